// The float32 row loops of layernorm on the CPU (kernels/cpu/layernorm.cpp): a row's statistics and its
// normalisation, the row's input gradient, and its share of the parameter gradients.
//
// As for the loops of exp_rows.h, the same code is compiled for AVX-512, AVX2 and SSE2 (layernorm_rows.cpp)
// on 16-lane vectors, lane by lane, without fused multiply-adds, and the widest ISA this CPU runs is picked
// at run time: every ISA gives the same bits. The sums are in double, in the 16 fixed lanes of
// row_vectors.h (the shifted sums of the mean and variance, the backward's two means). The elementwise
// formulas are in float, 16 lanes per AVX-512 register, with x - mean taken in two float parts (SplitMean in
// the .cpp), within about an ulp of x - mean in double: widening every element to double and back doubled the
// work.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/cpu/vector_isa.h"

namespace brigade::kernels::cpu::detail {

/// 1 / sqrt(variance + eps) from a row's sum of squared deviations from its mean. The variance is the
/// biased one (divided by the row length, not by length - 1), as in PyTorch's layernorm. v1's forwards
/// compute it here: the float32 loops below and the scalar loops of layernorm.cpp (v2 takes four rows'
/// square roots and divisions at once, layernorm_avx512.cpp).
inline double layernorm_inv_std(double squares, int64_t cols, double eps) {
  return 1.0 / std::sqrt(squares / static_cast<double>(cols) + eps);  // biased variance
}

/// One ISA's row loops; every row is n >= 1 contiguous floats.
struct LayernormRowKernels {
  /// mu = mean(x), inv_std = 1 / sqrt(mean((x - mu)^2) + eps) (the biased variance, from one pass of sums
  /// shifted by x[0]: see the .cpp for the bound on their cancellation), and
  /// y[j] = ((x[j] - mu) * inv_std) * w[j] + b[j], rounded to float. A null w is all ones, a null b zeros.
  void (*forward)(const float* x, float* y, int64_t n, const float* w, const float* b, double eps, double* mu,
                  double* inv_std);
  /// dx[j] = inv_std * ((dxhat[j] - mean(dxhat)) - xhat[j] * mean(dxhat * xhat)), rounded to float, with
  /// dxhat = dy * w (w null: ones) and xhat = (x - mu) * inv_std. The two means come from one pass.
  void (*backward)(const float* dy, const float* x, const float* w, double mu, double inv_std, float* dx,
                   int64_t n);
  /// For the rows r = 0 .. rows - 1 of dy and x ([rows, n], contiguous), in that order:
  /// pw[j] += (dy[r][j] * (x[r][j] - mean[r])) * inv_std[r] and pb[j] += dy[r][j] (the rows' share of
  /// dweight and dbias).
  void (*param_grads)(const float* dy, const float* x, const float* mean, const float* inv_std, int64_t rows,
                      double* pw, double* pb, int64_t n);
};

/// The row loops compiled for `isa` (which must run here).
const LayernormRowKernels& layernorm_row_kernels(VectorIsa isa);

/// The row loops of the widest ISA this CPU runs.
const LayernormRowKernels& layernorm_row_kernels();

}  // namespace brigade::kernels::cpu::detail
