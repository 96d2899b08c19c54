// The float32 row loops of kernels/cpu/exp_rows.h (softmax, log-softmax and cross-entropy on the CPU):
//  - the polynomial exp within 2 ulp of exp (std::exp in double, then the exact float distance) over the
//    whole range it claims, [-87.3, 88], sampled every 251st float (8.9 M values), and its values outside;
//  - every ISA this CPU runs (AVX-512, AVX2, SSE2) gives the same bits for every loop, on rows of 1..40
//    elements (every tail length) and a few long ones;
//  - the sums against a sum in long double;
//  - float GELU and its gradient over arrays (kernels/cpu/elementwise.cpp, the same polynomial exp): the
//    widest vectors this CPU has (16 or 8 lanes) give the bits of the 4-lane baseline.
// The ops themselves are checked against kernels/reference/ by the op table (tests/ops/).
#include "kernels/cpu/exp_rows.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/cpu/elementwise.h"
#include "tensor/philox.h"
#include "tests/kernels/vector_isas.h"

namespace brigade::testing {
namespace {

using kernels::cpu::detail::exp_row_kernels;
using kernels::cpu::detail::ExpRowKernels;
using kernels::cpu::detail::VectorIsa;

uint32_t bits_of(float x) {
  uint32_t b;
  std::memcpy(&b, &x, sizeof b);
  return b;
}

float float_of(uint32_t b) {
  float x;
  std::memcpy(&x, &b, sizeof x);
  return x;
}

/// |f - exact| in units of the last place of exact (a normal float here).
double ulp_error(float f, double exact) {
  int exponent = 0;
  std::frexp(exact, &exponent);  // exact = m 2^exponent, m in [0.5, 1): ulp = 2^(exponent - 24)
  return std::fabs(static_cast<double>(f) - exact) / std::ldexp(1.0, exponent - 24);
}

TEST(ExpRows, ExpIsWithinTwoUlpOverItsRangeOnEveryIsa) {
  // Every 251st float of [-87.3, 88] (bit patterns: negatives count down from -0).
  std::vector<float> x;
  for (uint32_t b = 0; b <= bits_of(88.0f); b += 251) x.push_back(float_of(b));
  for (uint32_t b = bits_of(-0.0f); b <= bits_of(-87.3f); b += 251) x.push_back(float_of(b));
  x.push_back(88.0f);
  x.push_back(-87.3f);
  const std::vector<VectorIsa> isas = vector_isas_here();
  std::vector<float> first(x.size()), y(x.size());
  exp_row_kernels(isas[0]).exp(x.data(), first.data(), static_cast<int64_t>(x.size()));
  double worst = 0;
  float worst_x = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double e = ulp_error(first[i], std::exp(static_cast<double>(x[i])));
    if (e > worst) worst = e, worst_x = x[i];
  }
  EXPECT_LE(worst, 2.0) << "at x = " << worst_x;
  RecordProperty("max_ulp", std::to_string(worst));
  for (size_t k = 1; k < isas.size(); ++k) {
    exp_row_kernels(isas[k]).exp(x.data(), y.data(), static_cast<int64_t>(x.size()));
    EXPECT_EQ(0, std::memcmp(first.data(), y.data(), x.size() * sizeof(float))) << "isa " << k;
  }
}

TEST(ExpRows, ExpOutsideItsRange) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> x = {-87.4f, -100.0f, -inf, 88.1f, 1000.0f, inf, nan, 0.0f, -0.0f};
  for (VectorIsa isa : vector_isas_here()) {
    std::vector<float> y(x.size());
    exp_row_kernels(isa).exp(x.data(), y.data(), static_cast<int64_t>(x.size()));
    EXPECT_EQ(y[0], 0.0f);
    EXPECT_EQ(y[1], 0.0f);
    EXPECT_EQ(y[2], 0.0f);
    EXPECT_EQ(y[3], inf);
    EXPECT_EQ(y[4], inf);
    EXPECT_EQ(y[5], inf);
    EXPECT_TRUE(std::isnan(y[6]));
    EXPECT_EQ(y[7], 1.0f);
    EXPECT_EQ(y[8], 1.0f);
  }
}

/// Every loop of `k` on rows x, w, g of n elements, outputs and sums appended to one list of bits.
std::vector<uint64_t> run_all(const ExpRowKernels& k, const float* x, const float* w, const float* g,
                              int64_t n) {
  std::vector<uint64_t> out;
  auto keep = [&out](const std::vector<float>& v) {
    for (float f : v) out.push_back(bits_of(f));
  };
  auto keep_double = [&out](double d) {
    uint64_t b;
    std::memcpy(&b, &d, sizeof b);
    out.push_back(b);
  };
  const auto size = static_cast<size_t>(n);
  std::vector<float> e(size), y(size), dx(size);
  const float max = k.max(x, n);
  out.push_back(bits_of(max));
  const double total = k.exp_shifted_sum(x, max, e.data(), n);
  keep_double(total);
  keep(e);
  y = e;
  k.scale(y.data(), n, static_cast<float>(1.0 / total));
  keep(y);
  k.log_softmax(x, y.data(), n, max, std::log(total));
  keep(y);
  keep_double(k.sum(g, n));
  keep_double(k.dot(g, w, n));
  k.softmax_backward(g, w, dx.data(), n, 0.25);
  keep(dx);
  k.log_softmax_backward(g, y.data(), dx.data(), n, 1.5);
  keep(dx);
  k.scale_twice(e.data(), dx.data(), n, 1.0 / total, 1.0 / 3.0);
  keep(dx);
  return out;
}

std::vector<float> normal_row(int64_t n, uint64_t seed, double scale) {
  std::vector<float> v(static_cast<size_t>(n));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(scale * philox::normal(seed, 0, i));
  return v;
}

TEST(ExpRows, EveryIsaGivesTheSameBitsAndTheSumsAreRight) {
  const std::vector<VectorIsa> isas = vector_isas_here();
  std::vector<int64_t> lengths;
  for (int64_t n = 1; n <= 40; ++n) lengths.push_back(n);
  for (int64_t n : {1000, 1027, 50257}) lengths.push_back(n);
  for (int64_t n : lengths) {
    std::vector<float> x = normal_row(n, 100 + static_cast<uint64_t>(n), 5.0);
    const std::vector<float> w = normal_row(n, 200, 1.0), g = normal_row(n, 300, 1.0);
    if (n > 3) x[2] = -std::numeric_limits<float>::infinity();  // a masked logit
    const std::vector<uint64_t> first = run_all(exp_row_kernels(isas[0]), x.data(), w.data(), g.data(), n);
    for (size_t k = 1; k < isas.size(); ++k) {
      EXPECT_EQ(first, run_all(exp_row_kernels(isas[k]), x.data(), w.data(), g.data(), n))
          << "n " << n << " isa " << k;
    }
    const ExpRowKernels& k = exp_row_kernels();
    long double sum = 0, dot = 0, exps = 0;
    float max = x[0];
    for (int64_t j = 0; j < n; ++j) max = std::max(max, x[static_cast<size_t>(j)]);
    for (size_t j = 0; j < static_cast<size_t>(n); ++j) {
      sum += g[j];
      dot += static_cast<long double>(g[j]) * w[j];
      exps += std::exp(static_cast<long double>(x[j] - max));
    }
    std::vector<float> e(static_cast<size_t>(n));
    EXPECT_EQ(k.max(x.data(), n), max);
    EXPECT_NEAR(k.sum(g.data(), n), static_cast<double>(sum), 1e-12 * static_cast<double>(n));
    EXPECT_NEAR(k.dot(g.data(), w.data(), n), static_cast<double>(dot), 1e-12 * static_cast<double>(n));
    const double total = k.exp_shifted_sum(x.data(), max, e.data(), n);
    EXPECT_NEAR(total, static_cast<double>(exps), 3e-7 * static_cast<double>(exps)) << "n " << n;
  }
}

TEST(ExpRows, GeluArraysGiveTheBaselineBitsOnTheWidestVectors) {
  const int64_t n = 100003;  // a tail on every width
  std::vector<float> x(static_cast<size_t>(n)), g = normal_row(n, 400, 1.0);
  for (size_t i = 0; i < x.size(); ++i) x[i] = -12.0f + 24.0f * static_cast<float>(i) / static_cast<float>(n);
  std::vector<float> base(x.size()), wide(x.size());
  kernels::cpu::gelu_array(base.data(), x.data(), n, /*avx2=*/false);
  kernels::cpu::gelu_array(wide.data(), x.data(), n, /*avx2=*/true);
  EXPECT_EQ(0, std::memcmp(base.data(), wide.data(), x.size() * sizeof(float)));
  kernels::cpu::gelu_grad_array(base.data(), g.data(), x.data(), n, false);
  kernels::cpu::gelu_grad_array(wide.data(), g.data(), x.data(), n, true);
  EXPECT_EQ(0, std::memcmp(base.data(), wide.data(), x.size() * sizeof(float)));
}

}  // namespace
}  // namespace brigade::testing
