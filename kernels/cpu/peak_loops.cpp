// peak_loops.h: chains of FMA or vdpbf16ps, timed.
#include "kernels/cpu/peak_loops.h"

#include <algorithm>
#include <chrono>

#include "kernels/cpu/cpu_features.h"

#if BRIGADE_CPU_X86
#include <immintrin.h>
#endif

namespace brigade::kernels::cpu {
namespace {

constexpr int kChains = 12;  // >= latency (4-6 cycles) x pipes (2)
// Read through a volatile so that the compiler cannot fold the loops into their result.
volatile float g_scale = 0.9999999f, g_offset = 1e-7f;

#if BRIGADE_CPU_X86
__attribute__((target("avx2,fma"), noinline)) float fma_avx2(int64_t iterations) {
  __m256 acc[kChains];
  for (int j = 0; j < kChains; ++j) acc[j] = _mm256_set1_ps(0.01f * float(j + 1));
  const __m256 a = _mm256_set1_ps(g_scale), b = _mm256_set1_ps(g_offset);
  for (int64_t i = 0; i < iterations; ++i) {
#pragma GCC unroll 12
    for (int j = 0; j < kChains; ++j) acc[j] = _mm256_fmadd_ps(acc[j], a, b);
  }
  for (int j = 1; j < kChains; ++j) acc[0] = _mm256_add_ps(acc[0], acc[j]);
  return _mm256_cvtss_f32(acc[0]);
}

__attribute__((target("avx512f"), noinline)) float fma_avx512(int64_t iterations) {
  __m512 acc[kChains];
  for (int j = 0; j < kChains; ++j) acc[j] = _mm512_set1_ps(0.01f * float(j + 1));
  const __m512 a = _mm512_set1_ps(g_scale), b = _mm512_set1_ps(g_offset);
  for (int64_t i = 0; i < iterations; ++i) {
#pragma GCC unroll 12
    for (int j = 0; j < kChains; ++j) acc[j] = _mm512_fmadd_ps(acc[j], a, b);
  }
  for (int j = 1; j < kChains; ++j) acc[0] = _mm512_add_ps(acc[0], acc[j]);
  alignas(64) float lanes[16];  // (not _mm512_reduce_add_ps: g++ 12 warns inside it)
  _mm512_store_ps(lanes, acc[0]);
  return lanes[0] + lanes[15];
}

__attribute__((target("avx512f,avx512bf16"), noinline)) float dpbf16_avx512(int64_t iterations) {
  __m512 acc[kChains];
  for (int j = 0; j < kChains; ++j) acc[j] = _mm512_set1_ps(0.01f * float(j + 1));
  const __m512bh a = _mm512_cvtne2ps_pbh(_mm512_set1_ps(g_offset), _mm512_set1_ps(g_offset));
  for (int64_t i = 0; i < iterations; ++i) {
#pragma GCC unroll 12
    for (int j = 0; j < kChains; ++j) acc[j] = _mm512_dpbf16_ps(acc[j], a, a);
  }
  for (int j = 1; j < kChains; ++j) acc[0] = _mm512_add_ps(acc[0], acc[j]);
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, acc[0]);
  return lanes[0] + lanes[15];
}
#endif

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

const char* peak_loop_name(PeakLoop loop) {
  switch (loop) {
    case PeakLoop::FmaAvx2:
      return "fma_avx2";
    case PeakLoop::FmaAvx512:
      return "fma_avx512";
    case PeakLoop::Dpbf16Avx512:
      return "dpbf16_avx512";
  }
  return "?";
}

bool peak_loop_runs(PeakLoop loop) {
  const CpuFeatures& f = cpu_features();
  switch (loop) {
    case PeakLoop::FmaAvx2:
      return f.avx2 && f.fma;
    case PeakLoop::FmaAvx512:
      return f.avx512f;
    case PeakLoop::Dpbf16Avx512:
      return f.avx512_bf16;
  }
  return false;
}

double peak_loop_flops_per_iteration(PeakLoop loop) {
  switch (loop) {
    case PeakLoop::FmaAvx2:
      return kChains * 8 * 2;
    case PeakLoop::FmaAvx512:
      return kChains * 16 * 2;
    case PeakLoop::Dpbf16Avx512:
      return kChains * 16 * 2 * 2;
  }
  return 0;
}

float run_peak_loop(PeakLoop loop, int64_t iterations) {
  if (!peak_loop_runs(loop)) return 0;
#if BRIGADE_CPU_X86
  switch (loop) {
    case PeakLoop::FmaAvx2:
      return fma_avx2(iterations);
    case PeakLoop::FmaAvx512:
      return fma_avx512(iterations);
    case PeakLoop::Dpbf16Avx512:
      return dpbf16_avx512(iterations);
  }
#endif
  (void)iterations;
  return 0;
}

double measure_peak_loop(PeakLoop loop, int64_t iterations, int trials) {
  if (!peak_loop_runs(loop)) return 0;
  double best = 0;
  volatile float sink = 0;
  for (int t = 0; t < trials; ++t) {
    const auto start = std::chrono::steady_clock::now();
    sink = sink + run_peak_loop(loop, iterations);
    best = std::max(best, peak_loop_flops_per_iteration(loop) * double(iterations) / seconds_since(start));
  }
  return best;
}

double dpbf16_over_fma() {
  static const double ratio = [] {
    if (!peak_loop_runs(PeakLoop::Dpbf16Avx512) || !peak_loop_runs(PeakLoop::FmaAvx512)) return 0.0;
    // 4096 passes of 12 instructions: ~20-40 us a trial. Taking turns, so that a busy spell on a shared
    // core slows both; each keeps its best.
    double dpbf16 = 0, fma = 0;
    for (int round = 0; round < 8; ++round) {
      dpbf16 = std::max(dpbf16, measure_peak_loop(PeakLoop::Dpbf16Avx512, 4096, 1));
      fma = std::max(fma, measure_peak_loop(PeakLoop::FmaAvx512, 4096, 1));
    }
    return fma > 0 ? dpbf16 / fma : 0.0;
  }();
  return ratio;
}

}  // namespace brigade::kernels::cpu
