// The cross-entropy version registry (kernels/cross_entropy_versions.h).
#include "kernels/cross_entropy_versions.h"

#include "kernels/backend.h"

namespace brigade::kernels {

const char* cross_entropy_kernel_name(CrossEntropyKernel kernel) {
  switch (kernel) {
    case CrossEntropyKernel::CpuRowLoop:
      return "v1-row-loop";
    case CrossEntropyKernel::CpuAvx512:
      return "v2-avx512";
    case CrossEntropyKernel::CudaBlockPerRow:
      return "v1-block-per-row";
    case CrossEntropyKernel::CudaVectorRow:
      return "v2-vector-row";
  }
  return "?";
}

DeviceKind cross_entropy_kernel_backend(CrossEntropyKernel kernel) {
  return kernel == CrossEntropyKernel::CpuRowLoop || kernel == CrossEntropyKernel::CpuAvx512
             ? DeviceKind::CPU
             : DeviceKind::CUDA;
}

const std::vector<CrossEntropyKernel>& all_cross_entropy_kernels() {
  static const std::vector<CrossEntropyKernel> kernels = {
      CrossEntropyKernel::CpuRowLoop, CrossEntropyKernel::CpuAvx512, CrossEntropyKernel::CudaBlockPerRow,
      CrossEntropyKernel::CudaVectorRow};
  return kernels;
}

bool cross_entropy_kernel_supports(CrossEntropyKernel kernel) {
  return kernel != CrossEntropyKernel::CpuAvx512 || detail::cpu_runs_avx512_fma();
}

CrossEntropyKernel default_cross_entropy_kernel(DeviceKind backend) {
  // v2 measured at 0.63 of v1's time on an H200 at GPT-2's logits (docs/kernels.md).
  if (backend == DeviceKind::CUDA) return CrossEntropyKernel::CudaVectorRow;
  return detail::cpu_runs_avx512_fma() ? CrossEntropyKernel::CpuAvx512 : CrossEntropyKernel::CpuRowLoop;
}

int64_t cross_entropy_with(CrossEntropyKernel kernel, const Tensor& logits, const Tensor& targets,
                           int64_t ignore_index, const Tensor& row_loss, const Tensor& grad, int64_t* count) {
  const char* name = cross_entropy_kernel_name(kernel);
  const DeviceKind backend = cross_entropy_kernel_backend(kernel);
  detail::check_version_device("cross_entropy", name, backend, {&logits, &targets, &row_loss, &grad});
  if (backend == DeviceKind::CPU)
    return cpu::cross_entropy_with(kernel, logits, targets, ignore_index, row_loss, grad, count);
  BRIGADE_RUN_CUDA_VERSION("cross_entropy", name,
                           cross_entropy_with(kernel, logits, targets, ignore_index, row_loss, grad, count));
}

}  // namespace brigade::kernels
