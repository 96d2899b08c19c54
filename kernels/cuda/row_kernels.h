// The CUDA row kernels (softmax, log-softmax, their backward, layernorm forward and backward) by version, for
// tests and benchmarks that want one implementation. Plain C++ (no CUDA headers), only linked in CUDA builds:
// guard uses with `#if BRIGADE_WITH_CUDA`.
//
//   v1 BlockPerRow  kernels/cuda/softmax.cu, layernorm.cu   one block per row, block_reduce, the row read
//                                                            again for each pass (any C); the default
//   v2 WarpPerRow   kernels/cuda/rows_warp.cu                one warp per row, the row held in registers
//                                                            (read from memory once), shuffles only;
//                                                            C <= 1024
//
// Arguments as in kernels/backend.h (softmax_rows, softmax_backward_rows, layernorm_forward/backward): [R, C]
// contiguous rows, mean/rstd [R] in float32 (float64 for float64). The *_with functions run v1 when the
// chosen version does not support C (row_kernel_supports), so every (kernel, C) is valid.
#pragma once

#include <cstdint>
#include <vector>

#include "tensor/tensor.h"

namespace brigade::kernels::cuda {

enum class RowKernel {
  BlockPerRow,  ///< v1
  WarpPerRow,   ///< v2
};
const char* row_kernel_name(RowKernel kernel);

/// Every RowKernel, v1 first.
const std::vector<RowKernel>& all_row_kernels();

/// The widest row v2 holds in registers (32 lanes x 32 values).
constexpr int64_t kMaxWarpRowCols = 1024;

/// Whether `kernel` itself runs rows of `cols` elements (v1: any; v2: 1..kMaxWarpRowCols).
bool row_kernel_supports(RowKernel kernel, int64_t cols);

void softmax_rows_with(RowKernel kernel, const Tensor& x, const Tensor& out, bool log);
void softmax_backward_rows_with(RowKernel kernel, const Tensor& dy, const Tensor& y, const Tensor& dx,
                                bool log);
void layernorm_forward_with(RowKernel kernel, const Tensor& x, const Tensor& weight, const Tensor& bias,
                            double eps, const Tensor& y, const Tensor& mean, const Tensor& rstd);
void layernorm_backward_with(RowKernel kernel, const Tensor& dy, const Tensor& x, const Tensor& weight,
                             const Tensor& mean, const Tensor& rstd, const Tensor& dx, const Tensor& dweight,
                             const Tensor& dbias);

}  // namespace brigade::kernels::cuda
