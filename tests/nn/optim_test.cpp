// Optimizers against hand computations (AdamW with and without decay, SGD momentum / nesterov / weight
// decay), clipping by global norm, the warmup + cosine schedule, and optimizer state round trips.
#include "nn/optim.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numbers>
#include <string>
#include <vector>

#include "autograd/ops.h"
#include "nn/gpt.h"
#include "nn/layers.h"
#include "test_support.h"

using brigade::Tensor;
namespace nn = brigade::nn;

namespace {

Tensor param(const std::vector<double>& v, const brigade::Shape& shape) {
  return brigade::from_vector(v, shape).to(brigade::kFloat32).set_requires_grad();
}

void set_grad(Tensor& p, const std::vector<double>& g) {
  p.set_grad(brigade::from_vector(g, p.shape()).to(brigade::kFloat32));
}

void expect_near(const std::vector<double>& actual, const std::vector<double>& expected, double tol,
                 const std::string& what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  for (size_t i = 0; i < actual.size(); ++i)
    EXPECT_NEAR(actual[i], expected[i], tol) << what << " [" << i << "]";
}

}  // namespace

TEST(AdamW, TwoStepsMatchHandComputationWithDecayOnlyOnMatrices) {
  Tensor w = param({0.5, -1.0, 2.0, 0.25}, {2, 2});  // decayed group
  Tensor b = param({1.0, -0.5}, {2});                // no-decay group
  nn::ParamGroup decay{{w}, {"w"}, std::nullopt, 0.1};
  nn::ParamGroup no_decay{{b}, {"b"}, std::nullopt, 0.0};
  const double lr = 0.01, b1 = 0.9, b2 = 0.95, eps = 1e-8;
  nn::AdamW opt({decay, no_decay}, nn::AdamWOptions{.lr = lr, .beta1 = b1, .beta2 = b2, .eps = eps});

  std::vector<std::vector<double>> grads_w = {{0.1, -0.2, 0.3, 0.0}, {-0.05, 0.4, 0.1, 1.0}};
  std::vector<std::vector<double>> grads_b = {{2.0, -1.0}, {0.5, 0.5}};
  std::vector<double> pw = {0.5, -1.0, 2.0, 0.25}, pb = {1.0, -0.5};
  std::vector<double> mw(4, 0), vw(4, 0), mb(2, 0), vb(2, 0);
  auto hand = [&](std::vector<double>& p, std::vector<double>& m, std::vector<double>& v,
                  const std::vector<double>& g, double wd, int t) {
    for (size_t i = 0; i < p.size(); ++i) {
      m[i] = b1 * m[i] + (1 - b1) * g[i];
      v[i] = b2 * v[i] + (1 - b2) * g[i] * g[i];
      const double mhat = m[i] / (1 - std::pow(b1, t)), vhat = v[i] / (1 - std::pow(b2, t));
      p[i] -= lr * (mhat / (std::sqrt(vhat) + eps) + wd * p[i]);
    }
  };
  for (int t = 1; t <= 2; ++t) {
    set_grad(w, grads_w[t - 1]);
    set_grad(b, grads_b[t - 1]);
    opt.step();
    hand(pw, mw, vw, grads_w[t - 1], 0.1, t);
    hand(pb, mb, vb, grads_b[t - 1], 0.0, t);
    expect_near(w.to_vector<double>(), pw, 1e-6, "w step " + std::to_string(t));
    expect_near(b.to_vector<double>(), pb, 1e-6, "b step " + std::to_string(t));
  }
  EXPECT_EQ(opt.step_count(), 2);
  auto state = opt.state();
  expect_near(state.tensors.at("w.exp_avg").to_vector<double>(), mw, 1e-7, "exp_avg");
  expect_near(state.tensors.at("b.exp_avg_sq").to_vector<double>(), vb, 1e-7, "exp_avg_sq");
}

TEST(AdamW, DecayGroupsFollowNanoGPT) {
  nn::GPTConfig c;
  c.vocab_size = 7;
  c.block_size = 4;
  c.n_layer = 1;
  c.n_head = 1;
  c.n_embd = 4;
  nn::GPT model(c);
  auto groups = nn::decay_groups(model, 0.1);
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(*groups[0].weight_decay, 0.1);
  EXPECT_EQ(*groups[1].weight_decay, 0.0);
  EXPECT_EQ(groups[0].names,
            (std::vector<std::string>{"embed.wte.weight", "embed.wpe.weight", "blocks.0.attn.qkv.weight",
                                      "blocks.0.attn.proj.weight", "blocks.0.mlp.fc.weight",
                                      "blocks.0.mlp.proj.weight"}));
  for (const Tensor& p : groups[1].params) EXPECT_EQ(p.dim(), 1);
  EXPECT_EQ(groups[0].params.size() + groups[1].params.size(), model.parameters().size());
  // A parameter listed twice is refused.
  nn::ParamGroup twice{{groups[0].params[0], groups[0].params[0]}, {}, std::nullopt, std::nullopt};
  EXPECT_THROW(nn::AdamW(std::vector<nn::ParamGroup>{twice}), brigade::ValueError);
}

TEST(SGD, MomentumNesterovAndWeightDecayMatchHand) {
  const double lr = 0.1, mu = 0.9, wd = 0.01;
  for (bool nesterov : {false, true}) {
    Tensor p = param({1.0, -2.0, 0.5}, {3});
    nn::SGD opt({p}, nn::SGDOptions{.lr = lr, .momentum = mu, .nesterov = nesterov, .weight_decay = wd});
    std::vector<double> hp = {1.0, -2.0, 0.5}, buf(3, 0.0);
    const std::vector<std::vector<double>> grads = {{0.5, 0.1, -1.0}, {0.2, -0.3, 0.0}, {1.0, 1.0, 1.0}};
    for (const auto& g : grads) {
      set_grad(p, g);
      opt.step();
      for (size_t i = 0; i < 3; ++i) {
        const double d = g[i] + wd * hp[i];
        buf[i] = mu * buf[i] + d;
        hp[i] -= lr * (nesterov ? d + mu * buf[i] : buf[i]);
      }
      expect_near(p.to_vector<double>(), hp, 1e-6, nesterov ? "nesterov" : "momentum");
    }
    expect_near(opt.state().tensors.at("group0.0.momentum_buffer").to_vector<double>(), buf, 1e-6, "buffer");
  }
  // Plain SGD keeps no state; parameters without a gradient are left alone.
  Tensor p = param({1.0}, {1}), q = param({3.0}, {1});
  nn::SGD plain({p, q}, nn::SGDOptions{.lr = 0.5});
  set_grad(p, {2.0});
  plain.step();
  EXPECT_EQ(p.item(), 0.0);
  EXPECT_EQ(q.item(), 3.0);
  EXPECT_TRUE(plain.state().tensors.empty());
  EXPECT_THROW(nn::SGD({p}, nn::SGDOptions{.nesterov = true}), brigade::ValueError);
}

TEST(ClipGradNorm, ScalesToMaxNormAndReturnsTheNorm) {
  Tensor a = param({0, 0, 0}, {3}), b = param({0, 0}, {2}), none = param({1}, {1});
  set_grad(a, {3.0, 0.0, 4.0});
  set_grad(b, {0.0, 12.0});  // global norm sqrt(9 + 16 + 144) = 13
  const double norm = nn::clip_grad_norm({a, b, none}, 1.0);
  EXPECT_NEAR(norm, 13.0, 1e-6);
  std::vector<double> ga = a.grad().to_vector<double>(), gb = b.grad().to_vector<double>();
  double after = 0;
  for (double v : ga) after += v * v;
  for (double v : gb) after += v * v;
  EXPECT_NEAR(std::sqrt(after), 1.0, 1e-5);
  EXPECT_NEAR(ga[0], 3.0 / 13.0, 1e-6);
  // Below the limit nothing changes.
  const double again = nn::clip_grad_norm({a, b}, 5.0);
  EXPECT_NEAR(again, 1.0, 1e-5);
  EXPECT_EQ(a.grad().to_vector<double>(), ga);
  EXPECT_THROW(nn::clip_grad_norm({a}, 0.0), brigade::ValueError);
  // A non-finite norm is reported, the gradients are left as they are.
  set_grad(a, {NAN, 1.0, 1.0});
  EXPECT_TRUE(std::isnan(nn::clip_grad_norm({a}, 1.0)));
  EXPECT_EQ(a.grad().to_vector<double>()[1], 1.0);
}

TEST(CosineSchedule, WarmupPeakMidpointAndEnd) {
  nn::CosineSchedule s{.max_lr = 1e-3, .min_lr = 1e-4, .warmup_steps = 10, .decay_steps = 110};
  EXPECT_DOUBLE_EQ(s.lr_at(0), 1e-4);  // 1e-3 * 1 / 10
  EXPECT_DOUBLE_EQ(s.lr_at(4), 5e-4);
  EXPECT_DOUBLE_EQ(s.lr_at(9), 1e-3);       // warmup ends at the peak
  EXPECT_DOUBLE_EQ(s.lr_at(10), 1e-3);      // cosine starts at the peak
  EXPECT_NEAR(s.lr_at(60), 5.5e-4, 1e-15);  // halfway: (max + min) / 2
  EXPECT_NEAR(s.lr_at(35), 1e-4 + 0.9e-3 * (1 + std::cos(std::numbers::pi / 4)) / 2, 1e-15);
  EXPECT_DOUBLE_EQ(s.lr_at(110), 1e-4);
  EXPECT_DOUBLE_EQ(s.lr_at(100000), 1e-4);
  for (int64_t t = 10; t < 110; ++t) EXPECT_GE(s.lr_at(t), s.lr_at(t + 1)) << t;  // monotone decay
  nn::CosineSchedule no_warmup{.max_lr = 2.0, .min_lr = 0.0, .warmup_steps = 0, .decay_steps = 4};
  EXPECT_DOUBLE_EQ(no_warmup.lr_at(0), 2.0);
  EXPECT_NEAR(no_warmup.lr_at(2), 1.0, 1e-15);
  nn::CosineSchedule bad{.max_lr = 1e-4, .min_lr = 1e-3};
  EXPECT_THROW(bad.lr_at(0), brigade::ValueError);
  EXPECT_THROW(s.lr_at(-1), brigade::ValueError);
}

TEST(Optimizer, StateRoundTripContinuesBitExactly) {
  // Two identical runs; the second is interrupted after 3 steps and resumed into a fresh optimizer.
  auto make = [] {
    brigade::Generator gen(4);
    return std::make_shared<nn::Linear>(3, 2, true, &gen);
  };
  brigade::Generator data(8);
  std::vector<Tensor> xs;
  for (int i = 0; i < 6; ++i) xs.push_back(brigade::randn({4, 3}, {}, &data));
  auto run_step = [&](nn::Linear& m, nn::Optimizer& opt, int i) {
    opt.zero_grad();
    brigade::sum(brigade::tanh(m(xs[i]))).backward();
    opt.step();
  };
  auto a = make();
  nn::AdamW opt_a(nn::decay_groups(*a, 0.1), nn::AdamWOptions{.lr = 0.05});
  for (int i = 0; i < 6; ++i) run_step(*a, opt_a, i);

  auto b = make();
  nn::AdamW opt_b(nn::decay_groups(*b, 0.1), nn::AdamWOptions{.lr = 0.05});
  for (int i = 0; i < 3; ++i) run_step(*b, opt_b, i);
  nn::StateDict weights;
  for (auto& [name, t] : b->state_dict()) weights[name] = t.clone();
  nn::OptimizerState saved = opt_b.state();
  for (auto& [name, t] : saved.tensors) t = t.clone();

  auto c = make();
  c->load_state_dict(weights);
  nn::AdamW opt_c(nn::decay_groups(*c, 0.1), nn::AdamWOptions{.lr = 0.05});
  opt_c.load_state(saved);
  EXPECT_EQ(opt_c.step_count(), 3);
  for (int i = 3; i < 6; ++i) run_step(*c, opt_c, i);
  EXPECT_EQ(c->weight().to_vector<float>(), a->weight().to_vector<float>());
  EXPECT_EQ(c->bias().to_vector<float>(), a->bias().to_vector<float>());

  nn::OptimizerState wrong = saved;
  wrong.tensors.erase("bias.exp_avg");
  try {
    opt_c.load_state(wrong);
    ADD_FAILURE() << "expected a ValueError";
  } catch (const brigade::ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("missing keys: 'bias.exp_avg'"), std::string::npos) << e.what();
  }
  wrong = saved;
  wrong.tensors["weight.exp_avg"] = brigade::zeros({3, 2});
  EXPECT_THROW(opt_c.load_state(wrong), brigade::ShapeError);
  // zero_grad drops the gradients.
  opt_c.zero_grad();
  EXPECT_FALSE(c->weight().grad().defined());
}
