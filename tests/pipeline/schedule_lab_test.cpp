// The schedule lab's pictures and figures: each stage's memory curve (the activation ledger over time),
// the messages' arrival times and arrows, per-stage cost factors, the side-by-side picture and the JSON
// that the lab page's simulator is checked against.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "pipeline/plan/render_timeline.h"
#include "pipeline/plan/simulator.h"
#include "pipeline/plan/stage_costs.h"
#include "pipeline/schedule/generators.h"

namespace brigade::pipeline {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

size_t count(const std::string& text, const std::string& part) {
  size_t n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

TEST(MemoryCurve, GPipeRisesWithEachForwardAndFallsWithEachBackward) {
  // S = 2, M = 2, F = 1, B = 2. Stage 0: F0 [0,1], F1 [1,2], B1 [5,7] (once stage 1's B1 is done), B0 [7,9].
  const Timeline t = simulate(make_schedule("gpipe", 2, 2));
  EXPECT_EQ(t.stats[0].memory, (std::vector<MemoryPoint>{{0, 0}, {0, 1}, {1, 2}, {7, 1}, {9, 0}}));
  // Stage 1: F0 [1,2], F1 [2,3], B1 [3,5], B0 [5,7].
  EXPECT_EQ(t.stats[1].memory, (std::vector<MemoryPoint>{{0, 0}, {1, 1}, {2, 2}, {5, 1}, {7, 0}}));
}

TEST(MemoryCurve, ItsHighestPointIsThePeakAndItEndsEmpty) {
  MemoryModel memory;
  memory.uniform = ActivationSizes{1.0, 0.125};
  for (const std::string& name : schedule_names()) {
    for (Recompute recompute : {Recompute::Never, Recompute::Always}) {
      SCOPED_TRACE(name + " recompute " + to_string(recompute));
      const Timeline t = simulate(make_schedule(name, 4, 8, name == "interleaved" ? 2 : 1, recompute),
                                  Costs::parse("f=1,b=2,w=1,t=0.25"), memory);
      for (const StageStats& stats : t.stats) {
        ASSERT_FALSE(stats.memory.empty());
        EXPECT_EQ(stats.memory.front(), (MemoryPoint{0, 0}));
        double highest = 0.0;
        for (size_t k = 1; k < stats.memory.size(); ++k) {
          EXPECT_GE(stats.memory[k].time, stats.memory[k - 1].time);  // in time order
          EXPECT_NE(stats.memory[k].live, stats.memory[k - 1].live);  // a point only where it changes
          highest = std::max(highest, stats.memory[k].live);
        }
        EXPECT_EQ(highest, stats.peak_memory);
        EXPECT_NEAR(stats.memory.back().live, 0.0, 1e-12);  // every activation is freed by the end
      }
    }
  }
}

TEST(Messages, ArriveTheTransferTimeAfterTheirSendAndBeforeTheirRecvEnds) {
  const Timeline t = simulate(make_schedule("1f1b", 4, 8), Costs::parse("t=0.5"));
  int sends = 0;
  for (int s = 0; s < 4; ++s) {
    for (const TimedAction& a : t.stages[s]) {
      const bool send = a.action.kind == ActionKind::SendActivation || a.action.kind == ActionKind::SendGrad;
      if (!send) {
        EXPECT_EQ(a.arrival, -1.0);
        continue;
      }
      ++sends;
      EXPECT_EQ(a.arrival, a.end + 0.5);
      // The Recv on the peer with the same message ends once it is there (or later, if the lane was busy).
      const TransferTag tag = transfer_tag(t.schedule, s, a.action);
      bool found = false;
      for (const TimedAction& r : t.stages[a.action.peer]) {
        const bool recv =
            r.action.kind == ActionKind::RecvActivation || r.action.kind == ActionKind::RecvGrad;
        if (!recv || !(transfer_tag(t.schedule, a.action.peer, r.action) == tag)) continue;
        found = true;
        EXPECT_GE(r.end, a.arrival);
        if (r.end > r.start) {
          EXPECT_EQ(r.end, a.arrival);  // a Recv that waited, waited for exactly this message
        }
      }
      EXPECT_TRUE(found);
    }
  }
  EXPECT_EQ(sends, 2 * 8 * 3);
}

TEST(Messages, TheSvgDrawsAnArrowPerMessageSlantedByTheTransferTime) {
  const Timeline t = simulate(make_schedule("1f1b", 2, 1), Costs::parse("t=0.5"));
  const std::string svg = render_svg(t);
  EXPECT_EQ(count(svg, "marker-end=\"url(#activation-head)\""), 1u);
  EXPECT_EQ(count(svg, "marker-end=\"url(#gradient-head)\""), 1u);
  EXPECT_THAT(svg, HasSubstr("activation of F0 from stage 0 to 1: sent 1, there 1.5"));
  EXPECT_THAT(svg, HasSubstr("gradient of B0 from stage 1 to 0: sent 4.5, there 5"));
  EXPECT_EQ(count(svg, "memory peak 1"), 2u);   // the memory band's note on each stage
  EXPECT_EQ(count(svg, "<path d=\"M56,"), 2u);  // one memory curve per stage
}

TEST(StageCosts, ParseAListOrNamedStages) {
  EXPECT_EQ(parse_stage_factors("1,1,1,2", 4), (std::vector<double>{1, 1, 1, 2}));
  EXPECT_EQ(parse_stage_factors("last=2", 4), (std::vector<double>{1, 1, 1, 2}));
  EXPECT_EQ(parse_stage_factors("s0=1.5,last=3", 3), (std::vector<double>{1.5, 1, 3}));
  auto message = [](const std::string& text, int stages) {
    try {
      parse_stage_factors(text, stages);
    } catch (const ValueError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_THAT(message("1,2", 4), HasSubstr("'1,2' gives 2 factors, the schedule has 4 stages"));
  EXPECT_THAT(message("s4=2", 4), HasSubstr("s4 is not one of the 4 stages (s0 .. s3)"));
  EXPECT_THAT(message("head=2", 4), HasSubstr("'head' names no stage (expected s0 .. s3 or last)"));
  EXPECT_THAT(message("1,x,1", 3), HasSubstr("'x' in '1,x,1' is not a number"));
  EXPECT_THAT(message("last=-1", 2), HasSubstr("stage 1 has factor -1 (need >= 0)"));
}

TEST(StageCosts, AHeavyLastStagePacesThePipeline) {
  // The last stage computes k (f + b) per microbatch, back to back once it has started: it starts after
  // the (S - 1) f of the fill and the gradient of its last backward needs (S - 1) b to drain:
  //   T = (S - 1)(f + b) + M k (f + b), for GPipe and for 1F1B.
  for (const char* name : {"gpipe", "1f1b"}) {
    for (int S : {2, 4}) {
      for (int M : {1, 4, 8}) {
        for (double k : {1.0, 1.5, 2.0}) {
          SCOPED_TRACE(std::string(name) + " S=" + std::to_string(S) + " M=" + std::to_string(M) +
                       " k=" + std::to_string(k));
          const Schedule schedule = make_schedule(name, S, M);
          std::vector<double> factors(static_cast<size_t>(S), 1.0);
          factors.back() = k;
          const Costs costs = scale_stage_costs(Costs::parse("f=1,b=2,w=1"), schedule.layout(), factors);
          const Timeline t = simulate(schedule, costs);
          EXPECT_NEAR(t.step_time, (S - 1) * 3.0 + M * k * 3.0, 1e-12);
          EXPECT_NEAR(t.stats[S - 1].busy, M * k * 3.0, 1e-12);
        }
      }
    }
  }
}

TEST(StageCosts, ScaleEveryChunkOfTheStageIncludingVPlacement) {
  // zb-v holds model chunks s and 2S-1-s on stage s: both get stage s's factor, each 1/2 of the stage.
  const Schedule schedule = make_schedule("zb-v", 2, 4);
  const Costs costs = scale_stage_costs(Costs::parse("f=1,b=2,w=1,r=1"), schedule.layout(), {1.0, 3.0});
  ASSERT_EQ(costs.per_chunk.size(), 4u);
  for (int model_chunk : {0, 3}) EXPECT_EQ(costs.per_chunk[model_chunk].forward, 0.5);  // stage 0
  for (int model_chunk : {1, 2}) {                                                      // stage 1
    EXPECT_EQ(costs.per_chunk[model_chunk].forward, 1.5);
    EXPECT_EQ(costs.per_chunk[model_chunk].backward, 3.0);
    EXPECT_EQ(costs.per_chunk[model_chunk].weight, 1.5);
    EXPECT_EQ(costs.per_chunk[model_chunk].recompute, 1.5);
  }
  EXPECT_THROW(scale_stage_costs(Costs{}, schedule.layout(), {1.0}), ValueError);
}

TEST(Compare, OneSvgWithABlockPerScheduleOnOneTimeScale) {
  std::vector<Timeline> timelines;
  for (const char* name : {"gpipe", "1f1b", "zb-h1"})
    timelines.push_back(simulate(make_schedule(name, 4, 8)));
  const std::string svg = render_compare_svg(timelines);
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_EQ(count(svg, "<svg"), 1u);
  EXPECT_EQ(count(svg, "<g transform=\"translate(0,"), 3u);
  EXPECT_EQ(count(svg, "F forward"), 1u);  // one legend, under the last block
  for (const char* title : {"gpipe: 4 stages", "1f1b: 4 stages", "zb-h1: 4 stages"}) {
    EXPECT_THAT(svg, HasSubstr(title));
  }
  // zb-h1 (step 27) is drawn on gpipe's time scale (33): its axis reaches 30, as it does not alone.
  const std::string last_block = svg.substr(svg.rfind("<g transform"));
  EXPECT_THAT(last_block, HasSubstr(">30</text>"));
  EXPECT_THAT(render_svg(timelines[2]), Not(HasSubstr(">30</text>")));
  // gpipe and 1f1b: F and B per stage and microbatch; zb-h1: F, B on stage 0, F, Bi, Bw on the others.
  EXPECT_EQ(count(svg, "<g><title>"), 2 * (4u * 8 * 2) + (8u * 2 + 3u * 8 * 3));
}

TEST(Json, NumbersReadBackExactlyAndCarryTheCurveAndArrivals) {
  const Timeline t = simulate(make_schedule("interleaved", 4, 8, 3), Costs::parse("f=1,b=2.2,w=0.7,t=0.1"));
  const nlohmann::json j = nlohmann::json::parse(render_json(t));
  EXPECT_EQ(j["step_time"].get<double>(), t.step_time);
  EXPECT_EQ(j["bubble"].get<double>(), t.bubble);
  EXPECT_EQ(j["placement"], "interleaved");
  size_t index = 0;
  for (int s = 0; s < 4; ++s) {
    const auto& curve = j["stage_stats"][s]["memory"];
    ASSERT_EQ(curve.size(), t.stats[s].memory.size());
    for (size_t k = 0; k < curve.size(); ++k) {
      EXPECT_EQ(curve[k][0].get<double>(), t.stats[s].memory[k].time);
      EXPECT_EQ(curve[k][1].get<double>(), t.stats[s].memory[k].live);
    }
    for (const TimedAction& a : t.stages[s]) {
      const auto& action = j["actions"][index++];
      EXPECT_EQ(action["start"].get<double>(), a.start);  // exactly: shortest round-trip digits
      EXPECT_EQ(action["end"].get<double>(), a.end);
      EXPECT_EQ(action.contains("arrival"), a.arrival >= 0);
      if (a.arrival >= 0) {
        EXPECT_EQ(action["arrival"].get<double>(), a.arrival);
      }
    }
  }
  EXPECT_EQ(index, j["actions"].size());
  const Schedule s = make_schedule("1f1b", 2, 2);
  const nlohmann::json scaled =
      nlohmann::json::parse(render_json(simulate(s, scale_stage_costs(Costs{}, s.layout(), {1.0, 2.0}))));
  EXPECT_EQ(scaled["costs"]["per_chunk"].size(), 2u);
  EXPECT_EQ(scaled["costs"]["per_chunk"][1]["backward"].get<double>(), 4.0);
}

}  // namespace
}  // namespace brigade::pipeline
