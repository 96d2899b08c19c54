// Recomputing the attention core (nn/attention.h: RecomputeAttentionCore) changes what a block keeps, not
// what it computes: the same output and gradients as the plain block (fused, and unfused with dropout,
// whose masks the recompute replays), with the core recomputed ahead of the backward or inside it.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "autograd/checkpoint.h"
#include "nn/attention.h"
#include "nn/block.h"
#include "tensor/generator.h"
#include "tensor/grad_mode.h"
#include "test_support.h"

namespace nn = brigade::nn;
using brigade::Generator;
using brigade::Tensor;

namespace {

struct Result {
  Tensor output;
  std::vector<Tensor> grads;  // input, then every parameter
  int checkpoints = 0;        // found by recompute_graph_ahead
};

// One block's forward and backward on a fixed input, its dropout drawing from a generator seeded 11.
Result run_block(double dropout, bool recompute_core, bool ahead) {
  Generator init(3), masks(11);
  nn::Block block(16, 4, dropout, true, &init);
  nn::set_dropout_generator(block, &masks);
  Tensor x = brigade::randn({2, 6, 16}, {}, &init).set_requires_grad(true);
  Tensor y;
  {
    nn::RecomputeAttentionCore core(recompute_core);
    y = block.forward(x);
  }
  Result r;
  if (ahead) r.checkpoints = brigade::recompute_graph_ahead(y);
  Tensor g = brigade::randn(y.shape(), {}, &init);
  y.backward(g);
  r.output = y.detach();
  r.grads.push_back(x.grad());
  for (const Tensor& p : block.parameters()) r.grads.push_back(p.grad());
  return r;
}

void expect_same(const Result& a, const Result& b) {
  EXPECT_TRUE(brigade::testing::allclose(a.output, b.output, 1e-6, 1e-6));
  ASSERT_EQ(a.grads.size(), b.grads.size());
  for (size_t i = 0; i < a.grads.size(); ++i)
    EXPECT_TRUE(brigade::testing::allclose(a.grads[i], b.grads[i], 1e-5, 1e-6)) << "gradient " << i;
}

TEST(RecomputeAttentionCore, SameOutputAndGradientsFusedAndWithDropout) {
  for (double dropout : {0.0, 0.3}) {
    SCOPED_TRACE(dropout);
    const Result plain = run_block(dropout, false, false);
    const Result inside = run_block(dropout, true, false);
    const Result ahead = run_block(dropout, true, true);
    expect_same(inside, plain);
    expect_same(ahead, plain);
    EXPECT_EQ(ahead.checkpoints, 1);  // one core per block
  }
}

TEST(RecomputeAttentionCore, IsPerThreadScopedAndOffWithoutGrad) {
  EXPECT_FALSE(nn::RecomputeAttentionCore::enabled());
  {
    nn::RecomputeAttentionCore on;
    EXPECT_TRUE(nn::RecomputeAttentionCore::enabled());
    {
      nn::RecomputeAttentionCore off(false);
      EXPECT_FALSE(nn::RecomputeAttentionCore::enabled());
    }
    EXPECT_TRUE(nn::RecomputeAttentionCore::enabled());
    // Without grad there is nothing to keep: no checkpoint in the (absent) graph.
    brigade::NoGradGuard no_grad;
    Generator init(3);
    nn::Block block(16, 4, 0.0, true, &init);
    const Tensor y = block.forward(brigade::randn({1, 4, 16}, {}, &init));
    EXPECT_EQ(brigade::recompute_graph_ahead(y), 0);
  }
  EXPECT_FALSE(nn::RecomputeAttentionCore::enabled());
}

}  // namespace
