// The published bubble and memory figures of the schedules, reproduced in the simulator.
//
// The setting of the zero-bubble papers: F = Bi = Bw (here --costs f=1,b=2,w=1 per stage, each chunk
// costing 1/v of it), no transfer time, no optimizer step. Their bubble is the idle time inside a stage's
// span (StageStats::span - busy, the papers' "1 - work / longest stage time"); 1F1B's is
// (p - 1)(F + B + W) = 3 (S - 1) on stage 0, a bubble fraction of B = (S - 1) / (M + S - 1) of the step.
// Memory is the peak of activations on the worst stage, in units of one stage's activations for one
// microbatch (1F1B: S, on stage 0).
//
// What is exact and what is "about" is said in each test: a formula the simulator must meet to 1e-9, or a
// range around a published approximation.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "pipeline/plan/simulator.h"
#include "pipeline/schedule/generators.h"
#include "pipeline/schedule/zero_bubble.h"

namespace brigade::pipeline {
namespace {

constexpr double kExact = 1e-9;

struct Figures {
  double idle = 0.0;    // the largest idle time inside a stage's span
  double memory = 0.0;  // the largest peak of activations
  double step = 0.0;
  double busy = 0.0;  // of stage 0 (every stage does the same work)
};

Figures figures(const Schedule& schedule, const Costs& costs = {}) {
  const Timeline t = simulate(schedule, costs);
  Figures f;
  f.step = t.step_time;
  f.busy = t.stats.front().busy;
  for (const StageStats& s : t.stats) {
    f.idle = std::max(f.idle, s.span - s.busy);
    f.memory = std::max(f.memory, s.peak_memory);
  }
  return f;
}

Figures figures(const std::string& name, int S, int M) {
  return figures(make_schedule(name, S, M));
}

// 1F1B: idle (S - 1)(F + B + W) = 3 (S - 1), exact, on stage 0; bubble fraction B; memory S.
TEST(PublishedFigures, OneFOneBIdlesThreeSMinusOneUnitsAtSMicrobatches) {
  for (int S : {2, 4, 6, 8}) {
    for (int M : {S, 2 * S, 4 * S}) {
      SCOPED_TRACE("S=" + std::to_string(S) + " M=" + std::to_string(M));
      const Figures f = figures("1f1b", S, M);
      EXPECT_NEAR(f.idle, 3.0 * (S - 1), kExact);
      EXPECT_NEAR((f.step - f.busy) / f.step, (S - 1.0) / (M + S - 1.0), kExact);
      EXPECT_NEAR(f.memory, S, kExact);
    }
  }
}

// ZB-H1: idle (S - 1)(F + Bi - Bw) = S - 1, exactly a third of 1F1B's, at 1F1B's memory S.
TEST(PublishedFigures, ZeroBubbleH1IdlesAThirdOfOneFOneB) {
  for (int S : {2, 4, 6, 8}) {
    for (int M : {S, 2 * S, 4 * S}) {
      SCOPED_TRACE("S=" + std::to_string(S) + " M=" + std::to_string(M));
      const Figures f = figures("zb-h1", S, M);
      EXPECT_NEAR(f.idle, figures("1f1b", S, M).idle / 3.0, kExact);
      EXPECT_NEAR(f.memory, S, kExact);
    }
  }
}

// ZB-H2: no idle time inside any stage's span (exact, for M >= 2S - 1) at 2S - 1 microbatches of
// activations, "2x" 1F1B's S (exact: 2S - 1). The step keeps the pipeline's skew: S - 1 forwards (exact).
// 2S - 1 is the smallest cap of the rules that leaves no hole: with 2S - 2 at least one unit remains.
TEST(PublishedFigures, ZeroBubbleH2HasNoHoleAtTwiceTheMemory) {
  for (int S : {2, 3, 4, 6, 8}) {
    for (int M : {2 * S - 1, 2 * S, 4 * S}) {
      SCOPED_TRACE("S=" + std::to_string(S) + " M=" + std::to_string(M));
      const Figures f = figures("zb-h2", S, M);
      EXPECT_NEAR(f.idle, 0.0, kExact);
      EXPECT_NEAR(f.memory, 2.0 * S - 1.0, kExact);
      EXPECT_NEAR(f.step - f.busy, S - 1.0, kExact);
      EXPECT_GE(figures(capped_zero_bubble("tighter", S, M, 2 * S - 2)).idle, 1.0 - kExact);
    }
  }
}

// ZB-V: no idle time inside any stage's span (exact, for M >= 2S - 1) at 1F1B's memory, S microbatches'
// worth of a stage (exact), with twice 1F1B's messages.
TEST(PublishedFigures, ZeroBubbleVHasNoHoleAtOneFOneBsMemory) {
  for (int S : {2, 3, 4, 6, 8}) {
    for (int M : {2 * S - 1, 2 * S, 4 * S}) {
      SCOPED_TRACE("S=" + std::to_string(S) + " M=" + std::to_string(M));
      const Figures f = figures("zb-v", S, M);
      EXPECT_NEAR(f.idle, 0.0, kExact);
      EXPECT_NEAR(f.memory, S, kExact);
      // The skew left in the step: half a forward (one chunk) per hop.
      EXPECT_NEAR(f.step - f.busy, (S - 1) / 2.0, kExact);
    }
  }
}

// A building-block schedule: its memory exactly `memory(S)`, its idle time within [low, high] of 1F1B's.
void expect_block_figures(const std::string& name, int (*memory)(int), double low, double high) {
  for (int S : {4, 5, 6, 8}) {
    for (int M : {2 * S, 4 * S}) {
      SCOPED_TRACE(name + " S=" + std::to_string(S) + " M=" + std::to_string(M));
      const Figures f = figures(name, S, M);
      EXPECT_NEAR(f.memory, memory(S), kExact);
      const double ratio = f.idle / figures("1f1b", S, M).idle;
      EXPECT_GE(ratio, low);
      EXPECT_LE(ratio, high);
    }
  }
}

// V-Half: (S + 2) / 2 microbatches' worth of activations, rounded down (exact: the controllable-memory
// paper's table), and about half of 1F1B's idle time: the squeezed block leaves 0.56..0.58 of it here
// (the paper's own reordering of the warm-up gets nearer to 1/2); the test asks for 0.45..0.6.
TEST(PublishedFigures, VHalfIdlesAboutHalfOfOneFOneBAtHalfItsMemory) {
  expect_block_figures(
      "v-half", [](int S) { return (S + 2) / 2; }, 0.45, 0.6);
}

// V-Min: (S + 4) / 3 microbatches' worth, rounded down (exact: the paper's table), and about two thirds of
// 1F1B's idle time (the paper: 2B/3 + O(n)): 0.61..0.64 here; the test asks for 0.55..0.72.
TEST(PublishedFigures, VMinIdlesAboutTwoThirdsOfOneFOneBAtAThirdOfItsMemory) {
  expect_block_figures(
      "v-min", [](int S) { return (S + 4) / 3; }, 0.55, 0.72);
}

// DualPipeV, the DualPipe table's row (PP = 2S chunks on S devices): activations PP + 1 chunks per device,
// S + 1/2 stages' worth (exact). Bubble: the table's (PP/2 - 1)(F&B + B - 3W) counts an overlapped pair as
// one unit; brigade runs the pair as F then B, so the F half can start before the B half's gradient is
// there. With F = Bi = Bw each stage idles exactly S - 1 chunk forwards, half the table's figure, and with
// other costs it stays at or below it (F&B = F + B, chunk costs F = f/2, B = b/2, W = w/2).
TEST(PublishedFigures, DualPipeVHoldsPPPlusOneChunksAndIdlesAtMostTheTablesBubble) {
  for (int S : {2, 3, 4, 6, 8}) {
    for (int M : {2 * S, 2 * S + 4, 4 * S}) {
      SCOPED_TRACE("S=" + std::to_string(S) + " M=" + std::to_string(M));
      const Schedule s = make_schedule("dualpipev", S, M);
      const Figures f = figures(s);
      EXPECT_NEAR(f.memory, S + 0.5, kExact);
      EXPECT_NEAR(f.step - f.busy, (S - 1) * 0.5, kExact);
      for (auto [fwd, bwd, w] :
           {std::tuple{1.0, 2.0, 1.0}, {1.0, 2.0, 0.5}, {1.0, 3.0, 1.0}, {2.0, 2.0, 1.0}}) {
        Costs costs;
        costs.forward = fwd;
        costs.backward = bwd;
        costs.weight = w;
        const Figures g = figures(s, costs);
        const double F = fwd / 2, B = bwd / 2, W = w / 2;
        EXPECT_LE(g.step - g.busy, (S - 1) * ((F + B) + B - 3 * W) + kExact)
            << "f=" << fwd << " b=" << bwd << " w=" << w;
      }
    }
  }
}

// LoopedBFS: GPipe over S v thin stages, bubble fraction (S - 1) / (v M + S - 1) for M >= S (exact), every
// chunk activation held at the peak: v M chunks, M stages' worth.
TEST(PublishedFigures, LoopedBfsHasTheInterleavedBubbleAtGPipesMemory) {
  for (int S : {2, 4}) {
    for (int v : {1, 2, 3}) {
      for (int M : {S, 2 * S}) {
        SCOPED_TRACE("S=" + std::to_string(S) + " v=" + std::to_string(v) + " M=" + std::to_string(M));
        const Figures f = figures(make_schedule("looped-bfs", S, M, v));
        EXPECT_NEAR((f.step - f.busy) / f.step, (S - 1.0) / (v * M + S - 1.0), kExact);
        EXPECT_NEAR(f.memory, M, kExact);
      }
    }
  }
}

}  // namespace
}  // namespace brigade::pipeline
