// CPU-only reductions beyond kernels/backend.h's reduce_rows, called by kernels/reduce.cpp for the layouts
// they serve.
#pragma once

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "tensor/bf16_arrays.h"
#include "tensor/tensor.h"

namespace brigade::kernels::cpu {

/// out[c] = sum over r of x[r, c], x [R, C] contiguous, out [C] contiguous, in x's dtype. Each column is
/// summed with exactly the association of reduce_rows' Sum over the transposed rows (cpu_access.h's
/// chunked_sum: double, chunks of kSumChunk rows, eight running sums per chunk), so the bits are those of
/// the transposed copy followed by row sums, without the copy: the bias gradients of every Linear.
void sum_columns(const Tensor& x, const Tensor& out);

namespace detail {

/// sums[c] += row[c] in double for c in [0, n), over AVX-512 where the CPU has it (8 columns an add, against
/// 2 in the SSE2 baseline). Each column is its own sum, so every vector width gives the same bits. For rows
/// already in L1 (bias_gelu's backward adds each dx row it has just written): sum_columns, which streams
/// its rows from memory with a stride, keeps its inline loop over 8 rows (through this call, one row at a
/// time, it measured 2.9x slower at GPT-2's [1024, 3072]).
void add_float_row_to_sums(double* sums, const float* row, int64_t n);

/// The same for any dtype: the float path above, bfloat16 widened to float first (16 lanes at a time,
/// tensor/bf16_arrays.h; exact, so the same sums), the others a plain loop.
template <typename T>
void add_row_to_sums(double* sums, const T* row, int64_t n) {
  if constexpr (std::is_same_v<T, float>) {
    add_float_row_to_sums(sums, row, n);
  } else if constexpr (std::is_same_v<T, bfloat16>) {
    constexpr int64_t kPiece = 256;
    float wide[kPiece];
    for (int64_t c0 = 0; c0 < n; c0 += kPiece) {
      const int64_t m = std::min(kPiece, n - c0);
      float_from_bf16_array(wide, row + c0, m);
      add_float_row_to_sums(sums + c0, wide, m);
    }
  } else {
    for (int64_t c = 0; c < n; ++c) sums[c] += static_cast<double>(row[c]);
  }
}

}  // namespace detail

}  // namespace brigade::kernels::cpu
