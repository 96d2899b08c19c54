// How an op's outputs are compared with the reference's (op_reference.h), shared by every backend's table
// test: the count, each output's dtype, device and layout, then its values within a tolerance.
//
// The error measure. For most ops, per element: |actual - expected| <= atol + rtol * |expected| (NaN where
// the reference is NaN, and the same infinity, pass). For matmul, and the float32 layernorm backward's
// parameter gradients on the CPU, the magnitude-relative error of tests/kernels/matmul_check.h:
// |c_ij - ref_ij| / (sum of the terms' magnitudes + 1e-300) <= magnitude_tol, where the reference gives that
// sum (Expected::magnitude) and the tolerance a magnitude_tol.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "tests/kernels/matmul_check.h"
#include "tests/ops/op_case.h"
#include "tests/ops/op_cases.h"
#include "tests/ops/op_reference.h"
#include "tests/ops/op_tolerance.h"  // Tolerance
#include "tests/test_support.h"

namespace brigade::testing {

/// Ops that write into an operand (their outputs are operands, with the operands' layout).
inline bool writes_in_place(Op op) {
  return op == Op::AddInPlace || op == Op::MulInPlace || op == Op::AdamW || op == Op::AdamWAll;
}

inline ::testing::AssertionResult within(const Tensor& actual, const Expected& expected,
                                         const Tolerance& tol) {
  if (on_magnitude(expected, tol)) {
    return within_magnitude(actual, expected.value, expected.magnitude, tol.magnitude_tol);
  }
  return allclose(actual, expected.value, tol.rtol, tol.atol);
}

/// Checks the outputs of case c run on `device` against the reference; `tolerance(k, dtype)` gives output
/// k's tolerance. Outputs the op returns as host values (a count, a norm) are expected on the CPU.
inline void expect_matches_reference(const OpCase& c, const std::vector<Tensor>& actual,
                                     const std::vector<Expected>& expected, const Device& device,
                                     const std::function<Tolerance(size_t, DType)>& tolerance) {
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t k = 0; k < actual.size(); ++k) {
    SCOPED_TRACE("output " + std::to_string(k));
    ASSERT_TRUE(actual[k].defined());
    EXPECT_EQ(actual[k].dtype(), expected[k].dtype);
    EXPECT_EQ(actual[k].device(), expected[k].on_host ? Device::cpu() : device);
    if (!writes_in_place(c.op)) {
      EXPECT_TRUE(actual[k].is_contiguous());
    }
    EXPECT_TRUE(within(actual[k], expected[k], tolerance(k, actual[k].dtype())));
  }
}

/// The indices of the cases that have a kernel (all but the compositions), for INSTANTIATE_TEST_SUITE_P.
inline std::vector<size_t> kernel_case_indices() {
  std::vector<size_t> indices;
  for (size_t i = 0; i < op_cases().size(); ++i) {
    if (op_cases()[i].op != Op::Composite) indices.push_back(i);
  }
  return indices;
}

}  // namespace brigade::testing
