// The fused causal attention of autograd/attention.h against the same attention written otherwise: the
// packed self-attention against the head split and merge (bit for bit), and the fused op against the
// unfused differentiable ops (values and gradients). Its finite-difference gradchecks (every input, some
// inputs fixed, head-split views of one projection, packed self-attention) are cases of the op table
// (tests/ops/op_cases_attention.h, op_cases_compositions.h; run by tests/ops/op_gradcheck_test.cpp).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "autograd/attention.h"
#include "autograd/ops.h"
#include "kernels/kernels.h"
#include "test_support.h"

namespace brigade {
namespace {

using Inputs = std::vector<Tensor>;

Tensor R(const Shape& shape, uint64_t seed) {
  Generator gen(seed);
  return randn(shape, kFloat64, &gen).set_requires_grad();
}

// causal_self_attention is causal_attention on the head-split views, then the merge: same values and
// gradient, bit for bit (the same kernel sums in the same order).
TEST(AttentionGradcheck, PackedSelfAttentionMatchesTheHeadSplit) {
  const int64_t B = 2, T = 7, H = 3, D = 4;
  Generator gen(12);
  const Tensor base = randn({B, T, 3 * H * D}, kFloat32, &gen);
  const Tensor w = randn({B, T, H * D}, kFloat32, &gen);
  Tensor a = base.clone().set_requires_grad(), b = base.clone().set_requires_grad();
  Tensor packed = causal_self_attention(a, H, 0.5);
  sum(packed * w).backward();
  const Tensor heads = b.view({B, T, 3, H, D}).permute({2, 0, 3, 1, 4});
  Tensor split = causal_attention(heads.select(0, 0), heads.select(0, 1), heads.select(0, 2), 0.5)
                     .permute({0, 2, 1, 3})
                     .reshape({B, T, H * D});
  sum(split * w).backward();
  EXPECT_TRUE(testing::allclose(packed, split.detach(), 0.0, 0.0));
  EXPECT_TRUE(testing::allclose(a.grad(), b.grad(), 0.0, 0.0));
  EXPECT_THROW(causal_self_attention(a, 5, 0.5), ShapeError);
}

// The fused op and the unfused formula (matmul, masked_fill, softmax, matmul) agree in value and gradient.
TEST(AttentionGradcheck, MatchesTheUnfusedOps) {
  const Shape shape{2, 2, 6, 5};
  const double scale = 0.45;
  std::vector<Tensor> fused_in{R(shape, 7), R(shape, 8), R(shape, 9)};
  std::vector<Tensor> plain_in;
  for (const Tensor& t : fused_in) plain_in.push_back(t.detach().clone().set_requires_grad());
  Generator gen(10);
  const Tensor w = randn(shape, kFloat64, &gen);

  Tensor fused = causal_attention(fused_in[0], fused_in[1], fused_in[2], scale);
  sum(fused * w).backward();

  // matmul batches over one leading dim: [B, H, T, D] -> [B * H, T, D].
  auto flat = [](const Tensor& t) { return t.reshape({4, 6, 5}); };
  Tensor scores = matmul(flat(plain_in[0]), flat(plain_in[1]), false, true) * scale;
  scores = masked_fill(scores, kernels::causal_mask(6, TensorOptions(kFloat64)),
                       -std::numeric_limits<double>::infinity());
  Tensor plain = matmul(softmax(scores), flat(plain_in[2])).reshape(shape);
  sum(plain * w).backward();

  EXPECT_TRUE(testing::allclose(fused, plain.detach(), 1e-12, 1e-13));
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_TRUE(testing::allclose(fused_in[i].grad(), plain_in[i].grad(), 1e-11, 1e-12)) << "input " << i;
  }
}

}  // namespace
}  // namespace brigade
