// Shared machinery of brigade's kernel benchmarks (bench/*_bench.cpp that opt in): the device peaks measured
// at start-up, the run context written into the JSON, timing loops for CPU and CUDA, and the counters.
//
// Counters every case reports (plain numbers, computed from our own timer, not Google Benchmark's rates):
//   FLOP/s    napkin floating-point operations per second (2 per multiply-add; elementwise ops count the
//             arithmetic of their formula, roughly: the figure that matters for them is bytes/s)
//   bytes/s   napkin bytes moved per second: each input read once, each output written once
//   pct_peak  100 * t_roofline / t_measured, with t_roofline = max(FLOPs / compute peak, bytes / copy
//             bandwidth): the percent of the nearer roofline ceiling (label "compute" or "memory" says which;
//             on the CPU "memory@256KiB" names the copy-ladder rung, i.e. the cache level, used)
// The peaks are MEASURED when the run starts (see measure_peaks in bench_support.cpp) and written into the
// JSON context beside the date, the commit, the device and the load average.
//
// GPU cases: timed with CUDA events around each call, with the L2 cache flushed (a memset of twice its
// size) before every timed repetition, so a kernel cannot read its inputs from a warm L2.
#pragma once

#include <benchmark/benchmark.h>

#include <chrono>
#include <exception>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "tensor/device.h"
#include "tensor/error.h"

namespace brigade::bench {

/// Thrown by a case whose baseline library or data type is not available here (reported, not a failure).
struct Unavailable : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Peaks measured at start-up; 0 where not measured (no GPU).
struct Peaks {
  double cpu_copy_bytes_per_s = 0;  ///< best OpenMP-parallel memcpy of a large buffer, read + write bytes
  /// (working-set bytes, copy rate) from 64 KiB up: the cache-aware ceilings CPU cases are measured against
  std::vector<std::pair<double, double>> cpu_copy_ladder;
  double cpu_flops = 0;             ///< best FMA-loop rate over all OpenMP threads (hardware compute peak)
  double cpu_gemm_flops = 0;        ///< brigade's own CPU GEMM at a large square size (for reference)
  std::string cpu_flops_source;     ///< "fma_avx512 loop", "fma_avx2 loop" or "scalar loop" (no FMA)
  double gpu_copy_bytes_per_s = 0;  ///< cudaMemcpyAsync device to device, read + write bytes
  double gpu_fp32_flops = 0;        ///< cuBLAS SGEMM at 8192^3 (4096^3 in smoke runs)
  double gpu_bf16_flops = 0;        ///< cuBLAS bf16 GEMM (fp32 accumulation), same size
};
const Peaks& peaks();

/// What a case is measured against: the CPU peaks, or the GPU's fp32 / bf16 GEMM rate.
enum class Target { Cpu, CudaFp32, CudaBf16 };

/// Napkin work of one call.
struct Work {
  double flops = 0;
  double bytes = 0;
};

/// True when the run was started with --smoke (short shapes list, tiny minimum time, quick peaks).
bool smoke();
/// True when a CUDA device is present and brigade was built with CUDA.
bool gpu_present();
/// Timed calls per CUDA case (a fixed count, see kernels_bench.cpp): 10, or 2 in smoke runs;
/// BRIGADE_BENCH_CUDA_ITERS overrides.
int cuda_iterations();

/// Parses --smoke, initialises Google Benchmark, measures the peaks and writes the context. Call first.
void init(int* argc, char** argv);
/// Runs the registered cases; returns the process exit code: 1 when a case failed with an error that is
/// not "unsupported" (so CI fails when a kernel throws), 0 otherwise.
int run_and_finish();

/// Sets FLOP/s, bytes/s, pct_peak and the label from the work of one call and the measured total time.
void set_counters(benchmark::State& state, const Work& work, double total_seconds, Target target);

/// Reports a failed case: DTypeError and Unavailable as "unsupported: ..." (not a failure),
/// anything else as "error: ..." (makes run_and_finish return 1).
void report_exception(benchmark::State& state, const std::exception& e, bool unsupported);

/// Times `fn` on the CPU by wall clock (what a user of a multi-threaded kernel waits for): one warm-up call
/// (first touch of outputs, OpenMP pool), then the timed loop.
template <class Fn>
void time_cpu(benchmark::State& state, const Work& work, Fn& fn) {
  fn();
  const auto start = std::chrono::steady_clock::now();
  for (auto _ : state) fn();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  set_counters(state, work, seconds, Target::Cpu);
}

#if BRIGADE_WITH_CUDA
/// CUDA event timing of one call on the current stream of cuda:0, the L2 flushed before it. Returns seconds.
/// (Implemented in bench_support.cpp; `call` is type-erased to keep CUDA headers out of this header.)
double time_cuda_once(void (*call)(void*), void* context);

/// Times `fn` on cuda:0: one warm-up call (module load, handles, allocator pool), then per iteration an L2
/// flush and an event-timed call.
template <class Fn>
void time_cuda(benchmark::State& state, const Work& work, Target target, Fn& fn) {
  auto trampoline = [](void* p) { (*static_cast<Fn*>(p))(); };
  time_cuda_once(trampoline, &fn);
  double total = 0;
  for (auto _ : state) {
    const double seconds = time_cuda_once(trampoline, &fn);
    state.SetIterationTime(seconds);
    total += seconds;
  }
  set_counters(state, work, total, target);
}
#endif

/// One case: `make()` builds the inputs on the device and returns the call to time; errors in either are
/// reported (unsupported or failure, see report_exception) instead of ending the run.
template <class Make>
void run_case(benchmark::State& state, const Work& work, Target target, Make&& make) {
  try {
    auto call = make();
    if (target == Target::Cpu) {
      time_cpu(state, work, call);
    } else {
#if BRIGADE_WITH_CUDA
      time_cuda(state, work, target, call);
#else
      throw Unavailable("built without CUDA");
#endif
    }
  } catch (const DTypeError& e) {
    report_exception(state, e, true);
  } catch (const Unavailable& e) {
    report_exception(state, e, true);
  } catch (const std::exception& e) {
    report_exception(state, e, false);
  }
}

}  // namespace brigade::bench
