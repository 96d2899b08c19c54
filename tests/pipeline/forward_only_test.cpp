// The forward-only schedule (schedule/generators.h: forward_only) and what runs on it: the IR holds F and
// the activations' Send/Recv only, the validator holds it to that and the simulator gives GPipe's fill
// (M + S - 1 forward times); Pipeline::forward gives exactly the unpipelined model's logits, for one and
// several chunks per stage, V placement and tied weights; and a pipelined training run evaluates and samples
// through it: its validation loss and greedy completions are the plain model's, bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "nn/train_data.h"
#include "nn/trainer.h"
#include "pipeline/plan/simulator.h"
#include "pipeline/run/executor.h"
#include "pipeline/run/train_runner.h"
#include "pipeline/schedule/generators.h"
#include "pipeline/schedule/validate.h"
#include "pipeline_fixtures.h"
#include "tensor/grad_mode.h"
#include "test_support.h"
#include "tiny_train_options.h"

namespace {

using namespace brigade;
using namespace brigade::pipeline;
using brigade::pipeline::testing::make_batch;
using brigade::pipeline::testing::tiny_config;

TEST(ForwardOnlySchedule, HoldsForwardsAndActivationTransfersOnlyAndSimulatesAsTheFill) {
  for (const auto& [S, M] : std::vector<std::pair<int, int>>{{1, 1}, {2, 4}, {4, 3}}) {
    const Schedule s = forward_only(S, M);
    EXPECT_TRUE(s.forward_only);
    EXPECT_NO_THROW(validate(s));
    EXPECT_NO_THROW(validate(s, TransferModel::Rendezvous));
    for (const auto& list : s.actions) {
      for (const Action& a : list) {
        EXPECT_TRUE(a.kind == ActionKind::Forward || a.kind == ActionKind::SendActivation ||
                    a.kind == ActionKind::RecvActivation)
            << to_string(a);
      }
    }
    // Uniform costs: F of every microbatch on the last stage after S - 1 forwards of fill.
    Costs uniform;
    uniform.forward = 1.0;
    const Timeline t = simulate(s, uniform);
    EXPECT_DOUBLE_EQ(t.step_time, M + S - 1) << S << "x" << M;
    EXPECT_NEAR(t.bubble, (S - 1.0) / (M + S - 1.0), 1e-12) << S << "x" << M;
  }
  EXPECT_NO_THROW(validate(forward_only(2, 4, 2)));                // interleaved placement
  EXPECT_NO_THROW(validate(forward_only(2, 4, 2, Placement::V)));  // V: stage 0 holds chunks 0 and 3
}

TEST(ForwardOnlySchedule, TheValidatorRefusesWhatAForwardOnlyScheduleCannotHold) {
  Schedule with_backward = forward_only(2, 2);
  with_backward.actions[1].push_back(B(0));
  EXPECT_THROW(
      {
        try {
          validate(with_backward);
        } catch (const ScheduleError& e) {
          EXPECT_NE(std::string(e.what()).find("in a forward-only schedule"), std::string::npos) << e.what();
          throw;
        }
      },
      ScheduleError);
  Schedule missing = forward_only(2, 2);
  missing.actions[1].erase(missing.actions[1].begin());  // the first Recv
  EXPECT_THROW(validate(missing), ScheduleError);
  Schedule twice = forward_only(2, 2);
  twice.actions[0].push_back(F(0));
  EXPECT_THROW(validate(twice), ScheduleError);
}

// The logits through the pipeline equal the whole model's forward on the whole batch, bit for bit: each
// microbatch runs the same ops on its rows.
TEST(PipelineForward, EqualsTheUnpipelinedForwardExactly) {
  struct Case {
    std::string schedule;
    int stages, microbatches, virtual_chunks, forward_microbatches;
  } cases[] = {{"1f1b", 2, 4, 1, 0}, {"1f1b", 3, 2, 1, 1}, {"interleaved", 2, 4, 2, 0}, {"zb-v", 2, 4, 1, 2}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.schedule + " S=" + std::to_string(c.stages));
    nn::GPT model(tiny_config(/*blocks=*/4), /*seed=*/3);  // tied embedding and head
    const auto batch = make_batch(8, 8, 20, 11);
    Tensor expected;
    {
      NoGradGuard no_grad;
      expected = model.forward(batch.ids);
    }
    PipelineConfig config;
    config.schedule = c.schedule;
    config.stages = c.stages;
    config.microbatches = c.microbatches;
    config.virtual_chunks = c.virtual_chunks;
    Pipeline pipe(model, config);
    const Tensor logits = pipe.forward(batch.ids, c.forward_microbatches);
    EXPECT_FALSE(logits.requires_grad());
    EXPECT_TRUE(brigade::testing::allclose(logits, expected, 0.0, 0.0));
    // The training step still runs after a forward (the stages are left clean).
    EXPECT_TRUE(std::isfinite(pipe.forward_backward(batch.ids, batch.targets).loss));
  }
}

// A pipelined run evaluates through the pipeline: the runner's logits, validation loss and greedy
// completions are the plain model's.
TEST(PipelineForward, TrainingEvaluatesAndSamplesThroughThePipeline) {
  nn::TrainOptions options = brigade::testing::tiny_train_options(3, /*layers=*/2);
  options.stages = 2;
  options.microbatches = 4;
  PipelineRunner runner(options);
  nn::TrainSession session(options, {}, &runner);
  while (!session.done()) session.step();
  nn::GPT& model = session.model();
  model.eval();
  const auto batch = make_batch(16, 8, model.config().vocab_size, 5);
  {
    NoGradGuard no_grad;
    EXPECT_TRUE(brigade::testing::allclose(runner.forward(model, batch.ids), model.forward(batch.ids), 0, 0));
  }
  const std::vector<std::string> prompts = {"123+456=", "999+001=", "500+500="};
  const nn::TrainData& data = session.data();
  const auto through_pipeline =
      nn::greedy_complete(model, data.tokenizer, prompts, 4, Device::cpu(),
                          [&](const Tensor& ids) { return runner.forward(model, ids); });
  EXPECT_EQ(through_pipeline, nn::greedy_complete(model, data.tokenizer, prompts, 4, Device::cpu()));
  model.train();
}

}  // namespace
