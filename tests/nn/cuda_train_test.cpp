// Training on CUDA follows training on the CPU: the same seed gives the same initial weights and the same
// batches (both come from host-side Philox draws), so the per-step losses may differ only by float32
// rounding (different summation orders in the GPU kernels), which AdamW then carries forward.
// Tolerances: the first step's loss within 1e-5 relative (one forward, no update yet); the 20 steps within
// 2e-3 relative. Resuming on CUDA reproduces the CUDA run bit for bit, as on the CPU.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "nn/trainer.h"
#include "test_support.h"

namespace {

using namespace brigade;
using namespace brigade::nn;
namespace fs = std::filesystem;

class CudaTrain : public brigade::testing::TempDirTest {};

TrainOptions small(const std::string& device) {
  TrainOptions o;
  o.layers = 2;
  o.heads = 4;
  o.embd = 64;
  o.batch = 32;
  o.steps = 20;
  o.warmup = 5;
  o.eval_every = 0;
  o.eval_iters = 2;
  o.device = device;
  o.threads = 1;
  return o;
}

TEST_F(CudaTrain, TwentyStepsFollowTheCpuLosses) {
  BRIGADE_REQUIRE_CUDA();
  TrainResult cpu = train(small("cpu"));
  TrainResult gpu = train(small("cuda"));
  ASSERT_EQ(cpu.losses.size(), 20u);
  ASSERT_EQ(gpu.losses.size(), 20u);
  EXPECT_NEAR(gpu.losses[0], cpu.losses[0], 1e-5 * std::fabs(cpu.losses[0]));
  for (size_t i = 0; i < cpu.losses.size(); ++i) {
    EXPECT_NEAR(gpu.losses[i], cpu.losses[i], 2e-3 * std::fabs(cpu.losses[i])) << "step " << i + 1;
  }
  EXPECT_NEAR(gpu.val_loss, cpu.val_loss, 2e-3 * std::fabs(cpu.val_loss));
  EXPECT_EQ(gpu.device, "cuda:0");
  EXPECT_GT(gpu.peak_bytes, 0);  // the CUDA allocator's peak, not the CPU's
}

TEST_F(CudaTrain, ResumeOnCudaIsBitExactAndCpuCheckpointsContinueOnCuda) {
  BRIGADE_REQUIRE_CUDA();
  TrainOptions options = small("cuda");
  options.steps = 10;
  options.dropout = 0.1;  // CUDA dropout masks come from the restored generator too
  options.save = file("run.safetensors");
  options.save_every = 5;
  TrainHooks hooks;
  hooks.before_step = [&](int64_t step, GPT&) {
    if (step == 5) fs::copy_file(options.save, file("step5.safetensors"));
  };
  TrainResult full = train(options, hooks);
  TrainOptions resumed = options;
  resumed.resume = file("step5.safetensors");
  resumed.save = file("resumed.safetensors");
  TrainResult second = train(resumed);
  ASSERT_EQ(second.losses.size(), 5u);
  for (size_t i = 0; i < 5; ++i) EXPECT_EQ(second.losses[i], full.losses[5 + i]) << "step " << 6 + i;

  // A checkpoint written on the GPU continues on the CPU (and the other way round) without complaint.
  TrainOptions on_cpu = resumed;
  on_cpu.device = "cpu";
  on_cpu.save = "";
  on_cpu.save_every = 0;  // nothing saved: --save-every needs --save
  TrainResult cpu = train(on_cpu);
  ASSERT_EQ(cpu.losses.size(), 5u);
  EXPECT_NEAR(cpu.losses[0], full.losses[5], 1e-4 * std::fabs(full.losses[5]));
}

}  // namespace
