// The whole grid for the schedules added to the first four (label "slow"): every S in 1..4, every M that
// divides the batch and that the schedule takes, every recompute policy, and for looped-bfs v = 2 and 3,
// each matching the unpipelined step to 1e-5 (executor_test.cpp runs the same grid for the first four).
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "pipeline/run/executor.h"
#include "pipeline/schedule/generators.h"
#include "pipeline_fixtures.h"

namespace brigade::pipeline {
namespace {

void sweep(const std::string& schedule) {
  testing::Watchdog watchdog(900, schedule + " grid");
  const bool takes_v = schedule_traits(schedule).chunks_per_stage == 0;
  for (int asked : takes_v ? std::vector<int>{2, 3} : std::vector<int>{1}) {
    const int v = chunks_per_stage(schedule, asked);
    for (Recompute recompute : {Recompute::Never, Recompute::Always, Recompute::ExceptLast}) {
      for (int S : {1, 2, 3, 4}) {
        for (int M : {1, 2, 4, 8}) {  // the batch has 8 sequences
          if (M < smallest_microbatches(schedule, S)) continue;
          SCOPED_TRACE(schedule + " recompute=" + to_string(recompute) + " S=" + std::to_string(S) +
                       " M=" + std::to_string(M) + " v=" + std::to_string(v));
          testing::expect_matches_unpipelined(testing::equivalence_config(schedule, S, M, recompute, asked),
                                              std::max(4, S * v - 2));
          if (::testing::Test::HasFatalFailure()) return;
        }
      }
    }
  }
}

TEST(ScheduleEquivalenceSlow, ZeroBubbleH2OverTheGrid) {
  sweep("zb-h2");
}
TEST(ScheduleEquivalenceSlow, ZeroBubbleVOverTheGrid) {
  sweep("zb-v");
}
TEST(ScheduleEquivalenceSlow, VHalfOverTheGrid) {
  sweep("v-half");
}
TEST(ScheduleEquivalenceSlow, VMinOverTheGrid) {
  sweep("v-min");
}
TEST(ScheduleEquivalenceSlow, DualPipeVOverTheGrid) {
  sweep("dualpipev");
}
TEST(ScheduleEquivalenceSlow, LoopedBfsOverTheGrid) {
  sweep("looped-bfs");
}

}  // namespace
}  // namespace brigade::pipeline
