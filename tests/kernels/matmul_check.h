// Matmul against the triple loop of kernels/reference (which also gives sum_k |a_ik b_kj|), on the
// magnitude-relative error: a dot product of length K rounded in a type with unit roundoff u is off by at
// most about K u sum_k |a_ik b_kj|, whatever the sign pattern, and typically sqrt(K) u times that. So each
// element's error is divided by that magnitude (plus a tiny floor), not by |c_ij| (which may cancel to ~0):
//   err_ij = |c_ij - ref_ij| / (sum_k |a_ik b_kj| + 1e-300).
// Tolerances on that scale: float32 1e-5, float64 1e-12, bfloat16 1e-2 (the output is rounded to bfloat16,
// a relative step of 2^-8; the inputs are already bfloat16, so the reference sees the same inputs).
// The op table (tests/ops/op_cases_matmul.h) runs every matmul shape this way; the tests of tests/kernels
// that check something else of a matmul (thread-count independence, streams, padded views, one GEMM
// version's own paths) use it too.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/reference/reference.h"
#include "tests/kernels/matmul_tolerance.h"  // matmul_tolerance
#include "tensor/tensor.h"

namespace brigade::testing {

/// A [rows, cols] or [batch, rows, cols] random operand (batch < 0: 2-d).
inline Tensor random_matrix(int64_t batch, int64_t rows, int64_t cols, DType dtype, Generator& gen,
                            Device device = Device::cpu()) {
  Shape shape = batch < 0 ? Shape{rows, cols} : Shape{batch, rows, cols};
  return randn(shape, TensorOptions().dtype(dtype).device(device), &gen);
}

/// |actual - expected| / (magnitude + 1e-300) <= tol for every element (NaN fails), naming the worst one.
inline ::testing::AssertionResult within_magnitude(const Tensor& actual, const Tensor& expected,
                                                   const Tensor& magnitude, double tol) {
  if (actual.shape() != expected.shape()) {
    return ::testing::AssertionFailure()
           << "shape " << shape_str(actual.shape()) << ", expected " << shape_str(expected.shape());
  }
  const std::vector<double> got = actual.to_vector<double>(), want = expected.to_vector<double>();
  const std::vector<double> mag = magnitude.to_vector<double>();
  double worst = 0.0;
  size_t worst_index = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double err = std::fabs(got[i] - want[i]) / (mag[i] + 1e-300);
    if (!(err <= worst)) {  // also catches NaN
      worst = std::isnan(err) ? INFINITY : err;
      worst_index = i;
    }
  }
  if (worst <= tol) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "element " << worst_index << ": " << got[worst_index] << " vs reference " << want[worst_index]
         << " (relative error " << worst << " > " << tol << " of sum|a*b| = " << mag[worst_index] << ")";
}

/// Checks `actual` (any device) against the triple loop for op(a) @ op(b) within `tol` (see the top).
inline ::testing::AssertionResult matmul_matches_reference(const Tensor& actual, const Tensor& a,
                                                           const Tensor& b, bool ta, bool tb, double tol) {
  const kernels::reference::MatmulReference ref = kernels::reference::matmul(a, b, ta, tb);
  return within_magnitude(actual, ref.c, ref.magnitude, tol);
}

}  // namespace brigade::testing
