// cpu::gemm (kernels/backend.h): the OpenBLAS baseline when matmul_backend() is Blas, else the default CPU
// version for the dtype (default_matmul_kernel); and cpu::gemm_with, which runs one named CPU version.
//
// A bias (GemmArgs::bias) is added by v2-v4 as they store each tile (gemm_loops.h); v1 and OpenBLAS have no
// such step, so they run the product alone and the bias is added here afterwards, in one pass over C with
// the same bits (the product rounded to C's dtype, then the add).
#include <type_traits>

#include "kernels/cpu/cpu_access.h"
#include "kernels/cpu/matmul.h"
#include "kernels/matmul_versions.h"

namespace brigade::kernels::cpu {
namespace {

template <typename T>
void add_bias_rows(const GemmArgs& g) {
  using Sum = std::conditional_t<std::is_same_v<T, double>, double, float>;
  const T* bias = static_cast<const T*>(g.bias);
  const int64_t rows = g.batch * g.m;
#pragma omp parallel for if (rows * g.n >= detail::kParallelGrain) schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    T* row = static_cast<T*>(g.c) + (r / g.m) * g.stride_c + (r % g.m) * g.ldc;
    for (int64_t j = 0; j < g.n; ++j) row[j] = static_cast<T>(Sum(row[j]) + Sum(bias[j]));
  }
}

/// `run` (a version without a bias step) on args without the bias, then the bias added.
void gemm_then_bias(void (*run)(const GemmArgs&), const GemmArgs& args) {
  if (args.bias == nullptr) return run(args);
  GemmArgs product = args;
  product.bias = nullptr;
  run(product);
  if (args.m <= 0 || args.n <= 0 || args.batch <= 0) return;
  BRIGADE_DISPATCH_FLOATING(args.dtype, "matmul bias", [&] { add_bias_rows<scalar_t>(args); });
}

}  // namespace

void gemm_with(MatmulKernel kernel, const GemmArgs& args) {
  switch (kernel) {
    case MatmulKernel::CpuBlocked:
      return gemm_then_bias(gemm_blocked, args);
    case MatmulKernel::CpuAvx2Fma:
      return gemm_avx2_fma(args);
    case MatmulKernel::CpuAvx512:
      return gemm_avx512(args);
    case MatmulKernel::CpuAvx512Bf16:
      return gemm_avx512_bf16(args);
    default:
      BRIGADE_THROW(ValueError, "matmul: '", matmul_kernel_name(kernel), "' is not a CPU version");
  }
}

void gemm(const GemmArgs& args) {
  if (matmul_backend() == MatmulBackend::Blas) return gemm_then_bias(gemm_openblas, args);
  cpu::gemm_with(default_matmul_kernel(DeviceKind::CPU, args.dtype), args);
}

}  // namespace brigade::kernels::cpu
