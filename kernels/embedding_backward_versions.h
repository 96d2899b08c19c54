// The embedding backward (scatter-add) kernel versions, on each backend (the shape of every
// kernels/<op>_versions.h: kernels/kernel_versions.h). The forward gather has one version per backend.
#pragma once

#include <vector>

#include "kernels/kernel_versions.h"
#include "tensor/tensor.h"

namespace brigade::kernels {

enum class EmbeddingBackwardKernel {
  /// CPU v1 (kernels/cpu/embedding.cpp): positions grouped by id (a stable sort), each group summed in
  /// double in position order, parallel over ids: deterministic.
  CpuGroupedById,
  /// CUDA v1 (kernels/cuda/embedding.cu): float atomics per element; the order of the adds, and so the last
  /// bits of rows hit by several ids, vary from run to run. v2 improves: a fixed order.
  CudaAtomic,
  /// CUDA v2 (kernels/cuda/embedding.cu): positions bucketed by id (integer counts, a prefix sum, a stable
  /// placement), then each (id, 32 columns) summed by one warp in position order: bitwise the same on every
  /// run, and the CPU's sums exactly; the default.
  CudaSorted,
};

/// "v1-grouped-by-id" (CPU); "v1-atomic", "v2-sorted" (CUDA).
const char* embedding_backward_kernel_name(EmbeddingBackwardKernel kernel);

/// DeviceKind::CPU or DeviceKind::CUDA.
DeviceKind embedding_backward_kernel_backend(EmbeddingBackwardKernel kernel);

/// Every EmbeddingBackwardKernel, in enum order.
const std::vector<EmbeddingBackwardKernel>& all_embedding_backward_kernels();

/// Whether `kernel` runs here: always.
bool embedding_backward_kernel_supports(EmbeddingBackwardKernel kernel);

/// What kernels::embedding_backward runs on `backend`: the CPU's grouped sums; CudaSorted.
EmbeddingBackwardKernel default_embedding_backward_kernel(DeviceKind backend);

/// embedding_backward of kernels/backend.h (tensors on the version's backend) by one version.
#define BRIGADE_EMBEDDING_BACKWARD_VERSION_FUNCTIONS                                                      \
  void embedding_backward_with(EmbeddingBackwardKernel kernel, const Tensor& grad_out, const Tensor& ids, \
                               const Tensor& grad_weight);
BRIGADE_EMBEDDING_BACKWARD_VERSION_FUNCTIONS

namespace cuda {
/// The CUDA side of embedding_backward_with (kernels/cuda/embedding.cu): `kernel` is a CUDA version. Call
/// that instead.
BRIGADE_EMBEDDING_BACKWARD_VERSION_FUNCTIONS
}  // namespace cuda

}  // namespace brigade::kernels
