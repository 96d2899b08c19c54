// The single-core compute peak of this CPU, measured: the ceiling the CPU GEMM versions' "% of peak" is
// taken against (docs/kernels.md, CPU GEMM). Each case runs on one thread a loop of independent
// multiply-add chains, enough of them to cover the instruction's latency on every pipe, so that only the
// issue rate limits it:
//   peak.fma_avx2       12 chains of vfmadd231ps ymm (8 lanes, 16 flops each)
//   peak.fma_avx512     12 chains of vfmadd231ps zmm (16 lanes, 32 flops)
//   peak.dpbf16_avx512  12 chains of vdpbf16ps zmm (16 lanes x 2 bf16 products, 64 flops)
// A case this CPU cannot run reports "unsupported". Counter FLOP/s; the time per call is one loop of
// kIters iterations.
//
//   ./cpu_peak_bench                      # all cases, one thread each
//   ./cpu_peak_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
//
// Napkin math for the machine this was written on (AMD EPYC Zen 4, ~3.7 GHz): two 256-bit FMA pipes = 32
// float flops per cycle = ~118 GFLOP/s per core, whether issued as ymm (2 per cycle) or zmm (1 per cycle,
// each taking both pipes); vdpbf16ps zmm doubles that in bf16 products.
#include <benchmark/benchmark.h>

#include <cstdint>

#include "kernels/cpu/cpu_features.h"  // BRIGADE_CPU_X86

#if BRIGADE_CPU_X86
#include <immintrin.h>
#endif

namespace {

constexpr int64_t kIters = 1 << 16;
constexpr int kChains = 12;  // >= latency (4-6 cycles) x pipes (2)
// Read through a volatile so that the compiler cannot fold the loops into their result.
volatile float g_scale = 0.9999999f, g_offset = 1e-7f;

#if BRIGADE_CPU_X86
__attribute__((target("avx2,fma"), noinline)) float fma_avx2() {
  __m256 acc[kChains];
  for (int j = 0; j < kChains; ++j) acc[j] = _mm256_set1_ps(0.01f * float(j + 1));
  const __m256 a = _mm256_set1_ps(g_scale), b = _mm256_set1_ps(g_offset);
  for (int64_t i = 0; i < kIters; ++i) {
#pragma GCC unroll 12
    for (int j = 0; j < kChains; ++j) acc[j] = _mm256_fmadd_ps(acc[j], a, b);
  }
  for (int j = 1; j < kChains; ++j) acc[0] = _mm256_add_ps(acc[0], acc[j]);
  return _mm256_cvtss_f32(acc[0]);
}

__attribute__((target("avx512f"), noinline)) float fma_avx512() {
  __m512 acc[kChains];
  for (int j = 0; j < kChains; ++j) acc[j] = _mm512_set1_ps(0.01f * float(j + 1));
  const __m512 a = _mm512_set1_ps(g_scale), b = _mm512_set1_ps(g_offset);
  for (int64_t i = 0; i < kIters; ++i) {
#pragma GCC unroll 12
    for (int j = 0; j < kChains; ++j) acc[j] = _mm512_fmadd_ps(acc[j], a, b);
  }
  for (int j = 1; j < kChains; ++j) acc[0] = _mm512_add_ps(acc[0], acc[j]);
  alignas(64) float lanes[16];  // (not _mm512_reduce_add_ps: g++ 12 warns inside it)
  _mm512_store_ps(lanes, acc[0]);
  return lanes[0] + lanes[15];
}

__attribute__((target("avx512f,avx512bf16"), noinline)) float dpbf16_avx512() {
  __m512 acc[kChains];
  for (int j = 0; j < kChains; ++j) acc[j] = _mm512_set1_ps(0.01f * float(j + 1));
  const __m512bh a = _mm512_cvtne2ps_pbh(_mm512_set1_ps(g_offset), _mm512_set1_ps(g_offset));
  for (int64_t i = 0; i < kIters; ++i) {
#pragma GCC unroll 12
    for (int j = 0; j < kChains; ++j) acc[j] = _mm512_dpbf16_ps(acc[j], a, a);
  }
  for (int j = 1; j < kChains; ++j) acc[0] = _mm512_add_ps(acc[0], acc[j]);
  alignas(64) float lanes[16];  // (not _mm512_reduce_add_ps: g++ 12 warns inside it)
  _mm512_store_ps(lanes, acc[0]);
  return lanes[0] + lanes[15];
}

#else
// Another architecture: cpu_features() reports none of these, so the cases say "unsupported".
float fma_avx2() {
  return 0;
}
float fma_avx512() {
  return 0;
}
float dpbf16_avx512() {
  return 0;
}
#endif

template <float (*Loop)()>
void run(benchmark::State& state, bool supported, double flops_per_instruction) {
  if (!supported) {
    state.SkipWithError("unsupported: this CPU lacks the instruction set");
    return;
  }
  for (auto _ : state) benchmark::DoNotOptimize(Loop());
  const double flops = flops_per_instruction * kChains * double(kIters) * double(state.iterations());
  state.counters["FLOP/s"] = benchmark::Counter(flops, benchmark::Counter::kIsRate);
}

}  // namespace

int main(int argc, char** argv) {
  const brigade::kernels::cpu::CpuFeatures& f = brigade::kernels::cpu::cpu_features();
  benchmark::RegisterBenchmark("peak.fma_avx2",
                               [&](benchmark::State& s) { run<fma_avx2>(s, f.avx2 && f.fma, 16); });
  benchmark::RegisterBenchmark("peak.fma_avx512",
                               [&](benchmark::State& s) { run<fma_avx512>(s, f.avx512f, 32); });
  benchmark::RegisterBenchmark("peak.dpbf16_avx512",
                               [&](benchmark::State& s) { run<dpbf16_avx512>(s, f.avx512_bf16, 64); });
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::AddCustomContext("cpu_features", brigade::kernels::cpu::cpu_features_summary());
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
