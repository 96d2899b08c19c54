// The softmax kernel versions (softmax and log-softmax over rows, forward and backward), on each backend
// (the shape of every kernels/<op>_versions.h: kernels/kernel_versions.h).
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/kernel_versions.h"
#include "tensor/tensor.h"

namespace brigade::kernels {

enum class SoftmaxKernel {
  /// CPU v1 (kernels/cpu/softmax.cpp): one row per OpenMP iteration, sums in double (float32 rows
  /// through the vector loops of kernels/cpu/exp_rows.h: AVX-512, AVX2 or SSE2, the same bits). v2
  /// improves: one pass for the max and the sum, FMAs, a cheaper exp.
  CpuRowLoop,
  /// CPU v2 (kernels/cpu/exp_rows_avx512.h): float32 rows in AVX-512 intrinsics with FMA: the max and the
  /// sum of the exps in one pass over memory (8 KiB chunks, the running max rescaled), a table-driven exp
  /// of ~1 ulp, the output written in one more pass (non-temporal stores when it is bigger than twice the
  /// L3; a softmax row of one chunk keeps the exps of its sum pass and is scaled in place); the backward's
  /// row sums in double as v1's, the rest in float; rows up to 256 floats several at a time. Other dtypes,
  /// and CPUs without AVX-512F and FMA, run v1. The CPU default where it runs.
  CpuAvx512,
  /// CUDA v1 (kernels/cuda/softmax.cu): one block per row, block_reduce, the row read again for each pass;
  /// any C; the default. v2 improves: the row read once into registers, shuffles only.
  CudaBlockPerRow,
  /// CUDA v2 (kernels/cuda/softmax_warp.cu): one warp per row, the row held in registers (read from memory
  /// once), butterfly shuffles, no shared memory; 1 <= C <= kMaxWarpRowCols (wider rows run v1).
  CudaWarpPerRow,
};

/// The widest row CudaWarpPerRow (and LayerNormKernel::CudaWarpPerRow) holds in registers: 32 lanes x 32.
constexpr int64_t kMaxWarpRowCols = 1024;

/// "v1-row-loop", "v2-avx512" (CPU); "v1-block-per-row", "v2-warp-per-row" (CUDA).
const char* softmax_kernel_name(SoftmaxKernel kernel);

/// DeviceKind::CPU or DeviceKind::CUDA.
DeviceKind softmax_kernel_backend(SoftmaxKernel kernel);

/// Every SoftmaxKernel, in enum order.
const std::vector<SoftmaxKernel>& all_softmax_kernels();

/// Whether `kernel` itself runs rows of `cols` elements here (CUDA v2: 1 .. kMaxWarpRowCols; CPU v2: any,
/// where the CPU has AVX-512F and FMA; the others: any).
bool softmax_kernel_supports(SoftmaxKernel kernel, int64_t cols);

/// What kernels::softmax and log_softmax (and their backward) run on `backend`: CPU v2 where it runs, else
/// v1; CUDA v2 where the row fits (measured faster on an H200 at every such shape), else v1.
SoftmaxKernel default_softmax_kernel(DeviceKind backend, int64_t cols);

/// softmax_rows / softmax_backward_rows of kernels/backend.h ([R, C] contiguous, on the version's backend)
/// by one version (v1 of its backend when !softmax_kernel_supports(kernel, C)).
#define BRIGADE_SOFTMAX_VERSION_FUNCTIONS                                                                    \
  void softmax_rows_with(SoftmaxKernel kernel, const Tensor& x, const Tensor& out, bool log);                \
  void softmax_backward_rows_with(SoftmaxKernel kernel, const Tensor& dy, const Tensor& y, const Tensor& dx, \
                                  bool log);
BRIGADE_SOFTMAX_VERSION_FUNCTIONS

namespace cpu {
/// The CPU side of the two above (kernels/cpu/softmax.cpp): `kernel` is a CPU version. Call those instead.
BRIGADE_SOFTMAX_VERSION_FUNCTIONS
}  // namespace cpu

namespace cuda {
/// The CUDA side of the two above (kernels/cuda/softmax_warp.cu): `kernel` is a CUDA version. Call those.
BRIGADE_SOFTMAX_VERSION_FUNCTIONS
}  // namespace cuda

}  // namespace brigade::kernels
