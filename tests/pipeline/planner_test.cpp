// The planner (plan/planner.h) on hand-built cost models: the same output every time, never a plan over
// the budget (checked again with the memory model), the bound prunes nothing that the exhaustive search
// ranks, and the known optima: a heavy last layer moves the cut, tight memory chooses recomputation or a
// lower-memory schedule, a slow link chooses fewer stages, D replicas pay the all-reduce.
#include "pipeline/plan/planner.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "pipeline/plan/memory_model.h"
#include "tensor/error.h"
#include "test_support.h"

namespace brigade::pipeline {
namespace {

using ::testing::HasSubstr;

// L layers at one sample per microbatch: forward f_i ms, backward 2 f_i, activations 1 MiB each (output
// 64 KiB), 256 KiB of parameters each.
ModelProfile hand_profile(const std::vector<double>& forward_ms, int64_t activation = 1 << 20) {
  ModelProfile p;
  p.measured = true;
  p.microbatch_size = 1;
  p.repeats = 1;
  for (size_t i = 0; i < forward_ms.size(); ++i) {
    LayerProfile l;
    l.name = "layer" + std::to_string(i);
    l.type = "Hand";
    l.parameter_list = {{l.name + ".weight", 65536, 262144}};
    l.parameters = 65536;
    l.parameter_bytes = 262144;
    l.forward_ms = forward_ms[i];
    l.backward_ms = 2 * forward_ms[i];
    l.activation_bytes = activation;
    l.output_bytes = l.input_bytes = 65536;
    l.split_pending_bytes = activation / 2;
    p.layers.push_back(l);
  }
  return p;
}

PlanRequest request_for(const ModelProfile& base, int devices, int64_t batch) {
  PlanRequest r;
  r.profile = [base](int64_t samples) { return scale_profile(base, samples); };
  r.devices = devices;
  r.batch = batch;
  return r;
}

TEST(Planner, SameOutputEveryTimeAndRankedBestFirst) {
  const PlanRequest r = request_for(hand_profile({1, 1, 1, 1, 1, 1, 1, 3}), 4, 16);
  const Plan a = plan_pipeline(r), b = plan_pipeline(r);
  EXPECT_EQ(a.table(), b.table());
  ASSERT_EQ(a.ranked.size(), 10u);
  for (size_t i = 1; i < a.ranked.size(); ++i) EXPECT_LE(a.ranked[i - 1].step_ms, a.ranked[i].step_ms);
  EXPECT_THAT(a.table(), HasSubstr("(the pick)"));
  EXPECT_THAT(a.table(), HasSubstr("pick: brigade train --stages "));
}

TEST(Planner, TheBoundPrunesNothingTheExhaustiveSearchRanks) {
  PlanRequest r = request_for(hand_profile({1, 2, 1, 1, 2, 1, 1, 3}), 4, 16);
  r.keep = 6;
  const Plan exhaustive = plan_pipeline(r);
  ASSERT_TRUE(exhaustive.exhaustive);
  r.exhaustive_limit = 0;
  const Plan pruned = plan_pipeline(r);
  EXPECT_FALSE(pruned.exhaustive);
  EXPECT_GT(pruned.pruned, 0);
  ASSERT_EQ(pruned.ranked.size(), exhaustive.ranked.size());
  for (size_t i = 0; i < pruned.ranked.size(); ++i) {
    EXPECT_EQ(pruned.ranked[i].flags(), exhaustive.ranked[i].flags()) << i;
    EXPECT_DOUBLE_EQ(pruned.ranked[i].step_ms, exhaustive.ranked[i].step_ms) << i;
  }
}

// Every ranked candidate fits, by the planner's figures and by the memory model asked again.
TEST(Planner, NeverReturnsAPlanOverBudget) {
  const ModelProfile base = hand_profile({1, 1, 1, 1, 1, 1});
  for (int64_t budget : {int64_t(10) << 20, int64_t(14) << 20, int64_t(24) << 20, int64_t(64) << 20}) {
    SCOPED_TRACE(budget);
    PlanRequest r = request_for(base, 2, 8);
    r.device_memory = budget;
    const Plan plan = plan_pipeline(r);
    for (const PlanCandidate& c : plan.ranked) {
      EXPECT_LE(c.max_peak_bytes(), budget) << c.flags();
      MemoryPlan m;
      m.schedule = c.schedule;
      m.stages = c.stages;
      m.microbatches = c.microbatches;
      m.virtual_chunks = c.virtual_chunks;
      m.recompute = c.policy;
      m.layer_recompute = c.layer_recompute;
      m.batch_size = 8;
      m.partition = PartitionMethod::Balance;
      m.balance = c.balance;
      EXPECT_LE(predict_memory(scale_profile(base, c.microbatch_size), m).peak_bytes(), budget) << c.flags();
    }
    for (const PlanCandidate& c : plan.refused) EXPECT_GT(c.max_peak_bytes(), budget) << c.flags();
  }
}

TEST(Planner, AHeavyLastLayerMovesTheCut) {
  PlanRequest r = request_for(hand_profile({1, 1, 1, 1, 1, 1, 1, 1}), 2, 8);
  r.schedules = {"1f1b"};
  r.max_microbatches = 8;
  const Plan even = plan_pipeline(r);
  EXPECT_EQ(even.best().stages, 2);
  EXPECT_EQ(even.best().balance, (std::vector<int>{4, 4}));
  r = request_for(hand_profile({1, 1, 1, 1, 1, 1, 1, 4}), 2, 8);
  r.schedules = {"1f1b"};
  r.max_microbatches = 8;
  const Plan heavy = plan_pipeline(r);
  EXPECT_EQ(heavy.best().stages, 2);
  // Stage costs 5 and 6 (or 6 and 5) instead of 4 and 7: the last stage gives up layers.
  EXPECT_EQ(heavy.best().balance, (std::vector<int>{5, 3}));
}

// Two devices, two samples, 1f1b, at most two microbatches. Without a budget the pick is 2 stages x 2
// microbatches, stage 0 holding both microbatches' activations. Just below that peak one stage cannot
// hold the model's parameters and optimizer state with a microbatch, one microbatch of two samples is
// as large as two of one, and except-last keeps the second microbatch whole while the first is
// replayed: the optimum is to recompute every microbatch on stage 0 only (always, stages f|n).
TEST(Planner, TightMemoryChoosesRecomputation) {
  PlanRequest r = request_for(hand_profile({1, 1, 1, 1}), 2, 2);
  r.schedules = {"1f1b"};
  const Plan free = plan_pipeline(r);
  ASSERT_EQ(free.best().stages, 2);
  ASSERT_EQ(free.best().microbatches, 2);
  ASSERT_EQ(free.best().policy, Recompute::Never);
  r.device_memory = free.best().max_peak_bytes() - (1 << 20);
  const Plan tight = plan_pipeline(r);
  const PlanCandidate& pick = tight.best();
  EXPECT_EQ(pick.stages, 2);
  EXPECT_EQ(pick.policy, Recompute::Always);
  EXPECT_EQ(pick.stage_choices, "fn");
  EXPECT_EQ(pick.recompute_text(), "always:ffnn");
  // R costs a forward on stage 0, placed in the time stage 0 waits for stage 1's gradient: here it hides.
  EXPECT_GE(pick.step_ms, free.best().step_ms);
  EXPECT_GT(pick.recompute_ms, 0.0);
  EXPECT_LE(pick.max_peak_bytes(), r.device_memory);
  EXPECT_THAT(tight.table(), HasSubstr("refused by the memory model"));
}

// The V family on two stages: zb-v (no bubble, 1F1B's memory) against v-half and v-min (a half and a
// third of it, more bubble). Below zb-v's peak the pick keeps to the budget by a lower-memory schedule or
// by recomputing.
TEST(Planner, TightMemoryChoosesALowMemoryScheduleOrRecomputation) {
  PlanRequest r = request_for(hand_profile({1, 1, 1, 1, 1, 1, 1, 1}), 2, 8);
  r.schedules = {"zb-v", "v-half", "v-min"};
  r.max_microbatches = 8;
  const Plan free = plan_pipeline(r);
  ASSERT_EQ(free.best().schedule, "zb-v");
  r.device_memory = free.best().max_peak_bytes() - 1;
  const Plan tight = plan_pipeline(r);
  const PlanCandidate& pick = tight.best();
  EXPECT_LE(pick.max_peak_bytes(), r.device_memory);
  EXPECT_TRUE(pick.schedule != "zb-v" || pick.policy != Recompute::Never) << pick.flags();
  EXPECT_GE(pick.step_ms, free.best().step_ms);
  std::printf("%s", tight.table().c_str());
}

TEST(Planner, ASlowLinkChoosesFewerStages) {
  const ModelProfile base = hand_profile({1, 1, 1, 1, 1, 1, 1, 1});
  PlanRequest r = request_for(base, 4, 16);
  r.schedules = {"1f1b"};
  const int fast = plan_pipeline(r).best().stages;
  r.link = LinkModel::parse("latency=1ms,bandwidth=1MB/s");  // 64 KiB per sample: 66.5 ms a message
  const int slow = plan_pipeline(r).best().stages;
  EXPECT_EQ(fast, 4);
  EXPECT_LT(slow, fast);
}

// Replicas split the batch; their all-reduce is on the link: free, they are as good as stages; slow,
// they lose. (The executor runs one replica today; the planner ranks more when asked.)
TEST(Planner, ReplicasPayTheAllReduceOnTheLink) {
  PlanRequest r = request_for(hand_profile({1, 1, 1, 1}), 2, 8);
  r.schedules = {"1f1b"};
  r.max_replicas = 2;
  const Plan free = plan_pipeline(r);
  EXPECT_EQ(free.best().replicas, 2);  // no bubble, no cost
  EXPECT_EQ(free.best().allreduce_ms, 0.0);
  r.link = LinkModel::parse("latency=100ms");  // a ring over 2 replicas: 2 steps of 100 ms
  const Plan slow = plan_pipeline(r);
  EXPECT_EQ(slow.best().replicas, 1);
  for (const PlanCandidate& c : slow.ranked) {
    if (c.replicas == 2) {
      EXPECT_DOUBLE_EQ(c.allreduce_ms, 200.0) << c.flags();
    }
  }
}

// Priced at B, the split backward makes zb-h1 beat 1F1B on 2 stages (bubble (S - 1) f instead of
// (S - 1)(f + b)); measured 30 % dearer (Bi = Bw = 1.3 f), its busiest stage alone outlasts 1F1B's step.
TEST(Planner, TheSplitBackwardIsPricedAsMeasured) {
  ModelProfile base = hand_profile({1, 1, 1, 1});
  PlanRequest r = request_for(base, 2, 8);
  r.schedules = {"1f1b", "zb-h1"};
  EXPECT_EQ(plan_pipeline(r).best().schedule, "zb-h1");
  for (LayerProfile& l : base.layers) l.backward_input_ms = l.backward_weight_ms = 1.3 * l.forward_ms;
  r = request_for(base, 2, 8);
  r.schedules = {"1f1b", "zb-h1"};
  const Plan plan = plan_pipeline(r);
  const PlanCandidate& pick = plan.best();
  EXPECT_EQ(pick.schedule, "1f1b");
  EXPECT_NEAR(pick.step_ms, (8 + 1) * 6.0, 1e-9);  // 1F1B's (M + S - 1)(f + b), two layers a stage
}

// The executor's actions against the layers timed alone (ModelProfile::action_forward_factor): with
// times linear in the samples, the most microbatches have the smallest bubble and win; when small actions
// run over their layers by a fixed cost (as they do on a CPU: 1 + 0.3 / samples here, 30 % at one sample),
// two samples per microbatch win, and each candidate's step is priced with the factor of its own size (the
// factors lie on the planner's line, factor_fit.h, so they are priced as given).
TEST(Planner, SmallActionsPayTheExecutorsFactor) {
  const ModelProfile base = hand_profile({1, 1, 1, 1});
  PlanRequest r = request_for(base, 2, 16);
  r.schedules = {"1f1b"};
  r.max_replicas = 1;
  const PlanCandidate linear = plan_pipeline(r).best();
  EXPECT_EQ(linear.stages, 2);
  EXPECT_EQ(linear.microbatches, 16);
  r.profile = [base](int64_t samples) {
    ModelProfile p = scale_profile(base, samples);
    p.action_forward_factor = p.action_backward_factor = 1.0 + 0.3 / static_cast<double>(samples);
    return p;
  };
  const Plan plan = plan_pipeline(r);
  EXPECT_EQ(plan.best().microbatches, 8);
  // 1F1B on 2 stages of 2 layers: (M + S - 1)(f + b) with f + b = 6 ms a sample per stage.
  EXPECT_NEAR(plan.best().step_ms, (8 + 1) * 2 * 6.0 * 1.15, 1e-9);
  for (const PlanCandidate& c : plan.ranked) {
    if (c.stages == 2 && c.microbatches == 16) {
      EXPECT_NEAR(c.step_ms, (16 + 1) * 6.0 * 1.3, 1e-9);
    }
  }
  EXPECT_EQ(plan_pipeline(r).table(), plan.table());  // deterministic
}

// The optimizer step follows the pipeline: the whole model's in one process (D = 1), the largest stage's
// share when each replica's ranks step their own stage (D > 1). The bound still prunes nothing.
TEST(Planner, TheOptimizerStepIsAddedAfterThePipeline) {
  PlanRequest r = request_for(hand_profile({1, 1, 1, 1}), 4, 8);
  r.schedules = {"1f1b"};
  r.max_replicas = 2;
  r.keep = 1000;
  r.optimizer_ms = 10.0;
  const Plan plan = plan_pipeline(r);
  bool shared = false;
  for (const PlanCandidate& c : plan.ranked) {
    EXPECT_DOUBLE_EQ(c.step_ms, c.pipeline_ms + c.allreduce_ms + c.tied_ms + c.optimizer_ms) << c.flags();
    const double expected = c.replicas == 1 ? 10.0 : 10.0 * (4 / c.stages) / 4;  // equal layers
    EXPECT_DOUBLE_EQ(c.optimizer_ms, expected) << c.flags();
    shared = shared || (c.replicas == 2 && c.stages == 2);
  }
  EXPECT_TRUE(shared);
  EXPECT_THAT(plan.table(), HasSubstr("optimizer step 10.000 ms"));
  r.keep = 5;
  const Plan exhaustive = plan_pipeline(r);
  r.exhaustive_limit = 0;
  const Plan pruned = plan_pipeline(r);
  ASSERT_EQ(pruned.ranked.size(), exhaustive.ranked.size());
  for (size_t i = 0; i < pruned.ranked.size(); ++i)
    EXPECT_EQ(pruned.ranked[i].flags(), exhaustive.ranked[i].flags()) << i;
}

// Two schedule names that generate the same lists are one program (the table says so); a different cut,
// microbatch count or list is another.
TEST(Planner, TellsTheSameProgramFromAnother) {
  PlanCandidate a;
  a.stages = 2, a.microbatches = 1, a.schedule = "1f1b", a.balance = {2, 2};
  PlanCandidate b = a;
  b.schedule = "gpipe";  // one microbatch: the forward then the backward, either way
  EXPECT_TRUE(a.same_program(b));
  b.microbatches = a.microbatches = 4;
  EXPECT_FALSE(a.same_program(b));  // GPipe's forwards all come first
  PlanCandidate c = a;
  EXPECT_TRUE(a.same_program(c));
  c.balance = {1, 3};
  EXPECT_FALSE(a.same_program(c));
}

TEST(Planner, RefusesABadRequestAndSaysWhenNothingFits) {
  PlanRequest r = request_for(hand_profile({1, 1}), 1, 2);
  r.devices = 0;
  EXPECT_THAT(testing::message_of<ValueError>([&] { plan_pipeline(r); }), HasSubstr("devices must be >= 1"));
  r.devices = 1;
  r.schedules = {"zigzag"};
  EXPECT_THAT(testing::message_of<ValueError>([&] { plan_pipeline(r); }), HasSubstr("zigzag"));
  r.schedules = {};
  r.device_memory = 1 << 10;
  const Plan none = plan_pipeline(r);
  EXPECT_TRUE(none.ranked.empty());
  EXPECT_THAT(testing::message_of<ValueError>([&] { none.best(); }), HasSubstr("nothing fits in 1.00 KiB"));
}

}  // namespace
}  // namespace brigade::pipeline
