// The softmax version registry (kernels/softmax_versions.h).
#include "kernels/softmax_versions.h"

#include "kernels/backend.h"

namespace brigade::kernels {

const char* softmax_kernel_name(SoftmaxKernel kernel) {
  switch (kernel) {
    case SoftmaxKernel::CpuRowLoop:
      return "v1-row-loop";
    case SoftmaxKernel::CpuAvx512:
      return "v2-avx512";
    case SoftmaxKernel::CudaBlockPerRow:
      return "v1-block-per-row";
    case SoftmaxKernel::CudaWarpPerRow:
      return "v2-warp-per-row";
  }
  return "?";
}

DeviceKind softmax_kernel_backend(SoftmaxKernel kernel) {
  return kernel == SoftmaxKernel::CpuRowLoop || kernel == SoftmaxKernel::CpuAvx512 ? DeviceKind::CPU
                                                                                   : DeviceKind::CUDA;
}

const std::vector<SoftmaxKernel>& all_softmax_kernels() {
  static const std::vector<SoftmaxKernel> kernels = {SoftmaxKernel::CpuRowLoop, SoftmaxKernel::CpuAvx512,
                                                     SoftmaxKernel::CudaBlockPerRow,
                                                     SoftmaxKernel::CudaWarpPerRow};
  return kernels;
}

bool softmax_kernel_supports(SoftmaxKernel kernel, int64_t cols) {
  if (kernel == SoftmaxKernel::CpuAvx512) return detail::cpu_runs_avx512_fma();
  return kernel != SoftmaxKernel::CudaWarpPerRow || (cols >= 1 && cols <= kMaxWarpRowCols);
}

SoftmaxKernel default_softmax_kernel(DeviceKind backend, int64_t cols) {
  // v2 measured at 0.27-0.56 of v1's time on an H200, at every shape it takes (docs/kernels.md).
  if (backend == DeviceKind::CUDA) {
    return softmax_kernel_supports(SoftmaxKernel::CudaWarpPerRow, cols) ? SoftmaxKernel::CudaWarpPerRow
                                                                        : SoftmaxKernel::CudaBlockPerRow;
  }
  return detail::cpu_runs_avx512_fma() ? SoftmaxKernel::CpuAvx512 : SoftmaxKernel::CpuRowLoop;
}

void softmax_rows_with(SoftmaxKernel kernel, const Tensor& x, const Tensor& out, bool log) {
  const char* name = softmax_kernel_name(kernel);
  const DeviceKind backend = softmax_kernel_backend(kernel);
  detail::check_version_device("softmax", name, backend, {&x, &out});
  if (backend == DeviceKind::CPU) return cpu::softmax_rows_with(kernel, x, out, log);
  BRIGADE_RUN_CUDA_VERSION("softmax", name, softmax_rows_with(kernel, x, out, log));
}

void softmax_backward_rows_with(SoftmaxKernel kernel, const Tensor& dy, const Tensor& y, const Tensor& dx,
                                bool log) {
  const char* name = softmax_kernel_name(kernel);
  const DeviceKind backend = softmax_kernel_backend(kernel);
  detail::check_version_device("softmax_backward", name, backend, {&dy, &y, &dx});
  if (backend == DeviceKind::CPU) return cpu::softmax_backward_rows_with(kernel, dy, y, dx, log);
  BRIGADE_RUN_CUDA_VERSION("softmax_backward", name, softmax_backward_rows_with(kernel, dy, y, dx, log));
}

}  // namespace brigade::kernels
