// The float32 row loops of kernels/cpu/exp_rows.h (softmax, log-softmax and cross-entropy on the CPU):
//  - the polynomial exp within 2 ulp of exp (std::exp in double, then the exact float distance) over the
//    whole range it claims, [-87.3, 88], sampled every 251st float (8.9 M values), and its values outside;
//  - every ISA this CPU runs (AVX-512, AVX2, SSE2) gives the same bits for every loop, on rows of 1..40
//    elements (every tail length) and a few long ones;
//  - the sums against a sum in long double;
//  - float GELU and its gradient over arrays (kernels/cpu/elementwise.cpp, the same polynomial exp): the
//    widest vectors this CPU has (16 or 8 lanes) give the bits of the 4-lane baseline.
// And the AVX-512 + FMA set of softmax and cross-entropy v2 and GELU v3 (kernels/cpu/exp_rows_avx512.h,
// gelu_avx512.cpp), where the CPU runs it:
//  - exp16 within 1.25 ulp over the same range, and its values outside;
//  - the one-pass max and sum against long double, on rows whose max rises in a later chunk, with a
//    masked (-inf) prefix longer than a chunk, and at every tail length;
//  - the output loops against long double, the non-temporal stores giving the same bits, and a short
//    softmax row's exps kept by the sum pass and scaled in place giving the same bits as computed twice;
//  - short rows taken several at a time (the maxes and sums, the softmax backward) giving each row the
//    bits it gets alone, and the softmax backward within 4 float roundings of its terms against long double;
//  - GELU v1 and v3 (and their gradients) both within the same bound of the formula in double.
// The ops themselves are checked against kernels/reference/ by the op table (tests/ops/).
#include "kernels/cpu/exp_rows.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/exp_rows_avx512.h"
#include "kernels/cpu/vector_math.h"  // kGeluULimit
#include "kernels/kernels.h"
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
  using kernels::cpu::GeluCode;
  kernels::cpu::gelu_array(base.data(), x.data(), n, GeluCode::Lanes4);
  kernels::cpu::gelu_array(wide.data(), x.data(), n, GeluCode::Wide);
  EXPECT_EQ(0, std::memcmp(base.data(), wide.data(), x.size() * sizeof(float)));
  kernels::cpu::gelu_grad_array(base.data(), g.data(), x.data(), n, GeluCode::Lanes4);
  kernels::cpu::gelu_grad_array(wide.data(), g.data(), x.data(), n, GeluCode::Wide);
  EXPECT_EQ(0, std::memcmp(base.data(), wide.data(), x.size() * sizeof(float)));
}

// ---- the AVX-512 + FMA set ------------------------------------------------------------------------------

namespace fast = kernels::cpu::detail;

#define SKIP_WITHOUT_AVX512_FMA()                    \
  if (!fast::avx512_rows_run())                      \
  GTEST_SKIP() << "this CPU lacks AVX-512F or FMA: " \
               << "the v2/v3 row loops do not run here"

TEST(FastExpRows, ExpIsWithinOneAndAQuarterUlpOverItsRange) {
  SKIP_WITHOUT_AVX512_FMA();
  std::vector<float> x;
  for (uint32_t b = 0; b <= bits_of(88.0f); b += 251) x.push_back(float_of(b));
  for (uint32_t b = bits_of(-0.0f); b <= bits_of(-87.3f); b += 251) x.push_back(float_of(b));
  x.push_back(88.0f);
  x.push_back(-87.3f);
  std::vector<float> y(x.size());
  fast::exp_avx512(x.data(), y.data(), static_cast<int64_t>(x.size()));
  double worst = 0;
  float worst_x = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double e = ulp_error(y[i], std::exp(static_cast<double>(x[i])));
    if (e > worst) worst = e, worst_x = x[i];
  }
  EXPECT_LE(worst, 1.25) << "at x = " << worst_x;
  RecordProperty("max_ulp", std::to_string(worst));
}

TEST(FastExpRows, ExpOutsideItsRange) {
  SKIP_WITHOUT_AVX512_FMA();
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> x = {-100.0f, -104.5f, -inf, 88.1f, 1000.0f, inf, nan, 0.0f, -0.0f};
  std::vector<float> y(x.size());
  fast::exp_avx512(x.data(), y.data(), static_cast<int64_t>(x.size()));
  // exp(-100) = 3.72e-44 would be a denormal: 0, as exp_v gives, with no lane computing it (exp_avx512.h).
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

// The attention's log-sum-exp takes the log of a block's eight row sums at once (log_avx512.h).
TEST(FastExpRows, LogOfEightDoublesIsWithinItsSeriesBoundAndRoundsToTheFloatLog) {
  SKIP_WITHOUT_AVX512_FMA();
  std::vector<double> x;
  // Every 97th float in [1, 2^20] (a row's sum of exps lies in [1, row length]), the two sides of each
  // mantissa's 1.5 (where the reduction switches halves), powers of two, and the ends of the normals.
  for (uint32_t b = bits_of(1.0f); b <= bits_of(1048576.0f); b += 97) x.push_back(float_of(b));
  for (int e = -1022; e <= 1023; e += 7) {
    for (double m : {1.0, 1.5, std::nextafter(1.5, 0.0), std::nextafter(1.5, 2.0), std::nextafter(2.0, 0.0)})
      x.push_back(std::ldexp(m, e));
  }
  x.push_back(std::numeric_limits<double>::min());
  x.push_back(std::numeric_limits<double>::max());
  std::vector<double> y(x.size());
  fast::log_avx512(x.data(), y.data(), static_cast<int64_t>(x.size()));
  // The series stops at s^14/15 with |s| <= 1/5: the next term is under 4e-13 of the value.
  double worst = 0;
  double worst_x = 0;
  size_t float_mismatches = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const long double exact = std::log(static_cast<long double>(x[i]));
    const double e = exact == 0 ? std::fabs(y[i]) : static_cast<double>(std::fabs((y[i] - exact) / exact));
    if (e > worst) worst = e, worst_x = x[i];
    if (x[i] <= 1048576.0 && x[i] >= 1.0 && static_cast<float>(y[i]) != static_cast<float>(exact)) {
      ++float_mismatches;
    }
  }
  EXPECT_LE(worst, 4e-13) << "at x = " << worst_x;
  EXPECT_EQ(float_mismatches, 0u);
  RecordProperty("max_relative_error_times_1e13", std::to_string(worst * 1e13));
}

TEST(FastExpRows, MaxExpSumAgreesWithLongDoubleOnShortAndLongRows) {
  SKIP_WITHOUT_AVX512_FMA();
  const float minus_inf = -std::numeric_limits<float>::infinity();
  std::vector<int64_t> lengths;
  for (int64_t n = 1; n <= 40; ++n) lengths.push_back(n);
  for (int64_t n :
       {fast::kExpChunk - 1, fast::kExpChunk, fast::kExpChunk + 1, int64_t{5000}, int64_t{50257}}) {
    lengths.push_back(n);
  }
  for (int64_t n : lengths) {
    for (int shape = 0; shape < 4; ++shape) {
      std::vector<float> x = normal_row(n, 500 + static_cast<uint64_t>(n), 4.0);
      if (shape == 1) {  // a rising ramp: every chunk raises the max, a long row's shift many times
        for (size_t j = 0; j < x.size(); ++j) x[j] += 0.01f * static_cast<float>(j);
      }
      if (shape == 3) x[x.size() * 2 / 3] = 60.0f;  // one element far above the rest: the shift jumps
      if (shape == 2) {  // a masked prefix longer than a chunk (rows this short are all but one masked)
        for (size_t j = 0; j + 1 < x.size() && j < 3000; ++j) x[j] = minus_inf;
      }
      float max = x[0];
      for (float v : x) max = std::max(max, v);
      long double exps = 0;
      for (float v : x) exps += std::exp(static_cast<long double>(v) - max);
      float got_max = 0;
      const double total = fast::max_exp_sum_avx512(x.data(), n, &got_max);
      EXPECT_EQ(got_max, max) << "n " << n << " shape " << shape;
      EXPECT_NEAR(total, static_cast<double>(exps), 1e-6 * static_cast<double>(exps))
          << "n " << n << " shape " << shape;
    }
  }
  // A NaN anywhere in a row gives a NaN sum, short row or long.
  for (int64_t n : {int64_t{100}, int64_t{5000}}) {
    std::vector<float> x = normal_row(n, 42, 1.0);
    x[static_cast<size_t>(n) / 2] = std::numeric_limits<float>::quiet_NaN();
    float max = 0;
    EXPECT_TRUE(std::isnan(fast::max_exp_sum_avx512(x.data(), n, &max))) << "n " << n;
  }
}

TEST(FastExpRows, OutputLoopsAgreeWithLongDoubleAndStreamingChangesNoBits) {
  SKIP_WITHOUT_AVX512_FMA();
  for (int64_t n : {1, 7, 16, 33, 1000, 50257}) {
    const std::vector<float> x = normal_row(n, 600 + static_cast<uint64_t>(n), 3.0);
    const std::vector<float> g = normal_row(n, 700, 1.0);
    const auto size = static_cast<size_t>(n);
    // One float more, so that a row starting at +1 is misaligned for the non-temporal path.
    std::vector<float> y(size), ys(size + 16), dx(size);
    float max = 0;
    const double total = fast::max_exp_sum_avx512(x.data(), n, &max);
    const auto log_total = static_cast<float>(std::log(total));
    for (int which = 0; which < 2; ++which) {
      if (which == 0) {
        fast::exp_scaled_avx512(x.data(), y.data(), n, max, static_cast<float>(1.0 / total), false);
        fast::exp_scaled_avx512(x.data(), ys.data() + 1, n, max, static_cast<float>(1.0 / total), true);
      } else {
        fast::log_softmax_avx512(x.data(), y.data(), n, max, log_total, false);
        fast::log_softmax_avx512(x.data(), ys.data() + 1, n, max, log_total, true);
      }
      EXPECT_EQ(0, std::memcmp(y.data(), ys.data() + 1, size * sizeof(float))) << "n " << n;
      for (size_t j = 0; j < size; ++j) {
        const long double z =
            static_cast<long double>(x[j]) - max - std::log(static_cast<long double>(total));
        const double exact = static_cast<double>(which == 0 ? std::exp(z) : z);
        // x - max rounds in float (its error grows with the distance), then exp (~1 ulp), 1 / total and
        // the product (half an ulp each); log-softmax: two float subtractions.
        const double slack = which == 0 ? (3e-7 + 6e-8 * std::fabs(x[j] - max)) * std::fabs(exact)
                                        : 3e-7 * (std::fabs(x[j] - max) + 1.0);
        ASSERT_NEAR(y[j], exact, slack + 1e-30) << "n " << n << " j " << j << " which " << which;
      }
    }
    // log-softmax backward from y = the log-softmax just written: dx = g - exp(y) * sum(g).
    long double dy_total = 0;
    for (float v : g) dy_total += v;
    fast::log_softmax_backward_avx512(g.data(), y.data(), dx.data(), n, static_cast<float>(dy_total));
    for (size_t j = 0; j < size; ++j) {
      const long double e = std::exp(static_cast<long double>(y[j]));
      const double exact = static_cast<double>(g[j] - e * static_cast<float>(dy_total));
      ASSERT_NEAR(dx[j], exact, 4e-7 * (std::fabs(g[j]) + static_cast<double>(e * std::fabs(dy_total))))
          << "n " << n << " j " << j;
    }
  }
}

TEST(FastExpRows, ShortSoftmaxRowsKeepTheirExpsAndGiveTheSameBits) {
  SKIP_WITHOUT_AVX512_FMA();
  // A row that fits one chunk: its exps written by the sum pass, then scaled in place, against the max and
  // sum pass followed by exp_scaled (each exp computed twice).
  const float minus_inf = -std::numeric_limits<float>::infinity();
  std::vector<int64_t> lengths;
  for (int64_t n = 1; n <= 40; ++n) lengths.push_back(n);
  for (int64_t n : {int64_t{64}, int64_t{1000}, fast::kExpChunk}) lengths.push_back(n);
  for (int64_t n : lengths) {
    for (int shape = 0; shape < 2; ++shape) {
      std::vector<float> x = normal_row(n, 800 + static_cast<uint64_t>(n), 5.0);
      if (shape == 1) x.back() = minus_inf;  // a masked key
      const auto size = static_cast<size_t>(n);
      std::vector<float> twice(size), once(size);
      float max = 0, max_once = 0;
      const double total = fast::max_exp_sum_avx512(x.data(), n, &max);
      fast::exp_scaled_avx512(x.data(), twice.data(), n, max, static_cast<float>(1.0 / total), false);
      const double total_once = fast::max_exp_sum_store_avx512(x.data(), once.data(), n, &max_once);
      fast::scale_avx512(once.data(), n, static_cast<float>(1.0 / total_once));
      EXPECT_EQ(max_once, max) << "n " << n;
      EXPECT_EQ(total_once, total) << "n " << n;
      EXPECT_EQ(0, std::memcmp(once.data(), twice.data(), size * sizeof(float)))
          << "n " << n << " shape " << shape;
    }
  }
  // A row of -inf only writes nothing and says so by its max.
  std::vector<float> masked(8, minus_inf), y(8, 3.0f);
  float max = 0;
  EXPECT_EQ(fast::max_exp_sum_store_avx512(masked.data(), y.data(), 8, &max), 0.0);
  EXPECT_EQ(max, minus_inf);
  EXPECT_EQ(y, std::vector<float>(8, 3.0f));
}

TEST(FastExpRows, CrossEntropyGradientGivesTheBitsOfItsFormulaWhetherItKeepsTheExpsOrNot) {
  SKIP_WITHOUT_AVX512_FMA();
  // Short rows (65) keep their exps in the gradient row and scale them in place; longer rows (300)
  // compute them again. Either way each entry must be the formula's bits: exp_scaled's exp(x - max) times
  // float(1 / (total count)), the target's entry (exp(x_t - lse) - 1) / count in double, an ignored row 0.
  for (int64_t V : {int64_t{65}, int64_t{300}}) {
    const int64_t N = 11;
    std::vector<float> x = normal_row(N * V, 900 + static_cast<uint64_t>(V), 5.0);
    x[static_cast<size_t>(2 * V + 7)] = -std::numeric_limits<float>::infinity();  // a masked logit
    std::vector<int64_t> t(static_cast<size_t>(N));
    for (int64_t n = 0; n < N; ++n) t[static_cast<size_t>(n)] = (n * 13) % V;
    t[4] = -100;
    kernels::CrossEntropyOutput ce =
        kernels::cross_entropy(from_vector<float>(x, {N, V}), from_vector<int64_t>(t, {N}));
    const std::vector<float> got = ce.grad_logits.to_vector<float>();
    const double inv_count = 1.0 / static_cast<double>(N - 1);
    std::vector<float> want(x.size(), 0.0f);
    for (int64_t n = 0; n < N; ++n) {
      if (t[static_cast<size_t>(n)] < 0) continue;
      const float* row = x.data() + n * V;
      float* g = want.data() + n * V;
      float max = 0;
      const double total = fast::max_exp_sum_avx512(row, V, &max);
      fast::exp_scaled_avx512(row, g, V, max, static_cast<float>(inv_count / total), false);
      const double lse = static_cast<double>(max) + std::log(total);
      const int64_t target = t[static_cast<size_t>(n)];
      g[target] = static_cast<float>((std::exp(static_cast<double>(row[target]) - lse) - 1.0) * inv_count);
    }
    EXPECT_EQ(0, std::memcmp(got.data(), want.data(), want.size() * sizeof(float))) << "V " << V;
  }
}

TEST(FastExpRows, RowsTakenTogetherGiveEachRowsBits) {
  SKIP_WITHOUT_AVX512_FMA();
  // max_exp_sum_rows_avx512 interleaves a few rows' maxes and sums; each row must come out as
  // max_exp_sum_avx512 (or, storing its exps, max_exp_sum_store_avx512) gives it alone, including a row of
  // -inf only.
  const float minus_inf = -std::numeric_limits<float>::infinity();
  for (int64_t n : {int64_t{1}, int64_t{7}, int64_t{16}, int64_t{65}, int64_t{130}, fast::kExpChunk}) {
    for (int64_t rows : {1, 3, 4, 5, 9}) {
      std::vector<float> x = normal_row(rows * n, 900 + static_cast<uint64_t>(n + rows), 4.0);
      if (rows > 2) std::fill(x.begin() + n, x.begin() + 2 * n, minus_inf);  // row 1 fully masked
      std::vector<float> maxes(static_cast<size_t>(rows));
      std::vector<double> totals(static_cast<size_t>(rows));
      fast::max_exp_sum_rows_avx512(x.data(), rows, n, maxes.data(), totals.data(), nullptr);
      // With y: the exps as max_exp_sum_store_avx512 writes them (a row of -inf only: untouched).
      std::vector<float> y(x.size(), 3.0f), y_one(x.size(), 3.0f), maxes_y(maxes.size());
      std::vector<double> totals_y(totals.size());
      fast::max_exp_sum_rows_avx512(x.data(), rows, n, maxes_y.data(), totals_y.data(), y.data());
      for (int64_t r = 0; r < rows; ++r) {
        const std::string where =
            "n " + std::to_string(n) + " rows " + std::to_string(rows) + " row " + std::to_string(r);
        float max = 0, max_store = 0;
        const double total = fast::max_exp_sum_avx512(x.data() + r * n, n, &max);
        const double total_store =
            fast::max_exp_sum_store_avx512(x.data() + r * n, y_one.data() + r * n, n, &max_store);
        EXPECT_EQ(maxes[static_cast<size_t>(r)], max) << where;
        EXPECT_EQ(totals[static_cast<size_t>(r)], total) << where;
        EXPECT_EQ(maxes_y[static_cast<size_t>(r)], max_store) << where;
        EXPECT_EQ(totals_y[static_cast<size_t>(r)], total_store) << where;
      }
      EXPECT_EQ(0, std::memcmp(y.data(), y_one.data(), y.size() * sizeof(float))) << "n " << n;
    }
  }
}

TEST(FastExpRows, SoftmaxBackwardRowsAgreeWithLongDoubleAndDoNotDependOnTheGrouping) {
  SKIP_WITHOUT_AVX512_FMA();
  // dx = y (dy - sum dy y), or dy - exp(y) sum dy (log), against long double: within 4 float roundings
  // (2^-24) of the size of its terms, |y dy| + |y sum| or |dy| + exp(y) |sum| (the sums are double, the
  // rest float: the sum rounded to float, a subtraction, a product, the exp's ulp; measured worst 2.7),
  // and a row's bits the same whether it goes alone or with others (rows up to 256 floats go four at a
  // time). Float sums in place of double ones would miss it by the rows' length in roundings.
  const double kUlp = std::ldexp(1.0, -24), kBound = 4.0;
  double worst = 0.0;
  for (bool log : {false, true}) {
    for (int64_t n : {int64_t{1}, int64_t{7}, int64_t{65}, int64_t{300}}) {
      for (int64_t rows : {1, 3, 4, 5, 9}) {
        std::vector<float> y = normal_row(rows * n, 1500 + static_cast<uint64_t>(n + rows), 1.0);
        const std::vector<float> dy = normal_row(rows * n, 1600 + static_cast<uint64_t>(n), 1.0);
        for (float& v : y) v = log ? -std::fabs(v) : std::fabs(v) / static_cast<float>(n);
        std::vector<float> dx(y.size()), dx_one(y.size());
        fast::softmax_backward_rows_avx512(dy.data(), y.data(), dx.data(), rows, n, log);
        for (int64_t r = 0; r < rows; ++r) {
          fast::softmax_backward_rows_avx512(dy.data() + r * n, y.data() + r * n, dx_one.data() + r * n, 1, n,
                                             log);
          long double sum = 0;
          for (int64_t j = 0; j < n; ++j)
            sum += static_cast<long double>(dy[r * n + j]) * (log ? 1 : y[r * n + j]);
          for (int64_t j = 0; j < n; ++j) {
            const long double g = dy[r * n + j], p = y[r * n + j];
            const long double want = log ? g - std::exp(p) * sum : p * (g - sum);
            const double scale =
                log ? std::fabs(static_cast<double>(g)) +
                          std::exp(static_cast<double>(p)) * std::fabs(static_cast<double>(sum))
                    : std::fabs(static_cast<double>(p * g)) + std::fabs(static_cast<double>(p * sum));
            worst = std::max(worst,
                             std::fabs(static_cast<double>(dx[r * n + j] - want)) / (kUlp * scale + 1e-38));
            ASSERT_NEAR(dx[r * n + j], static_cast<double>(want), kBound * kUlp * scale + 1e-38)
                << "log " << log << " n " << n << " rows " << rows << " row " << r << " j " << j;
          }
        }
        EXPECT_EQ(0, std::memcmp(dx.data(), dx_one.data(), dx.size() * sizeof(float)))
            << "log " << log << " n " << n << " rows " << rows;
      }
    }
  }
  EXPECT_GT(worst, 0.0);  // the bound is not vacuous: some outputs do round (measured worst: 2.7)
}

/// |f - exact| in ulps of `scale` (the size of the terms that were added: the error a float sum of them can
/// not avoid).
double ulps_of_scale(float f, double exact, double scale) {
  int exponent = 0;
  std::frexp(scale, &exponent);
  return std::fabs(static_cast<double>(f) - exact) / std::ldexp(1.0, exponent - 24);
}

TEST(FastExpRows, GeluV3IsAsCloseToItsFormulaInDoubleAsV1) {
  SKIP_WITHOUT_AVX512_FMA();
  using kernels::cpu::GeluCode;
  const int64_t n = 240001;
  std::vector<float> x(static_cast<size_t>(n)), ones(x.size(), 1.0f);
  for (size_t i = 0; i < x.size(); ++i) x[i] = -12.0f + 24.0f * static_cast<float>(i) / static_cast<float>(n);
  // The bound grows with |u|: u carries the rounding of ~4 float operations (relative 4 x 2^-24), and
  // exp(-2u) turns that into a relative error of 2|u| 4 x 2^-24 in the sigmoid: 8|u| ulps. Beyond |u| = 40
  // both versions take the limit (x or x * 0, vector_math.h): not compared here.
  for (GeluCode code : {GeluCode::Lanes4, GeluCode::Avx512Fma}) {
    std::vector<float> y(x.size()), d(x.size());
    kernels::cpu::gelu_array(y.data(), x.data(), n, code);
    kernels::cpu::gelu_grad_array(d.data(), ones.data(), x.data(), n, code);
    double worst_y = 0, worst_d = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      const double v = x[i], u = 0.7978845608028654 * (v + 0.044715 * v * v * v);
      const double e = std::exp(-2.0 * u), s = 1.0 / (1.0 + e);
      const double du = 0.7978845608028654 * (1.0 + 3.0 * 0.044715 * v * v);
      const double slope = 2.0 * v * e * s * s * du;
      if (std::fabs(u) > kernels::cpu::detail::kGeluULimit) continue;
      const double bound = 4.0 + 8.0 * std::fabs(u);
      if (v != 0.0) worst_y = std::max(worst_y, ulps_of_scale(y[i], v * s, std::fabs(v * s)) / bound);
      worst_d = std::max(worst_d, ulps_of_scale(d[i], s + slope, s + std::fabs(slope)) / bound);
    }
    const char* name = code == GeluCode::Lanes4 ? "v1" : "v3";
    EXPECT_LE(worst_y, 1.0) << name << " forward";
    EXPECT_LE(worst_d, 1.0) << name << " gradient";
    RecordProperty(std::string(name) + "_forward_of_bound", std::to_string(worst_y));
    RecordProperty(std::string(name) + "_gradient_of_bound", std::to_string(worst_d));
  }
}

}  // namespace
}  // namespace brigade::testing
