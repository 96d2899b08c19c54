// Simulator: textbook bubbles to 1e-12 with uniform costs, zero-bubble below 1F1B, the activation counts
// that distinguish GPipe from 1F1B, the recompute memory model, transfer latency, and the pictures.
#include "pipeline/plan/simulator.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "pipeline/plan/render_timeline.h"
#include "pipeline/schedule/generators.h"
#include "pipeline/schedule/validate.h"

namespace brigade::pipeline {
namespace {

using ::testing::HasSubstr;

Costs costs_fb(double f, double b, double w = 0.0) {
  Costs c;
  c.forward = f;
  c.backward = b;
  c.weight = w;
  return c;
}

std::string shape(const std::string& name, int S, int M, int v = 1) {
  return name + " S=" + std::to_string(S) + " M=" + std::to_string(M) + " v=" + std::to_string(v);
}

TEST(Simulator, GPipeAndOneFOneBHaveTheTextbookBubble) {
  // (M + S - 1)(f + b) is the step on every stage, for any f and b: each stage works M (f + b) and waits
  // (S - 1) f while the pipeline fills and (S - 1) b while it drains.
  for (const char* name : {"gpipe", "1f1b"}) {
    for (int S : {1, 2, 4, 8}) {
      for (int M : {1, 4, 8, 32}) {
        for (auto [f, b] : {std::pair{1.0, 1.0}, std::pair{1.0, 2.0}, std::pair{2.0, 3.0}}) {
          SCOPED_TRACE(shape(name, S, M) + " f=" + std::to_string(f) + " b=" + std::to_string(b));
          const Timeline t = simulate(make_schedule(name, S, M), costs_fb(f, b));
          const double expected = (S - 1.0) / (M + S - 1.0);
          EXPECT_NEAR(t.step_time, (M + S - 1) * (f + b), 1e-12);
          EXPECT_NEAR(t.bubble, expected, 1e-12);
          EXPECT_NEAR(t.bubble, textbook_bubble(name, S, M), 1e-12);
          for (const StageStats& stats : t.stats) EXPECT_NEAR(stats.bubble, expected, 1e-12);
        }
      }
    }
  }
}

TEST(Simulator, InterleavedHasBubbleSMinusOneOverVMPlusSMinusOne) {
  // Chunk costs are f/v and b/v; the fill and the drain each take S - 1 chunk steps, so the step is
  // (v M + S - 1)(f + b)/v and the bubble (S - 1)/(v M + S - 1) (Megatron: (S - 1)/(v M) of the ideal time).
  for (int S : {1, 2, 4, 8}) {
    for (int M : {4, 8, 32}) {
      if (M % S != 0) continue;
      for (int v : {1, 2, 3}) {
        for (auto [f, b] : {std::pair{1.0, 1.0}, std::pair{1.0, 2.0}}) {
          SCOPED_TRACE(shape("interleaved", S, M, v) + " b=" + std::to_string(b));
          const Timeline t = simulate(make_schedule("interleaved", S, M, v), costs_fb(f, b));
          const double expected = (S - 1.0) / (v * M + S - 1.0);
          EXPECT_NEAR(t.step_time, (v * M + S - 1) * (f + b) / v, 1e-12);
          EXPECT_NEAR(t.bubble, expected, 1e-12);
          EXPECT_NEAR(t.bubble, textbook_bubble("interleaved", S, M, v), 1e-12);
          for (const StageStats& stats : t.stats) EXPECT_NEAR(stats.bubble, expected, 1e-12);
          if (v == 1) {
            EXPECT_NEAR(t.bubble, simulate(make_schedule("1f1b", S, M), costs_fb(f, b)).bubble, 1e-12);
          }
        }
      }
    }
  }
}

TEST(Simulator, ZeroBubbleH1BeatsOneFOneBWithEqualFBW) {
  const Costs c = costs_fb(1.0, 2.0, 1.0);  // F = Bi = Bw = 1
  for (int S : {2, 4, 8}) {
    for (int M : {1, 4, 8, 32}) {
      SCOPED_TRACE(shape("zb-h1", S, M));
      const Timeline zb = simulate(make_schedule("zb-h1", S, M), c);
      const Timeline base = simulate(make_schedule("1f1b", S, M), c);
      EXPECT_LT(zb.bubble, base.bubble);
      EXPECT_LT(zb.step_time, base.step_time);
      if (M >= S) {  // a full steady state: (S - 1) units of idle per stage instead of 1F1B's 3 (S - 1)
        EXPECT_NEAR(zb.step_time, 3.0 * M + S - 1, 1e-12);
        EXPECT_NEAR(zb.bubble, (S - 1.0) / (3.0 * M + S - 1.0), 1e-12);
      }
      for (int s = 0; s < S; ++s) EXPECT_LE(zb.stats[s].peak_in_flight, S);  // 1F1B's peak memory
    }
  }
}

TEST(Simulator, ActionTotalsSumEachChunksActionsByKind) {
  // Interleaved, 2 stages x 2 chunks, 4 microbatches, uniform stage costs f = 1, b = 2: a chunk's action
  // costs half of those, and each model chunk runs 4 of each.
  const Timeline t = simulate(make_schedule("interleaved", 2, 4, 2), costs_fb(1.0, 2.0, 1.0));
  const ActionTotals totals = action_totals(t);
  ASSERT_EQ(totals.size(), 8u);  // 4 model chunks x {F, B}; no optimizer step, sends or receives
  for (int chunk = 0; chunk < 4; ++chunk) {
    EXPECT_DOUBLE_EQ(totals.at({chunk, ActionKind::Forward}), 4 * 0.5);
    EXPECT_DOUBLE_EQ(totals.at({chunk, ActionKind::Backward}), 4 * 1.0);
  }
  // zb-h1 splits the backward: Bi and Bw per chunk, each its cost times M.
  const ActionTotals split = action_totals(simulate(make_schedule("zb-h1", 2, 3), costs_fb(1.0, 2.0, 1.0)));
  EXPECT_DOUBLE_EQ(split.at({1, ActionKind::BackwardInput}), 3 * 1.0);
  EXPECT_DOUBLE_EQ(split.at({1, ActionKind::BackwardWeight}), 3 * 1.0);
  EXPECT_EQ(split.count({1, ActionKind::Backward}), 0u);
}

TEST(Simulator, GPipeHoldsEveryMicrobatchOneFOneBAtMostSMinusS) {
  for (int S : {1, 2, 4, 8}) {
    for (int M : {1, 4, 8, 32}) {
      SCOPED_TRACE(shape("gpipe/1f1b", S, M));
      const Timeline gpipe = simulate(make_schedule("gpipe", S, M));
      const Timeline ofob = simulate(make_schedule("1f1b", S, M));
      for (int s = 0; s < S; ++s) {
        EXPECT_EQ(gpipe.stats[s].peak_in_flight, M);
        EXPECT_EQ(ofob.stats[s].peak_in_flight, std::min(S - s, M));
        EXPECT_NEAR(ofob.stats[s].peak_memory, std::min(S - s, M), 1e-12);  // one unit per microbatch
      }
    }
  }
}

TEST(Simulator, RecomputeKeepsBoundariesAndOneFullActivation) {
  MemoryModel memory;
  memory.uniform = ActivationSizes{1.0, 0.125};
  const int S = 4, M = 8;
  const Timeline always = simulate(make_schedule("1f1b", S, M, 1, Recompute::Always), {}, memory);
  const Timeline gpipe = simulate(make_schedule("gpipe", S, M, 1, Recompute::Always), {}, memory);
  for (int s = 0; s < S; ++s) {
    // At the peak, R(j) runs: j holds its full activations, the other S - s - 1 in flight their inputs.
    EXPECT_EQ(always.stats[s].peak_full, 1);
    EXPECT_EQ(always.stats[s].peak_in_flight, S - s);
    EXPECT_NEAR(always.stats[s].peak_memory, 1.0 + 0.125 * (S - s - 1), 1e-12);
    EXPECT_NEAR(gpipe.stats[s].peak_memory, 1.0 + 0.125 * (M - 1), 1e-12);
  }
  // except-last: microbatch M-1 keeps its activations from F to B, beside one recomputed microbatch.
  const Timeline except = simulate(make_schedule("gpipe", S, M, 1, Recompute::ExceptLast), {}, memory);
  EXPECT_EQ(except.stats[0].peak_full, 1);  // GPipe's B(M-1) comes first: its activations are gone before R
  EXPECT_NEAR(except.stats[0].peak_memory, 1.0 + 0.125 * (M - 1), 1e-12);
}

TEST(Simulator, RecomputeFillsTheWaitForTheGradient) {
  // GPipe, stage 0: after its last forward it waits (S - 1)(f + b) for the first gradient; R runs then.
  const int S = 4, M = 4;
  const Timeline t = simulate(make_schedule("gpipe", S, M, 1, Recompute::Always), costs_fb(1.0, 2.0));
  const auto& s0 = t.stages[0];
  const auto r = std::find_if(s0.begin(), s0.end(),
                              [](const TimedAction& a) { return a.action.kind == ActionKind::Recompute; });
  const auto recv = std::find_if(s0.begin(), s0.end(),
                                 [](const TimedAction& a) { return a.action.kind == ActionKind::RecvGrad; });
  ASSERT_NE(r, s0.end());
  ASSERT_NE(recv, s0.end());
  EXPECT_EQ(r->action, R(M - 1));
  EXPECT_NEAR(r->start, M * 1.0, 1e-12);  // right after F(M-1)
  EXPECT_LT(r->end, recv->end);           // done before the gradient arrives
  // The last stage cannot hide its R: every R there adds f to the step.
  const Timeline plain = simulate(make_schedule("gpipe", S, M), costs_fb(1.0, 2.0));
  EXPECT_GT(t.step_time, plain.step_time);
}

TEST(Simulator, TransferLatencyAddsTwoHopsPerBoundaryToGPipe) {
  Costs c = costs_fb(1.0, 2.0);
  c.transfer = 0.25;
  for (int S : {2, 4}) {
    const int M = 8;
    const Timeline t = simulate(make_schedule("gpipe", S, M), c);
    EXPECT_NEAR(t.step_time, (M + S - 1) * 3.0 + 2 * (S - 1) * 0.25, 1e-12);
  }
}

TEST(Simulator, MeasuredPerChunkCostsAndStepCost) {
  // Stage 1 twice as slow: the slow stage paces the pipeline, the fast one idles.
  Costs c;
  c.per_chunk = {ChunkCosts{1.0, 2.0, 1.0, 1.0}, ChunkCosts{2.0, 4.0, 2.0, 2.0}};
  c.step = 0.5;
  const Timeline t = simulate(make_schedule("gpipe", 2, 4), c);
  // Forwards of stage 1 end at 1 + 4 * 2 = 9, its backwards at 9 + 4 * 4 = 25, stage 0's last B at 25 + 2,
  // then each stage's step.
  EXPECT_NEAR(t.step_time, 27.5, 1e-12);
  EXPECT_NEAR(t.stats[1].busy, 24.5, 1e-12);
  EXPECT_NEAR(t.stats[0].busy, 12.5, 1e-12);
  c.per_chunk.pop_back();
  EXPECT_THROW(simulate(make_schedule("gpipe", 2, 4), c), ValueError);
}

// A measured Bi is used as it is (not B - Bw), so a split that costs more than B lengthens the step; a
// chunk whose Bw exceeds its B (measured twice, noise) is accepted when Bi is given.
TEST(Simulator, AMeasuredBackwardInputIsUsedAsItIs) {
  Costs c;
  c.per_chunk = {ChunkCosts{1.0, 2.0, 1.0, 1.0}, ChunkCosts{1.0, 2.0, 1.0, 1.0}};
  const Schedule zb = make_schedule("zb-h1", 2, 4);
  const Timeline derived = simulate(zb, c);
  for (ChunkCosts& chunk : c.per_chunk) chunk.input = 1.3;  // Bi + Bw = 2.3: 15 % more than B
  const Timeline measured = simulate(zb, c);
  for (const TimedAction& a : measured.stages[1]) {
    if (a.action.kind == ActionKind::BackwardInput) {
      EXPECT_NEAR(a.end - a.start, 1.3, 1e-12);
    }
  }
  // Stage 1 runs F, Bi, Bw back to back after its first input: 0.3 more per microbatch.
  EXPECT_NEAR(measured.stats[1].busy - derived.stats[1].busy, 4 * 0.3, 1e-12);
  EXPECT_GT(measured.step_time, derived.step_time);
  // B is unchanged for schedules without the split: 1F1B's (M + S - 1)(f + b).
  EXPECT_NEAR(simulate(make_schedule("1f1b", 2, 4), c).step_time, 5 * 3.0, 1e-12);
  c.per_chunk[0].weight = 2.5;  // above B: fine with Bi given, refused without
  EXPECT_NO_THROW(simulate(zb, c));
  c.per_chunk[0].input = -1.0;
  EXPECT_THROW(simulate(zb, c), ValueError);
}

// A Bw that does not follow its own Bi on its stage costs ChunkCosts::weight_deferred; one right after its
// Bi costs weight. ZB-H1 on 2 stages defers every Bw of the last stage by a microbatch (stage 0 runs whole
// Bs); ZB-V on one stage runs each Bw right after its Bi.
TEST(Simulator, ADeferredWeightGradientCostsItsOwnPrice) {
  Costs c;
  c.per_chunk = {ChunkCosts{1.0, 2.0, 1.0, 1.0}, ChunkCosts{1.0, 2.0, 1.0, 1.0}};
  for (ChunkCosts& chunk : c.per_chunk) chunk.weight_deferred = 1.25;
  int deferred = 0, adjacent = 0;
  for (const Schedule& s : {make_schedule("zb-h1", 2, 4), make_schedule("zb-v", 1, 4)}) {
    const Timeline t = simulate(s, c);
    for (int st = 0; st < s.stages; ++st) {
      const TimedAction* before = nullptr;
      for (const TimedAction& a : t.stages[st]) {
        if (a.action.kind == ActionKind::BackwardWeight) {
          const bool follows = before != nullptr && before->action.kind == ActionKind::BackwardInput &&
                               before->action.microbatch == a.action.microbatch &&
                               before->action.chunk == a.action.chunk;
          EXPECT_NEAR(a.end - a.start, follows ? 1.0 : 1.25, 1e-12)
              << s.name << " stage " << st << " Bw" << a.action.microbatch << "." << a.action.chunk;
          ++(follows ? adjacent : deferred);
        }
        if (is_compute(a.action.kind)) before = &a;
      }
    }
  }
  EXPECT_EQ(deferred, 4);  // zb-h1's last stage
  EXPECT_EQ(adjacent, 8);  // zb-v's two chunks
  // Priced alike (negative: weight), zb-h1's last stage is 4 x 0.25 less busy.
  const Schedule zb = make_schedule("zb-h1", 2, 4);
  Costs plain = c;
  for (ChunkCosts& chunk : plain.per_chunk) chunk.weight_deferred = -1.0;
  EXPECT_NEAR(simulate(zb, c).stats[1].busy - simulate(zb, plain).stats[1].busy, 4 * 0.25, 1e-12);
  // Below weight it is refused.
  c.per_chunk[1].weight_deferred = 0.5;
  EXPECT_THROW(simulate(zb, c), ValueError);
}

// A microbatch's first backward runs cold (ChunkCosts::cold) after another microbatch's forward or
// recompute on its stage, warm right after its own.
TEST(Simulator, ABackwardAfterOtherMicrobatchesForwardsRunsCold) {
  Costs c;
  c.per_chunk = {ChunkCosts{1.0, 2.0, 1.0, 1.0}};
  c.per_chunk[0].cold = 1.5;
  // One stage: 1F1B runs F0 B0 F1 B1 F2 B2 (every B warm), GPipe F0 F1 F2 B2 B1 B0 (B1 and B0 cold).
  EXPECT_NEAR(simulate(make_schedule("1f1b", 1, 3), c).step_time, 3 * 1.0 + 3 * 2.0, 1e-12);
  EXPECT_NEAR(simulate(make_schedule("gpipe", 1, 3), c).step_time, 3 * 1.0 + 2.0 + 2 * 3.0, 1e-12);
  // A recompute right before each backward brings its activations back: warm again, R paid instead.
  EXPECT_NEAR(simulate(make_schedule("gpipe", 1, 3, 1, Recompute::Always), c).step_time,
              3 * 1.0 + 3 * 1.0 + 3 * 2.0, 1e-12);
  // An R that costs nothing (a stage that keeps its activations under a recompute schedule) brings nothing
  // back: B2 follows F2 (warm), B1 and B0 stay cold.
  Costs kept = c;
  kept.per_chunk[0].recompute = 0.0;
  EXPECT_NEAR(simulate(make_schedule("gpipe", 1, 3, 1, Recompute::Always), kept).step_time,
              3 * 1.0 + 2.0 + 2 * 3.0, 1e-12);
  // Two stages of 1F1B over 4 microbatches: stage 0 runs F0 F1 B0 F2 B1 F3 B2 B3, its first three
  // backwards cold; the last stage runs each backward right after its forward.
  Costs two = c;
  two.per_chunk.push_back(c.per_chunk[0]);
  const Timeline t = simulate(make_schedule("1f1b", 2, 4), two);
  EXPECT_NEAR(t.stats[0].busy, 4 * 1.0 + 3 * 3.0 + 2.0, 1e-12);
  EXPECT_NEAR(t.stats[1].busy, 4 * 1.0 + 4 * 2.0, 1e-12);
  // Split backwards: the cold read is Bi's; where Bi has nothing to do (the first chunk's: input 0), Bw's.
  ChunkCosts split = c.per_chunk[0];
  split.input = 1.0;
  const Action f1 = F(1);
  EXPECT_TRUE(is_cold_backward(Bi(0), &f1, split));
  EXPECT_FALSE(is_cold_backward(Bw(0), &f1, split));
  EXPECT_FALSE(is_cold_backward(Bi(1), &f1, split));
  EXPECT_FALSE(is_cold_backward(Bi(0), nullptr, split));
  split.input = 0.0;
  EXPECT_TRUE(is_cold_backward(Bw(0), &f1, split));
  EXPECT_FALSE(is_cold_backward(Bi(0), &f1, split));
  // Below 1 it is refused.
  c.per_chunk[0].cold = 0.9;
  EXPECT_THROW(simulate(make_schedule("1f1b", 1, 3), c), ValueError);
}

TEST(Simulator, CostsParseAndRefuseNonsense) {
  const Costs c = Costs::parse("f=1,b=3,w=1.5,t=0.25,r=0.5,step=2");
  EXPECT_EQ(c.forward, 1.0);
  EXPECT_EQ(c.backward, 3.0);
  EXPECT_EQ(c.weight, 1.5);
  EXPECT_EQ(c.transfer, 0.25);
  EXPECT_EQ(c.recompute, 0.5);
  EXPECT_EQ(c.step, 2.0);
  try {
    Costs::parse("f=1,x=2");
    FAIL() << "expected ValueError";
  } catch (const ValueError& e) {
    EXPECT_THAT(std::string(e.what()), HasSubstr("unknown key 'x' (valid: f|forward"));
  }
  EXPECT_THROW(Costs::parse("f=fast"), ValueError);
  EXPECT_THROW(Costs::parse("f"), ValueError);
  EXPECT_THROW(simulate(make_schedule("1f1b", 2, 2), Costs::parse("b=1,w=2")), ValueError);
  EXPECT_THROW(simulate(make_schedule("1f1b", 2, 2), Costs::parse("f=-1")), ValueError);
  EXPECT_NEAR(MemoryModel::parse("full=2,boundary=0.5").uniform.boundary, 0.5, 0.0);
  EXPECT_THROW(MemoryModel::parse("bytes=1"), ValueError);
}

TEST(Simulator, RefusesAnInvalidSchedule) {
  Schedule s = make_schedule("1f1b", 2, 2);
  s.actions[1].erase(s.actions[1].begin());  // drop "recv F0 <-s0"
  EXPECT_THROW(simulate(s), ScheduleError);
}

TEST(Render, TimeGridDrawsDurationsAndIdle) {
  const Timeline t = simulate(make_schedule("gpipe", 2, 2), costs_fb(1.0, 2.0));
  EXPECT_EQ(render_time_grid(t),
            "t  | 0              5\n"
            "s0 | F0 F1  .  .  . B1--- B0---\n"
            "s1 |  . F0 F1 B1--- B0---  .  .\n");
  const Timeline zb = simulate(make_schedule("zb-h1", 2, 2), costs_fb(1.0, 2.0, 1.0));
  EXPECT_THAT(render_time_grid(zb), HasSubstr("s1 |  .  F0  Bi0 F1  Bi1 Bw0 Bw1"));
  const Timeline inter = simulate(make_schedule("interleaved", 2, 2, 2), costs_fb(1.0, 1.0));
  EXPECT_THAT(render_time_grid(inter), HasSubstr("s0 | F0a F1a F0b F1b"));
}

TEST(Render, SvgAndJsonDescribeEveryAction) {
  const Timeline t = simulate(make_schedule("1f1b", 4, 8, 1, Recompute::Always));
  const std::string svg = render_svg(t);
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_THAT(svg, HasSubstr("</svg>"));
  EXPECT_THAT(svg, HasSubstr("stage 3"));
  EXPECT_THAT(svg, HasSubstr("R recompute"));
  size_t boxes = 0;
  for (size_t at = svg.find("<g><title>"); at != std::string::npos; at = svg.find("<g><title>", at + 1))
    ++boxes;
  EXPECT_EQ(boxes, 4u * 3 * 8);  // F, R and B of 8 microbatches on 4 stages (the step costs nothing)

  const std::string json = render_json(t);
  EXPECT_THAT(json, HasSubstr("\"schedule\": \"1f1b\""));
  EXPECT_THAT(json, HasSubstr("\"recompute\": \"always\""));
  EXPECT_THAT(json, HasSubstr("\"step_time\": " + std::to_string(static_cast<int>(t.step_time))));
  size_t actions = 0, expected = 0;
  for (size_t at = json.find("\"kind\""); at != std::string::npos; at = json.find("\"kind\"", at + 1))
    ++actions;
  for (const auto& list : t.schedule.actions) expected += list.size();
  EXPECT_EQ(actions, expected);
  EXPECT_EQ(std::count(json.begin(), json.end(), '{'), std::count(json.begin(), json.end(), '}'));
}

}  // namespace
}  // namespace brigade::pipeline
