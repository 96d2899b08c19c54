// Longer executor checks (label "slow"): the cost of splitting the backward into Bi and Bw, a deeper
// pipeline's equivalence, and the measured step against the simulator fed with the measured costs.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <string>
#include <vector>

#include "autograd/engine.h"
#include "nn/block.h"
#include "nn/gpt.h"
#include "nn/statistics.h"
#include "pipeline/backward/split_backward.h"
#include "pipeline/run/executor.h"
#include "pipeline/run/trace.h"
#include "pipeline_fixtures.h"

namespace brigade::pipeline {
namespace {

using testing::Batch;
using testing::expect_same_parameters;
using testing::make_batch;
using testing::reference_backward;
using testing::relative_error;

// Process CPU time in ms: on a shared machine the wall clock measures the neighbours as much as the code.
double cpu_ms() {
  return 1000.0 * static_cast<double>(std::clock()) / CLOCKS_PER_SEC;
}

TEST(SplitBackwardSlow, CostOfTheSplitAgainstTheFullBackward) {
  // Two transformer blocks, embd 128, 8 sequences of 64 tokens: a realistic chunk. B is the engine's full
  // backward; Bi + Bw run the same formulas split in two, LayerNorm's backward kernel once in each.
  nn::Block a(128, 4), b(128, 4);
  std::vector<Tensor> params = a.parameters();
  for (const Tensor& p : b.parameters()) params.push_back(p);
  const Tensor x = randn({8, 64, 128}), dy = randn({8, 64, 128});
  auto clear = [&] {
    for (Tensor p : params) p.set_grad(Tensor());
  };
  std::vector<double> full, input, weight;
  std::vector<Tensor> expected;
  for (int rep = 0; rep < 12; ++rep) {
    clear();
    Tensor x1 = x.detach().set_requires_grad(true);
    Tensor y1 = b.forward(a.forward(x1));
    double t0 = cpu_ms();
    autograd::backward(y1, dy);
    full.push_back(cpu_ms() - t0);
    if (rep == 0) {
      for (const Tensor& p : params) expected.push_back(p.grad().clone());
      expected.push_back(x1.grad().clone());
    }
    clear();
    Tensor x2 = x.detach().set_requires_grad(true);
    Tensor y2 = b.forward(a.forward(x2));
    SplitBackward split;
    t0 = cpu_ms();
    Tensor dx = split.backward_input(y2, dy, x2);
    input.push_back(cpu_ms() - t0);
    t0 = cpu_ms();
    split.backward_weight();
    weight.push_back(cpu_ms() - t0);
    if (rep == 0) {
      for (size_t i = 0; i < params.size(); ++i) {
        EXPECT_LE(relative_error(params[i].grad(), expected[i]), 1e-6) << "parameter " << i;
      }
      EXPECT_LE(relative_error(dx, expected.back()), 1e-6);
    }
  }
  // The first repetition warms caches and workspaces.
  full.erase(full.begin()), input.erase(input.begin()), weight.erase(weight.begin());
  const double B = nn::median(full), Bi = nn::median(input), Bw = nn::median(weight);
  std::printf(
      "2 blocks, embd 128, [8, 64] tokens, %d OpenMP threads, CPU time: B %.2f ms; Bi %.2f ms + Bw %.2f ms "
      "= %.2f ms (%+.1f%% against B)\n",
      omp_get_max_threads(), B, Bi, Bw, Bi + Bw, 100.0 * (Bi + Bw - B) / B);
  EXPECT_GT(Bi, 0.0);
  EXPECT_GT(Bw, 0.0);
}

TEST(PipelineSlow, EightStagesSixteenMicrobatchesMatchTheUnpipelinedStep) {
  nn::GPTConfig config = testing::tiny_config(8);
  config.n_embd = 64;
  config.block_size = 16;
  const Batch batch = make_batch(16, 16, config.vocab_size, 3);
  for (const std::string schedule : {"gpipe", "1f1b", "interleaved", "zb-h1"}) {
    SCOPED_TRACE(schedule);
    nn::GPT reference(config, 9), piped(config, 9);
    const double expected = reference_backward(reference, batch);
    PipelineConfig pc;
    pc.schedule = schedule;
    pc.microbatches = 16;
    pc.recompute = Recompute::ExceptLast;
    pc.recv_timeout_seconds = 120;
    if (schedule == "interleaved") {
      pc.stages = 4;
      pc.virtual_chunks = 2;
      pc.balance = {2, 1, 1, 1, 1, 1, 1, 2};  // 10 layers over 8 chunks
    } else {
      pc.stages = 8;  // 10 layers: 2, 2, 1, ...
    }
    Pipeline pipe(piped, pc);
    const StepResult r = pipe.forward_backward(batch.ids, batch.targets);
    EXPECT_NEAR(r.loss, expected, 1e-5 * expected);
    expect_same_parameters(piped, reference, 1e-5, false);
  }
}

TEST(PipelineSlow, MeasuredStepAgainstTheSimulatorWithMeasuredCosts) {
  // What `brigade train` reports as measured vs simulated, on this machine: the simulator gets each
  // chunk's mean F/B time from the same step, so the difference is what the simulator does not model
  // (transfers, host overheads, stages sharing cores).
  nn::GPTConfig config = testing::tiny_config(8);
  config.n_embd = 128;
  config.block_size = 32;
  const Batch batch = make_batch(16, 32, config.vocab_size, 4);
  for (const std::string schedule : {"gpipe", "1f1b", "zb-h1"}) {
    nn::GPT model(config, 1);
    PipelineConfig pc;
    pc.schedule = schedule;
    pc.stages = 4;
    pc.microbatches = 8;
    pc.threads_per_stage = std::max(1, omp_get_num_procs() / pc.stages);
    Pipeline pipe(model, pc);
    StepResult r;
    for (int i = 0; i < 3; ++i) {
      model.zero_grad();
      r = pipe.forward_backward(batch.ids, batch.targets);
    }
    const Timeline simulated = simulate_measured(r.trace);
    std::printf(
        "%-6s S=4 M=8, %d thread(s)/stage: measured step %.2f ms, bubble %.1f%%; simulated %.2f ms, "
        "bubble %.1f%%\n",
        schedule.c_str(), pc.threads_per_stage, r.step_ms, 100 * r.bubble, simulated.step_time,
        100 * simulated.bubble);
    ASSERT_EQ(simulated.stages.size(), r.trace.stages.size());
    for (size_t s = 0; s < simulated.stages.size(); ++s) {
      EXPECT_EQ(simulated.stages[s].size(), r.trace.stages[s].size());
    }
    EXPECT_GT(simulated.step_time, 0.0);
  }
}

}  // namespace
}  // namespace brigade::pipeline
