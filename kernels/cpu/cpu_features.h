// What this CPU offers the kernels, asked once at run time: the vector extensions (CPUID, through GCC's
// __builtin_cpu_supports, which also checks that the OS saves the wider registers) and the data cache sizes
// (sysconf, which reads CPUID's cache leaves). The GEMM versions (kernels/cpu/matmul_*.cpp) pick their
// micro-kernel from the first and their cache blocks from the second; `brigade info` prints both.
#pragma once

#include <cstdint>
#include <string>

// Code with x86 intrinsics (the GEMM versions v2-v4, AdamW's AVX-512 loop) compiles only where this is 1;
// elsewhere cpu_features() reports nothing and those versions say they do not run.
#if defined(__x86_64__) && defined(__GNUC__)
#define BRIGADE_CPU_X86 1
#else
#define BRIGADE_CPU_X86 0
#endif

namespace brigade::kernels::cpu {

struct CpuFeatures {
  bool avx2 = false;
  bool fma = false;
  bool avx512f = false;      ///< 32 zmm registers of 16 floats
  bool avx512_bf16 = false;  ///< vdpbf16ps: bf16 pair dot products into float lanes (AVX512-BF16)
  bool amx_bf16 = false;     ///< Intel AMX tiles (reported, not used: no AMX kernel here)
};

/// The features of the CPU running this process (all false on other architectures and compilers).
const CpuFeatures& cpu_features();

/// Bytes of each data cache level as the machine reports it, per core for L1 and L2, shared for L3. A level
/// the OS does not report (0 or -1 from sysconf) gets a conservative default (32 KiB, 512 KiB, 8 MiB); L3
/// is clamped to 64 MiB (virtual machines report odd values: this 32 MiB EPYC VM says 320 MiB).
struct CacheSizes {
  int64_t l1d = 0, l2 = 0, l3 = 0;
};
const CacheSizes& cpu_cache_sizes();

/// "avx2 fma avx512f avx512_bf16; L1d 32 KiB, L2 1024 KiB, L3 32768 KiB": for `brigade info` and benchmarks.
std::string cpu_features_summary();

/// What a CPU with (or without) AVX512-BF16 and AMX gives bfloat16 here, in one line for `brigade info`:
/// which of the two it has, which it lacks, and what the bf16 GEMMs run on as a result (brigade has no AMX
/// kernel). bf16_support_summary() is the line for this CPU.
std::string bf16_support_text(bool avx512_bf16, bool amx_bf16);
std::string bf16_support_summary();

}  // namespace brigade::kernels::cpu
