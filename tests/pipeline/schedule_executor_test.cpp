// The schedules added to the first four (zb-h2, zb-v, v-half, v-min, dualpipev, looped-bfs) run on the
// executor and match the unpipelined step to 1e-5: a few shapes each here, every policy among them; the
// whole S x M x recompute grid is schedule_executor_slow_test.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "pipeline/run/executor.h"
#include "pipeline/schedule/generators.h"
#include "pipeline_fixtures.h"

namespace brigade::pipeline {
namespace {

struct Shape {
  int stages, microbatches;
  Recompute recompute;
  int virtual_chunks = 1;
};

void expect_equivalent(const std::string& schedule, const Shape& shape) {
  const int v = chunks_per_stage(schedule, shape.virtual_chunks);
  // The batch has 8 sequences: M must divide it (dualpipev's 2S = 6 for S = 3 becomes 8).
  int M = std::max(shape.microbatches, smallest_microbatches(schedule, shape.stages));
  while (8 % M != 0) ++M;
  SCOPED_TRACE(schedule + " S=" + std::to_string(shape.stages) + " M=" + std::to_string(M) +
               " v=" + std::to_string(v) + " recompute " + to_string(shape.recompute));
  // Every chunk needs a layer: the GPT has its blocks plus the embedding and the head.
  const int64_t blocks = std::max(4, shape.stages * v - 2);
  testing::expect_matches_unpipelined(
      testing::equivalence_config(schedule, shape.stages, M, shape.recompute, shape.virtual_chunks), blocks);
}

const std::vector<Shape>& quick_shapes() {
  static const std::vector<Shape> shapes = {
      {1, 2, Recompute::Never}, {2, 4, Recompute::ExceptLast}, {3, 4, Recompute::Always},
      {4, 8, Recompute::Never}, {4, 8, Recompute::ExceptLast},
  };
  return shapes;
}

void quick_sweep(const std::string& schedule) {
  testing::Watchdog watchdog(120, schedule + " equivalence");
  for (const Shape& shape : quick_shapes()) {
    expect_equivalent(schedule, shape);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

TEST(ScheduleEquivalence, ZeroBubbleH2MatchesTheUnpipelinedStep) {
  quick_sweep("zb-h2");
}
TEST(ScheduleEquivalence, ZeroBubbleVMatchesTheUnpipelinedStep) {
  quick_sweep("zb-v");
}
TEST(ScheduleEquivalence, VHalfMatchesTheUnpipelinedStep) {
  quick_sweep("v-half");
}
TEST(ScheduleEquivalence, VMinMatchesTheUnpipelinedStep) {
  quick_sweep("v-min");
}
TEST(ScheduleEquivalence, DualPipeVMatchesTheUnpipelinedStep) {
  quick_sweep("dualpipev");
}
TEST(ScheduleEquivalence, LoopedBfsMatchesTheUnpipelinedStep) {
  testing::Watchdog watchdog(120, "looped-bfs equivalence");
  for (const Shape& shape : {Shape{1, 2, Recompute::Never, 3}, Shape{2, 4, Recompute::ExceptLast, 2},
                             Shape{3, 4, Recompute::Always, 2}, Shape{4, 8, Recompute::Never, 2}}) {
    expect_equivalent("looped-bfs", shape);
  }
}

// Any layer count: interleaved and V schedules cut the model into S x v chunks of at least one layer
// whatever L is, the first chunks taking the extra layers, and still match the unpipelined step.
TEST(ScheduleEquivalence, ChunksOfUnequalLayerCountsMatchTheUnpipelinedStep) {
  testing::Watchdog watchdog(120, "unequal chunks");
  struct Case {
    std::string schedule;
    int stages, virtual_chunks;
    int64_t blocks;
  };
  // 4 x 2 chunks over 10 layers (2, 2, 1, ...); 3 x 2 over 7; 2 x 3 over 7 for looped-bfs.
  for (const Case& c : {Case{"interleaved", 4, 2, 8}, Case{"zb-v", 3, 1, 5}, Case{"v-min", 2, 1, 3},
                        Case{"looped-bfs", 2, 3, 5}, Case{"dualpipev", 3, 1, 5}}) {
    SCOPED_TRACE(c.schedule);
    const int M = c.schedule == "dualpipev" ? 8 : 4;
    testing::expect_matches_unpipelined(
        testing::equivalence_config(c.schedule, c.stages, M, Recompute::ExceptLast, c.virtual_chunks),
        c.blocks);
  }
  nn::GPT model(testing::tiny_config(8), 1);
  PipelineConfig pc;
  pc.schedule = "interleaved";
  pc.stages = 4;
  pc.microbatches = 4;
  pc.virtual_chunks = 2;
  Pipeline pipe(model, pc);
  EXPECT_EQ(pipe.chunk_layers(0, 0), (std::pair<int, int>{0, 2}));   // model chunk 0: 2 layers
  EXPECT_EQ(pipe.chunk_layers(1, 0), (std::pair<int, int>{2, 4}));   // model chunk 1: 2 layers
  EXPECT_EQ(pipe.chunk_layers(3, 1), (std::pair<int, int>{9, 10}));  // model chunk 7: 1 layer
}

// A V schedule computes the loss on stage 0, beside the embedding, and holds the tied embedding matrix on
// that one stage: nothing is summed across stages, and the losses come from stage 0.
TEST(ScheduleEquivalence, AVScheduleHasTheLossAndTheTiedWeightOnStageZero) {
  nn::GPT model(testing::tiny_config(6), 1);
  PipelineConfig pc;
  pc.schedule = "zb-v";
  pc.stages = 4;
  pc.microbatches = 4;
  Pipeline pipe(model, pc);
  EXPECT_EQ(pipe.schedule().virtual_chunks, 2);
  EXPECT_EQ(pipe.chunk_layers(0, 0).first, 0);       // the embedding
  EXPECT_EQ(pipe.chunk_layers(0, 1).second, 8);      // ... and the head
  EXPECT_TRUE(pipe.tied_parameter_names().empty());  // both on stage 0
  const testing::Batch batch = testing::make_batch(8, 8, 20, 2);
  const StepResult r = pipe.forward_backward(batch.ids, batch.targets);
  EXPECT_EQ(r.microbatch_losses.size(), 4u);
  // A microbatch crosses 6 of the 7 chunk boundaries (not the turn, 3 -> 4 on stage 3), each way.
  EXPECT_EQ(r.traffic.activation_messages, 6 * 4);
  EXPECT_EQ(r.traffic.gradient_messages, 6 * 4);
}

}  // namespace
}  // namespace brigade::pipeline
