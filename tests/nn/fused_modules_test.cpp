// The nn modules on the fused ops: Linear (its bias added by the GEMM: matmul_bias), Block (the residual
// add and ln2 as add_layer_norm), MLP (fc's bias and the GELU as bias_gelu) and AdamW (every parameter in one
// adamw_update_all) give the bits of the unfused ops they replace: the output, every parameter's gradient and
// the input's, in float32 and under bf16 autocast, and the parameters after optimizer steps.
#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "autograd/autocast.h"
#include "autograd/ops.h"
#include "kernels/kernels.h"
#include "nn/block.h"
#include "nn/layers.h"
#include "nn/optim.h"
#include "tests/test_support.h"

namespace brigade::testing {
namespace {

/// The block written with the unfused ops, on the block's own parameters (named as named_parameters()).
Tensor unfused_block(nn::Block& block, const Tensor& x) {
  std::map<std::string, Tensor> p;
  for (auto& [name, t] : block.named_parameters()) p[name] = t;
  auto linear = [&](const Tensor& in, const std::string& name) {
    const Tensor x2 = in.reshape({-1, in.size(-1)});
    Tensor y = matmul(x2, p[name + ".weight"], false, true) + autograd::autocast_low(p[name + ".bias"]);
    Shape shape = in.shape();
    shape.back() = p[name + ".weight"].size(0);
    return y.view(shape);
  };
  const Tensor a = (*block.attn())(layer_norm(x, p["ln1.weight"], p["ln1.bias"]));  // attention: unchanged
  Tensor h = x + a;
  Tensor m = gelu(linear(layer_norm(h, p["ln2.weight"], p["ln2.bias"]), "mlp.fc"));
  return h + linear(m, "mlp.proj");
}

void expect_same_forward_and_gradients(std::optional<DType> autocast) {
  Generator gen(11);
  nn::Block block(32, 4, 0.0, true, &gen);
  const Tensor x0 = randn({3, 9, 32}, {}, &gen);
  std::vector<std::vector<Tensor>> runs;
  for (bool fused : {true, false}) {
    block.zero_grad();
    Tensor x = x0.clone().set_requires_grad();
    Tensor y;
    {
      autograd::AutocastGuard guard(autocast);
      y = fused ? block(x) : unfused_block(block, x);
    }
    sum(y * y.detach()).backward();  // a gradient that differs per element
    std::vector<Tensor> out = {y.detach(), x.grad()};
    for (auto& [name, t] : block.named_parameters()) out.push_back(t.grad());
    runs.push_back(out);
  }
  ASSERT_EQ(runs[0].size(), runs[1].size());
  for (size_t k = 0; k < runs[0].size(); ++k)
    EXPECT_TRUE(allclose(runs[0][k], runs[1][k], 0, 0)) << "output " << k;
}

TEST(FusedModules, BlockEqualsTheUnfusedOpsBitForBit) {
  expect_same_forward_and_gradients(std::nullopt);
}

TEST(FusedModules, BlockUnderBf16AutocastEqualsTheUnfusedOpsBitForBit) {
  expect_same_forward_and_gradients(kBFloat16);
}

// nn::Linear with a bias is one matmul_bias node: its output and the gradients of x, the weight and the
// bias must be those of matmul then add, for a 3-d input (the bias gradient summed over both leading dims
// there, over the flattened rows here), in float32 and under bf16 autocast, with a product large enough
// for two K slices and edge tiles.
TEST(FusedModules, LinearEqualsMatmulThenAddBitForBit) {
  for (std::optional<DType> autocast : {std::optional<DType>(), std::optional<DType>(kBFloat16)}) {
    Generator gen(19);
    nn::Linear linear(700, 90, true, &gen);
    const Tensor x0 = randn({3, 13, 700}, {}, &gen);
    std::vector<std::vector<Tensor>> runs;
    for (bool fused : {true, false}) {
      linear.zero_grad();
      Tensor x = x0.clone().set_requires_grad();
      Tensor y;
      {
        autograd::AutocastGuard guard(autocast);
        y = fused ? linear(x)
                  : matmul(x.reshape({-1, 700}), linear.weight(), false, true).view({3, 13, 90}) +
                        autograd::autocast_low(linear.bias());
      }
      sum(y * y.detach()).backward();
      runs.push_back({y.detach(), x.grad(), linear.weight().grad(), linear.bias().grad()});
    }
    for (size_t k = 0; k < runs[0].size(); ++k) {
      EXPECT_TRUE(allclose(runs[0][k], runs[1][k], 0, 0)) << "output " << k << (autocast ? " autocast" : "");
    }
  }
}

// Three steps of nn::AdamW (two groups: decay and no decay) against adamw_update per tensor on copies.
TEST(FusedModules, AdamWStepEqualsOneUpdatePerTensorBitForBit) {
  Generator gen(5);
  nn::Block block(16, 2, 0.0, true, &gen);
  std::vector<nn::ParamGroup> groups = nn::decay_groups(block, 0.1);
  struct Copy {
    Tensor param, m, v;
    double weight_decay;
  };
  std::vector<Copy> copies;
  for (const nn::ParamGroup& g : groups) {
    for (const Tensor& p : g.params) {
      copies.push_back({p.detach().clone(), zeros(p.shape()), zeros(p.shape()), *g.weight_decay});
    }
  }
  nn::AdamW opt(groups,
                nn::AdamWOptions{.lr = 1e-2, .beta1 = 0.9, .beta2 = 0.99, .eps = 1e-8, .weight_decay = 0});
  for (int64_t step = 1; step <= 3; ++step) {
    size_t i = 0;
    for (nn::ParamGroup& g : opt.param_groups()) {
      for (Tensor& p : g.params) {
        const Tensor grad = randn(p.shape(), {}, &gen);
        p.set_grad(grad);
        kernels::adamw_update(copies[i].param, grad, copies[i].m, copies[i].v,
                              kernels::AdamWStep{1e-2, 0.9, 0.99, 1e-8, copies[i].weight_decay, step});
        ++i;
      }
    }
    opt.step();
  }
  size_t i = 0;
  for (const nn::ParamGroup& g : opt.param_groups()) {
    for (const Tensor& p : g.params)
      EXPECT_TRUE(allclose(p, copies[i++].param, 0, 0)) << "parameter " << i - 1;
  }
}

}  // namespace
}  // namespace brigade::testing
