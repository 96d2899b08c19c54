// cpu_features.h: the CPU's vector extensions and cache sizes, asked once.
#include "kernels/cpu/cpu_features.h"

#include <unistd.h>

#include <algorithm>

namespace brigade::kernels::cpu {

const CpuFeatures& cpu_features() {
  static const CpuFeatures features = [] {
    CpuFeatures f;
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    f.avx2 = __builtin_cpu_supports("avx2");
    f.fma = __builtin_cpu_supports("fma");
    f.avx512f = __builtin_cpu_supports("avx512f");
    f.avx512_bf16 = f.avx512f && __builtin_cpu_supports("avx512bf16");
    f.amx_bf16 = __builtin_cpu_supports("amx-bf16");
#endif
    return f;
  }();
  return features;
}

namespace {

int64_t reported(int name, int64_t fallback) {
  const long bytes = sysconf(name);
  return bytes > 0 ? static_cast<int64_t>(bytes) : fallback;
}

}  // namespace

const CacheSizes& cpu_cache_sizes() {
  static const CacheSizes sizes = [] {
    CacheSizes s;
    s.l1d = reported(_SC_LEVEL1_DCACHE_SIZE, int64_t{32} << 10);
    s.l2 = reported(_SC_LEVEL2_CACHE_SIZE, int64_t{512} << 10);
    s.l3 = std::min<int64_t>(reported(_SC_LEVEL3_CACHE_SIZE, int64_t{8} << 20), int64_t{64} << 20);
    return s;
  }();
  return sizes;
}

std::string cpu_features_summary() {
  const CpuFeatures& f = cpu_features();
  std::string text;
  for (auto [on, name] : {std::pair{f.avx2, "avx2"},
                          {f.fma, "fma"},
                          {f.avx512f, "avx512f"},
                          {f.avx512_bf16, "avx512_bf16"},
                          {f.amx_bf16, "amx_bf16"}}) {
    if (on) text += std::string(text.empty() ? "" : " ") + name;
  }
  if (text.empty()) text = "no avx2";
  const CacheSizes& c = cpu_cache_sizes();
  return text + "; L1d " + std::to_string(c.l1d >> 10) + " KiB, L2 " + std::to_string(c.l2 >> 10) +
         " KiB, L3 " + std::to_string(c.l3 >> 10) + " KiB";
}

std::string bf16_support_text(bool avx512_bf16, bool amx_bf16) {
  const std::string amx = amx_bf16 ? "AMX present but not used (brigade has no AMX kernel)" : "no AMX";
  if (avx512_bf16) {
    return "AVX512-BF16: bf16 GEMMs run on vdpbf16ps where it outruns the FMAs (measured: the line above), "
           "else widen to float; " +
           amx;
  }
  return "no AVX512-BF16, " + amx +
         ": bf16 GEMMs widen their operands to float, so bf16 saves memory here, "
         "not arithmetic";
}

std::string bf16_support_summary() {
  const CpuFeatures& f = cpu_features();
  return bf16_support_text(f.avx512_bf16, f.amx_bf16);
}

}  // namespace brigade::kernels::cpu
