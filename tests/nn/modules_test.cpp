// Module, Sequential and the basic layers: values against hand computations, names, state_dict round trips
// and their error messages, train/eval, to(dtype), attention causality.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "autograd/gradcheck.h"
#include "autograd/ops.h"
#include "nn/attention.h"
#include "nn/block.h"
#include "nn/layers.h"
#include "nn/module.h"
#include "nn/sequential.h"
#include "test_support.h"

using brigade::Tensor;
using brigade::testing::allclose;
namespace nn = brigade::nn;

namespace {

std::vector<double> values(const Tensor& t) {
  return t.to_vector<double>();
}

// A user-defined module, libtorch style: its own parameter plus two submodules.
struct Net : nn::Module {
  Net() : Module("Net") {
    scale = &register_parameter("scale", brigade::ones({3}));
    fc1 = register_module("fc1", std::make_shared<nn::Linear>(4, 3));
    fc2 = register_module("fc2", std::make_shared<nn::Linear>(3, 2, /*bias=*/false));
  }
  Tensor forward(const Tensor& x) override { return (*fc2)(brigade::relu((*fc1)(x)) * *scale); }
  Tensor* scale;
  std::shared_ptr<nn::Linear> fc1, fc2;
};

}  // namespace

TEST(Linear, EqualsHandMatmulOnEveryRank) {
  brigade::Generator gen(7);
  nn::Linear fc(4, 3, true, &gen);
  const std::vector<double> w = values(fc.weight()), b = values(fc.bias());
  ASSERT_EQ(fc.weight().shape(), (brigade::Shape{3, 4}));
  ASSERT_EQ(fc.bias().shape(), (brigade::Shape{3}));
  for (const brigade::Shape& shape : {brigade::Shape{4}, brigade::Shape{5, 4}, brigade::Shape{2, 3, 4}}) {
    Tensor x = brigade::randn(shape, {}, &gen);
    Tensor y = fc(x);
    brigade::Shape expected_shape = shape;
    expected_shape.back() = 3;
    ASSERT_EQ(y.shape(), expected_shape);
    const std::vector<double> xv = values(x);
    const int64_t rows = x.numel() / 4;
    std::vector<double> expected(static_cast<size_t>(rows * 3));
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t o = 0; o < 3; ++o) {
        double acc = b[o];
        for (int64_t i = 0; i < 4; ++i) acc += xv[r * 4 + i] * w[o * 4 + i];
        expected[r * 3 + o] = acc;
      }
    }
    EXPECT_TRUE(allclose(y, brigade::from_vector(expected, expected_shape), 1e-6, 1e-6))
        << brigade::shape_str(shape);
  }
  // Default init is U(-1/sqrt(in), 1/sqrt(in)) = U(-0.5, 0.5).
  for (double v : w) EXPECT_LE(std::fabs(v), 0.5);
  EXPECT_THROW(fc(brigade::randn({2, 5})), brigade::ShapeError);
}

TEST(Linear, NoBiasAndGradcheck) {
  nn::Linear fc(3, 2, /*bias=*/false);
  EXPECT_FALSE(fc.has_bias());
  EXPECT_FALSE(fc.bias().defined());
  EXPECT_EQ(fc.named_parameters().size(), 1u);
  fc.to(brigade::kFloat64);
  // d/dW and d/dx of a 3-d input through the module, against finite differences.
  Tensor x = brigade::randn({2, 2, 3}, brigade::kFloat64).set_requires_grad();
  Tensor w = fc.weight().detach().clone().set_requires_grad();
  auto result = brigade::autograd::gradcheck(
      [&](const std::vector<Tensor>& in) {
        fc.set_parameter("weight", in[1]);
        return fc(in[0]);
      },
      {x, w});
  EXPECT_TRUE(result.ok) << result.message;
  EXPECT_GT(result.checked, 0);
}

TEST(Embedding, GathersRows) {
  nn::Embedding emb(5, 3);
  Tensor ids = brigade::from_vector<int64_t>({4, 0, 4, 2}, {2, 2});
  Tensor y = emb(ids);
  ASSERT_EQ(y.shape(), (brigade::Shape{2, 2, 3}));
  const std::vector<double> w = values(emb.weight()), yv = values(y);
  const int64_t rows[] = {4, 0, 4, 2};
  for (int r = 0; r < 4; ++r) {
    for (int c = 0; c < 3; ++c) EXPECT_EQ(yv[r * 3 + c], w[rows[r] * 3 + c]);
  }
}

TEST(LayerNorm, MatchesHandFormula) {
  nn::LayerNorm ln(4, 1e-5);
  EXPECT_EQ(values(ln.weight()), std::vector<double>(4, 1.0));
  EXPECT_EQ(values(ln.bias()), std::vector<double>(4, 0.0));
  {
    brigade::NoGradGuard no_grad;
    ln.weight().copy_(brigade::from_vector<float>({1.0f, 2.0f, -1.0f, 0.5f}, {4}));
    Tensor bias = ln.bias();
    bias.copy_(brigade::from_vector<float>({0.0f, 0.1f, 0.2f, 0.3f}, {4}));
  }
  Tensor x = brigade::from_vector<float>({1, 2, 3, 4, -1, 0, 1, 5}, {2, 4});
  const std::vector<double> xv = values(x), g = {1, 2, -1, 0.5}, b = {0, 0.1, 0.2, 0.3};
  std::vector<double> expected;
  for (int r = 0; r < 2; ++r) {
    double mean = 0, var = 0;
    for (int c = 0; c < 4; ++c) mean += xv[r * 4 + c] / 4;
    for (int c = 0; c < 4; ++c) var += (xv[r * 4 + c] - mean) * (xv[r * 4 + c] - mean) / 4;
    for (int c = 0; c < 4; ++c)
      expected.push_back((xv[r * 4 + c] - mean) / std::sqrt(var + 1e-5) * g[c] + b[c]);
  }
  EXPECT_TRUE(allclose(ln(x), brigade::from_vector(expected, {2, 4}), 1e-5, 1e-6));
  nn::LayerNorm no_bias(4, 1e-5, false);
  EXPECT_EQ(no_bias.num_parameters(), 4);
}

TEST(Dropout, EvalIsIdentityTrainDropsAndScales) {
  nn::Dropout drop(0.25);
  Tensor x = brigade::ones({10000});
  drop.eval();
  EXPECT_FALSE(drop.is_training());
  EXPECT_EQ(drop(x).unsafe_impl_id(), x.unsafe_impl_id());  // the input itself, no draw
  drop.train();
  brigade::Generator gen(3);
  drop.set_generator(&gen);
  std::vector<double> y = values(drop(x));
  int64_t zeros = 0;
  for (double v : y) {
    if (v == 0.0) {
      ++zeros;
    } else {
      EXPECT_NEAR(v, 1.0 / 0.75, 1e-6);
    }
  }
  // 10000 Bernoulli(0.25): mean 2500, sd ~43; allow 5 sd.
  EXPECT_NEAR(static_cast<double>(zeros), 2500.0, 220.0);
  EXPECT_THROW(nn::Dropout(1.0), brigade::ValueError);
}

TEST(Module, NamedParametersChildrenAndCounts) {
  Net net;
  std::vector<std::string> names;
  for (auto& [name, p] : net.named_parameters()) names.push_back(name);
  EXPECT_EQ(names, (std::vector<std::string>{"scale", "fc1.weight", "fc1.bias", "fc2.weight"}));
  EXPECT_EQ(net.num_parameters(), 3 + 12 + 3 + 6);
  EXPECT_EQ(net.named_parameters(/*recurse=*/false).size(), 1u);
  for (const Tensor& p : net.parameters()) EXPECT_TRUE(p.requires_grad());
  auto children = net.named_children();
  ASSERT_EQ(children.size(), 2u);
  EXPECT_EQ(children[0].first, "fc1");
  std::vector<std::string> modules;
  for (auto& [name, m] : net.named_modules()) modules.push_back(name + ":" + m->type_name());
  EXPECT_EQ(modules, (std::vector<std::string>{":Net", "fc1:Linear", "fc2:Linear"}));

  EXPECT_THROW(net.register_parameter("scale", brigade::ones({1})), brigade::ValueError);
  EXPECT_THROW(net.register_parameter("a.b", brigade::ones({1})), brigade::ValueError);
  EXPECT_THROW(net.register_module("fc1", std::make_shared<nn::GELU>()), brigade::ValueError);
  EXPECT_THROW(net.parameter("nope"), brigade::ValueError);
  EXPECT_THROW(net.forward(brigade::ones({1})), brigade::ShapeError);  // fc1 wants [..., 4]
  nn::Module bare;
  EXPECT_THROW(bare.forward(brigade::ones({1})), brigade::Error);
}

TEST(Module, ZeroGradDropsGradients) {
  Net net;
  brigade::sum(net(brigade::randn({2, 4}))).backward();
  for (const Tensor& p : net.parameters()) EXPECT_TRUE(p.grad().defined());
  net.zero_grad();
  for (const Tensor& p : net.parameters()) EXPECT_FALSE(p.grad().defined());
}

TEST(Module, StateDictRoundTripAndErrors) {
  brigade::manual_seed(1);
  Net a;
  Net b;
  Tensor x = brigade::randn({3, 4});
  ASSERT_FALSE(allclose(a(x), b(x), 0, 0));
  b.load_state_dict(a.state_dict());
  EXPECT_EQ(values(a(x)), values(b(x)));  // bit-exact
  // The load copies values: b's tensors stay b's own.
  EXPECT_NE(a.parameter("scale").data_ptr(), b.parameter("scale").data_ptr());

  nn::StateDict state = a.state_dict();
  state.erase("fc1.bias");
  state["fc3.weight"] = brigade::ones({1});
  try {
    b.load_state_dict(state);
    ADD_FAILURE() << "expected a ValueError";
  } catch (const brigade::ValueError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("missing keys: 'fc1.bias'"), std::string::npos) << message;
    EXPECT_NE(message.find("unexpected keys: 'fc3.weight'"), std::string::npos) << message;
  }
  auto result = b.load_state_dict(state, /*strict=*/false);
  EXPECT_EQ(result.missing_keys, std::vector<std::string>{"fc1.bias"});
  EXPECT_EQ(result.unexpected_keys, std::vector<std::string>{"fc3.weight"});

  nn::StateDict wrong = a.state_dict();
  wrong["fc2.weight"] = brigade::zeros({3, 2});
  const std::vector<double> before = values(b.parameter("scale"));
  try {
    b.load_state_dict(wrong);
    ADD_FAILURE() << "expected a ShapeError";
  } catch (const brigade::ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("'fc2.weight' has shape [3, 2] in the state but [2, 3]"),
              std::string::npos)
        << e.what();
  }
  // Nothing was copied by the failed load (shapes are checked first).
  EXPECT_EQ(values(b.parameter("scale")), before);

  // A float64 state loads into float32 parameters (converted).
  nn::StateDict f64;
  for (auto& [name, t] : a.state_dict()) f64[name] = t.to(brigade::kFloat64);
  Net c;
  c.load_state_dict(f64);
  EXPECT_EQ(values(c(x)), values(a(x)));
}

TEST(Module, ToDtypeUpdatesSlotsAndKeepsTying) {
  nn::Sequential seq;
  auto emb = std::make_shared<nn::Embedding>(5, 3);
  auto head = std::make_shared<nn::Linear>(3, 5, false);
  seq.push_back(emb);
  seq.push_back(head);
  head->set_parameter("weight", emb->weight());
  EXPECT_EQ(seq.named_parameters().size(), 1u);  // the tied tensor once
  EXPECT_EQ(seq.num_parameters(), 15);
  seq.to(brigade::kFloat64);
  EXPECT_EQ(emb->weight().dtype(), brigade::kFloat64);
  EXPECT_TRUE(emb->weight().requires_grad());
  EXPECT_TRUE(emb->weight().is_leaf());
  EXPECT_EQ(head->weight().unsafe_impl_id(), emb->weight().unsafe_impl_id());
  Tensor y = seq(brigade::from_vector<int64_t>({1, 2}, {2}));
  EXPECT_EQ(y.dtype(), brigade::kFloat64);
  EXPECT_EQ(y.shape(), (brigade::Shape{2, 5}));
  EXPECT_THROW(head->set_parameter("weight", brigade::ones({5, 4})), brigade::ShapeError);
  // Moving to the device the parameters are already on keeps the very same tensors.
  const void* before = emb->weight().unsafe_impl_id();
  seq.to(brigade::Device::cpu());
  EXPECT_EQ(emb->weight().unsafe_impl_id(), before);
}

TEST(Sequential, ForwardRangeComposesAndNames) {
  brigade::Generator gen(11);
  auto l0 = std::make_shared<nn::Linear>(4, 6, true, &gen);
  auto l1 = std::make_shared<nn::GELU>();
  auto l2 = std::make_shared<nn::Linear>(6, 2, true, &gen);
  nn::Sequential seq({l0, l1});
  seq.push_back("out", l2);
  ASSERT_EQ(seq.size(), 3);
  EXPECT_EQ(seq.name_at(0), "0");
  EXPECT_EQ(seq.name_at(2), "out");
  EXPECT_EQ(seq.at(1).get(), l1.get());
  Tensor x = brigade::randn({5, 4}, {}, &gen);
  Tensor full = seq(x);
  Tensor by_hand = (*l2)(brigade::gelu((*l0)(x)));
  EXPECT_EQ(values(full), values(by_hand));
  Tensor split = seq.forward_range(seq.forward_range(x, 0, 2), 2, 3);
  EXPECT_EQ(values(split), values(full));
  EXPECT_EQ(seq.forward_range(x, 1, 1).unsafe_impl_id(), x.unsafe_impl_id());
  std::vector<std::string> names;
  for (auto& [name, p] : seq.named_parameters_range(1, 3)) names.push_back(name);
  EXPECT_EQ(names, (std::vector<std::string>{"out.weight", "out.bias"}));
  EXPECT_THROW(seq.forward_range(x, 2, 1), brigade::ValueError);
  EXPECT_THROW(seq.forward_range(x, 0, 4), brigade::ValueError);
  EXPECT_THROW(seq.at(3), brigade::ValueError);
}

TEST(CausalSelfAttention, MatchesHandAttentionAndIsCausal) {
  brigade::Generator gen(5);
  const int64_t B = 2, T = 5, C = 6, H = 2, D = 3;
  nn::CausalSelfAttention attn(C, H, 0.0, true, &gen);
  Tensor x = brigade::randn({B, T, C}, {}, &gen);
  Tensor y = attn(x);
  ASSERT_EQ(y.shape(), (brigade::Shape{B, T, C}));

  // Reference in double with loops.
  auto wq = values(attn.qkv()->weight()), bq = values(attn.qkv()->bias());
  auto wp = values(attn.proj()->weight()), bp = values(attn.proj()->bias());
  auto xv = values(x);
  std::vector<double> expected(B * T * C);
  for (int64_t b = 0; b < B; ++b) {
    std::vector<double> qkv(T * 3 * C);
    for (int64_t t = 0; t < T; ++t)
      for (int64_t o = 0; o < 3 * C; ++o) {
        double acc = bq[o];
        for (int64_t i = 0; i < C; ++i) acc += xv[(b * T + t) * C + i] * wq[o * C + i];
        qkv[t * 3 * C + o] = acc;
      }
    std::vector<double> merged(T * C);
    for (int64_t h = 0; h < H; ++h)
      for (int64_t t = 0; t < T; ++t) {
        std::vector<double> s(t + 1);
        double mx = -1e300;
        for (int64_t u = 0; u <= t; ++u) {
          double dot = 0;
          for (int64_t d = 0; d < D; ++d) dot += qkv[t * 3 * C + h * D + d] * qkv[u * 3 * C + C + h * D + d];
          s[u] = dot / std::sqrt(static_cast<double>(D));
          mx = std::max(mx, s[u]);
        }
        double z = 0;
        for (auto& v : s) z += (v = std::exp(v - mx));
        for (int64_t d = 0; d < D; ++d) {
          double acc = 0;
          for (int64_t u = 0; u <= t; ++u) acc += s[u] / z * qkv[u * 3 * C + 2 * C + h * D + d];
          merged[t * C + h * D + d] = acc;
        }
      }
    for (int64_t t = 0; t < T; ++t)
      for (int64_t o = 0; o < C; ++o) {
        double acc = bp[o];
        for (int64_t i = 0; i < C; ++i) acc += merged[t * C + i] * wp[o * C + i];
        expected[(b * T + t) * C + o] = acc;
      }
  }
  EXPECT_TRUE(allclose(y, brigade::from_vector(expected, {B, T, C}), 1e-5, 1e-6));

  // Changing the inputs after position t leaves outputs 0..t bit-identical.
  const int64_t t = 2;
  Tensor x2 = x.clone();
  {
    brigade::NoGradGuard no_grad;
    x2.narrow(1, t + 1, T - t - 1).copy_(brigade::randn({B, T - t - 1, C}, {}, &gen));
  }
  Tensor y2 = attn(x2);
  EXPECT_EQ(values(y2.narrow(1, 0, t + 1).contiguous()), values(y.narrow(1, 0, t + 1).contiguous()));
  EXPECT_NE(values(y2.narrow(1, t + 1, 1).contiguous()), values(y.narrow(1, t + 1, 1).contiguous()));
  EXPECT_THROW(nn::CausalSelfAttention(6, 4), brigade::ValueError);
}

TEST(Block, GradcheckInFloat64) {
  brigade::Generator gen(9);
  nn::Block block(4, 2, 0.0, true, &gen);
  block.to(brigade::kFloat64);
  Tensor x = brigade::randn({1, 3, 4}, brigade::kFloat64, &gen).set_requires_grad();
  Tensor w = block.attn()->qkv()->weight().detach().clone().set_requires_grad();
  auto result = brigade::autograd::gradcheck(
      [&](const std::vector<Tensor>& in) {
        block.attn()->qkv()->set_parameter("weight", in[1]);
        return block(in[0]);
      },
      {x, w});
  EXPECT_TRUE(result.ok) << result.message;
  EXPECT_EQ(result.checked, 12 + 48);
}
