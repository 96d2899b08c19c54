// The layernorm kernel versions (forward and backward over rows), on each backend (the shape of every
// kernels/<op>_versions.h: kernels/kernel_versions.h).
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/kernel_versions.h"
#include "kernels/softmax_versions.h"  // kMaxWarpRowCols
#include "tensor/tensor.h"

namespace brigade::kernels {

enum class LayerNormKernel {
  /// CPU v1 (kernels/cpu/layernorm.cpp): one row per OpenMP iteration, statistics in double, parameter
  /// gradients summed over fixed row blocks (independent of the thread count); float32 rows through the
  /// vector loops of kernels/cpu/layernorm_rows.h (AVX-512, AVX2 or SSE2, the same bits). v2 improves: float
  /// sums with FMAs, and one sweep of the backward for dx and the parameter gradients.
  CpuRowLoop,
  /// CPU v2 (kernels/cpu/layernorm_avx512.h): float32 rows in AVX-512 intrinsics with FMA: the statistics
  /// from one pass of float sums about a guess of the mean, then corrected; the backward writes dx and adds
  /// four rows at a time into a block's double dweight and dbias sums in the same sweep (the blocks totalled
  /// in order). Other dtypes, and CPUs without AVX-512F and FMA, run v1. The CPU default where it runs.
  CpuAvx512,
  /// CUDA v1 (kernels/cuda/layernorm.cu): one block per row, block_reduce, the row read again for each
  /// pass; parameter gradients through [P, C] partials and column sums (deterministic); any C; the default.
  /// v2 improves: the row read once into registers, shuffles only.
  CudaBlockPerRow,
  /// CUDA v2 (kernels/cuda/layernorm_warp.cu): one warp per row, the row held in registers, butterfly
  /// shuffles; the backward's per-warp partials summed in a fixed order; 1 <= C <= kMaxWarpRowCols (wider
  /// rows run v1).
  CudaWarpPerRow,
};

/// "v1-row-loop", "v2-avx512" (CPU); "v1-block-per-row", "v2-warp-per-row" (CUDA).
const char* layernorm_kernel_name(LayerNormKernel kernel);

/// DeviceKind::CPU or DeviceKind::CUDA.
DeviceKind layernorm_kernel_backend(LayerNormKernel kernel);

/// Every LayerNormKernel, in enum order.
const std::vector<LayerNormKernel>& all_layernorm_kernels();

/// Whether `kernel` itself runs rows of `cols` elements here (CUDA v2: 1 .. kMaxWarpRowCols; CPU v2: any,
/// where the CPU has AVX-512F and FMA; the others: any).
bool layernorm_kernel_supports(LayerNormKernel kernel, int64_t cols);

/// What kernels::layernorm, layernorm_backward and add_layernorm run on `backend`: CPU v2 where it runs,
/// else v1; CUDA v2 where the row fits (measured faster on an H200 at every such shape), else v1.
LayerNormKernel default_layernorm_kernel(DeviceKind backend, int64_t cols);

/// layernorm_forward / layernorm_backward of kernels/backend.h (tensors on the version's backend) by one
/// version (v1 of its backend when !layernorm_kernel_supports(kernel, C)).
#define BRIGADE_LAYERNORM_VERSION_FUNCTIONS                                                        \
  void layernorm_forward_with(LayerNormKernel kernel, const Tensor& x, const Tensor& weight,       \
                              const Tensor& bias, double eps, const Tensor& y, const Tensor& mean, \
                              const Tensor& rstd);                                                 \
  void layernorm_backward_with(LayerNormKernel kernel, const Tensor& dy, const Tensor& x,          \
                               const Tensor& weight, const Tensor& mean, const Tensor& rstd,       \
                               const Tensor& dx, const Tensor& dweight, const Tensor& dbias);
BRIGADE_LAYERNORM_VERSION_FUNCTIONS

namespace cpu {
/// The CPU side of the two above (kernels/cpu/layernorm.cpp): `kernel` is a CPU version. Call those instead.
BRIGADE_LAYERNORM_VERSION_FUNCTIONS
}  // namespace cpu

namespace cuda {
/// The CUDA side of the two above (kernels/cuda/layernorm_warp.cu): `kernel` is a CUDA version. Call those.
BRIGADE_LAYERNORM_VERSION_FUNCTIONS
}  // namespace cuda

}  // namespace brigade::kernels
