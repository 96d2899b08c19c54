// How close an op's outputs must come to the reference's (op_reference.h), on each backend, and the error
// measure the check uses: shared by the table tests (op_table_test.cpp, cuda_op_table_test.cpp, which
// explain each figure) and the kernel lab (`brigade kernel`, apps/kernel_lab.h), which reports the same
// measure for one version at one shape.
//
// The error measure. For most ops, per element: |actual - expected| <= atol + rtol * |expected| (NaN where
// the reference is NaN, and the same infinity, pass). For matmul, and the float32 layernorm backward's
// parameter gradients on the CPU, the magnitude-relative error of tests/kernels/matmul_check.h:
// |c_ij - ref_ij| / (sum of the terms' magnitudes + 1e-300) <= magnitude_tol, where the reference gives that
// sum (Expected::magnitude) and the tolerance a magnitude_tol.
#pragma once

#include <cmath>
#include <cstddef>
#include <vector>

#include "tests/kernels/matmul_tolerance.h"
#include "tests/ops/op_reference.h"
#include "tests/ops/op_versions.h"

namespace brigade::testing {

struct Tolerance {
  double rtol = 0, atol = 0;
  /// The bound on the magnitude-relative error above, where the reference gives a magnitude (0: the
  /// per-element rtol and atol instead).
  double magnitude_tol = 0;
};

/// Whether `expected` is checked on the magnitude-relative error (its reference gives a magnitude and the
/// tolerance a bound on it), else per element on rtol and atol.
inline bool on_magnitude(const Expected& expected, const Tolerance& tol) {
  return expected.magnitude.defined() && tol.magnitude_tol > 0;
}

/// The CPU backend's tolerances (op_table_test.cpp explains them).
inline Tolerance cpu_tolerance(const OpCase& c, size_t output, DType output_dtype) {
  auto attention = [](DType dtype) -> Tolerance {
    if (dtype == kFloat64) return {1e-11, 1e-12};
    if (dtype == kFloat32) return {1e-4, 2e-6};
    return {1e-2, 2e-3};
  };
  if (!is_floating(output_dtype)) return {};
  switch (c.op) {
    case Op::Matmul:
    case Op::MatmulBias:
      return {0, 0, matmul_tolerance(c.dtype)};
    case Op::Attention:  // output 1 is lse: float32 unless the case is float64
      return attention(output == 1 && c.dtype != kFloat64 ? kFloat32 : c.dtype);
    case Op::AttentionBackward: {
      const Tolerance t = attention(c.dtype);
      const double factor = c.dtype == kBFloat16 ? 2.0 : 1.0;
      return {factor * t.rtol, factor * t.atol};
    }
    case Op::LayerNormBackward:
      // dweight and dbias sum a term per row; their error is on the terms' scale (op_table_test.cpp).
      if (output > 0 && c.dtype == kFloat32) return {1e-5, 1e-6, 1e-6};
      break;
    default:
      break;
  }
  switch (c.dtype) {
    case DType::BFloat16:
      return {1e-2, 1e-2};
    case DType::Float64:
      return {1e-12, 1e-12};
    default:
      return {1e-5, 1e-6};
  }
}

/// The CUDA implementations' tolerances (cuda_op_table_test.cpp explains them).
inline Tolerance cuda_tolerance(const OpCase& c, const Implementation& impl, size_t output,
                                DType output_dtype) {
  if (!is_floating(output_dtype)) return {};
  if (c.op == Op::Matmul || c.op == Op::MatmulBias) return {0, 0, matmul_tolerance(c.dtype)};
  if (impl.family == Family::Attention) {
    if (c.op == Op::Attention && output == 1 && c.dtype != kFloat64) return {1e-5, 1e-5};
    if (c.dtype == kFloat64) return {1e-11, 1e-12};
    Tolerance t = c.dtype == kBFloat16 ? Tolerance{2e-2, 4e-3} : Tolerance{1e-4, 1e-5};
    const bool tensor_cores =
        impl.version == static_cast<int>(kernels::AttentionKernel::CudaFlashTensorCore) ||
        impl.version == static_cast<int>(kernels::AttentionKernel::CudaFlashTensorCoreAsync);
    if (c.op == Op::AttentionBackward && tensor_cores && impl.runs_itself) t.atol = 1e-2;
    return t;
  }
  if (impl.version < 0) return c.dtype == kBFloat16 ? Tolerance{2e-2, 3e-2} : Tolerance{1e-4, 1e-5};
  const DType dtype = c.op == Op::AdamW ? output_dtype : c.dtype;  // a version's own tolerance
  Tolerance t = dtype == kBFloat16 ? Tolerance{1e-2, 1e-3}
                                   : (dtype == kFloat64 ? Tolerance{1e-12, 1e-14} : Tolerance{1e-5, 1e-6});
  if (c.op == Op::LayerNorm && output > 0) return {c.dtype == kFloat64 ? 1e-12 : 1e-5, 1e-6};
  if (c.op == Op::LayerNormBackward && output > 0) {
    t.atol = c.dtype == kFloat64 ? 1e-12 : (c.dtype == kBFloat16 ? 1e-2 : 1e-4);
  }
  if (c.op == Op::EmbeddingBackward && c.dtype == kFloat32) t.atol = 1e-4;
  return t;
}

/// The worst element of `actual` against `expected`, as a multiple of what the tolerance allows (<= 1
/// passes; infinity for NaN or a shape mismatch).
struct ErrorRatio {
  double ratio = 0;
  size_t index = 0;
  double actual = 0, expected = 0;
};

inline ErrorRatio error_ratio(const Tensor& actual, const Expected& expected, const Tolerance& tol) {
  ErrorRatio worst;
  if (actual.numel() != expected.value.numel()) return {INFINITY, 0, 0, 0};
  const std::vector<double> got = actual.contiguous().to(Device::cpu()).to(kFloat64).to_vector<double>();
  const std::vector<double> want = expected.value.contiguous().to(kFloat64).to_vector<double>();
  const std::vector<double> magnitude = on_magnitude(expected, tol)
                                            ? expected.magnitude.contiguous().to(kFloat64).to_vector<double>()
                                            : std::vector<double>();
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i] == want[i] || (std::isnan(got[i]) && std::isnan(want[i]))) continue;
    const double allowed = magnitude.empty() ? tol.atol + tol.rtol * std::fabs(want[i])
                                             : tol.magnitude_tol * (magnitude[i] + 1e-300);
    const double ratio = std::fabs(got[i] - want[i]) / allowed;
    if (!(ratio <= worst.ratio)) worst = {std::isnan(ratio) ? INFINITY : ratio, i, got[i], want[i]};
  }
  return worst;
}

}  // namespace brigade::testing
