// Properties of the raw ops that a table of cases cannot express: gradients against central finite
// differences (float64), dropout's keep fraction, scaling and replay from a Philox state, results that do
// not depend on the OpenMP thread count, AdamW against numbers worked out by hand, in-place edge cases.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/kernels.h"
#include "tensor/philox.h"
#include "tests/test_support.h"

namespace brigade::testing {
namespace {

using kernels::UnaryOp;

// ---- gradients against central finite differences (float64) ---------------------------------------------

// d/dx of sum(f(x) * w) by central differences, for each element of x; f maps a [R, C] float64 tensor to
// one of the same shape. Step 1e-6: truncation error ~1e-12, rounding ~1e-10 relative.
template <typename F>
std::vector<double> numeric_grad(const std::vector<double>& x, const Shape& shape,
                                 const std::vector<double>& w, F f) {
  const double h = 1e-6;
  std::vector<double> grad(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    std::vector<double> plus = x, minus = x;
    plus[i] += h;
    minus[i] -= h;
    std::vector<double> fp = f(from_vector<double>(plus, shape)).template to_vector<double>();
    std::vector<double> fm = f(from_vector<double>(minus, shape)).template to_vector<double>();
    double d = 0;
    for (size_t j = 0; j < fp.size(); ++j) d += (fp[j] - fm[j]) * w[j];
    grad[i] = d / (2 * h);
  }
  return grad;
}

std::vector<double> normal_values(size_t n, uint64_t seed, double scale = 1.0, double shift = 0.0) {
  std::vector<double> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = shift + scale * philox::normal(seed, 0, i);
  return v;
}

TEST(OpGradients, UnaryBackwardMatchesFiniteDifferences) {
  const Shape shape = {3, 4};
  for (UnaryOp op : {UnaryOp::Neg, UnaryOp::Exp, UnaryOp::Log, UnaryOp::Sqrt, UnaryOp::Rsqrt, UnaryOp::Tanh,
                     UnaryOp::Sigmoid, UnaryOp::Relu, UnaryOp::Gelu, UnaryOp::Abs}) {
    SCOPED_TRACE(kernels::unary_op_name(op));
    const bool positive = op == UnaryOp::Log || op == UnaryOp::Sqrt || op == UnaryOp::Rsqrt;
    // Away from the kinks of relu and abs at 0: |x| >= 0.1.
    std::vector<double> x = normal_values(12, 11, positive ? 0.3 : 1.0, positive ? 1.5 : 0.0);
    for (double& v : x) {
      if (std::fabs(v) < 0.1) v = v < 0 ? -0.1 - v : 0.1 + v;
    }
    std::vector<double> w = normal_values(12, 12);
    Tensor xt = from_vector<double>(x, shape);
    Tensor dx = kernels::unary_backward(op, from_vector<double>(w, shape), xt, kernels::unary(op, xt));
    std::vector<double> expected =
        numeric_grad(x, shape, w, [op](const Tensor& t) { return kernels::unary(op, t); });
    EXPECT_TRUE(allclose(dx, from_vector<double>(expected, shape), 1e-7, 1e-8));
    // y may be omitted: it is recomputed.
    EXPECT_TRUE(allclose(kernels::unary_backward(op, from_vector<double>(w, shape), xt, Tensor()), dx, 0, 0));
  }
}

TEST(OpGradients, SoftmaxAndLogSoftmaxBackwardMatchFiniteDifferences) {
  const Shape shape = {3, 5};
  std::vector<double> x = normal_values(15, 21), w = normal_values(15, 22);
  Tensor xt = from_vector<double>(x, shape), wt = from_vector<double>(w, shape);
  EXPECT_TRUE(
      allclose(kernels::softmax_backward(wt, kernels::softmax(xt)),
               from_vector<double>(
                   numeric_grad(x, shape, w, [](const Tensor& t) { return kernels::softmax(t); }), shape),
               1e-7, 1e-8));
  EXPECT_TRUE(
      allclose(kernels::log_softmax_backward(wt, kernels::log_softmax(xt)),
               from_vector<double>(
                   numeric_grad(x, shape, w, [](const Tensor& t) { return kernels::log_softmax(t); }), shape),
               1e-7, 1e-8));
}

TEST(OpGradients, LayerNormBackwardMatchesFiniteDifferences) {
  const Shape shape = {3, 6};
  std::vector<double> x = normal_values(18, 31), dy = normal_values(18, 32);
  Tensor weight = from_vector<double>(normal_values(6, 33), {6});
  Tensor bias = from_vector<double>(normal_values(6, 34), {6});
  Tensor xt = from_vector<double>(x, shape);
  kernels::LayerNormOutput f = kernels::layernorm(xt, weight, bias, 1e-5);
  kernels::LayerNormGrads g =
      kernels::layernorm_backward(from_vector<double>(dy, shape), xt, weight, f.mean, f.rstd, true);
  auto forward = [&](const Tensor& t) { return kernels::layernorm(t, weight, bias, 1e-5).y; };
  EXPECT_TRUE(allclose(g.dx, from_vector<double>(numeric_grad(x, shape, dy, forward), shape), 1e-6, 1e-7));
  // dweight: perturb the weight instead.
  std::vector<double> wv = weight.to_vector<double>();
  auto by_weight = [&](const Tensor& w) { return kernels::layernorm(xt, w, bias, 1e-5).y; };
  std::vector<double> dw(6);
  for (int64_t j = 0; j < 6; ++j) {
    std::vector<double> plus = wv, minus = wv;
    plus[j] += 1e-6;
    minus[j] -= 1e-6;
    std::vector<double> yp = by_weight(from_vector<double>(plus, {6})).to_vector<double>();
    std::vector<double> ym = by_weight(from_vector<double>(minus, {6})).to_vector<double>();
    for (size_t i = 0; i < yp.size(); ++i) dw[j] += (yp[i] - ym[i]) * dy[i] / 2e-6;
  }
  EXPECT_TRUE(allclose(g.dweight, from_vector<double>(dw, {6}), 1e-6, 1e-7));
}

TEST(OpGradients, CrossEntropyGradMatchesFiniteDifferences) {
  const Shape shape = {4, 5};
  std::vector<double> x = normal_values(20, 41);
  Tensor t = from_vector<int64_t>({3, -100, 0, 4}, {4});
  kernels::CrossEntropyOutput out = kernels::cross_entropy(from_vector<double>(x, shape), t);
  EXPECT_EQ(out.count, 3);
  auto loss = [&](const Tensor& logits) { return kernels::cross_entropy(logits, t, -100, false).loss; };
  EXPECT_TRUE(
      allclose(out.grad_logits, from_vector<double>(numeric_grad(x, shape, {1.0}, loss), shape), 1e-7, 1e-9));
}

// ---- dropout --------------------------------------------------------------------------------------------

TEST(Dropout, KeepsAFractionOneMinusPScaledAndReplaysFromTheState) {
  const double p = 0.3;
  Tensor x = ones({400, 250});
  Tensor y = kernels::dropout(x, p, {2024, 5});
  std::vector<double> v = y.to_vector<double>();
  size_t kept = 0;
  for (double e : v) {
    if (e != 0.0) {
      ++kept;
      EXPECT_FLOAT_EQ(e, 1.0 / (1.0 - p));
    }
  }
  // 100000 Bernoulli(0.7) draws: standard deviation of the fraction ~0.0014; allow 5 sigma.
  EXPECT_NEAR(static_cast<double>(kept) / static_cast<double>(v.size()), 1.0 - p, 0.007);
  // The same state gives the same mask; another offset or seed a different one.
  EXPECT_TRUE(allclose(kernels::dropout(x, p, {2024, 5}), y, 0, 0));
  EXPECT_FALSE(allclose(kernels::dropout(x, p, {2024, 6}), y, 0, 0));
  EXPECT_FALSE(allclose(kernels::dropout(x, p, {2025, 5}), y, 0, 0));
  // The mask follows the logical (row-major) order of x, whatever its strides.
  Tensor xt = from_vector<double>(normal_values(100, 3), {10, 10}).to(kFloat32).t();
  EXPECT_TRUE(allclose(kernels::dropout(xt, p, {7, 1}), kernels::dropout(xt.contiguous(), p, {7, 1}), 0, 0));
}

TEST(Dropout, PZeroIsIdentityAndPOneIsZeros) {
  Tensor x = from_vector<double>(normal_values(12, 4), {3, 4}).to(kFloat32);
  EXPECT_TRUE(allclose(kernels::dropout(x, 0.0, {1, 1}), x, 0, 0));
  EXPECT_TRUE(allclose(kernels::dropout(x, 1.0, {1, 1}), zeros({3, 4}), 0, 0));
}

// ---- determinism and hand-computed values ------------------------------------------------------------

TEST(Determinism, ReductionsDoNotDependOnTheThreadCount) {
  Tensor x = from_vector<double>(normal_values(3 * 50000, 51), {3, 50000}).to(kFloat32);
  std::vector<int64_t> id_values(4000);
  for (size_t i = 0; i < id_values.size(); ++i) id_values[i] = static_cast<int64_t>(i % 7);
  Tensor ids = from_vector<int64_t>(id_values, {4000});
  Tensor g = from_vector<double>(normal_values(4000 * 16, 52), {4000, 16}).to(kFloat32);
  const int threads = omp_get_max_threads();
  auto run = [&] {
    return std::vector<Tensor>{kernels::sum(x, {1}), kernels::sum(x), kernels::embedding_backward(g, ids, 7),
                               from_vector<double>({kernels::global_l2_norm({x, g})}, {})};
  };
  std::vector<Tensor> many = run();
  omp_set_num_threads(1);
  std::vector<Tensor> one = run();
  omp_set_num_threads(threads);
  for (size_t k = 0; k < many.size(); ++k) EXPECT_TRUE(allclose(many[k], one[k], 0, 0)) << "output " << k;
}

TEST(AdamW, OneStepMatchesHandComputedValues) {
  // param 1, grad 0.5, m = v = 0, step 1, lr 0.1, betas (0.9, 0.999), eps 1e-8, weight decay 0.01:
  //   m = 0.05, v = 0.00025, mhat = 0.5, vhat = 0.25, update = 0.5 / (0.5 + 1e-8) = 0.99999998
  //   param = 1 - 0.1 * (0.99999998 + 0.01 * 1) = 0.899000002
  Tensor p = from_vector<double>({1.0}, {1}), g = from_vector<double>({0.5}, {1});
  Tensor m = zeros({1}, kFloat64), v = zeros({1}, kFloat64);
  kernels::adamw_update(p, g, m, v, {0.1, 0.9, 0.999, 1e-8, 0.01, 1});
  EXPECT_NEAR(p.item(), 0.899000002, 1e-12);
  EXPECT_NEAR(m.item(), 0.05, 1e-15);
  EXPECT_NEAR(v.item(), 0.00025, 1e-15);
  // Step 2 with grad 0.5 again: m = 0.095, v = 0.00049975, mhat = 0.5, vhat = 0.25 -> same update size.
  kernels::adamw_update(p, g, m, v, {0.1, 0.9, 0.999, 1e-8, 0.01, 2});
  EXPECT_NEAR(p.item(), 0.899000002 - 0.1 * (0.99999998 + 0.01 * 0.899000002), 1e-12);
}

TEST(InPlace, AddIntoItselfDoublesAndBroadcastDestinationsAreRefused) {
  Tensor x = from_vector<double>({1, 2, 3, 4}, {2, 2});
  kernels::add_(x, x);
  EXPECT_TRUE(allclose(x, from_vector<double>({2, 4, 6, 8}, {2, 2}), 0, 0));
  EXPECT_THROW(kernels::add_(from_vector<double>({1, 2}, {1, 2}).expand({3, 2}), x.narrow(0, 0, 1)),
               ValueError);
  EXPECT_THROW(kernels::mul_(from_vector<double>({1, 2}, {2, 1}).expand({2, 3}), 2.0), ValueError);
}

TEST(GlobalL2Norm, SkipsUndefinedTensorsAndIsZeroForNone) {
  EXPECT_EQ(kernels::global_l2_norm({}), 0.0);
  EXPECT_DOUBLE_EQ(kernels::global_l2_norm({Tensor(), from_vector<double>({3, 4}, {2})}), 5.0);
}

}  // namespace
}  // namespace brigade::testing
