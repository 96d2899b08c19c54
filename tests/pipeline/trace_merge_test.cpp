// Merging the ranks' traces (pipeline/run/trace_merge.h), checked on a step run in one process: a stage's
// events written out and merged back land where they were, whatever the writer's clock offset, and the
// traffic per link adds up to the transport's count.
#include "pipeline/run/trace_merge.h"

#include <gtest/gtest.h>

#include "pipeline_fixtures.h"
#include "test_support.h"

namespace brigade::pipeline {
namespace {

StepResult one_step() {
  nn::GPT model(testing::tiny_config(2), /*seed=*/3);
  PipelineConfig pc;
  pc.schedule = "1f1b";
  pc.stages = 2;
  pc.microbatches = 4;
  Pipeline pipe(model, pc);
  const testing::Batch batch = testing::make_batch(8, 8, 20, 5);
  return pipe.forward_backward(batch.ids, batch.targets);
}

TEST(TraceMerge, AStageWrittenOutAndMergedBackLandsWhereItWasWhateverTheWritersClock) {
  const StepResult result = one_step();
  // As if stage 1 ran on a rank whose clock is 2.5 s ahead: its step start reads 2.5 s later there.
  StepResult elsewhere = result;
  const double offset = 2.5;
  elsewhere.origin_ns = result.origin_ns + static_cast<int64_t>(offset * 1e9);
  ExecutionTrace merged = result.trace;
  merged.stages[1].clear();
  merge_stage_events(merged, stage_events_text(elsewhere, 1), result.origin_ns, offset);
  ASSERT_EQ(merged.stages[1].size(), result.trace.stages[1].size());
  for (size_t i = 0; i < merged.stages[1].size(); ++i) {
    const TraceEvent &got = merged.stages[1][i], &want = result.trace.stages[1][i];
    EXPECT_EQ(got.action, want.action);
    EXPECT_NEAR(got.start_ms, want.start_ms, 1e-6);
    EXPECT_NEAR(got.end_ms, want.end_ms, 1e-6);
    EXPECT_EQ(got.bytes, want.bytes);
  }
  EXPECT_NEAR(merged.span_ms(), result.trace.span_ms(), 1e-6);
  EXPECT_NE(
      brigade::testing::message_of<ValueError>([&] { merge_stage_events(merged, "{}", 0, 0.0); }).find("not the text"),
      std::string::npos);
}

TEST(TraceMerge, TrafficPerLinkAddsUpToTheTransportsCount) {
  const StepResult result = one_step();
  const std::vector<LinkTraffic> links = link_traffic(result.trace);
  ASSERT_EQ(links.size(), 2u);  // s0 -> s1 (activations), s1 -> s0 (gradients)
  EXPECT_EQ(links[0].from_stage, 0);
  EXPECT_EQ(links[0].to_stage, 1);
  EXPECT_EQ(links[0].bytes, result.traffic.activation_bytes);
  EXPECT_EQ(links[0].messages, result.traffic.activation_messages);
  EXPECT_EQ(links[1].bytes, result.traffic.gradient_bytes);
  EXPECT_EQ(links[1].messages, 4);
  EXPECT_GT(links[0].in_flight_ms, 0.0);
  EXPECT_GT(links[0].achieved_bytes_per_second(), 0.0);
}

}  // namespace
}  // namespace brigade::pipeline
