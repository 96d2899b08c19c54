// The executor on GPUs (skipped without one; scripts/gpu_check.sh runs it with BRIGADE_REQUIRE_GPU=1):
// every stage on one GPU with its own compute and copy streams, the pipelined step against the
// unpipelined step on the same GPU; a trace timed with CUDA events; stages on two GPUs when there are two.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <string>

#include "nn/gpt.h"
#include "nn/optim.h"
#include "pipeline/run/executor.h"
#include "pipeline/run/trace.h"
#include "pipeline/schedule/generators.h"
#include "pipeline_fixtures.h"
#include "test_support.h"

namespace brigade::pipeline {
namespace {

using testing::Batch;
using testing::make_batch;
using testing::relative_error;
using testing::tiny_config;

// Gradients of the GPU pipeline against the GPU unpipelined step: same kernels, only the microbatch
// summation order differs.
constexpr double kTolerance = 1e-5;

void expect_gradients_match(const nn::Module& actual, const nn::Module& expected) {
  const auto a = actual.named_parameters(), e = expected.named_parameters();
  ASSERT_EQ(a.size(), e.size());
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_TRUE(a[i].second.grad().defined()) << a[i].first;
    EXPECT_LE(relative_error(a[i].second.grad().cpu(), e[i].second.grad().cpu()), kTolerance) << a[i].first;
  }
}

TEST(CudaPipeline, StreamsOnOneGpuMatchTheUnpipelinedStep) {
  BRIGADE_REQUIRE_CUDA();
  const Device gpu = Device::cuda(0);
  const Batch batch = make_batch(8, 8, 20, 1);
  for (const std::string& schedule : schedule_names()) {
    for (Recompute recompute : {Recompute::Never, Recompute::ExceptLast}) {
      SCOPED_TRACE(schedule + " " + to_string(recompute));
      const int v = schedule == "interleaved" ? 2 : 1;
      const nn::GPTConfig config = tiny_config(chunks_per_stage(schedule, v) > 1 ? 6 : 4);
      nn::GPT reference(config, 3), piped(config, 3);
      reference.to(gpu);
      piped.to(gpu);
      reference.zero_grad();
      Tensor loss = nn::GPT::loss(reference.forward(batch.ids.to(gpu)), batch.targets.to(gpu));
      loss.backward();
      PipelineConfig pc;
      pc.schedule = schedule;
      pc.stages = 4;
      pc.microbatches = 8;
      pc.virtual_chunks = v;
      pc.recompute = recompute;
      pc.recv_timeout_seconds = 120;
      Pipeline pipe(piped, pc);
      for (int s = 0; s < 4; ++s) EXPECT_EQ(pipe.device(s), gpu);
      const StepResult r = pipe.forward_backward(batch.ids, batch.targets);
      EXPECT_NEAR(r.loss, loss.item(), kTolerance * loss.item());
      expect_gradients_match(piped, reference);
    }
  }
}

TEST(CudaPipeline, TrainStepsAndATraceTimedWithCudaEvents) {
  BRIGADE_REQUIRE_CUDA();
  const Device gpu = Device::cuda(0);
  nn::GPT model(tiny_config(), 2);
  model.to(gpu);
  PipelineConfig pc;
  pc.schedule = "1f1b";
  pc.stages = 4;
  pc.microbatches = 8;
  Pipeline pipe(model, pc);
  nn::AdamW opt(nn::decay_groups(model, 0.1));
  StepResult r;
  for (int step = 0; step < 3; ++step) {
    const Batch batch = make_batch(8, 8, 20, 10 + step);
    r = pipe.train_step(batch.ids.to(gpu), batch.targets.to(gpu), opt);
    EXPECT_TRUE(std::isfinite(r.loss));
  }
  EXPECT_GT(r.step_ms, 0.0);
  for (const StageReport& s : r.stages) {
    EXPECT_GT(s.busy_ms, 0.0);
    EXPECT_GT(s.activation_peak_bytes, 0);
    EXPECT_EQ(s.device, gpu);
  }
  for (const auto& events : r.trace.stages) {
    for (const TraceEvent& e : events) EXPECT_LE(e.start_ms, e.end_ms + 1e-6);
  }
  const Timeline simulated = simulate_measured(r.trace);
  const nlohmann::json json = nlohmann::json::parse(chrome_trace_json(r.trace, &simulated));
  EXPECT_GT(json["traceEvents"].size(), 100u);
}

TEST(CudaPipeline, StagesOnTwoGpusMatchTheUnpipelinedStep) {
  BRIGADE_REQUIRE_CUDA();
  if (cuda_device_count() < 2) GTEST_SKIP() << "needs two GPUs, found " << cuda_device_count();
  const Batch batch = make_batch(8, 8, 20, 1);
  nn::GPT reference(tiny_config(), 3), piped(tiny_config(), 3);
  reference.to(Device::cuda(0));
  reference.zero_grad();
  Tensor loss =
      nn::GPT::loss(reference.forward(batch.ids.to(Device::cuda(0))), batch.targets.to(Device::cuda(0)));
  loss.backward();
  PipelineConfig pc;
  pc.schedule = "1f1b";
  pc.stages = 2;
  pc.microbatches = 4;
  pc.devices = {Device::cuda(0), Device::cuda(1)};
  pc.recv_timeout_seconds = 120;
  Pipeline pipe(piped, pc);  // moves the second stage's layers to cuda:1; the tied embedding stays on cuda:0
  const StepResult r = pipe.forward_backward(batch.ids, batch.targets);
  EXPECT_NEAR(r.loss, loss.item(), kTolerance * loss.item());
  expect_gradients_match(piped, reference);
}

}  // namespace
}  // namespace brigade::pipeline
