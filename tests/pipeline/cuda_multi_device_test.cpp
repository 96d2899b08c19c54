// One process, several devices (skipped without GPUs; scripts/gpu_check.sh runs it with
// BRIGADE_REQUIRE_GPU=1): `brigade train --devices cuda:0,cuda:1` trains with one GPU per stage and evaluates
// through the pipeline's forward-only schedule. With one GPU the same path runs as cuda:0,cuda:0; the two-GPU
// cases skip with the reason where fewer than two are present.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "nn/trainer.h"
#include "pipeline/run/executor.h"
#include "pipeline/run/train_runner.h"
#include "pipeline_fixtures.h"
#include "tensor/grad_mode.h"
#include "test_support.h"
#include "tiny_train_options.h"

namespace brigade::pipeline {
namespace {

using testing::make_batch;
using testing::relative_error;
using testing::tiny_config;

#define BRIGADE_REQUIRE_TWO_GPUS()                                                                        \
  do {                                                                                                    \
    BRIGADE_REQUIRE_CUDA();                                                                               \
    if (cuda_device_count() < 2) GTEST_SKIP() << "needs two CUDA devices, found " << cuda_device_count(); \
  } while (0)

// The forward-only pass on `devices` against the whole model's forward on cuda:0. Same kernels; the
// microbatches cut the GEMMs' rows differently, so the tolerance is float rounding's.
void expect_forward_matches(const std::vector<Device>& devices) {
  nn::GPT reference(tiny_config(4), /*seed=*/5), model(tiny_config(4), /*seed=*/5);
  reference.to(Device::cuda(0));
  const auto batch = make_batch(8, 8, 20, 3);
  Tensor expected;
  {
    NoGradGuard no_grad;
    expected = reference.forward(batch.ids.to(Device::cuda(0))).cpu();
  }
  model.to(Device::cuda(0));
  PipelineConfig config;
  config.stages = 2;
  config.microbatches = 4;
  config.devices = devices;
  Pipeline pipe(model, config);
  const Tensor logits = pipe.forward(batch.ids);
  EXPECT_EQ(logits.device(), devices.back());
  EXPECT_LE(relative_error(logits.cpu(), expected), 1e-5);
}

TEST(CudaMultiDevice, ForwardOnlyOnTwoStagesOfOneGpu) {
  BRIGADE_REQUIRE_CUDA();
  expect_forward_matches({Device::cuda(0), Device::cuda(0)});
}

TEST(CudaMultiDevice, ForwardOnlyAcrossTwoGpus) {
  BRIGADE_REQUIRE_TWO_GPUS();
  expect_forward_matches({Device::cuda(0), Device::cuda(1)});
}

// Training with one GPU per stage follows training on one GPU (the same kernels on each device), and its
// evaluation runs through the pipeline.
TEST(CudaMultiDevice, TrainingAcrossTwoGpusFollowsOneGpu) {
  BRIGADE_REQUIRE_TWO_GPUS();
  nn::TrainOptions one = brigade::testing::tiny_train_options(10, /*layers=*/2);
  one.device = "cuda:0";
  one.stages = 2;
  one.microbatches = 4;
  nn::TrainOptions two = one;
  two.devices = "cuda:0,cuda:1";
  PipelineRunner one_runner(one), two_runner(two);
  const nn::TrainResult a = nn::train(one, {}, &one_runner), b = nn::train(two, {}, &two_runner);
  ASSERT_EQ(a.losses.size(), b.losses.size());
  for (size_t i = 0; i < a.losses.size(); ++i) {
    EXPECT_NEAR(b.losses[i], a.losses[i], 1e-5 * std::abs(a.losses[i])) << "step " << i + 1;
  }
  EXPECT_NEAR(b.val_loss, a.val_loss, 1e-5 * a.val_loss);
  EXPECT_EQ(two_runner.pipeline().device(1), Device::cuda(1));
}

}  // namespace
}  // namespace brigade::pipeline
