// Finite-difference gradient checks for every differentiable op, every view kind and the copies, in
// float64 on the CPU. One table of cases (ggml's test-backend-ops style); each case is its own test.
//
// Tolerances (unless a case states its own): central differences with eps = 1e-6; an element passes when
// |analytic - numeric| <= 1e-5 + 1e-4 * |numeric|. Inputs are random normals (or uniform in [0.5, 2) where
// the op needs a positive input), so the kinks of relu, abs, max and maximum are hit with probability ~0.
#include "autograd/gradcheck.h"

#include <gtest/gtest.h>

#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "autograd/checkpoint.h"
#include "autograd/node.h"
#include "autograd/ops.h"
#include "kernels/kernels.h"
#include "test_support.h"

namespace brigade {
namespace {

using autograd::GradcheckOptions;
using Inputs = std::vector<Tensor>;

struct GradCase {
  std::string name;
  std::function<Inputs()> inputs;
  std::function<Tensor(const Inputs&)> fn;
  GradcheckOptions options = {};
};

void PrintTo(const GradCase& c, std::ostream* out) {
  *out << c.name;
}

/// A float64 leaf that requires grad: standard normal.
Tensor R(const Shape& shape, uint64_t seed) {
  Generator gen(seed);
  return randn(shape, kFloat64, &gen).set_requires_grad();
}
/// A float64 leaf that requires grad, uniform in [0.5, 2) (for log, sqrt, division, pow bases).
Tensor P(const Shape& shape, uint64_t seed) {
  Generator gen(seed);
  return (rand(shape, kFloat64, &gen) * 1.5 + 0.5).set_requires_grad();
}
/// A float64 constant (no grad): a 0/1 mask.
Tensor Mask(const Shape& shape, uint64_t seed) {
  Generator gen(seed);
  return gt(randn(shape, kFloat64, &gen), 0.0);
}
Tensor Ids(const std::vector<int64_t>& ids, const Shape& shape) {
  return from_vector<int64_t>(ids, shape);
}

using UnaryFn = Tensor (*)(const Tensor&);

std::vector<GradCase> cases() {
  std::vector<GradCase> c;
  auto add_case = [&c](std::string name, std::function<Inputs()> inputs,
                       std::function<Tensor(const Inputs&)> fn, GradcheckOptions options = {}) {
    c.push_back({std::move(name), inputs, fn, options});
  };

  // ---- unary ----
  const std::vector<std::pair<std::string, UnaryFn>> any_input = {
      {"neg", &neg},   {"exp", &exp},   {"tanh", &tanh}, {"sigmoid", &sigmoid},
      {"relu", &relu}, {"gelu", &gelu}, {"abs", &abs}};
  for (const auto& [name, op] : any_input) {
    add_case(
        name,
        [] {
          return Inputs{R({3, 4}, 1)};
        },
        [op = op](const Inputs& in) { return op(in[0]); });
  }
  const std::vector<std::pair<std::string, UnaryFn>> positive_input = {
      {"log", &log}, {"sqrt", &sqrt}, {"rsqrt", &rsqrt}};
  for (const auto& [name, op] : positive_input) {
    add_case(
        name,
        [] {
          return Inputs{P({3, 4}, 2)};
        },
        [op = op](const Inputs& in) { return op(in[0]); });
  }
  add_case(
      "unary_minus", [] { return Inputs{R({5}, 3)}; }, [](const Inputs& in) { return -in[0]; });

  // ---- binary, tensor-tensor with broadcasting ----
  add_case(
      "add_broadcast",
      [] {
        return Inputs{R({2, 3, 4}, 4), R({3, 1}, 5)};
      },
      [](const Inputs& in) { return add(in[0], in[1]); });
  add_case(
      "sub_broadcast",
      [] {
        return Inputs{R({3, 4}, 6), R({4}, 7)};
      },
      [](const Inputs& in) { return sub(in[0], in[1]); });
  add_case(
      "mul_broadcast",
      [] {
        return Inputs{R({2, 1, 4}, 8), R({3, 1}, 9)};
      },
      [](const Inputs& in) { return mul(in[0], in[1]); });
  add_case(
      "mul_same_shape",
      [] {
        return Inputs{R({3, 4}, 10), R({3, 4}, 11)};
      },
      [](const Inputs& in) { return in[0] * in[1]; });
  add_case(
      "div_broadcast",
      [] {
        return Inputs{R({3, 4}, 12), P({4}, 13)};
      },
      [](const Inputs& in) { return div(in[0], in[1]); });
  add_case(
      "maximum_broadcast",
      [] {
        return Inputs{R({3, 4}, 14), R({4}, 15)};
      },
      [](const Inputs& in) { return maximum(in[0], in[1]); });
  add_case(
      "pow_broadcast",
      [] {
        return Inputs{P({3, 4}, 16), R({4}, 17)};
      },
      [](const Inputs& in) { return pow(in[0], in[1]); });
  add_case(
      "operators",
      [] {
        return Inputs{R({3, 4}, 18), P({3, 4}, 19)};
      },
      [](const Inputs& in) {
        return (in[0] * in[1] - in[0] / in[1] + (-in[0])) * 2.0 - 1.0 / in[1] + in[0];
      });

  // ---- binary with a scalar ----
  add_case(
      "add_scalar", [] { return Inputs{R({4}, 20)}; },
      [](const Inputs& in) { return add(in[0], 2.5) * in[0]; });
  add_case(
      "scalar_add", [] { return Inputs{R({4}, 21)}; },
      [](const Inputs& in) { return add(2.5, in[0]) * in[0]; });
  add_case(
      "sub_scalar", [] { return Inputs{R({4}, 22)}; },
      [](const Inputs& in) { return sub(in[0], 1.5) * in[0]; });
  add_case(
      "scalar_sub", [] { return Inputs{R({4}, 23)}; },
      [](const Inputs& in) { return sub(1.5, in[0]) * in[0]; });
  add_case(
      "mul_scalar", [] { return Inputs{R({4}, 24)}; }, [](const Inputs& in) { return mul(in[0], -3.0); });
  add_case(
      "scalar_mul", [] { return Inputs{R({4}, 25)}; }, [](const Inputs& in) { return mul(-3.0, in[0]); });
  add_case(
      "div_scalar", [] { return Inputs{R({4}, 26)}; }, [](const Inputs& in) { return div(in[0], 4.0); });
  add_case(
      "scalar_div", [] { return Inputs{P({4}, 27)}; }, [](const Inputs& in) { return div(2.0, in[0]); });
  add_case(
      "maximum_scalar", [] { return Inputs{R({6}, 28)}; },
      [](const Inputs& in) { return maximum(in[0], 0.1); });
  add_case(
      "scalar_maximum", [] { return Inputs{R({6}, 29)}; },
      [](const Inputs& in) { return maximum(0.1, in[0]); });
  add_case(
      "pow_scalar", [] { return Inputs{P({4}, 30)}; }, [](const Inputs& in) { return pow(in[0], 3.0); });
  add_case(
      "pow_scalar_negative", [] { return Inputs{P({4}, 31)}; },
      [](const Inputs& in) { return pow(in[0], -0.5); });
  add_case(
      "scalar_pow", [] { return Inputs{R({4}, 32)}; }, [](const Inputs& in) { return pow(2.0, in[0]); });

  // ---- selection ----
  add_case(
      "where_broadcast",
      [] {
        return Inputs{Mask({3, 4}, 33), R({3, 4}, 34), R({4}, 35)};
      },
      [](const Inputs& in) { return where(in[0], in[1], in[2]); });
  add_case(
      "where_broadcast_condition",
      [] {
        return Inputs{Mask({4}, 36), R({3, 1}, 37), R({3, 4}, 38)};
      },
      [](const Inputs& in) { return where(in[0], in[1], in[2]); });
  add_case(
      "masked_fill",
      [] {
        return Inputs{R({3, 4}, 39), Mask({4}, 40)};
      },
      [](const Inputs& in) { return masked_fill(in[0], in[1], -1.5); });

  // ---- reductions ----
  add_case(
      "sum_all",
      [] {
        return Inputs{R({2, 3, 4}, 41)};
      },
      [](const Inputs& in) { return sum(in[0]); });
  add_case(
      "sum_dim",
      [] {
        return Inputs{R({2, 3, 4}, 42)};
      },
      [](const Inputs& in) { return sum(in[0], {1}); });
  add_case(
      "sum_dims_keepdim",
      [] {
        return Inputs{R({2, 3, 4}, 43)};
      },
      [](const Inputs& in) {
        return sum(in[0], {0, 2}, true);
      });
  add_case(
      "sum_negative_dim",
      [] {
        return Inputs{R({2, 3, 4}, 44)};
      },
      [](const Inputs& in) { return sum(in[0], {-1}); });
  add_case(
      "mean_all",
      [] {
        return Inputs{R({2, 3, 4}, 45)};
      },
      [](const Inputs& in) { return mean(in[0]); });
  add_case(
      "mean_dim",
      [] {
        return Inputs{R({2, 3, 4}, 46)};
      },
      [](const Inputs& in) { return mean(in[0], {1}); });
  add_case(
      "mean_dims_keepdim",
      [] {
        return Inputs{R({2, 3, 4}, 47)};
      },
      [](const Inputs& in) {
        return mean(in[0], {0, 2}, true);
      });
  add_case(
      "max_all",
      [] {
        return Inputs{R({2, 3, 4}, 48)};
      },
      [](const Inputs& in) { return max(in[0]); });
  add_case(
      "max_dim",
      [] {
        return Inputs{R({2, 3, 4}, 49)};
      },
      [](const Inputs& in) { return max(in[0], {1}); });
  add_case(
      "max_dims_keepdim",
      [] {
        return Inputs{R({2, 3, 4}, 50)};
      },
      [](const Inputs& in) {
        return max(in[0], {0, 2}, true);
      });

  // ---- matmul: every combination of trans flags, batched, and a 2-d operand shared by the batch ----
  for (int flags = 0; flags < 4; ++flags) {
    const bool ta = flags & 1, tb = flags & 2;
    add_case(
        "matmul_2d_" + std::to_string(flags),
        [ta, tb] {
          return Inputs{R(ta ? Shape{4, 3} : Shape{3, 4}, 51), R(tb ? Shape{5, 4} : Shape{4, 5}, 52)};
        },
        [ta, tb](const Inputs& in) { return matmul(in[0], in[1], ta, tb); });
    add_case(
        "matmul_batched_" + std::to_string(flags),
        [ta, tb] {
          return Inputs{R(ta ? Shape{2, 4, 3} : Shape{2, 3, 4}, 53),
                        R(tb ? Shape{2, 5, 4} : Shape{2, 4, 5}, 54)};
        },
        [ta, tb](const Inputs& in) { return matmul(in[0], in[1], ta, tb); });
    add_case(
        "matmul_shared_a_" + std::to_string(flags),
        [ta, tb] {
          return Inputs{R(ta ? Shape{4, 3} : Shape{3, 4}, 55), R(tb ? Shape{2, 5, 4} : Shape{2, 4, 5}, 56)};
        },
        [ta, tb](const Inputs& in) { return matmul(in[0], in[1], ta, tb); });
    add_case(
        "matmul_shared_b_" + std::to_string(flags),
        [ta, tb] {
          return Inputs{R(ta ? Shape{2, 4, 3} : Shape{2, 3, 4}, 57), R(tb ? Shape{5, 4} : Shape{4, 5}, 58)};
        },
        [ta, tb](const Inputs& in) { return matmul(in[0], in[1], ta, tb); });
  }
  add_case(
      "matmul_of_views",
      [] {
        return Inputs{R({4, 3}, 59), R({5, 8}, 60)};
      },
      [](const Inputs& in) { return matmul(in[0].t(), in[1].slice(1, 0, 8, 2).t()); });

  // ---- row ops ----
  add_case(
      "softmax",
      [] {
        return Inputs{R({3, 5}, 61)};
      },
      [](const Inputs& in) { return softmax(in[0]); });
  add_case(
      "log_softmax",
      [] {
        return Inputs{R({2, 3, 5}, 62)};
      },
      [](const Inputs& in) { return log_softmax(in[0]); });
  add_case(
      "layer_norm_affine",
      [] {
        return Inputs{R({4, 6}, 63), R({6}, 64), R({6}, 65)};
      },
      [](const Inputs& in) { return layer_norm(in[0], in[1], in[2]); });
  add_case(
      "layer_norm_no_bias",
      [] {
        return Inputs{R({2, 3, 6}, 66), R({6}, 67)};
      },
      [](const Inputs& in) { return layer_norm(in[0], in[1], Tensor()); });
  add_case(
      "layer_norm_plain",
      [] {
        return Inputs{R({4, 6}, 68)};
      },
      [](const Inputs& in) { return layer_norm(in[0], Tensor(), Tensor(), 1e-3); });

  // ---- embedding, loss, dropout ----
  add_case(
      "embedding",
      [] {
        return Inputs{R({5, 3}, 69), Ids({0, 4, 2, 4, 1, 0}, {2, 3})};
      },
      [](const Inputs& in) { return embedding(in[0], in[1]); });
  add_case(
      "cross_entropy",
      [] {
        return Inputs{R({4, 5}, 70), Ids({1, -100, 4, 0}, {4})};
      },
      [](const Inputs& in) { return cross_entropy(in[0], in[1]); });
  add_case(
      "cross_entropy_scaled",
      [] {
        return Inputs{R({3, 6}, 71), Ids({5, 0, 2}, {3})};
      },
      [](const Inputs& in) { return cross_entropy(in[0], in[1]) * 3.0 + sum(in[0]); });
  add_case(
      "dropout",
      [] {
        return Inputs{R({4, 8}, 72)};
      },
      [](const Inputs& in) {
        Generator gen(7);  // the same mask at every call
        return dropout(in[0], 0.3, /*training=*/true, &gen);
      });

  // ---- views (each followed by tanh so that the gradient is not just the projection) ----
  add_case(
      "view",
      [] {
        return Inputs{R({2, 6}, 73)};
      },
      [](const Inputs& in) {
        return tanh(in[0].view({3, 4}));
      });
  add_case(
      "reshape_of_transpose",
      [] {
        return Inputs{R({2, 3}, 74)};
      },
      [](const Inputs& in) { return tanh(in[0].t().reshape({6})); });
  add_case(
      "permute",
      [] {
        return Inputs{R({2, 3, 4}, 75)};
      },
      [](const Inputs& in) {
        Tensor p = in[0].permute({2, 0, 1});
        return tanh(p) * p;
      });
  add_case(
      "transpose",
      [] {
        return Inputs{R({2, 3, 4}, 76)};
      },
      [](const Inputs& in) { return tanh(in[0].transpose(0, 2)); });
  add_case(
      "narrow",
      [] {
        return Inputs{R({4, 5}, 77)};
      },
      [](const Inputs& in) { return tanh(in[0].narrow(1, 1, 3)); });
  add_case(
      "slice_step",
      [] {
        return Inputs{R({5, 3}, 78)};
      },
      [](const Inputs& in) { return tanh(in[0].slice(0, 1, 5, 2)); });
  add_case(
      "select",
      [] {
        return Inputs{R({3, 4}, 79)};
      },
      [](const Inputs& in) { return tanh(in[0].select(1, 2)); });
  add_case(
      "select_negative",
      [] {
        return Inputs{R({3, 4}, 80)};
      },
      [](const Inputs& in) { return tanh(in[0].select(0, -1)); });
  add_case(
      "expand",
      [] {
        return Inputs{R({3, 1}, 81)};
      },
      [](const Inputs& in) {
        return tanh(in[0].expand({2, 3, 4}));
      });
  add_case(
      "squeeze",
      [] {
        return Inputs{R({3, 1, 4}, 82)};
      },
      [](const Inputs& in) { return tanh(in[0].squeeze(1)); });
  add_case(
      "unsqueeze",
      [] {
        return Inputs{R({3, 4}, 83)};
      },
      [](const Inputs& in) { return tanh(in[0].unsqueeze(1)); });
  add_case(
      "view_chain",
      [] {
        return Inputs{R({4, 6}, 84)};
      },
      [](const Inputs& in) {
        return tanh(in[0].narrow(0, 1, 2).transpose(0, 1).unsqueeze(0).expand({3, 6, 2}).select(2, 1));
      });
  add_case(
      "overlapping_views", [] { return Inputs{R({6}, 85)}; },
      [](const Inputs& in) { return in[0].narrow(0, 0, 4) * in[0].narrow(0, 2, 4); });

  // ---- copies ----
  add_case(
      "contiguous",
      [] {
        return Inputs{R({3, 4}, 86)};
      },
      [](const Inputs& in) { return tanh(in[0].transpose(0, 1).contiguous()); });
  add_case(
      "clone",
      [] {
        return Inputs{R({3, 4}, 87)};
      },
      [](const Inputs& in) { return in[0].clone() * in[0]; });
  // Through float32: the numeric derivative carries float32 rounding (~6e-8 relative) divided by 2 eps,
  // so this case uses eps 1e-3 and atol 1e-3, rtol 1e-2.
  add_case(
      "to_float32_and_back",
      [] {
        return Inputs{R({3, 4}, 88)};
      },
      [](const Inputs& in) { return (in[0].to(kFloat32) * 2.0).to(kFloat64); },
      GradcheckOptions{1e-3, 1e-3, 1e-2, 1234});

  // ---- compositions ----
  add_case(
      "checkpoint",
      [] {
        return Inputs{R({3, 4}, 89), R({4, 5}, 90)};
      },
      [](const Inputs& in) {
        return checkpoint([](const Inputs& x) { return Inputs{tanh(matmul(x[0], x[1]))}; }, in)[0];
      });
  add_case(
      "causal_attention",
      [] {
        return Inputs{R({2, 3, 4}, 91), R({2, 3, 4}, 92), R({2, 3, 4}, 93)};
      },
      [](const Inputs& in) {
        Tensor scores = matmul(in[0], in[1], false, true) * 0.5;
        Tensor masked = masked_fill(scores, kernels::causal_mask(3, kFloat64), -1e9);
        return matmul(softmax(masked), in[2]);
      });
  add_case(
      "mlp_block",
      [] {
        return Inputs{R({4, 6}, 94), R({6, 8}, 95), R({8, 6}, 96), R({6}, 97)};
      },
      [](const Inputs& in) {
        Tensor h = gelu(matmul(layer_norm(in[0], in[3], Tensor()), in[1]));
        return in[0] + matmul(h, in[2]);
      });
  return c;
}

class Gradcheck : public ::testing::TestWithParam<GradCase> {};

TEST_P(Gradcheck, MatchesFiniteDifferences) {
  const GradCase& c = GetParam();
  autograd::GradcheckResult result = autograd::gradcheck(c.fn, c.inputs(), c.options);
  EXPECT_TRUE(result.ok) << c.name << ": " << result.message;
  EXPECT_GT(result.checked, 0);
}

INSTANTIATE_TEST_SUITE_P(Ops, Gradcheck, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<GradCase>& info) { return info.param.name; });

// ---- gradcheck itself -------------------------------------------------------------------------------------

/// x^2 with a deliberately wrong backward (g * x instead of 2 g x).
Tensor wrong_square(const Tensor& x) {
  Tensor y = autograd::forward_no_grad([&] { return kernels::binary(kernels::BinaryOp::Mul, x, x); });
  return autograd::record("wrong_square", y, {x},
                          [x = autograd::saved(x)](const Tensor& g, const NeedsGrad&) {
                            return std::vector<Tensor>{kernels::binary(kernels::BinaryOp::Mul, g, x)};
                          });
}

TEST(GradcheckSelf, CatchesAWrongGradientAndSaysWhere) {
  Tensor x = from_vector<double>({1.0, 2.0, -3.0}, {3}).set_requires_grad();
  autograd::GradcheckResult result =
      autograd::gradcheck([](const Inputs& in) { return wrong_square(in[0]); }, {x});
  EXPECT_FALSE(result.ok);
  EXPECT_EQ(result.input, 0);
  EXPECT_EQ(result.element, 2);  // |x| largest there, so the error is largest there
  EXPECT_NEAR(result.numeric / result.analytic, 2.0, 1e-6);
  EXPECT_NE(result.message.find("FAILED"), std::string::npos);
  EXPECT_FALSE(x.grad().defined()) << "gradcheck must work on copies";
}

TEST(GradcheckSelf, AGradientOfTheWrongShapeIsAnError) {
  Tensor x = from_vector<double>({1.0, 2.0}, {2}).set_requires_grad();
  Tensor y = autograd::record("bad_shape", x.detach() * 1.0, {x}, [](const Tensor& g, const NeedsGrad&) {
    return std::vector<Tensor>{g.reshape({1, 2})};
  });
  try {
    sum(y).backward();
    FAIL() << "expected AutogradError";
  } catch (const AutogradError& e) {
    std::string message = e.what();
    EXPECT_NE(message.find("bad_shape"), std::string::npos) << message;
    EXPECT_NE(message.find("[1, 2]"), std::string::npos) << message;
  }
}

TEST(GradcheckSelf, NothingToCheckIsNotAPass) {
  Tensor x = from_vector<double>({1.0}, {1});
  EXPECT_FALSE(autograd::gradcheck([](const Inputs& in) { return in[0] * 2.0; }, {x}).ok);
}

}  // namespace
}  // namespace brigade
