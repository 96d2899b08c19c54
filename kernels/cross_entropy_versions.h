// The cross-entropy (fused with log-softmax) kernel versions, on each backend (the shape of every
// kernels/<op>_versions.h: kernels/kernel_versions.h).
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/kernel_versions.h"
#include "tensor/tensor.h"

namespace brigade::kernels {

enum class CrossEntropyKernel {
  /// CPU v1 (kernels/cpu/loss.cpp): one row per OpenMP iteration, the row's logsumexp in double (float32
  /// through the vector loops of kernels/cpu/exp_rows.h: AVX-512, AVX2 or SSE2, the same bits). v2
  /// improves: the logits read once for the loss, FMAs, a cheaper exp.
  CpuRowLoop,
  /// CPU v2 (kernels/cpu/loss.cpp with kernels/cpu/exp_rows_avx512.h): float32 logits in AVX-512
  /// intrinsics with FMA: the row max and sum of exps in one pass over memory, nothing stored for the loss
  /// alone, the gradient row written in one more pass (exps recomputed, non-temporal stores when the
  /// gradient is bigger than twice the L3). Other dtypes, and CPUs without AVX-512F and FMA, run v1. The
  /// CPU default where it runs.
  CpuAvx512,
  /// CUDA v1 (kernels/cuda/loss.cu): one block per row, an online (max, sum) pass and a gradient pass,
  /// scalar loads; the default. v2 improves: 16-byte accesses.
  CudaBlockPerRow,
  /// CUDA v2 (kernels/cuda/loss.cu): the same two passes with 16-byte loads of the logits and stores of the
  /// gradient, each row cut into head, packs and tail by its own alignment (odd V); the gradient rows must
  /// share the logits rows' alignment, else v1.
  CudaVectorRow,
};

/// "v1-row-loop", "v2-avx512" (CPU); "v1-block-per-row", "v2-vector-row" (CUDA).
const char* cross_entropy_kernel_name(CrossEntropyKernel kernel);

/// DeviceKind::CPU or DeviceKind::CUDA.
DeviceKind cross_entropy_kernel_backend(CrossEntropyKernel kernel);

/// Every CrossEntropyKernel, in enum order.
const std::vector<CrossEntropyKernel>& all_cross_entropy_kernels();

/// Whether `kernel` runs itself here: CPU v2 where the CPU has AVX-512F and FMA; the others always (CUDA v2
/// hands rows it cannot align to v1).
bool cross_entropy_kernel_supports(CrossEntropyKernel kernel);

/// What kernels::cross_entropy runs on `backend`: CPU v2 where it runs, else v1; CUDA v2 (0.63 of v1's time
/// on an H200 at GPT-2's logits).
CrossEntropyKernel default_cross_entropy_kernel(DeviceKind backend);

/// cross_entropy of kernels/backend.h (tensors on the version's backend) by one version: returns the first
/// row with a bad target or -1, and sets *count.
#define BRIGADE_CROSS_ENTROPY_VERSION_FUNCTIONS                                                      \
  int64_t cross_entropy_with(CrossEntropyKernel kernel, const Tensor& logits, const Tensor& targets, \
                             int64_t ignore_index, const Tensor& row_loss, const Tensor& grad,       \
                             int64_t* count);
BRIGADE_CROSS_ENTROPY_VERSION_FUNCTIONS

namespace cpu {
/// The CPU side of cross_entropy_with (kernels/cpu/loss.cpp): `kernel` is a CPU version. Call that instead.
BRIGADE_CROSS_ENTROPY_VERSION_FUNCTIONS
}  // namespace cpu

namespace cuda {
/// The CUDA side of cross_entropy_with (kernels/cuda/loss.cu): `kernel` is a CUDA version. Call that instead.
BRIGADE_CROSS_ENTROPY_VERSION_FUNCTIONS
}  // namespace cuda

}  // namespace brigade::kernels
