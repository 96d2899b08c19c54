// Shared test helpers: CUDA skipping and tensor comparison with stated tolerances.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "tensor/tensor.h"

/// Skips the current test with the reason when no CUDA device can be used. With BRIGADE_REQUIRE_GPU=1 in
/// the environment (scripts/gpu_check.sh sets it) a missing GPU fails the test instead of skipping it.
#define BRIGADE_REQUIRE_CUDA()                                                                  \
  do {                                                                                          \
    if (!::brigade::cuda_available()) {                                                         \
      if (std::getenv("BRIGADE_REQUIRE_GPU") != nullptr) {                                      \
        FAIL() << "BRIGADE_REQUIRE_GPU is set but no CUDA device: "                             \
               << ::brigade::cuda_unavailable_reason();                                         \
      }                                                                                         \
      GTEST_SKIP() << "no CUDA device: " << ::brigade::cuda_unavailable_reason();               \
    }                                                                                           \
  } while (0)

namespace brigade::testing {

/// Max over elements of |a - b| / (atol + rtol * |b|); <= 1 means every element is within tolerance.
/// Shapes must match; both are brought to the CPU as float64.
inline ::testing::AssertionResult allclose(const Tensor& actual, const Tensor& expected, double rtol,
                                           double atol) {
  if (actual.shape() != expected.shape()) {
    return ::testing::AssertionFailure() << "shape " << shape_str(actual.shape()) << " vs expected "
                                         << shape_str(expected.shape());
  }
  std::vector<double> a = actual.to_vector<double>();
  std::vector<double> b = expected.to_vector<double>();
  for (size_t i = 0; i < a.size(); ++i) {
    bool both_nan = std::isnan(a[i]) && std::isnan(b[i]);
    bool same_inf = std::isinf(a[i]) && a[i] == b[i];
    if (both_nan || same_inf) continue;
    double err = std::fabs(a[i] - b[i]);
    if (!(err <= atol + rtol * std::fabs(b[i]))) {
      return ::testing::AssertionFailure() << "element " << i << ": " << a[i] << " vs expected " << b[i]
                                           << " (|diff| " << err << " > atol " << atol << " + rtol " << rtol
                                           << " * |expected|)";
    }
  }
  return ::testing::AssertionSuccess();
}

}  // namespace brigade::testing
