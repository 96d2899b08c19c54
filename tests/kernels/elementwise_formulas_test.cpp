// kernels/elementwise_formulas.h, the scalar formulas both backends compile: the CPU backend's results are
// these formulas (bit for bit in float64; float32 GELU in CPU v1 and v2 runs vector_math.h's vectorised
// form of the same expression, checked here to within a few ulp; v3's own exp and FMAs are checked against
// the formula in double in tests/kernels/exp_rows_test.cpp), and the float form of GELU (a sigmoid rewrite)
// agrees with the float64 tanh form.
//
// Tolerances: float64 exact (the same code); float32 GELU and its derivative vs v1's and v2's vector code:
// rtol 4e-7 (a 2-ulp exp, a few roundings), atol 1e-37 (results near the denormals); float form vs float64
// tanh form: rtol 1e-5 beyond |x| > 0.01, atol 1e-7 (float rounding of x^3 and of the sum).
#include "kernels/elementwise_formulas.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "kernels/backend.h"
#include "kernels/elementwise_versions.h"
#include "kernels/kernels.h"
#include "test_support.h"

namespace brigade {
namespace {

namespace formulas = kernels::formulas;
using kernels::UnaryOp;

/// x from -60 to 60 in steps of 0.0371 (past the +-40 clamp of u), plus zeros, infinities and NaN.
std::vector<double> sample_points() {
  std::vector<double> xs;
  for (double x = -60.0; x <= 60.0; x += 0.0371) xs.push_back(x);
  for (double x : {0.0, -0.0, 1e-30, -1e-30, 5.0, -5.0}) xs.push_back(x);
  xs.push_back(std::numeric_limits<double>::infinity());
  xs.push_back(-std::numeric_limits<double>::infinity());
  xs.push_back(std::nan(""));
  return xs;
}

TEST(ElementwiseFormulas, Float64IsTheCpuBackendBitForBit) {
  const std::vector<double> xs = sample_points();
  const int64_t n = static_cast<int64_t>(xs.size());
  const Tensor x = from_vector(xs, {n});
  std::vector<double> gs(xs.size());
  for (size_t i = 0; i < gs.size(); ++i) gs[i] = std::sin(static_cast<double>(i));
  const Tensor g = from_vector(gs, {n});
  for (UnaryOp op : {UnaryOp::Gelu, UnaryOp::Sigmoid, UnaryOp::Tanh, UnaryOp::Relu, UnaryOp::Abs}) {
    const Tensor y = kernels::unary(op, x);
    const Tensor dx = kernels::unary_backward(op, g, x, y);
    const std::vector<double> yv = y.to_vector<double>(), dv = dx.to_vector<double>();
    for (size_t i = 0; i < xs.size(); ++i) {
      const double fy = formulas::apply_unary(op, xs[i]);
      const double fd = formulas::apply_unary_grad(op, gs[i], xs[i], yv[i]);
      // Same bits, NaN for NaN.
      EXPECT_TRUE((std::isnan(fy) && std::isnan(yv[i])) ||
                  (std::signbit(fy) == std::signbit(yv[i]) && fy == yv[i]))
          << kernels::unary_op_name(op) << " x " << xs[i] << ": " << fy << " vs " << yv[i];
      EXPECT_TRUE((std::isnan(fd) && std::isnan(dv[i])) || fd == dv[i])
          << kernels::unary_op_name(op) << "' x " << xs[i] << ": " << fd << " vs " << dv[i];
    }
  }
}

TEST(ElementwiseFormulas, Float32GeluIsTheCpuVectorCodeWithinAFewUlp) {
  std::vector<float> xs;
  for (double x : sample_points()) xs.push_back(static_cast<float>(x));
  const int64_t n = static_cast<int64_t>(xs.size());
  const Tensor x = from_vector(xs, {n});
  std::vector<float> gs(xs.size(), 1.0f);
  const Tensor g = from_vector(gs, {n});
  for (kernels::ElementwiseKernel kernel :
       {kernels::ElementwiseKernel::CpuBaseline, kernels::ElementwiseKernel::CpuAvx2}) {
    if (!kernels::elementwise_kernel_supports(kernel)) continue;
    const char* name = kernels::elementwise_kernel_name(kernel);
    const Tensor y_out = empty({n}, TensorOptions(kFloat32)), d_out = empty({n}, TensorOptions(kFloat32));
    kernels::unary_with(kernel, UnaryOp::Gelu, x, y_out);
    kernels::unary_backward_with(kernel, UnaryOp::Gelu, g, x, y_out, d_out);
    const std::vector<float> y = y_out.to_vector<float>(), d = d_out.to_vector<float>();
    for (size_t i = 0; i < xs.size(); ++i) {
      const float fy = formulas::gelu(xs[i]), fd = formulas::gelu_grad(1.0f, xs[i]);
      if (std::isnan(y[i])) {
        EXPECT_TRUE(std::isnan(fy)) << name << " x " << xs[i];
      } else if (fy != y[i]) {  // equal infinities pass here
        EXPECT_LE(std::fabs(fy - y[i]), 1e-37 + 4e-7 * std::fabs(y[i])) << name << " gelu x " << xs[i];
        EXPECT_EQ(std::signbit(fy), std::signbit(y[i])) << name << " gelu x " << xs[i];
      }
      if (std::isnan(d[i])) {
        EXPECT_TRUE(std::isnan(fd)) << name << " x " << xs[i];
      } else if (fd != d[i]) {
        EXPECT_LE(std::fabs(fd - d[i]), 1e-37 + 4e-7 * std::fabs(d[i])) << name << " gelu' x " << xs[i];
      }
    }
  }
}

TEST(ElementwiseFormulas, Float32GeluFormAgreesWithTheFloat64TanhForm) {
  for (double x = -8.0; x <= 8.0; x += 0.013) {
    const float xf = static_cast<float>(x);
    const double xd = static_cast<double>(xf);
    const double y64 = formulas::gelu(xd), d64 = formulas::gelu_grad(1.0, xd);
    EXPECT_LE(std::fabs(formulas::gelu(xf) - y64), 1e-7 + 1e-5 * std::fabs(y64)) << "gelu x " << x;
    EXPECT_LE(std::fabs(formulas::gelu_grad(1.0f, xf) - d64), 1e-7 + 1e-5 * std::fabs(d64))
        << "gelu' x " << x;
  }
  // Far left: the float form keeps relative accuracy where the tanh form in float would cancel to 0.
  const double y64 = formulas::gelu(-6.0);
  EXPECT_NE(formulas::gelu(-6.0f), 0.0f);
  EXPECT_LE(std::fabs(formulas::gelu(-6.0f) - y64), 1e-5 * std::fabs(y64));
}

}  // namespace
}  // namespace brigade
