// The float32 row loops of kernels/cpu/layernorm_rows.h (layernorm on the CPU):
//  - every ISA this CPU runs (AVX-512, AVX2, SSE2) gives the same bits for the forward (y, mean, 1/std),
//    the input gradient and the parameter-gradient sums, on rows of 1..40 elements (every tail length) and
//    a few long ones, with and without weight and bias;
//  - the statistics and outputs against long double: mean and 1/std within 1e-12 relative (also with an
//    outlier first, the worst case for the one-pass shifted sums), y and dx within 4 float ulp-scale (2e-6
//    relative to the row's largest value).
// The op itself (all dtypes, gradcheck, the fused add_layernorm) is checked by the op table (tests/ops/).
#include "kernels/cpu/layernorm_rows.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "tensor/philox.h"
#include "tests/kernels/vector_isas.h"

namespace brigade::testing {
namespace {

using kernels::cpu::detail::layernorm_row_kernels;
using kernels::cpu::detail::LayernormRowKernels;
using kernels::cpu::detail::VectorIsa;

std::vector<float> normal_row(int64_t n, uint64_t seed, double scale, double shift) {
  std::vector<float> v(static_cast<size_t>(n));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(shift + scale * philox::normal(seed, 0, i));
  return v;
}

/// Every output bit of the three loops on one row, appended in a fixed order.
std::vector<uint64_t> run_all(const LayernormRowKernels& k, const float* x, const float* w, const float* b,
                              const float* dy, int64_t n) {
  std::vector<uint64_t> out;
  auto keep_float = [&](const std::vector<float>& v) {
    for (float f : v) {
      uint32_t bits;
      std::memcpy(&bits, &f, sizeof bits);
      out.push_back(bits);
    }
  };
  auto keep_double = [&](double d) {
    uint64_t bits;
    std::memcpy(&bits, &d, sizeof bits);
    out.push_back(bits);
  };
  std::vector<float> y(static_cast<size_t>(n)), dx(static_cast<size_t>(n));
  double mu = 0.0, inv_std = 0.0;
  k.forward(x, y.data(), n, w, b, 1e-5, &mu, &inv_std);
  keep_float(y);
  keep_double(mu);
  keep_double(inv_std);
  k.backward(dy, x, w, mu, inv_std, dx.data(), n);
  keep_float(dx);
  std::vector<double> pw(static_cast<size_t>(n), 0.5), pb(static_cast<size_t>(n), -0.25);
  // Two rows through the parameter gradients: this one, then dy reversed over x with other statistics.
  std::vector<float> dy2(dy, dy + n), x2(x, x + n);
  dy2.insert(dy2.end(), dy2.rbegin(), dy2.rend());
  x2.insert(x2.end(), x, x + n);
  const float mean[2] = {static_cast<float>(mu), static_cast<float>(mu) + 0.25f};
  const float inv[2] = {static_cast<float>(inv_std), 0.5f * static_cast<float>(inv_std)};
  k.param_grads(dy2.data(), x2.data(), mean, inv, 2, pw.data(), pb.data(), n);
  for (size_t j = 0; j < pw.size(); ++j) {
    keep_double(pw[j]);
    keep_double(pb[j]);
  }
  return out;
}

TEST(LayernormRows, EveryIsaGivesTheSameBits) {
  const std::vector<VectorIsa> isas = vector_isas_here();
  std::vector<int64_t> lengths;
  for (int64_t n = 1; n <= 40; ++n) lengths.push_back(n);
  for (int64_t n : {128, 768, 1027}) lengths.push_back(n);
  for (int64_t n : lengths) {
    const std::vector<float> x = normal_row(n, 100 + static_cast<uint64_t>(n), 3.0, 1.5);
    const std::vector<float> w = normal_row(n, 200, 1.0, 1.0), b = normal_row(n, 300, 0.5, 0.0);
    const std::vector<float> dy = normal_row(n, 400, 1.0, 0.0);
    for (bool affine : {true, false}) {
      const float* wp = affine ? w.data() : nullptr;
      const float* bp = affine ? b.data() : nullptr;
      const std::vector<uint64_t> first =
          run_all(layernorm_row_kernels(isas[0]), x.data(), wp, bp, dy.data(), n);
      for (size_t k = 1; k < isas.size(); ++k) {
        EXPECT_EQ(first, run_all(layernorm_row_kernels(isas[k]), x.data(), wp, bp, dy.data(), n))
            << "n " << n << " isa " << k << " affine " << affine;
      }
    }
  }
}

TEST(LayernormRows, StatisticsAndOutputsMatchLongDouble) {
  const LayernormRowKernels& k = layernorm_row_kernels();
  for (int64_t n : {1, 7, 16, 33, 128, 768, 1027}) {
    // A large shift on a small spread: the variance, from sums shifted by x[0], must not cancel; and, for
    // odd n, x[0] an outlier 1000 spreads out, the case the shift is worst for.
    std::vector<float> x = normal_row(n, 500 + static_cast<uint64_t>(n), 0.01, 100.0);
    if (n % 2 == 1) x[0] += 10.0f;
    const std::vector<float> w = normal_row(n, 600, 1.0, 1.0), b = normal_row(n, 700, 0.5, 0.0);
    const std::vector<float> dy = normal_row(n, 800, 1.0, 0.0);
    const double eps = 1e-5;
    long double mean = 0, var = 0;
    for (float v : x) mean += v;
    mean /= n;
    for (float v : x) var += (v - mean) * (v - mean);
    var /= n;
    const long double inv_std = 1.0L / std::sqrt(var + eps);
    std::vector<float> y(static_cast<size_t>(n)), dx(static_cast<size_t>(n));
    double mu = 0.0, got_inv_std = 0.0;
    k.forward(x.data(), y.data(), n, w.data(), b.data(), eps, &mu, &got_inv_std);
    EXPECT_NEAR(mu, static_cast<double>(mean), 1e-12 * std::fabs(static_cast<double>(mean))) << "n " << n;
    EXPECT_NEAR(got_inv_std, static_cast<double>(inv_std), 1e-12 * static_cast<double>(inv_std)) << "n " << n;
    long double m1 = 0, m2 = 0;
    std::vector<long double> xhat(static_cast<size_t>(n)), dxhat(static_cast<size_t>(n));
    for (size_t j = 0; j < xhat.size(); ++j) {
      xhat[j] = (x[j] - mean) * inv_std;
      dxhat[j] = static_cast<long double>(dy[j]) * w[j];
      m1 += dxhat[j];
      m2 += dxhat[j] * xhat[j];
      const double want = static_cast<double>(xhat[j] * w[j] + b[j]);
      EXPECT_NEAR(y[j], want, 2e-6 * (1.0 + std::fabs(want))) << "n " << n << " j " << j;
    }
    m1 /= n;
    m2 /= n;
    k.backward(dy.data(), x.data(), w.data(), mu, got_inv_std, dx.data(), n);
    for (size_t j = 0; j < xhat.size(); ++j) {
      const double want = static_cast<double>(inv_std * (dxhat[j] - m1 - xhat[j] * m2));
      EXPECT_NEAR(dx[j], want, 2e-6 * static_cast<double>(inv_std)) << "n " << n << " j " << j;
    }
  }
}

}  // namespace
}  // namespace brigade::testing
