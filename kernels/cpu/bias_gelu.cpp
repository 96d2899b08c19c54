// CPU backend: y = gelu(x + bias) and its backward, one pass each (kernels.h: bias_gelu), for the first
// Linear of every MLP: x is the GEMM's output [R, C] (C = 4 * embd), bias the Linear's bias.
//
// What the fusion saves. Unfused, the bias add reads x and writes h = x + bias, the GELU reads h and writes
// y; backward, the GELU's backward reads dy and h and writes dx, and the bias gradient reads dx again (its
// column sums). Fused, the forward reads x and writes y (h lives in a stack buffer of one row span), and the
// backward reads dy and x and writes dx while adding each value into the column sums. Napkin math, per float
// element: forward 16 bytes -> 8, backward 16 -> 12; at the baby GPT's fc (R = 768, C = 512, 1.5 MiB a
// tensor) 6 MiB -> 3 forward and 6 -> 4.5 backward, and two parallel regions fewer each way.
//
// float and bfloat16 on AVX-512 (GeluCode::Avx512Fma, the default there) differ in two ways, both measured
// faster. A row is one loop of 16 lanes (the sum, the GELU or its derivative, the store, and bfloat16's
// casts in registers: gelu_avx512.cpp) rather than a scalar sum into a stack span followed by the array
// calls. And the backward takes two passes, dx row by row and then sum_columns(dx): the one-pass walk down
// 128-column blocks (512 bytes of each of dy, x and dx a row, rows 2-12 KiB apart) waited on memory at
// every row, and its per-row double sums cost as much as sum_columns' own; two passes measured 1.23x (baby
// GPT's [768, 512]) and 1.54x (GPT-2's [1024, 3072]) faster in float on one Zen 4 core, and the baby GPT's
// step 4-5 % faster; in bfloat16 1.06x and 1.22x (docs/kernels.md). They read dx once more, mostly from L2
// at the baby GPT's size.
//
// Bits. Every value is computed as the unfused ops compute it: h rounded to x's dtype, GELU and its
// derivative by kernels/cpu/elementwise.cpp's arrays (float, bfloat16 through float) or the double formulas
// of elementwise_formulas.h (float64), and dbias with sum_columns' association (kernels/cpu/reduce.h: per
// column, chunks of kSumChunk rows, row i of a chunk into running sum i mod 8, a tail shorter than 8 into
// sum 0, the eight added pairwise). So a model that switches to this op trains to the same bits.
#include <algorithm>
#include <type_traits>

#include "kernels/backend.h"
#include "kernels/cpu/cpu_access.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/fused.h"
#include "kernels/cpu/reduce.h"
#include "kernels/cpu/vector_math.h"  // BRIGADE_CPU_AVX2
#include "kernels/elementwise_formulas.h"
#include "tensor/bf16_arrays.h"

namespace brigade::kernels::cpu {

using detail::kParallelGrain;
using detail::kSumChunk;

namespace {

/// Elements of a row handled at a time in the forward (h in a stack buffer: 1 KiB of float).
constexpr int64_t kSpan = 256;
/// Columns per task of the one-pass backward (the paths other than AVX-512's): each row's share is
/// one contiguous 512-byte read (with 32 columns, 128 bytes a row, the GELU derivative waited on the strided
/// loads: perf put it at 2.5x its unfused share of the baby GPT's step), and the eight running double sums
/// per column (8 x 128 x 8 B = 8 KiB) stay in L1.
constexpr int64_t kColumns = 128;

/// h[k] = float(T(float(x[k]) + float(b[k]))) for k in [0, n), n <= kSpan: the sum rounded to T as
/// binary(Add) stores it (a no-op for float). bfloat16 goes through tensor/bf16_arrays.h's 16-lane casts,
/// the bits of the scalar ones (an element at a time they were ~12 % of the baby GPT's bf16 step).
template <typename T>
void rounded_sums(float* h, const T* x, const T* b, int64_t n) {
  if constexpr (std::is_same_v<T, bfloat16>) {
    float wide_b[kSpan];
    bfloat16 rounded[kSpan];
    float_from_bf16_array(h, x, n);
    float_from_bf16_array(wide_b, b, n);
    for (int64_t k = 0; k < n; ++k) h[k] += wide_b[k];
    bf16_from_float_array(rounded, h, n);
    float_from_bf16_array(h, rounded, n);
  } else {
    for (int64_t k = 0; k < n; ++k) h[k] = static_cast<float>(static_cast<T>(float(x[k]) + float(b[k])));
  }
}

/// out[k] = gelu(x[k] + b[k]) for k in [0, n), n <= kSpan.
template <typename T>
void bias_gelu_span(T* out, const T* x, const T* b, int64_t n, GeluCode code) {
  if constexpr (std::is_same_v<T, double>) {
    for (int64_t k = 0; k < n; ++k) out[k] = formulas::gelu(x[k] + b[k]);
  } else {
#if BRIGADE_CPU_AVX2
    if (code == GeluCode::Avx512Fma) {
      if constexpr (std::is_same_v<T, float>) return detail::bias_gelu_row_avx512_fma(out, x, b, n);
      if constexpr (std::is_same_v<T, bfloat16>) return detail::bias_gelu_row_avx512_bf16(out, x, b, n);
    }
#endif
    float h[kSpan] = {};  // zeroed: g++ 12 cannot see that rounded_sums fills the n values read
    rounded_sums(h, x, b, n);
    if constexpr (std::is_same_v<T, float>) {
      gelu_array(out, h, n, code);
    } else {
      float y[kSpan];  // T is bfloat16 here: the casts by bf16_arrays.h's 16 lanes
      gelu_array(y, h, n, code);
      bf16_from_float_array(out, y, n);
    }
  }
}

/// dx[k] = dy[k] * gelu'(x[k] + b[k]) for k in [0, n), n <= kColumns.
template <typename T>
void bias_gelu_grad_span(T* dx, const T* dy, const T* x, const T* b, int64_t n, GeluCode code) {
  if constexpr (std::is_same_v<T, double>) {
    for (int64_t k = 0; k < n; ++k) dx[k] = formulas::gelu_grad(dy[k], x[k] + b[k]);
  } else {
    float h[kColumns];
    rounded_sums(h, x, b, n);
    if constexpr (std::is_same_v<T, float>) {
      gelu_grad_array(dx, dy, h, n, code);
    } else {
      float g[kColumns], d[kColumns];  // T is bfloat16 here: the casts by bf16_arrays.h's 16 lanes
      float_from_bf16_array(g, dy, n);
      gelu_grad_array(d, g, h, n, code);
      bf16_from_float_array(dx, d, n);
    }
  }
}

template <typename T>
void forward_impl(const Tensor& x, const Tensor& bias, const Tensor& y, GeluCode code) {
  const int64_t rows = x.size(0), cols = x.size(1);
  const auto* xp = static_cast<const T*>(x.data_ptr());
  const auto* bp = static_cast<const T*>(bias.data_ptr());
  auto* yp = y.data<T>();
#pragma omp parallel for if (rows * cols >= kParallelGrain) schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c0 = 0; c0 < cols; c0 += kSpan) {
      bias_gelu_span(yp + r * cols + c0, xp + r * cols + c0, bp + c0, std::min(kSpan, cols - c0), code);
    }
  }
}

// One task per block of kColumns columns: it walks every row of its block, so that its column sums are
// sum_columns' in the same order whatever the thread count.
template <typename T>
void backward_impl(const Tensor& dy, const Tensor& x, const Tensor& bias, const Tensor& dx,
                   const Tensor& dbias, GeluCode code) {
  const int64_t rows = x.size(0), cols = x.size(1);
  const auto* gp = static_cast<const T*>(dy.data_ptr());
  const auto* xp = static_cast<const T*>(x.data_ptr());
  const auto* bp = static_cast<const T*>(bias.data_ptr());
  auto* dxp = dx.data<T>();
  auto* dbp = dbias.data<T>();
#if BRIGADE_CPU_AVX2
  if constexpr (!std::is_same_v<T, double>) {
    if (code == GeluCode::Avx512Fma) {
      // Two passes: dx row by row in one AVX-512 loop (the sum x + b, the derivative and the product per
      // vector), then dbias = sum_columns(dx), whose association is the one below.
#pragma omp parallel for if (rows * cols >= kParallelGrain) schedule(static)
      for (int64_t r = 0; r < rows; ++r) {
        if constexpr (std::is_same_v<T, float>) {
          detail::bias_gelu_grad_row_avx512_fma(dxp + r * cols, gp + r * cols, xp + r * cols, bp, cols);
        } else {
          detail::bias_gelu_grad_row_avx512_bf16(dxp + r * cols, gp + r * cols, xp + r * cols, bp, cols);
        }
      }
      sum_columns(dx, dbias);
      return;
    }
  }
#endif
  const int64_t blocks = (cols + kColumns - 1) / kColumns;
#pragma omp parallel for if (rows * cols >= kParallelGrain) schedule(static)
  for (int64_t blk = 0; blk < blocks; ++blk) {
    const int64_t c0 = blk * kColumns, width = std::min(kColumns, cols - c0);
    double total[kColumns] = {};
    for (int64_t start = 0; start < rows; start += kSumChunk) {
      const int64_t end = std::min(rows, start + kSumChunk);
      const int64_t whole = start + (end - start) / 8 * 8;  // rows from here on go to running sum 0
      double sums[8][kColumns] = {};
      for (int64_t i = start; i < end; ++i) {
        const int64_t at = i * cols + c0;
        bias_gelu_grad_span(dxp + at, gp + at, xp + at, bp + c0, width, code);
        double* sum = sums[i < whole ? (i - start) % 8 : 0];
        detail::add_row_to_sums(sum, dxp + at, width);
      }
      for (int64_t c = 0; c < width; ++c) {
        total[c] += detail::pairwise_sum8([&](int l) { return sums[l][c]; });
      }
    }
    for (int64_t c = 0; c < width; ++c) dbp[c0 + c] = static_cast<T>(total[c]);
  }
}

GeluCode default_gelu_code() {
  return gelu_code(default_elementwise_kernel(DeviceKind::CPU));
}

}  // namespace

void bias_gelu_forward(const Tensor& x, const Tensor& bias, const Tensor& y) {
  const GeluCode code = default_gelu_code();
  BRIGADE_DISPATCH_FLOATING(x.dtype(), "bias_gelu", [&] { forward_impl<scalar_t>(x, bias, y, code); });
}

void bias_gelu_backward(const Tensor& dy, const Tensor& x, const Tensor& bias, const Tensor& dx,
                        const Tensor& dbias) {
  const GeluCode code = default_gelu_code();
  BRIGADE_DISPATCH_FLOATING(x.dtype(), "bias_gelu_backward",
                            [&] { backward_impl<scalar_t>(dy, x, bias, dx, dbias, code); });
}

}  // namespace brigade::kernels::cpu
