// The AdamW version registry (kernels/adamw_versions.h).
#include "kernels/adamw_versions.h"

#include "kernels/backend.h"

namespace brigade::kernels {

const char* adamw_kernel_name(AdamWKernel kernel) {
  switch (kernel) {
    case AdamWKernel::CpuLoop:
      return "v1-loop";
    case AdamWKernel::CpuAvx512:
      return "v2-avx512";
    case AdamWKernel::CudaScalar:
      return "v1-scalar";
    case AdamWKernel::CudaVector128:
      return "v2-vector128";
  }
  return "?";
}

DeviceKind adamw_kernel_backend(AdamWKernel kernel) {
  return kernel == AdamWKernel::CpuLoop || kernel == AdamWKernel::CpuAvx512 ? DeviceKind::CPU
                                                                            : DeviceKind::CUDA;
}

const std::vector<AdamWKernel>& all_adamw_kernels() {
  static const std::vector<AdamWKernel> kernels = {AdamWKernel::CpuLoop, AdamWKernel::CpuAvx512,
                                                   AdamWKernel::CudaScalar, AdamWKernel::CudaVector128};
  return kernels;
}

bool adamw_kernel_supports(AdamWKernel kernel) {
  return kernel != AdamWKernel::CpuAvx512 || detail::cpu_runs_avx512_fma();
}

AdamWKernel default_adamw_kernel(DeviceKind backend) {
  if (backend == DeviceKind::CUDA) return AdamWKernel::CudaVector128;
  return detail::cpu_runs_avx512_fma() ? AdamWKernel::CpuAvx512 : AdamWKernel::CpuLoop;
}

void adamw_with(AdamWKernel kernel, const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v,
                const AdamWStep& s) {
  const char* name = adamw_kernel_name(kernel);
  const DeviceKind backend = adamw_kernel_backend(kernel);
  detail::check_version_device("adamw", name, backend, {&param, &grad, &m, &v});
  if (backend == DeviceKind::CPU) return cpu::adamw_with(kernel, param, grad, m, v, s);
  BRIGADE_RUN_CUDA_VERSION("adamw", name, adamw_with(kernel, param, grad, m, v, s));
}

}  // namespace brigade::kernels
