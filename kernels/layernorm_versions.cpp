// The layernorm version registry (kernels/layernorm_versions.h).
#include "kernels/layernorm_versions.h"

#include "kernels/backend.h"

namespace brigade::kernels {

const char* layernorm_kernel_name(LayerNormKernel kernel) {
  switch (kernel) {
    case LayerNormKernel::CpuRowLoop:
      return "v1-row-loop";
    case LayerNormKernel::CpuAvx512:
      return "v2-avx512";
    case LayerNormKernel::CudaBlockPerRow:
      return "v1-block-per-row";
    case LayerNormKernel::CudaWarpPerRow:
      return "v2-warp-per-row";
  }
  return "?";
}

DeviceKind layernorm_kernel_backend(LayerNormKernel kernel) {
  return kernel == LayerNormKernel::CpuRowLoop || kernel == LayerNormKernel::CpuAvx512 ? DeviceKind::CPU
                                                                                       : DeviceKind::CUDA;
}

const std::vector<LayerNormKernel>& all_layernorm_kernels() {
  static const std::vector<LayerNormKernel> kernels = {
      LayerNormKernel::CpuRowLoop, LayerNormKernel::CpuAvx512, LayerNormKernel::CudaBlockPerRow,
      LayerNormKernel::CudaWarpPerRow};
  return kernels;
}

bool layernorm_kernel_supports(LayerNormKernel kernel, int64_t cols) {
  if (kernel == LayerNormKernel::CpuAvx512) return detail::cpu_runs_avx512_fma();
  return kernel != LayerNormKernel::CudaWarpPerRow || (cols >= 1 && cols <= kMaxWarpRowCols);
}

LayerNormKernel default_layernorm_kernel(DeviceKind backend, int64_t cols) {
  // v2 measured faster than v1 on an H200 at every shape it takes, forward and backward (docs/kernels.md).
  if (backend == DeviceKind::CUDA) {
    return layernorm_kernel_supports(LayerNormKernel::CudaWarpPerRow, cols)
               ? LayerNormKernel::CudaWarpPerRow
               : LayerNormKernel::CudaBlockPerRow;
  }
  return detail::cpu_runs_avx512_fma() ? LayerNormKernel::CpuAvx512 : LayerNormKernel::CpuRowLoop;
}

void layernorm_forward_with(LayerNormKernel kernel, const Tensor& x, const Tensor& weight, const Tensor& bias,
                            double eps, const Tensor& y, const Tensor& mean, const Tensor& rstd) {
  const char* name = layernorm_kernel_name(kernel);
  const DeviceKind backend = layernorm_kernel_backend(kernel);
  detail::check_version_device("layernorm", name, backend, {&x, &weight, &bias, &y, &mean, &rstd});
  if (backend == DeviceKind::CPU)
    return cpu::layernorm_forward_with(kernel, x, weight, bias, eps, y, mean, rstd);
  BRIGADE_RUN_CUDA_VERSION("layernorm", name,
                           layernorm_forward_with(kernel, x, weight, bias, eps, y, mean, rstd));
}

void layernorm_backward_with(LayerNormKernel kernel, const Tensor& dy, const Tensor& x, const Tensor& weight,
                             const Tensor& mean, const Tensor& rstd, const Tensor& dx, const Tensor& dweight,
                             const Tensor& dbias) {
  const char* name = layernorm_kernel_name(kernel);
  const DeviceKind backend = layernorm_kernel_backend(kernel);
  detail::check_version_device("layernorm_backward", name, backend,
                               {&dy, &x, &weight, &mean, &rstd, &dx, &dweight, &dbias});
  if (backend == DeviceKind::CPU)
    return cpu::layernorm_backward_with(kernel, dy, x, weight, mean, rstd, dx, dweight, dbias);
  BRIGADE_RUN_CUDA_VERSION("layernorm_backward", name,
                           layernorm_backward_with(kernel, dy, x, weight, mean, rstd, dx, dweight, dbias));
}

}  // namespace brigade::kernels
