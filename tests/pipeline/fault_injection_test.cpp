// --fail-at, the fault-injection switch of `brigade train` (pipeline/run/train_runner.h): its parsing and
// its effect on a run in one process (the multi-process case is tests/dist/mpi_fault_test.sh).
#include <gtest/gtest.h>

#include "nn/trainer.h"
#include "pipeline/run/train_runner.h"
#include "test_support.h"

namespace brigade::pipeline {
namespace {

TEST(FaultInjection, ParsesStepStageAndAction) {
  const FaultInjection f = parse_fault_injection("3:1:Bi12");
  EXPECT_EQ(f.step, 3);
  EXPECT_EQ(f.stage, 1);
  EXPECT_EQ(f.kind, ActionKind::BackwardInput);
  EXPECT_EQ(f.microbatch, 12);
  EXPECT_EQ(parse_fault_injection("1:0:F0").kind, ActionKind::Forward);
}

TEST(FaultInjection, RefusesMalformedTextNamingTheFlag) {
  for (const char* text : {"3:1", "x:1:B2", "0:1:B2", "3:1:Q2", "3:1:B", "3:1:2"}) {
    const std::string message = testing::message_of<ValueError>([&] { parse_fault_injection(text); });
    EXPECT_NE(message.find("--fail-at '" + std::string(text) + "'"), std::string::npos) << message;
  }
  nn::TrainOptions o;
  o.stages = 2;
  o.microbatches = 2;
  o.fail_at = "1:2:B0";
  EXPECT_NE(
      testing::message_of<ValueError>([&] { check_train_options(o); }).find("stage 2 outside the 2 stages"),
      std::string::npos);
}

TEST(FaultInjection, TheNamedStepFailsAtTheNamedAction) {
  nn::TrainOptions o;
  o.layers = 2;
  o.embd = 16;
  o.heads = 2;
  o.batch = 8;
  o.steps = 3;
  o.eval_every = 0;
  o.eval_iters = 1;
  o.stages = 2;
  o.microbatches = 2;
  o.fail_at = "2:1:B1";
  PipelineRunner runner(o);
  nn::TrainSession session(o, {}, &runner);
  session.step();  // step 1 runs
  try {
    session.step();
    FAIL() << "step 2 should fail";
  } catch (const PipelineError& e) {
    EXPECT_EQ(e.stage(), 1);
    EXPECT_EQ(e.action(), B(1));
    ASSERT_EQ(e.cursors().size(), 2u);
    EXPECT_TRUE(e.cursors()[1].failed);
    EXPECT_FALSE(e.cursors()[0].failed);
    EXPECT_NE(std::string(e.what()).find("injected fault"), std::string::npos);
  }
}

}  // namespace
}  // namespace brigade::pipeline
