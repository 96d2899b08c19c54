// The issue-rate loops: independent chains of one vector instruction, enough of them to cover its latency
// on every pipe, so that only the rate at which the core issues it limits the loop. They measure the
// compute ceilings that the CPU kernels are held against (bench/cpu_peak_bench, the benchmarks' "% of
// peak"), and they decide one dispatch: whether bfloat16 GEMMs run on vdpbf16ps (GEMM v4) or widen to float
// for the FMA kernel (v3). The two instructions' rates differ by core, in both directions:
//   AMD Zen 4:        vdpbf16ps zmm issues as often as vfmadd231ps zmm and does twice the flops: v4 wins;
//   Intel Emerald Rapids (no AMX in the VM): vdpbf16ps issues about once every two cycles, a quarter of
//   the two FMA pipes' rate, so it does half the flops of zmm FMAs, and v3 (widen, then FMA) is ~1.7x
//   faster than v4.
#pragma once

#include <cstdint>

namespace brigade::kernels::cpu {

enum class PeakLoop {
  FmaAvx2,       ///< vfmadd231ps ymm: 8 lanes, 16 flops an instruction
  FmaAvx512,     ///< vfmadd231ps zmm: 16 lanes, 32 flops
  Dpbf16Avx512,  ///< vdpbf16ps zmm: 16 lanes x 2 bf16 products, 64 flops
};

const char* peak_loop_name(PeakLoop loop);  ///< "fma_avx2", "fma_avx512", "dpbf16_avx512"

/// Whether this CPU has the loop's instructions (cpu_features()).
bool peak_loop_runs(PeakLoop loop);

/// Flops of one pass of `run_peak_loop(loop, 1)`: chains x lanes x flops per lane.
double peak_loop_flops_per_iteration(PeakLoop loop);

/// Runs `iterations` passes of the loop's chains on this thread; returns a value computed from them (give it
/// to benchmark::DoNotOptimize or add it to a sink, so that the loop is not optimised away). 0 where the
/// loop cannot run here.
float run_peak_loop(PeakLoop loop, int64_t iterations);

/// The best flop rate of `trials` timed runs of `iterations` passes each, on this thread; 0 where the loop
/// cannot run here.
double measure_peak_loop(PeakLoop loop, int64_t iterations, int trials);

/// vdpbf16ps's flop rate over the zmm FMA's on this core, measured once a process (about a millisecond,
/// taking turns between the two loops); 0 where the CPU lacks AVX512-BF16. Above 1, a bfloat16 GEMM
/// computes faster on vdpbf16ps than widened to float; the GEMM's default takes v4 above 1.25.
double dpbf16_over_fma();

}  // namespace brigade::kernels::cpu
