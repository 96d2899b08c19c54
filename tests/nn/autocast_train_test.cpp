// bf16 mixed precision on the model (autograd/autocast.h, TrainOptions::dtype): Linear's dtypes, a GPT
// step under autocast (bf16 logits, fp32 loss, fp32 gradients on every parameter, close to the fp32 step),
// and the --dtype option's validation and JSON round trip. The 300-step loss-curve comparison is in
// autocast_train_slow_test.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "autograd/autocast.h"
#include "autograd/ops.h"
#include "nn/gpt.h"
#include "nn/layers.h"
#include "nn/trainer.h"
#include "test_support.h"

namespace {

using namespace brigade;
using namespace brigade::nn;
using autograd::AutocastGuard;

TEST(AutocastNN, LinearComputesInBf16AndKeepsFp32Gradients) {
  Generator g(7);
  Linear linear(12, 5, /*bias=*/true, &g);
  Tensor x = randn({3, 4, 12}, TensorOptions(kFloat32), &g);
  Tensor y;
  {
    AutocastGuard autocast(kBFloat16);
    y = linear(x);
  }
  EXPECT_EQ(y.dtype(), kBFloat16);
  EXPECT_EQ(y.shape(), (Shape{3, 4, 5}));
  sum(y.to(kFloat32)).backward();
  for (const auto& [name, p] : linear.named_parameters()) {
    ASSERT_TRUE(p.grad().defined()) << name;
    EXPECT_EQ(p.dtype(), kFloat32) << name;
    EXPECT_EQ(p.grad().dtype(), kFloat32) << name;
  }
  // The bias gradient of sum(y) is the count of rows, exactly (12 per output, in any precision).
  EXPECT_TRUE(
      brigade::testing::allclose(linear.named_parameters()[1].second.grad(), full({5}, 12.0), 0.0, 0.0));
}

// One step of a small GPT: under autocast the logits are bf16, the loss fp32 and within 1% of the fp32
// loss (at init the loss is ~log(V); bf16 rounding of GEMM inputs moves it by far less), and each
// parameter's fp32 gradient is within 5% of its fp32-step gradient in norm-relative terms:
// |g_bf16 - g_fp32| / |g_fp32| < 0.05 (per-element bf16 rounding is ~2^-9; it compounds over the layers).
TEST(AutocastNN, GptStepFollowsTheFp32Step) {
  GPTConfig config;
  config.vocab_size = 23;
  config.block_size = 16;
  config.n_layer = 2;
  config.n_head = 2;
  config.n_embd = 32;
  Generator data(3);
  Tensor ids = (rand({4, 16}, TensorOptions(kFloat32), &data) * 23.0).to(kInt64);
  Tensor targets = (rand({4, 16}, TensorOptions(kFloat32), &data) * 23.0).to(kInt64);

  auto step = [&](std::optional<DType> autocast_dtype, DType* logits_dtype) {
    GPT model(config, /*seed=*/11);
    Tensor loss;
    {
      AutocastGuard autocast(autocast_dtype);
      Tensor logits = model.forward(ids);
      *logits_dtype = logits.dtype();
      loss = GPT::loss(logits, targets);
    }
    EXPECT_EQ(loss.dtype(), kFloat32);
    loss.backward();
    std::vector<std::pair<std::string, Tensor>> grads;
    for (const auto& [name, p] : model.named_parameters()) grads.emplace_back(name, p.grad());
    return std::make_pair(loss.item(), grads);
  };
  DType dtype32 = kFloat64, dtype16 = kFloat64;
  auto [loss32, grads32] = step(std::nullopt, &dtype32);
  auto [loss16, grads16] = step(kBFloat16, &dtype16);
  EXPECT_EQ(dtype32, kFloat32);
  EXPECT_EQ(dtype16, kBFloat16);
  EXPECT_NEAR(loss16, loss32, 0.01 * loss32);
  ASSERT_EQ(grads16.size(), grads32.size());
  for (size_t i = 0; i < grads32.size(); ++i) {
    const std::string& name = grads32[i].first;
    ASSERT_TRUE(grads16[i].second.defined()) << name;
    EXPECT_EQ(grads16[i].second.dtype(), kFloat32) << name;
    const std::vector<double> a = grads16[i].second.to_vector<double>(),
                              b = grads32[i].second.to_vector<double>();
    double diff = 0.0, norm = 0.0;
    for (size_t j = 0; j < a.size(); ++j) {
      diff += (a[j] - b[j]) * (a[j] - b[j]);
      norm += b[j] * b[j];
    }
    EXPECT_LT(std::sqrt(diff), 0.05 * std::sqrt(norm)) << name;
  }
}

TEST(AutocastNN, DtypeOptionValidatesAndRoundTrips) {
  TrainOptions o;
  EXPECT_EQ(o.dtype, "fp32");
  o.dtype = "bf16";
  EXPECT_NO_THROW(o.validate());
  EXPECT_EQ(TrainOptions::from_json(o.to_json()).dtype, "bf16");
  o.dtype = "fp16";
  try {
    o.validate();
    FAIL() << "fp16 accepted";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("--dtype"), std::string::npos) << e.what();
  }
}

}  // namespace
