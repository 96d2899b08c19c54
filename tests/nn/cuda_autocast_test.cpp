// bf16 autocast on CUDA (skips without a GPU): a GPT step under autocast on the GPU against the same step
// under autocast on the CPU. Both round the same GEMM inputs to bf16, but the GPU's GEMMs and reductions sum
// in other orders and round their bf16 outputs at other points, so the two agree to bf16 rounding, not
// bit for bit: the loss within 1% (relative), every parameter's fp32 gradient within 5% in norm-relative
// terms (the same bounds as the CPU test of bf16 against fp32, tests/nn/autocast_train_test.cpp).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "autograd/autocast.h"
#include "autograd/ops.h"
#include "nn/gpt.h"
#include "test_support.h"

namespace {

using namespace brigade;
using namespace brigade::nn;

TEST(CudaAutocast, GptStepFollowsTheCpuStep) {
  BRIGADE_REQUIRE_CUDA();
  GPTConfig config;
  config.vocab_size = 23;
  config.block_size = 16;
  config.n_layer = 2;
  config.n_head = 2;
  config.n_embd = 64;
  Generator data(3);
  const Tensor ids = (rand({4, 16}, TensorOptions(kFloat32), &data) * 23.0).to(kInt64);
  const Tensor targets = (rand({4, 16}, TensorOptions(kFloat32), &data) * 23.0).to(kInt64);

  auto step = [&](const Device& device) {
    GPT model(config, /*seed=*/11);
    model.to(device);
    Tensor loss;
    {
      autograd::AutocastGuard autocast(kBFloat16);
      Tensor logits = model.forward(ids.to(device));
      EXPECT_EQ(logits.dtype(), kBFloat16);
      loss = GPT::loss(logits, targets.to(device));
    }
    EXPECT_EQ(loss.dtype(), kFloat32);
    loss.backward();
    std::vector<std::pair<std::string, Tensor>> grads;
    for (const auto& [name, p] : model.named_parameters()) grads.emplace_back(name, p.grad().cpu());
    return std::make_pair(loss.item(), grads);
  };
  const auto [loss_cpu, grads_cpu] = step(Device::cpu());
  const auto [loss_gpu, grads_gpu] = step(Device::cuda(0));
  EXPECT_NEAR(loss_gpu, loss_cpu, 0.01 * loss_cpu);
  ASSERT_EQ(grads_gpu.size(), grads_cpu.size());
  for (size_t i = 0; i < grads_cpu.size(); ++i) {
    const std::string& name = grads_cpu[i].first;
    ASSERT_TRUE(grads_gpu[i].second.defined()) << name;
    EXPECT_EQ(grads_gpu[i].second.dtype(), kFloat32) << name;
    const std::vector<double> a = grads_gpu[i].second.to_vector<double>();
    const std::vector<double> b = grads_cpu[i].second.to_vector<double>();
    double diff = 0.0, norm = 0.0;
    for (size_t j = 0; j < a.size(); ++j) {
      diff += (a[j] - b[j]) * (a[j] - b[j]);
      norm += b[j] * b[j];
    }
    EXPECT_LT(std::sqrt(diff), 0.05 * std::sqrt(norm) + 1e-7) << name;
  }
}

}  // namespace
