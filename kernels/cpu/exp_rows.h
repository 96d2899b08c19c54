// The float32 row loops of softmax, log-softmax and cross-entropy (kernels/cpu/softmax.cpp, loss.cpp): the
// row max, exp(x - max) with its sum, and the passes that turn them into outputs and gradients, through the
// polynomial exp of vector_math.h (within 2 ulp of exp on [-87.3, 88]).
//
// The same code is compiled three times (exp_rows.cpp): for AVX-512, for AVX2 and for plain x86-64 (SSE2),
// and the widest that this CPU runs is picked at run time. The code is written on 16-lane vectors whatever
// the ISA (the compiler splits them into 4 or 2 registers where they are narrower), every operation is lane
// by lane, and nothing fuses a multiply with an add, so every ISA gives the same bits. Sums are in double,
// element k into lane k mod 16, the 16 lanes added in a fixed order at the end: the same for every ISA and
// every thread count.
#pragma once

#include <cstdint>

#include "kernels/cpu/vector_isa.h"

namespace brigade::kernels::cpu::detail {

/// One ISA's row loops; every row is n >= 1 contiguous floats.
struct ExpRowKernels {
  /// y[j] = exp(x[j]) (the polynomial exp alone, for its accuracy test).
  void (*exp)(const float* x, float* y, int64_t n);
  /// The largest x[j]; NaN elements are skipped unless x[0] is NaN (the sums then turn the row into NaN).
  float (*max)(const float* x, int64_t n);
  /// e[j] = exp(x[j] - shift) (x[j] - shift in float); returns the sum of the e[j] in double.
  double (*exp_shifted_sum)(const float* x, float shift, float* e, int64_t n);
  /// y[j] *= scale (softmax: the exps divided by their sum).
  void (*scale)(float* y, int64_t n, float scale);
  /// y[j] = (x[j] - max) - log_total, in double, rounded to float (log-softmax).
  void (*log_softmax)(const float* x, float* y, int64_t n, double max, double log_total);
  /// The sum of x[j] in double.
  double (*sum)(const float* x, int64_t n);
  /// The sum of a[j] * b[j] in double.
  double (*dot)(const float* a, const float* b, int64_t n);
  /// dx[j] = y[j] * (dy[j] - dot), in double, rounded to float (softmax backward).
  void (*softmax_backward)(const float* dy, const float* y, float* dx, int64_t n, double dot);
  /// dx[j] = dy[j] - exp(y[j]) * dy_total, exp in float, the rest in double (log-softmax backward).
  void (*log_softmax_backward)(const float* dy, const float* y, float* dx, int64_t n, double dy_total);
  /// g[j] = e[j] * inv_total * inv_count, in double, rounded to float (cross-entropy's gradient; e may be g).
  void (*scale_twice)(const float* e, float* g, int64_t n, double inv_total, double inv_count);
};

/// The row loops compiled for `isa` (which must run here).
const ExpRowKernels& exp_row_kernels(VectorIsa isa);

/// The row loops of the widest ISA this CPU runs.
const ExpRowKernels& exp_row_kernels();

}  // namespace brigade::kernels::cpu::detail
