// matmul benchmarks: the CPU GEMM (packed, blocked, OpenMP), and on CUDA brigade's kernels (v1 naive,
// v2 tiled) side by side with the cuBLAS baseline. Square M = N = K products; FLOPs = 2 * n^3.
//
//   ./matmul_bench                                   # everything (CUDA cases skip without a GPU)
//   ./matmul_bench --benchmark_filter=Cpu --benchmark_min_time=0.01   # a quick smoke run
//   ./matmul_bench --benchmark_format=json > bench/results/matmul-<date>-<commit>-<device>.json
//
// Counters: FLOP/s (a rate over wall time: the CPU cases use every OpenMP thread, the CUDA cases are
// timed with CUDA events around each call) and, on CUDA, pct_peak against the H200 peaks: fp32 ~67 TFLOP/s
// for float32, bf16 ~989 TFLOP/s (tensor cores) for bfloat16. brigade's own kernels do bfloat16 math on
// the fp32 CUDA cores, so their bfloat16 ceiling is the fp32 one; cuBLAS uses the tensor cores.
#include <benchmark/benchmark.h>

#include <string>

#include "kernels/kernels.h"
#include "tensor/stream.h"
#include "tensor/tensor.h"
#if BRIGADE_WITH_CUDA
#include "kernels/cuda/matmul.h"
#endif

namespace {

using brigade::DType;
using brigade::Tensor;
using brigade::kernels::MatmulBackend;

double flops_of(int64_t n) {
  return 2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n);
}

void set_flop_rate(benchmark::State& state, double flops_per_iteration) {
  state.counters["FLOP/s"] = benchmark::Counter(flops_per_iteration * static_cast<double>(state.iterations()),
                                                benchmark::Counter::kIsRate);
}

// ---- CPU
// ---------------------------------------------------------------------------------------------------

template <DType kDType>
void BM_CpuMatmul(benchmark::State& state) {
  const int64_t n = state.range(0);
  brigade::Generator gen(1);
  Tensor a = brigade::randn({n, n}, kDType, &gen);
  Tensor b = brigade::randn({n, n}, kDType, &gen);
  for (auto _ : state) {
    Tensor c = brigade::kernels::matmul(a, b);
    benchmark::DoNotOptimize(c.data_ptr());
  }
  set_flop_rate(state, flops_of(n));
}
BENCHMARK(BM_CpuMatmul<brigade::kFloat32>)
    ->Name("CpuMatmul/float32")
    ->RangeMultiplier(2)
    ->Range(128, 1024)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_CpuMatmul<brigade::kBFloat16>)
    ->Name("CpuMatmul/bfloat16")
    ->Arg(512)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_CpuMatmul<brigade::kFloat64>)
    ->Name("CpuMatmul/float64")
    ->Arg(512)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

// ---- CUDA
// ----------------------------------------------------------------------------------------------------

enum class CudaImpl { Naive, Tiled, Cublas };

/// One product with the chosen implementation; Tiled and Cublas go through kernels::matmul and the switch.
Tensor run_cuda(CudaImpl impl, const Tensor& a, const Tensor& b, const Tensor& c_for_naive) {
  if (impl == CudaImpl::Naive) {
#if BRIGADE_WITH_CUDA
    const int64_t n = a.size(0);
    brigade::kernels::GemmArgs args;
    args.a = a.data_ptr();
    args.b = b.data_ptr();
    args.c = c_for_naive.data_ptr();
    args.dtype = a.dtype();
    args.m = args.n = args.k = n;
    args.lda = args.ldb = args.ldc = n;
    brigade::kernels::cuda::gemm_native(args, brigade::kernels::cuda::GemmKernel::Naive);
#endif
    return c_for_naive;
  }
  brigade::kernels::set_matmul_backend(impl == CudaImpl::Cublas ? MatmulBackend::Cublas
                                                                : MatmulBackend::Native);
  return brigade::kernels::matmul(a, b);
}

template <CudaImpl kImpl, DType kDType>
void BM_CudaMatmul(benchmark::State& state) {
  if (!brigade::cuda_available()) {
    state.SkipWithError(("no CUDA device: " + brigade::cuda_unavailable_reason()).c_str());
    return;
  }
  const int64_t n = state.range(0);
  const brigade::Device gpu = brigade::Device::cuda();
  const MatmulBackend saved = brigade::kernels::matmul_backend();
  brigade::Generator gen(1);
  Tensor a = brigade::randn({n, n}, brigade::TensorOptions().dtype(kDType).device(gpu), &gen);
  Tensor b = brigade::randn({n, n}, brigade::TensorOptions().dtype(kDType).device(gpu), &gen);
  Tensor c = brigade::empty({n, n}, brigade::TensorOptions().dtype(kDType).device(gpu));
  run_cuda(kImpl, a, b, c);  // warm-up: module load, cuBLAS handle, allocator pool
  brigade::Stream::current(gpu).synchronize();

  brigade::Event start(true), stop(true);
  double total_seconds = 0.0;
  for (auto _ : state) {
    start.record(gpu);
    Tensor out = run_cuda(kImpl, a, b, c);
    stop.record(gpu);
    stop.synchronize();
    const double seconds = start.elapsed_ms(stop) / 1e3;
    total_seconds += seconds;
    state.SetIterationTime(seconds);
  }
  brigade::kernels::set_matmul_backend(saved);
  set_flop_rate(state, flops_of(n));
  const double peak = kDType == brigade::kBFloat16 ? 989e12 : 67e12;
  if (total_seconds > 0) {
    state.counters["pct_peak"] =
        100.0 * flops_of(n) * static_cast<double>(state.iterations()) / total_seconds / peak;
  }
}

#define BRIGADE_CUDA_MATMUL_BENCH(impl, dtype, label)      \
  BENCHMARK(BM_CudaMatmul<CudaImpl::impl, brigade::dtype>) \
      ->Name("CudaMatmul/" label)                          \
      ->Arg(256)                                           \
      ->Arg(1024)                                          \
      ->Arg(4096)                                          \
      ->UseManualTime()                                    \
      ->Unit(benchmark::kMicrosecond)

BRIGADE_CUDA_MATMUL_BENCH(Naive, kFloat32, "naive/float32");
BRIGADE_CUDA_MATMUL_BENCH(Tiled, kFloat32, "tiled/float32");
BRIGADE_CUDA_MATMUL_BENCH(Cublas, kFloat32, "cublas/float32");
BRIGADE_CUDA_MATMUL_BENCH(Tiled, kBFloat16, "tiled/bfloat16");
BRIGADE_CUDA_MATMUL_BENCH(Cublas, kBFloat16, "cublas/bfloat16");

}  // namespace

BENCHMARK_MAIN();
