// The float32 unary ops of elementwise v3 on AVX-512 (kernels/cpu/unary_avx512.cpp), where the CPU runs it:
//  - each op against its formula in double, rounded to float, in ulps of the exact value, over every 1009th
//    float of the whole range (positive and negative: ~8.5 M values, denormals included); sqrt and 1/sqrt
//    bit for bit against sqrtf and 1 / sqrtf (v1's bits);
//  - the special values: zeros, infinities, NaN, negatives of log and sqrt, the ends of exp's range;
//  - the op through kernels::unary_with(CpuAvx512) on a strided view gives the contiguous array's bits
//    (the gather path), and bfloat16 the float result rounded once.
// The ops are checked against kernels/reference/ by the op table too (tests/ops/), with every version.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iostream>
#include <limits>
#include <utility>
#include <vector>

#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/exp_rows_avx512.h"  // avx512_rows_run
#include "kernels/elementwise_versions.h"
#include "kernels/kernels.h"
#include "tensor/tensor.h"

namespace brigade::testing {
namespace {

#if BRIGADE_CPU_X86

#define SKIP_WITHOUT_AVX512_FMA()                                     \
  if (!kernels::cpu::detail::avx512_rows_run())                       \
  GTEST_SKIP() << "this CPU lacks AVX-512F or FMA: elementwise v3's " \
               << "unary arrays do not run here"

using kernels::UnaryOp;

/// The floats in order as integers (negatives below positives, -0 next to +0): their difference is the
/// distance in units of the last place, across binades and into the denormals.
int64_t ordered(float x) {
  const auto b = static_cast<int64_t>(std::bit_cast<uint32_t>(x));
  return b & 0x80000000 ? -(b & 0x7fffffff) : b;
}

/// The op's formula in double (kernels/elementwise_formulas.h), rounded to float once.
float exact(UnaryOp op, float xf) {
  const double x = xf;
  switch (op) {
    case UnaryOp::Exp:
      return static_cast<float>(std::exp(x));
    case UnaryOp::Log:
      return static_cast<float>(std::log(x));
    case UnaryOp::Tanh:
      return static_cast<float>(std::tanh(x));
    case UnaryOp::Sigmoid:
      return static_cast<float>(x >= 0 ? 1.0 / (1.0 + std::exp(-x)) : std::exp(x) / (1.0 + std::exp(x)));
    case UnaryOp::Sqrt:
      return std::sqrt(xf);  // v1's bits: sqrtf
    case UnaryOp::Rsqrt:
      return 1.0f / std::sqrt(xf);
    default:
      return std::numeric_limits<float>::quiet_NaN();
  }
}

std::vector<float> v3(UnaryOp op, const std::vector<float>& x) {
  std::vector<float> y(x.size());
  kernels::cpu::detail::unary_array_avx512(op, y.data(), x.data(), static_cast<int64_t>(x.size()));
  return y;
}

/// Every 1009th float, positive and negative, from 0 to the largest finite one.
std::vector<float> sweep() {
  std::vector<float> x;
  for (uint32_t b = 0; b < std::bit_cast<uint32_t>(std::numeric_limits<float>::infinity()); b += 1009) {
    x.push_back(std::bit_cast<float>(b));
    x.push_back(-std::bit_cast<float>(b));
  }
  return x;
}

/// The largest distance in ulps from the rounded formula over the sweep's values in the op's domain, and
/// that both are NaN together.
int64_t worst_ulps(UnaryOp op) {
  const std::vector<float> x = sweep();
  const std::vector<float> y = v3(op, x);
  int64_t worst = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const float want = exact(op, x[i]);
    EXPECT_EQ(std::isnan(want), std::isnan(y[i])) << kernels::unary_op_name(op) << "(" << x[i] << ")";
    if (std::isnan(want) || std::isnan(y[i])) continue;
    const int64_t d = std::llabs(ordered(y[i]) - ordered(want));
    if (d > worst) worst = d;
  }
  return worst;
}

TEST(UnaryAvx512, SqrtAndRsqrtAreV1sBitsEverywhere) {
  SKIP_WITHOUT_AVX512_FMA();
  EXPECT_EQ(0, worst_ulps(UnaryOp::Sqrt));
  EXPECT_EQ(0, worst_ulps(UnaryOp::Rsqrt));
}

// Bounds, in ulps from the rounded exact value, as measured on the sweep (the code is the same on every
// CPU that runs it, so these are exact): exp's table exp 1 (exp_avx512.h), log 0 (the correctly rounded
// value but within 4e-13 of a tie, and the sweep meets no such tie), tanh 1, sigmoid 3 (below 0, where
// e / (1 + e) adds the sum's and the quotient's roundings to exp's ulp: x = -1.96 is one such value).
TEST(UnaryAvx512, ExpLogTanhSigmoidAreWithinAFewUlpOfTheFormula) {
  SKIP_WITHOUT_AVX512_FMA();
  for (auto [op, bound] :
       {std::pair{UnaryOp::Exp, 1}, {UnaryOp::Log, 0}, {UnaryOp::Tanh, 1}, {UnaryOp::Sigmoid, 3}}) {
    const int64_t worst = worst_ulps(op);
    std::cout << kernels::unary_op_name(op) << ": at most " << worst << " ulp from the formula\n";
    EXPECT_LE(worst, bound) << kernels::unary_op_name(op);
  }
}

TEST(UnaryAvx512, SpecialValues) {
  SKIP_WITHOUT_AVX512_FMA();
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const float denormal = std::numeric_limits<float>::denorm_min() * 7;
  const std::vector<float> x = {0.0f,  -0.0f,  inf,     -inf,    nan,    -1.0f,   denormal, 88.7f,
                                88.8f, -87.5f, -103.0f, -104.5f, 0.625f, -0.625f, 1e-30f,   -1e-30f};
  for (UnaryOp op :
       {UnaryOp::Exp, UnaryOp::Log, UnaryOp::Sqrt, UnaryOp::Rsqrt, UnaryOp::Tanh, UnaryOp::Sigmoid}) {
    const std::vector<float> y = v3(op, x);
    for (size_t i = 0; i < x.size(); ++i) {
      const float want = exact(op, x[i]);
      if (std::isnan(want)) {
        EXPECT_TRUE(std::isnan(y[i])) << kernels::unary_op_name(op) << "(" << x[i] << ") = " << y[i];
      } else if (std::isinf(want) || want == 0.0f) {  // infinities and zeros exactly, with their sign
        EXPECT_EQ(std::bit_cast<uint32_t>(want), std::bit_cast<uint32_t>(y[i]))
            << kernels::unary_op_name(op) << "(" << x[i] << ") = " << y[i];
      } else {
        EXPECT_LE(std::llabs(ordered(y[i]) - ordered(want)), 3)
            << kernels::unary_op_name(op) << "(" << x[i] << ") = " << y[i] << ", want " << want;
      }
    }
  }
}

TEST(UnaryAvx512, EveryLayoutAndBfloat16GiveTheArraysBits) {
  SKIP_WITHOUT_AVX512_FMA();
  const int64_t rows = 37, cols = 29;  // 29: whole vectors and a tail in each contiguous run
  std::vector<float> values(static_cast<size_t>(rows * cols));
  for (size_t i = 0; i < values.size(); ++i) values[i] = 0.37f * static_cast<float>(i % 97) - 9.0f;
  for (UnaryOp op :
       {UnaryOp::Exp, UnaryOp::Log, UnaryOp::Sqrt, UnaryOp::Rsqrt, UnaryOp::Tanh, UnaryOp::Sigmoid}) {
    std::vector<float> in = values;
    if (op == UnaryOp::Log || op == UnaryOp::Sqrt || op == UnaryOp::Rsqrt) {
      for (float& v : in) v = std::fabs(v) + 0.01f;
    }
    const std::vector<float> want = v3(op, in);
    // The transposed view of the transposed values: the same elements, every run strided.
    const Tensor t = from_vector(in, {rows, cols}).transpose(0, 1).contiguous().transpose(0, 1);
    ASSERT_FALSE(t.is_contiguous());
    Tensor out = empty({rows, cols});
    kernels::unary_with(kernels::ElementwiseKernel::CpuAvx512, op, t, out);
    const std::vector<float> strided = out.to_vector<float>();
    EXPECT_EQ(0, std::memcmp(want.data(), strided.data(), want.size() * sizeof(float)))
        << kernels::unary_op_name(op);
    // bfloat16: the input widened, the float result rounded once.
    const Tensor b = from_vector(in, {rows, cols}).to(kBFloat16);
    Tensor b_out = empty({rows, cols}, TensorOptions(kBFloat16));
    kernels::unary_with(kernels::ElementwiseKernel::CpuAvx512, op, b, b_out);
    const std::vector<float> b_in = b.to(kFloat32).to_vector<float>();
    const std::vector<float> b_want =
        from_vector(v3(op, b_in), {rows, cols}).to(kBFloat16).to(kFloat32).to_vector<float>();
    const std::vector<float> b_got = b_out.to(kFloat32).to_vector<float>();
    EXPECT_EQ(0, std::memcmp(b_want.data(), b_got.data(), b_want.size() * sizeof(float)))
        << kernels::unary_op_name(op) << " bfloat16";
  }
}

#endif  // BRIGADE_CPU_X86

}  // namespace
}  // namespace brigade::testing
