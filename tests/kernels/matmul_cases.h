// The matmul test table and its reference, shared by matmul_test.cpp (CPU) and cuda_matmul_test.cpp (CUDA,
// native kernel and cuBLAS), so every backend runs the same shapes against the same plain triple loop.
//
// Error measure. A dot product of length K rounded in a type with unit roundoff u is off by at most about
// K * u * sum_k |a_ik * b_kj|, whatever the sign pattern, and typically sqrt(K) * u times that. So each
// element's error is divided by that magnitude (plus a tiny floor), not by |c_ij| (which may cancel to ~0):
//   err_ij = |c_ij - ref_ij| / (sum_k |a_ik b_kj| + 1e-300).
// Tolerances on that scale: float32 1e-5, float64 1e-12, bfloat16 1e-2 (the output is rounded to bfloat16,
// a relative step of 2^-8; the inputs are already bfloat16, so the reference sees the same inputs).
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "tensor/tensor.h"

namespace brigade::testing {

struct MatmulShape {
  int64_t m, n, k;
};

inline std::string shape_name(const MatmulShape& s) {
  std::ostringstream out;
  out << s.m << "x" << s.n << "x" << s.k;
  return out.str();
}

/// M x N x K, chosen around the CPU blocking (MR 6, NR 8 or 4, MC 96, NC 128, KC 256) and the CUDA tiles
/// (64 and 128): exact multiples, one less and one more, odd sizes, and degenerate vectors.
inline const std::vector<MatmulShape>& matmul_shapes() {
  static const std::vector<MatmulShape> shapes = {
      {1, 1, 1},    {2, 3, 4},     {37, 53, 29},   {13, 1, 17},    {1, 19, 8},
      {6, 8, 1},    {5, 7, 300},   {96, 128, 256}, {95, 127, 255}, {97, 129, 257},
      {64, 64, 64}, {65, 130, 33}, {129, 67, 520},
  };
  return shapes;
}

/// Tolerance on the magnitude-relative error above.
inline double matmul_tolerance(DType dtype) {
  switch (dtype) {
    case DType::Float64:
      return 1e-12;
    case DType::BFloat16:
      return 1e-2;
    default:
      return 1e-5;
  }
}

/// A [rows, cols] or [batch, rows, cols] random operand (batch < 0: 2-d).
inline Tensor random_matrix(int64_t batch, int64_t rows, int64_t cols, DType dtype, Generator& gen,
                            Device device = Device::cpu()) {
  Shape shape = batch < 0 ? Shape{rows, cols} : Shape{batch, rows, cols};
  return randn(shape, TensorOptions().dtype(dtype).device(device), &gen);
}

/// op(a) @ op(b) with the shape rules of kernels::matmul, by the plain triple loop in double over the
/// logical values of the (possibly strided) operands. Fills `magnitude` with sum_k |a_ik b_kj|.
inline std::vector<double> reference_matmul(const Tensor& a, const Tensor& b, bool ta, bool tb,
                                            std::vector<double>& magnitude, Shape& out_shape) {
  const std::vector<double> av = a.to_vector<double>();
  const std::vector<double> bv = b.to_vector<double>();
  const int64_t ar = a.size(-2), ac = a.size(-1), br = b.size(-2), bc = b.size(-1);
  const int64_t m = ta ? ac : ar, k = ta ? ar : ac, n = tb ? br : bc;
  const int64_t batch = a.dim() == 3 ? a.size(0) : (b.dim() == 3 ? b.size(0) : 1);
  const bool batched = a.dim() == 3 || b.dim() == 3;
  out_shape = batched ? Shape{batch, m, n} : Shape{m, n};
  std::vector<double> out(static_cast<size_t>(batch * m * n), 0.0);
  magnitude.assign(out.size(), 0.0);
  for (int64_t bi = 0; bi < batch; ++bi) {
    const double* ab = av.data() + (a.dim() == 3 ? bi * ar * ac : 0);
    const double* bb = bv.data() + (b.dim() == 3 ? bi * br * bc : 0);
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double sum = 0.0, mag = 0.0;
        for (int64_t p = 0; p < k; ++p) {
          const double x = ta ? ab[p * ac + i] : ab[i * ac + p];
          const double y = tb ? bb[j * bc + p] : bb[p * bc + j];
          sum += x * y;
          mag += std::fabs(x * y);
        }
        out[(bi * m + i) * n + j] = sum;
        magnitude[(bi * m + i) * n + j] = mag;
      }
    }
  }
  return out;
}

/// Checks `actual` (any device) against the triple loop for op(a) @ op(b) within `tol` (see the top).
inline ::testing::AssertionResult matmul_matches_reference(const Tensor& actual, const Tensor& a,
                                                           const Tensor& b, bool ta, bool tb, double tol) {
  std::vector<double> magnitude;
  Shape expected_shape;
  const std::vector<double> expected = reference_matmul(a, b, ta, tb, magnitude, expected_shape);
  if (actual.shape() != expected_shape) {
    return ::testing::AssertionFailure()
           << "shape " << shape_str(actual.shape()) << ", expected " << shape_str(expected_shape);
  }
  const std::vector<double> got = actual.to_vector<double>();
  double worst = 0.0;
  size_t worst_index = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double err = std::fabs(got[i] - expected[i]) / (magnitude[i] + 1e-300);
    if (!(err <= worst)) {  // also catches NaN
      worst = std::isnan(err) ? INFINITY : err;
      worst_index = i;
    }
  }
  if (worst <= tol) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "element " << worst_index << ": " << got[worst_index] << " vs reference " << expected[worst_index]
         << " (relative error " << worst << " > " << tol << " of sum|a*b| = " << magnitude[worst_index]
         << ")";
}

}  // namespace brigade::testing
