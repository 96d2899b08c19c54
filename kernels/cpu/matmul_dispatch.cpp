// cpu::gemm (kernels/backend.h): the OpenBLAS baseline when matmul_backend() is Blas, else the default CPU
// version for the dtype (default_matmul_kernel); and cpu::gemm_with, which runs one named CPU version.
#include "kernels/cpu/matmul.h"
#include "kernels/matmul_versions.h"

namespace brigade::kernels::cpu {

void gemm_with(MatmulKernel kernel, const GemmArgs& args) {
  switch (kernel) {
    case MatmulKernel::CpuBlocked:
      return gemm_blocked(args);
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
  if (matmul_backend() == MatmulBackend::Blas) return gemm_openblas(args);
  cpu::gemm_with(default_matmul_kernel(DeviceKind::CPU, args.dtype), args);
}

}  // namespace brigade::kernels::cpu
