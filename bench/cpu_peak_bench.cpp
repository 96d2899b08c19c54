// The single-core compute peak of this CPU, measured: the ceiling the CPU GEMM versions' "% of peak" is
// taken against (docs/kernels.md, CPU GEMM). Each case runs on one thread a loop of independent
// multiply-add chains, enough of them to cover the instruction's latency on every pipe, so that only the
// issue rate limits it:
//   peak.fma_avx2       12 chains of vfmadd231ps ymm (8 lanes, 16 flops each)
//   peak.fma_avx512     12 chains of vfmadd231ps zmm (16 lanes, 32 flops)
//   peak.dpbf16_avx512  12 chains of vdpbf16ps zmm (16 lanes x 2 bf16 products, 64 flops)
// The loops are kernels/cpu/peak_loops.h's. A case this CPU cannot run reports "unsupported". Counter
// FLOP/s; the time per call is one loop of kIters iterations.
//
//   ./cpu_peak_bench                      # all cases, one thread each
//   ./cpu_peak_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
//
// Napkin math for the machine this was written on (AMD EPYC Zen 4, ~3.7 GHz): two 256-bit FMA pipes = 32
// float flops per cycle = ~118 GFLOP/s per core, whether issued as ymm (2 per cycle) or zmm (1 per cycle,
// each taking both pipes); vdpbf16ps zmm doubles that in bf16 products. On an Intel Emerald Rapids core
// (~2.75 GHz) the zmm FMA runs on two 512-bit pipes, ~176 GFLOP/s (the ymm loop ~94), and vdpbf16ps
// issues about once every two cycles, ~86 GFLOP/s: half the FMA flops.
#include <benchmark/benchmark.h>

#include <cstdint>

#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/peak_loops.h"

namespace {

using brigade::kernels::cpu::PeakLoop;
constexpr int64_t kIters = 1 << 16;

void run(benchmark::State& state, PeakLoop loop) {
  namespace cpu = brigade::kernels::cpu;
  if (!cpu::peak_loop_runs(loop)) {
    state.SkipWithError("unsupported: this CPU lacks the instruction set");
    return;
  }
  for (auto _ : state) benchmark::DoNotOptimize(cpu::run_peak_loop(loop, kIters));
  const double flops = cpu::peak_loop_flops_per_iteration(loop) * double(kIters) * double(state.iterations());
  state.counters["FLOP/s"] = benchmark::Counter(flops, benchmark::Counter::kIsRate);
}

}  // namespace

int main(int argc, char** argv) {
  for (PeakLoop loop : {PeakLoop::FmaAvx2, PeakLoop::FmaAvx512, PeakLoop::Dpbf16Avx512}) {
    const std::string name = std::string("peak.") + brigade::kernels::cpu::peak_loop_name(loop);
    benchmark::RegisterBenchmark(name.c_str(), [loop](benchmark::State& s) { run(s, loop); });
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::AddCustomContext("cpu_features", brigade::kernels::cpu::cpu_features_summary());
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
