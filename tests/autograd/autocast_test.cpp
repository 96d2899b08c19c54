// Autocast (autograd/autocast.h): the scope, the dtype each op family computes in, gradients landing in
// the dtype of their tensor, and bf16 matmul accuracy against a float64 reference.
//
// Tolerance of a bf16 matmul (stated once, used below). Rounding each input to bf16 (8 significant bits)
// changes it by at most 2^-9 relative, so each product a_ik b_kj by at most ~2^-8 relative; the fp32
// accumulation adds ~K 2^-24 (negligible) and the final rounding of y to bf16 at most 2^-9 |y|. So
//   |y_bf16 - y_exact| <= 2^-8 * sum_k |a_ik b_kj| + 2^-8 |y_exact|          (elementwise)
// with a factor 2 to spare on the rounding terms. Random normal inputs make the first term ~sqrt(K) times
// larger than |y| typically: relative errors of ~1% on small outputs are expected, not a bug.
#include "autograd/autocast.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <thread>
#include <vector>

#include "autograd/attention.h"
#include "autograd/checkpoint.h"
#include "autograd/ops.h"
#include "tensor/generator.h"
#include "test_support.h"

namespace brigade {
namespace {

using autograd::autocast_dtype;
using autograd::AutocastGuard;

Tensor leaf(const Shape& shape, uint64_t seed, DType dtype = kFloat32) {
  Generator g(seed);
  return randn(shape, TensorOptions(kFloat32), &g).to(dtype).set_requires_grad();
}

/// A tensor of small integers in [-1, 1] (exact in bf16), float32, requiring grad.
Tensor small_ints(const Shape& shape, uint64_t seed) {
  Generator g(seed);
  std::vector<float> u = rand(shape, TensorOptions(kFloat32), &g).to_vector<float>();
  for (float& x : u) x = std::floor(x * 3.0f) - 1.0f;
  return from_vector(u, shape).set_requires_grad();
}

TEST(Autocast, GuardIsScopedNestedAndPerThread) {
  EXPECT_FALSE(autocast_dtype().has_value());
  {
    AutocastGuard on(kBFloat16);
    ASSERT_TRUE(autocast_dtype().has_value());
    EXPECT_EQ(*autocast_dtype(), kBFloat16);
    {
      AutocastGuard off(std::nullopt);
      EXPECT_FALSE(autocast_dtype().has_value());
    }
    EXPECT_EQ(autocast_dtype(), std::optional<DType>(kBFloat16));
    std::optional<DType> seen_by_other_thread = kFloat64;
    std::thread([&] { seen_by_other_thread = autocast_dtype(); }).join();
    EXPECT_FALSE(seen_by_other_thread.has_value()) << "a new thread starts with autocast off";
  }
  EXPECT_FALSE(autocast_dtype().has_value());
}

TEST(Autocast, RejectsOtherDtypesAndNames) {
  EXPECT_THROW({ AutocastGuard guard(kFloat32); }, DTypeError);
  EXPECT_THROW({ AutocastGuard guard(kFloat64); }, DTypeError);
  EXPECT_EQ(autograd::autocast_dtype_from_name("bf16"), std::optional<DType>(kBFloat16));
  EXPECT_EQ(autograd::autocast_dtype_from_name("bfloat16"), std::optional<DType>(kBFloat16));
  EXPECT_FALSE(autograd::autocast_dtype_from_name("fp32").has_value());
  EXPECT_THROW(autograd::autocast_dtype_from_name("fp16"), ValueError);
}

TEST(Autocast, OpFamiliesPickTheirDtypes) {
  Tensor x = leaf({4, 8}, 1), w = leaf({8, 6}, 2), ln_w = leaf({6}, 3), ln_b = leaf({6}, 4);
  AutocastGuard autocast(kBFloat16);
  Tensor y = matmul(x, w);
  EXPECT_EQ(y.dtype(), kBFloat16) << "matmul computes in bf16";
  EXPECT_EQ(gelu(y).dtype(), kBFloat16) << "elementwise ops follow their input";
  EXPECT_EQ(sum(y).dtype(), kBFloat16) << "reductions follow their input";
  EXPECT_EQ(softmax(y).dtype(), kFloat32);
  EXPECT_EQ(log_softmax(y).dtype(), kFloat32);
  EXPECT_EQ(layer_norm(y, ln_w, ln_b).dtype(), kFloat32);
  EXPECT_EQ(cross_entropy(y, from_vector<int64_t>({0, 1, 2, 3}, {4})).dtype(), kFloat32);
  EXPECT_EQ((y + x.narrow(1, 0, 6)).dtype(), kFloat32) << "bf16 + fp32 computes in the wider fp32";
  EXPECT_EQ((x.narrow(1, 0, 6) * y).dtype(), kFloat32);
  EXPECT_EQ(where(gt(y, 0.0), y, x.narrow(1, 0, 6)).dtype(), kFloat32);
  // float64 is left alone, as in PyTorch's autocast.
  Tensor a64 = leaf({3, 5}, 5, kFloat64), b64 = leaf({5, 2}, 6, kFloat64);
  EXPECT_EQ(matmul(a64, b64).dtype(), kFloat64);
}

TEST(Autocast, MixedDtypesStayAnErrorOutsideAutocast) {
  Tensor a = leaf({3}, 1), b = leaf({3}, 2, kBFloat16);
  EXPECT_THROW(add(a, b), DTypeError);
}

TEST(Autocast, GradientsLandInTheLeafDtype) {
  Tensor x = leaf({5, 8}, 1), w = leaf({8, 7}, 2), ln_w = leaf({7}, 3), ln_b = leaf({7}, 4);
  Tensor xb = leaf({5, 8}, 5, kBFloat16);
  Tensor loss;
  {
    AutocastGuard autocast(kBFloat16);
    Tensor h = layer_norm(matmul(x, w), ln_w, ln_b);  // fp32 out of layer norm
    Tensor logits = matmul(gelu(h), w.narrow(0, 0, 7).transpose(0, 1)) + matmul(xb, w.narrow(1, 0, 7));
    loss = cross_entropy(logits.narrow(1, 0, 7), from_vector<int64_t>({0, 3, 6, 1, 2}, {5}));
  }
  EXPECT_EQ(loss.dtype(), kFloat32);
  loss.backward();  // outside the scope, as PyTorch recommends: backward never consults autocast
  for (const Tensor* t : {&x, &w, &ln_w, &ln_b}) {
    ASSERT_TRUE(t->grad().defined());
    EXPECT_EQ(t->grad().dtype(), kFloat32) << "fp32 master tensors get fp32 gradients";
  }
  ASSERT_TRUE(xb.grad().defined());
  EXPECT_EQ(xb.grad().dtype(), kBFloat16);
}

TEST(Autocast, Bf16MatmulWithinTheRoundingBoundOfExact) {
  const int64_t M = 33, K = 200, N = 17;
  Tensor a = leaf({M, K}, 11), b = leaf({K, N}, 12);
  Tensor y;
  {
    AutocastGuard autocast(kBFloat16);
    y = matmul(a, b);
  }
  ASSERT_EQ(y.dtype(), kBFloat16);
  std::vector<double> av = a.to_vector<double>(), bv = b.to_vector<double>(), yv = y.to_vector<double>();
  double worst = 0.0;  // largest error as a fraction of its bound
  double mean_rel = 0.0;
  for (int64_t i = 0; i < M; ++i) {
    for (int64_t j = 0; j < N; ++j) {
      double exact = 0.0, abs_sum = 0.0;
      for (int64_t k = 0; k < K; ++k) {
        exact += av[i * K + k] * bv[k * N + j];
        abs_sum += std::fabs(av[i * K + k] * bv[k * N + j]);
      }
      const double err = std::fabs(yv[i * N + j] - exact);
      const double bound = std::ldexp(abs_sum + std::fabs(exact), -8);
      worst = std::max(worst, err / bound);
      mean_rel += err / abs_sum;
    }
  }
  EXPECT_LE(worst, 1.0) << "an element exceeds 2^-8 (sum|ab| + |y|)";
  // Typically the error is far below the bound: ~2^-9 sum|ab| / sqrt(K) on average.
  EXPECT_LT(mean_rel / static_cast<double>(M * N), std::ldexp(1.0, -10));
}

// The cast path backprops exactly: with integer inputs (exact in bf16, every product and sum exact in the
// fp32 accumulator, every output an integer below 256, exact in bf16) autocast must give the fp32 values
// and gradients bit for bit; any gradient lost, doubled or left in bf16 would show.
TEST(Autocast, CastPathBackpropsExactlyOnExactInputs) {
  auto run = [](bool autocast_on, std::vector<Tensor>& grads) {
    Tensor x = small_ints({6, 8}, 21), w = small_ints({8, 5}, 22), bias = small_ints({5}, 23);
    Tensor r = small_ints({6, 5}, 24).detach();
    Tensor y;
    {
      AutocastGuard autocast(autocast_on ? std::optional<DType>(kBFloat16) : std::nullopt);
      // bias joins in fp32 (the bf16 product is promoted), then a second GEMM reads it back in bf16.
      Tensor h = matmul(x, w) + bias;
      y = sum(matmul(h * r, w, false, true));
    }
    y.backward();
    grads = {x.grad(), w.grad(), bias.grad()};
    return y;
  };
  std::vector<Tensor> g32, g16;
  Tensor y32 = run(false, g32);
  Tensor y16 = run(true, g16);
  EXPECT_EQ(y16.item(), y32.item());
  for (size_t i = 0; i < g32.size(); ++i) {
    ASSERT_EQ(g16[i].dtype(), kFloat32) << "gradient " << i;
    EXPECT_TRUE(testing::allclose(g16[i], g32[i], 0.0, 0.0)) << "gradient " << i;
  }
}

// On random inputs the autocast gradients follow the fp32 ones within bf16 rounding: every element within
// 2% of the largest gradient of its tensor (bf16 keeps 8 bits, ~0.4% per rounding; a two-GEMM chain
// rounds the activations and the incoming gradient a few times over).
TEST(Autocast, GradientsFollowFp32WithinBf16Rounding) {
  std::vector<int64_t> targets(16);
  for (int64_t i = 0; i < 16; ++i) targets[static_cast<size_t>(i)] = (i * 7) % 10;
  auto run = [&](bool autocast_on) {
    Tensor x = leaf({16, 32}, 31), w1 = leaf({32, 24}, 32), w2 = leaf({24, 10}, 33);
    Tensor loss;
    {
      AutocastGuard autocast(autocast_on ? std::optional<DType>(kBFloat16) : std::nullopt);
      Tensor logits = matmul(gelu(matmul(x, w1)), w2);
      loss = cross_entropy(logits, from_vector(targets, {16}));
    }
    loss.backward();
    return std::vector<Tensor>{loss, x.grad(), w1.grad(), w2.grad()};
  };
  std::vector<Tensor> ref = run(false), got = run(true);
  EXPECT_NEAR(got[0].item(), ref[0].item(), 0.01 * std::fabs(ref[0].item()));
  for (size_t i = 1; i < ref.size(); ++i) {
    ASSERT_EQ(got[i].dtype(), kFloat32);
    const std::vector<double> r = ref[i].to_vector<double>();
    double scale = 0.0;
    for (double v : r) scale = std::max(scale, std::fabs(v));
    EXPECT_TRUE(testing::allclose(got[i], ref[i], 0.0, 0.02 * scale)) << "gradient " << i;
  }
}

// Fused attention reads bf16 under autocast (like a GEMM); its gradients come back to fp32 q, k, v.
TEST(Autocast, AttentionReadsBf16) {
  Tensor q = leaf({1, 2, 5, 4}, 51), k = leaf({1, 2, 5, 4}, 52), v = leaf({1, 2, 5, 4}, 53);
  Tensor y;
  {
    AutocastGuard autocast(kBFloat16);
    y = causal_attention(q, k, v, 0.5);
  }
  EXPECT_EQ(y.dtype(), kBFloat16);
  sum(y.to(kFloat32)).backward();
  for (const Tensor* t : {&q, &k, &v}) {
    ASSERT_TRUE(t->grad().defined());
    EXPECT_EQ(t->grad().dtype(), kFloat32);
  }
  // Within bf16 rounding of the fp32 result: the output is rounded to bf16 (up to 2^-8 relative), v by up to
  // 2^-9 of |v| (|v| < 4 here), and rounding q and k moves the scores by ~2^-8 |q.k| scale, the weights by
  // about as much relative: rtol 2^-7 plus atol 2^-6 covers the sum with room.
  Tensor ref = causal_attention(q.detach(), k.detach(), v.detach(), 0.5);
  EXPECT_TRUE(testing::allclose(y, ref, std::ldexp(1.0, -7), std::ldexp(1.0, -6)));
}

// The packed form (GPT's attention) follows the same rule.
TEST(Autocast, PackedSelfAttentionReadsBf16) {
  Tensor qkv = leaf({2, 5, 3 * 8}, 54);
  Tensor y;
  {
    AutocastGuard autocast(kBFloat16);
    y = causal_self_attention(qkv, /*heads=*/2, 0.5);
  }
  EXPECT_EQ(y.dtype(), kBFloat16);
  sum(y.to(kFloat32)).backward();
  ASSERT_TRUE(qkv.grad().defined());
  EXPECT_EQ(qkv.grad().dtype(), kFloat32);
  Tensor ref = causal_self_attention(qkv.detach(), 2, 0.5);
  EXPECT_TRUE(testing::allclose(y, ref, std::ldexp(1.0, -7), std::ldexp(1.0, -6)));  // as above
}

// A checkpoint recomputed by a backward outside the scope replays the forward's precision.
TEST(Autocast, CheckpointRecomputeReplaysTheForwardsAutocast) {
  auto fn = [](const std::vector<Tensor>& in) { return std::vector<Tensor>{softmax(matmul(in[0], in[1]))}; };
  auto run = [&](bool use_checkpoint) {
    Tensor x = leaf({4, 16}, 41), w = leaf({16, 9}, 42);
    Tensor r = leaf({4, 9}, 43).detach();
    Tensor loss;
    {
      AutocastGuard autocast(kBFloat16);
      Tensor y = use_checkpoint ? autograd::checkpoint(fn, {x, w})[0] : fn({x, w})[0];
      loss = sum(y * r);
    }
    loss.backward();  // recompute happens here, with autocast off on this thread
    return std::vector<Tensor>{x.grad(), w.grad()};
  };
  std::vector<Tensor> plain = run(false), checkpointed = run(true);
  for (size_t i = 0; i < plain.size(); ++i) {
    EXPECT_TRUE(testing::allclose(checkpointed[i], plain[i], 0.0, 0.0)) << "gradient " << i;
  }
}

}  // namespace
}  // namespace brigade
