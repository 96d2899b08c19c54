// The embedding backward version registry (kernels/embedding_backward_versions.h).
#include "kernels/embedding_backward_versions.h"

#include "kernels/backend.h"

namespace brigade::kernels {

const char* embedding_backward_kernel_name(EmbeddingBackwardKernel kernel) {
  switch (kernel) {
    case EmbeddingBackwardKernel::CpuGroupedById:
      return "v1-grouped-by-id";
    case EmbeddingBackwardKernel::CudaAtomic:
      return "v1-atomic";
    case EmbeddingBackwardKernel::CudaSorted:
      return "v2-sorted";
  }
  return "?";
}

DeviceKind embedding_backward_kernel_backend(EmbeddingBackwardKernel kernel) {
  return kernel == EmbeddingBackwardKernel::CpuGroupedById ? DeviceKind::CPU : DeviceKind::CUDA;
}

const std::vector<EmbeddingBackwardKernel>& all_embedding_backward_kernels() {
  static const std::vector<EmbeddingBackwardKernel> kernels = {EmbeddingBackwardKernel::CpuGroupedById,
                                                               EmbeddingBackwardKernel::CudaAtomic,
                                                               EmbeddingBackwardKernel::CudaSorted};
  return kernels;
}

bool embedding_backward_kernel_supports(EmbeddingBackwardKernel /*kernel*/) {
  return true;
}

EmbeddingBackwardKernel default_embedding_backward_kernel(DeviceKind backend) {
  return backend == DeviceKind::CPU ? EmbeddingBackwardKernel::CpuGroupedById
                                    : EmbeddingBackwardKernel::CudaSorted;
}

void embedding_backward_with(EmbeddingBackwardKernel kernel, const Tensor& grad_out, const Tensor& ids,
                             const Tensor& grad_weight) {
  const char* name = embedding_backward_kernel_name(kernel);
  const DeviceKind backend = embedding_backward_kernel_backend(kernel);
  detail::check_version_device("embedding_backward", name, backend, {&grad_out, &ids, &grad_weight});
  if (backend == DeviceKind::CPU) return cpu::embedding_backward(grad_out, ids, grad_weight);
  BRIGADE_RUN_CUDA_VERSION("embedding_backward", name,
                           embedding_backward_with(kernel, grad_out, ids, grad_weight));
}

}  // namespace brigade::kernels
