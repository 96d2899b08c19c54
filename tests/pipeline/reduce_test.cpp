// The Reduce action of the IR (data parallel): gradient buckets, their placement, the validator's checks,
// the simulator's comm lane and the pictures. The all-reduce itself across processes is tests/dist's.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "pipeline/plan/simulator.h"
#include "pipeline/run/trace.h"
#include "pipeline/schedule/generators.h"
#include "pipeline/schedule/reduce_buckets.h"
#include "pipeline/schedule/render_schedule.h"
#include "pipeline/schedule/validate.h"
#include "test_support.h"

namespace brigade::pipeline {
namespace {

using brigade::testing::message_of;

// Layers [begin, end) of each model chunk: `per` layers each.
std::vector<std::pair<int, int>> even_chunks(int chunks, int per) {
  std::vector<std::pair<int, int>> out;
  for (int k = 0; k < chunks; ++k) out.emplace_back(k * per, (k + 1) * per);
  return out;
}

// Every stage's bytes: `each` for every layer the stage holds.
std::vector<std::vector<int64_t>> layer_bytes(const Schedule& s,
                                              const std::vector<std::pair<int, int>>& chunks, int64_t each) {
  const int layers = chunks.back().second;
  std::vector<std::vector<int64_t>> out(static_cast<size_t>(s.stages), std::vector<int64_t>(layers, 0));
  for (int k = 0; k < s.model_chunks(); ++k)
    for (int l = chunks[k].first; l < chunks[k].second; ++l) out[s.stage_of(k)][l] = each;
  return out;
}

Schedule with_reduces(Schedule s, int per_chunk_layers, int64_t cap, int64_t each = 100) {
  const auto chunks = even_chunks(s.model_chunks(), per_chunk_layers);
  insert_reduces(s, gradient_buckets(s, chunks, layer_bytes(s, chunks, each), cap));
  return s;
}

int index_of(const std::vector<Action>& list, const Action& a) {
  return static_cast<int>(std::find(list.begin(), list.end(), a) - list.begin());
}

TEST(Reduce, BucketsCutAChunkFromItsLastLayerUpToTheCap) {
  const Schedule s = one_f_one_b(2, 4);
  const auto chunks = even_chunks(2, 3);  // stage 0: layers 0-2, stage 1: layers 3-5
  auto bytes = layer_bytes(s, chunks, 100);
  bytes[1][4] = 0;  // a layer without reduced parameters joins its neighbours' bucket
  const auto buckets = gradient_buckets(s, chunks, bytes, 250);
  ASSERT_EQ(buckets.size(), 2u);
  EXPECT_EQ(buckets[0], (std::vector<GradientBucket>{{0, 1, 3, 200}, {0, 0, 1, 100}}));
  EXPECT_EQ(buckets[1], (std::vector<GradientBucket>{{0, 3, 6, 200}}));
  EXPECT_NE(message_of<ValueError>([&] { gradient_buckets(s, chunks, bytes, 0); }).find("at least 1 byte"),
            std::string::npos);
}

TEST(Reduce, GoesRightAfterTheLastGradientWriteAndItsSend) {
  Schedule s = with_reduces(one_f_one_b(2, 4), 2, 150);  // two buckets per stage
  validate(s);
  // Stage 1 (the last): its last B is B3, with nothing to wait for after it but the step.
  const auto& last = s.actions[1];
  EXPECT_EQ(index_of(last, reduce(0, 0)), index_of(last, B(3)) + 2)
      << render_stage_lists(s);  // after send B3
  EXPECT_EQ(index_of(last, reduce(1, 0)), index_of(last, reduce(0, 0)) + 1);
  EXPECT_EQ(last.back(), optimizer_step());
  // zb-h1 defers Bw: stage 1's gradients are final at its last Bw, not at its last Bi.
  Schedule zb = with_reduces(zb_h1(2, 4), 2, 1000);
  validate(zb);
  const auto& list = zb.actions[1];
  EXPECT_EQ(index_of(list, reduce(0, 0)), last_gradient_write(list, 0) + 1);
  EXPECT_EQ(list[last_gradient_write(list, 0)].kind, ActionKind::BackwardWeight);
}

TEST(Reduce, EveryScheduleOfTheCatalogueValidatesWithItsReduces) {
  for (const std::string& name : schedule_names()) {
    const int v = name == "interleaved" || name == "looped-bfs" ? 2 : 1;
    for (Recompute r : {Recompute::Never, Recompute::Always}) {
      Schedule s = with_reduces(make_schedule(name, 2, 4, v, r), 2, 150);
      EXPECT_NO_THROW(validate(s)) << name;
      for (int st = 0; st < s.stages; ++st) {
        const auto n = std::count_if(s.actions[st].begin(), s.actions[st].end(),
                                     [](const Action& a) { return a.kind == ActionKind::Reduce; });
        EXPECT_EQ(n, static_cast<long>(s.buckets[st].size())) << name;
        EXPECT_EQ(n, 2 * s.virtual_chunks) << name;  // 2 layers of 100 bytes per chunk, cap 150
      }
    }
  }
}

TEST(Reduce, TheValidatorRefusesAMisplacedReduceNamingTheStageAndTheAction) {
  const Schedule good = with_reduces(one_f_one_b(2, 4), 2, 1000);
  // Moved in front of stage 1's last B: the gradients are not final yet.
  Schedule early = good;
  auto& list = early.actions[1];
  list.erase(list.begin() + index_of(list, reduce(0, 0)));
  list.insert(list.begin() + index_of(list, B(3)), reduce(0, 0));
  const std::string message = message_of<ScheduleError>([&] { validate(early); });
  EXPECT_NE(message.find("stage 1 step " + std::to_string(index_of(list, reduce(0, 0))) +
                         ": AR0 reduces bucket 0 (layers 2..3) before its gradients are final: B3 (step " +
                         std::to_string(index_of(list, B(3))) + ") still writes them"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("[AR0]"), std::string::npos) << message;  // marked in the grid

  Schedule missing = good;
  std::erase(missing.actions[0], reduce(0, 0));
  EXPECT_NE(message_of<ScheduleError>([&] {
              validate(missing);
            }).find("stage 0 never reduces gradient bucket 0 (layers 0..1 of chunk 0): no AR0 in its list"),
            std::string::npos);

  Schedule twice = good;
  twice.actions[0].insert(twice.actions[0].end() - 1, reduce(0, 0));
  EXPECT_NE(message_of<ScheduleError>([&] { validate(twice); }).find("reduces bucket 0 a second time"),
            std::string::npos);

  Schedule after_step = good;
  std::erase(after_step.actions[1], reduce(0, 0));
  after_step.actions[1].push_back(reduce(0, 0));
  EXPECT_NE(message_of<ScheduleError>([&] {
              validate(after_step);
            }).find(": AR0 comes after the optimizer step (step "),
            std::string::npos);

  Schedule unknown = good;
  unknown.actions[0].insert(unknown.actions[0].end() - 1, reduce(3, 0));
  EXPECT_NE(message_of<ScheduleError>([&] {
              validate(unknown);
            }).find("AR3 reduces bucket 3, but the stage has 1 gradient bucket"),
            std::string::npos);
}

TEST(Reduce, TheSimulatorRunsTheAllReduceOnACommLaneBesideTheCompute) {
  // 1F1B, 2 stages x 4 microbatches, f = 1, b = 2: 15 time units; stage 1 ends its backward at 13.
  const Schedule plain = one_f_one_b(2, 4);
  const Schedule s = with_reduces(plain, 2, 1000);
  Costs costs;
  costs.replicas = 2;
  costs.replica_link = LinkModel{1.0, 0.0};  // latency 1, infinite bandwidth: a ring of 2 takes 2
  const Timeline without = simulate(plain, costs);
  const Timeline t = simulate(s, costs);
  EXPECT_DOUBLE_EQ(without.step_time, 15.0);
  // Stage 0's backward ends the step; its all-reduce (2) is fully exposed. Stage 1's runs 13..15, beside
  // stage 0's last backward; its step waits for it only until 15.
  EXPECT_DOUBLE_EQ(t.step_time, 17.0);
  EXPECT_DOUBLE_EQ(t.stats[0].exposed_reduce, 2.0);
  EXPECT_DOUBLE_EQ(t.stats[1].exposed_reduce, 2.0);
  EXPECT_DOUBLE_EQ(t.stats[0].busy, without.stats[0].busy);  // a Reduce is not compute
  const auto& lane = t.stages[1];
  const auto it = std::find_if(lane.begin(), lane.end(),
                               [](const TimedAction& a) { return a.action.kind == ActionKind::Reduce; });
  ASSERT_NE(it, lane.end());
  EXPECT_DOUBLE_EQ(it->start, 13.0);
  EXPECT_DOUBLE_EQ(it->end, 15.0);
  // Interleaved: chunk 1's buckets are final early, and their all-reduce hides behind chunk 0's backward.
  const Schedule iv = with_reduces(interleaved(2, 4, 2), 1, 1000);
  Costs slow = costs;
  slow.replica_link = LinkModel{0.25, 0.0};
  const Timeline ti = simulate(iv, slow);
  const Timeline ti_plain = simulate(interleaved(2, 4, 2), slow);
  // Each bucket's ring takes 2 x 0.25 = 0.5; exposing both of a stage's would cost 1.
  EXPECT_GT(ti.step_time - ti_plain.step_time, 0.0);
  EXPECT_LT(ti.step_time - ti_plain.step_time, 1.0);
  // Without a replica link the Reduces take no time.
  EXPECT_DOUBLE_EQ(simulate(s).step_time, simulate(plain).step_time);
}

TEST(Reduce, TheGridShowsTheReduces) {
  const Schedule s = with_reduces(one_f_one_b(2, 2), 2, 1000);
  const std::string grid = render_order_grid(s, {}, 0);
  EXPECT_NE(grid.find("AR0"), std::string::npos) << grid;
  EXPECT_EQ(to_string(reduce(2, 1)), "AR2.c1");
  EXPECT_EQ(to_string(reduce(0, 0), true), "AR0.c0");
  EXPECT_FALSE(is_compute(ActionKind::Reduce));
  EXPECT_FALSE(is_transfer(ActionKind::Reduce));
}

TEST(Reduce, TracesDrawTheAllReduceOnACommTrackOfItsStage) {
  ExecutionTrace trace;
  trace.schedule = with_reduces(one_f_one_b(2, 2), 2, 1000);
  trace.devices = {Device::cpu(), Device::cpu()};
  for (int st = 0; st < 2; ++st) {
    TraceEvent b{0, B(1), 1.0, 2.0};
    TraceEvent ar{1, reduce(0, 0), 2.0, 5.0};  // the all-reduce runs on past the backward
    ar.bytes = 400;
    trace.stages.push_back({b, ar});
  }
  const nlohmann::json json = nlohmann::json::parse(chrome_trace_json(trace));
  int slices = 0;
  bool named = false;
  for (const auto& e : json["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "thread_name" && e["tid"] == 1001)
      named = e["args"]["name"].get<std::string>().find("stage 1 comm") == 0;
    if (e["ph"] != "X" || e["cat"] != "reduce") continue;
    ++slices;
    EXPECT_EQ(e["name"], "AR0");
    EXPECT_GE(e["tid"].get<int>(), 1000);  // the stage's comm track, not its compute track
    EXPECT_DOUBLE_EQ(e["dur"].get<double>(), 3000.0);
    EXPECT_EQ(e["args"]["bucket"], 0);
  }
  EXPECT_EQ(slices, 2);
  EXPECT_TRUE(named);
  const std::string svg = render_measured_svg(trace);
  EXPECT_NE(svg.find("AR0 (all-reduce over the replicas): 3.000 ms"), std::string::npos);
  EXPECT_NE(svg.find(">all-reduce<"), std::string::npos) << "the legend";
}

}  // namespace
}  // namespace brigade::pipeline
