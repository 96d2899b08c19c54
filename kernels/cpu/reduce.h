// CPU-only reductions beyond kernels/backend.h's reduce_rows, called by kernels/reduce.cpp for the layouts
// they serve.
#pragma once

#include "tensor/tensor.h"

namespace brigade::kernels::cpu {

/// out[c] = sum over r of x[r, c], x [R, C] contiguous, out [C] contiguous, in x's dtype. Each column is
/// summed with exactly the association of reduce_rows' Sum over the transposed rows (cpu_access.h's
/// chunked_sum: double, chunks of kSumChunk rows, eight running sums per chunk), so the bits are those of
/// the transposed copy followed by row sums, without the copy: the bias gradients of every Linear.
void sum_columns(const Tensor& x, const Tensor& out);

}  // namespace brigade::kernels::cpu
