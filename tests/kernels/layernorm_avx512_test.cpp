// The AVX-512 + FMA row loops of layernorm v2 (kernels/cpu/layernorm_avx512.h) against long double:
//  - the forward's mean within 2e-7 of the row's spread (its standard deviation), 1/std within 2e-7
//    relative, y within 1e-6 of (1 + |y|), on rows of 1..40 elements (every tail length) and long ones, with
//    and without weight and bias, including rows whose mean is 10^4 spreads from zero and rows with one
//    outlier (measured: 2e-8, 3e-8, 2e-7); and each row's forward results the same bits whether it is
//    normalised alone or in a call of up to 13 rows;
//  - the backward over 1..9 and 64 rows (groups of four and the rows left over): dx within 1e-6 of
//    inv_std * max |dy * w| per row (measured: 5e-8), and the parameter-gradient sums within 4e-7 of the
//    sum of the terms' magnitudes (each group of four rows adds its terms in float: xhat's two roundings
//    and three adds, ~3e-7 at most; measured: 1.3e-7), with and without them (null pw and pb), and
//    without a weight.
// Float sums of ~50 values a lane bound the float figures: a few float roundings (6e-8) times the row's
// scale.
// The op itself (every version against the reference, gradcheck, add_layernorm) is checked by the op table.
#include "kernels/cpu/layernorm_avx512.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/cpu/exp_rows_avx512.h"  // avx512_rows_run
#include "tensor/philox.h"

namespace brigade::testing {
namespace {

namespace fast = kernels::cpu::detail;

#define SKIP_WITHOUT_AVX512_FMA()                    \
  if (!fast::avx512_rows_run())                      \
  GTEST_SKIP() << "this CPU lacks AVX-512F or FMA: " \
               << "layernorm v2's row loops do not run here"

std::vector<float> normal_row(int64_t n, uint64_t seed, double scale, double shift) {
  std::vector<float> v(static_cast<size_t>(n));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(shift + scale * philox::normal(seed, 0, i));
  return v;
}

struct Stats {
  long double mean, inv_std, std_dev;
};

Stats row_stats(const float* x, int64_t n, double eps) {
  long double mean = 0, var = 0;
  for (int64_t j = 0; j < n; ++j) mean += x[j];
  mean /= n;
  for (int64_t j = 0; j < n; ++j) var += (x[j] - mean) * (x[j] - mean);
  var /= n;
  return {mean, 1.0L / std::sqrt(var + eps), std::sqrt(var)};
}

TEST(LayernormAvx512, ForwardMatchesLongDouble) {
  SKIP_WITHOUT_AVX512_FMA();
  std::vector<int64_t> lengths;
  for (int64_t n = 1; n <= 40; ++n) lengths.push_back(n);
  for (int64_t n : {128, 768, 1027, 4096}) lengths.push_back(n);
  const double eps = 1e-5;
  // (spread, mean, outlier): an ordinary row, a mean 10^4 spreads from zero, and an outlier first.
  const double shapes[3][3] = {{3.0, 1.5, 0.0}, {0.01, 100.0, 0.0}, {0.01, 100.0, 10.0}};
  for (int64_t n : lengths) {
    for (const auto& shape : shapes) {
      std::vector<float> x = normal_row(n, 500 + static_cast<uint64_t>(n), shape[0], shape[1]);
      x[0] += static_cast<float>(shape[2]);
      const std::vector<float> w = normal_row(n, 600, 1.0, 1.0), b = normal_row(n, 700, 0.5, 0.0);
      const Stats s = row_stats(x.data(), n, eps);
      for (bool affine : {true, false}) {
        std::vector<float> y(static_cast<size_t>(n));
        double mu = 0.0, inv_std = 0.0;
        fast::layernorm_forward_rows_avx512(x.data(), y.data(), 1, n, affine ? w.data() : nullptr,
                                            affine ? b.data() : nullptr, eps, &mu, &inv_std);
        const std::string where = "n " + std::to_string(n) + " spread " + std::to_string(shape[0]) +
                                  " outlier " + std::to_string(shape[2]) + " affine " +
                                  std::to_string(affine);
        EXPECT_NEAR(mu, static_cast<double>(s.mean), 2e-7 * static_cast<double>(s.std_dev) + 1e-30) << where;
        EXPECT_NEAR(inv_std, static_cast<double>(s.inv_std), 2e-7 * static_cast<double>(s.inv_std)) << where;
        for (int64_t j = 0; j < n; ++j) {
          const long double xhat = (x[j] - s.mean) * s.inv_std;
          const double want = affine ? static_cast<double>(xhat * w[j] + b[j]) : static_cast<double>(xhat);
          ASSERT_NEAR(y[j], want, 1e-6 * (1.0 + std::fabs(want))) << where << " j " << j;
        }
      }
    }
  }
}

// The forward takes rows four or eight at a time, their phases interleaved; a row's results must not depend
// on how many rows share the call (the thread count and the block split decide that).
TEST(LayernormAvx512, ForwardGivesEachRowTheSameBitsHoweverTheRowsAreGrouped) {
  SKIP_WITHOUT_AVX512_FMA();
  for (int64_t n : {1, 5, 16, 128, 133, 300, 768}) {
    for (int64_t rows : {1, 3, 4, 5, 8, 9, 13}) {
      std::vector<float> x = normal_row(rows * n, 1200 + static_cast<uint64_t>(n), 1.5, 0.25);
      // The first row's first 16 elements far off: past 16 elements its guess of the mean (theirs) is then
      // off by more than a spread, and that row takes its sums again.
      for (int64_t j = 0; j < std::min<int64_t>(n, 16); ++j) x[static_cast<size_t>(j)] += 40.0f;
      const std::vector<float> w = normal_row(n, 1300, 1.0, 1.0), b = normal_row(n, 1400, 0.5, 0.0);
      std::vector<float> y_all(x.size()), y_one(x.size());
      std::vector<double> mu_all(static_cast<size_t>(rows)), rs_all(mu_all.size()), mu_one(mu_all.size()),
          rs_one(mu_all.size());
      fast::layernorm_forward_rows_avx512(x.data(), y_all.data(), rows, n, w.data(), b.data(), 1e-5,
                                          mu_all.data(), rs_all.data());
      for (int64_t r = 0; r < rows; ++r) {
        fast::layernorm_forward_rows_avx512(x.data() + r * n, y_one.data() + r * n, 1, n, w.data(), b.data(),
                                            1e-5, mu_one.data() + r, rs_one.data() + r);
      }
      const std::string where = "n " + std::to_string(n) + " rows " + std::to_string(rows);
      EXPECT_EQ(mu_all, mu_one) << where;
      EXPECT_EQ(rs_all, rs_one) << where;
      EXPECT_EQ(y_all, y_one) << where;
    }
  }
}

TEST(LayernormAvx512, BackwardAndParameterSumsMatchLongDouble) {
  SKIP_WITHOUT_AVX512_FMA();
  for (int64_t n : {1, 7, 16, 33, 768, 1027}) {
    for (int64_t rows : {1, 2, 3, 4, 5, 7, 8, 9, 64}) {
      const std::vector<float> x = normal_row(rows * n, 900 + static_cast<uint64_t>(n), 2.0, 0.5);
      const std::vector<float> dy = normal_row(rows * n, 1000 + static_cast<uint64_t>(rows), 1.0, 0.0);
      const std::vector<float> w = normal_row(n, 1100, 1.0, 1.0);
      // The statistics as the forward stores them: float.
      std::vector<float> mean(static_cast<size_t>(rows)), inv_std(static_cast<size_t>(rows));
      for (int64_t r = 0; r < rows; ++r) {
        const Stats s = row_stats(x.data() + r * n, n, 1e-5);
        mean[static_cast<size_t>(r)] = static_cast<float>(s.mean);
        inv_std[static_cast<size_t>(r)] = static_cast<float>(s.inv_std);
      }
      for (bool weighted : {true, false}) {
        for (bool params : {true, false}) {
          const float* wp = weighted ? w.data() : nullptr;
          std::vector<float> dx(static_cast<size_t>(rows * n));
          std::vector<double> pw(static_cast<size_t>(n), 0.5), pb(static_cast<size_t>(n), -0.25);
          fast::layernorm_backward_rows_avx512(dy.data(), x.data(), wp, mean.data(), inv_std.data(), rows, n,
                                               dx.data(), params ? pw.data() : nullptr,
                                               params ? pb.data() : nullptr);
          const std::string where = "n " + std::to_string(n) + " rows " + std::to_string(rows) +
                                    " weighted " + std::to_string(weighted) + " params " +
                                    std::to_string(params);
          std::vector<long double> want_pw(static_cast<size_t>(n), 0.5L),
              want_pb(static_cast<size_t>(n), -0.25L);
          std::vector<long double> scale_pw(static_cast<size_t>(n), 0.5L),
              scale_pb(static_cast<size_t>(n), 0.25L);
          for (int64_t r = 0; r < rows; ++r) {
            const long double mu = mean[static_cast<size_t>(r)], rs = inv_std[static_cast<size_t>(r)];
            long double m1 = 0, m2 = 0, largest = 0;
            std::vector<long double> xhat(static_cast<size_t>(n)), dxhat(static_cast<size_t>(n));
            for (int64_t j = 0; j < n; ++j) {
              const size_t i = static_cast<size_t>(r * n + j);
              xhat[static_cast<size_t>(j)] = (x[i] - mu) * rs;
              dxhat[static_cast<size_t>(j)] =
                  static_cast<long double>(dy[i]) * (weighted ? w[static_cast<size_t>(j)] : 1.0f);
              m1 += dxhat[static_cast<size_t>(j)];
              m2 += dxhat[static_cast<size_t>(j)] * xhat[static_cast<size_t>(j)];
              largest = std::max(largest, std::fabs(dxhat[static_cast<size_t>(j)]));
              want_pw[static_cast<size_t>(j)] += dy[i] * xhat[static_cast<size_t>(j)];
              want_pb[static_cast<size_t>(j)] += dy[i];
              scale_pw[static_cast<size_t>(j)] += std::fabs(dy[i] * xhat[static_cast<size_t>(j)]);
              scale_pb[static_cast<size_t>(j)] += std::fabs(static_cast<long double>(dy[i]));
            }
            m1 /= n;
            m2 /= n;
            for (int64_t j = 0; j < n; ++j) {
              const size_t i = static_cast<size_t>(r * n + j);
              const double want = static_cast<double>(
                  rs * (dxhat[static_cast<size_t>(j)] - m1 - xhat[static_cast<size_t>(j)] * m2));
              ASSERT_NEAR(dx[i], want, 1e-6 * static_cast<double>(rs * largest))
                  << where << " r " << r << " j " << j;
            }
          }
          for (int64_t j = 0; j < n; ++j) {
            const size_t c = static_cast<size_t>(j);
            if (!params) {
              ASSERT_EQ(pw[c], 0.5) << where;  // untouched
              ASSERT_EQ(pb[c], -0.25) << where;
              continue;
            }
            ASSERT_NEAR(pw[c], static_cast<double>(want_pw[c]), 4e-7 * static_cast<double>(scale_pw[c]))
                << where;
            ASSERT_NEAR(pb[c], static_cast<double>(want_pb[c]), 4e-7 * static_cast<double>(scale_pb[c]))
                << where;
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace brigade::testing
