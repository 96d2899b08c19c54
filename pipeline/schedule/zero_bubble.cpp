// ZB-H2 by the capped zero-bubble rules (see zero_bubble.h).
#include "pipeline/schedule/zero_bubble.h"

#include <deque>
#include <memory>
#include <string>

#include "pipeline/schedule/generators.h"
#include "pipeline/schedule/list_scheduler.h"
#include "tensor/error.h"

namespace brigade::pipeline {

namespace {

// One stage's state while the rules run: what it has started, and what it holds.
struct StageState {
  int next_forward = 0, next_backward = 0;
  std::deque<int> pending_weights;  // microbatches whose Bi ran and whose Bw has not
  int in_flight = 0;                // microbatches holding activations (from F to Bw)
};

}  // namespace

Schedule capped_zero_bubble(const std::string& name, int stages, int microbatches, int max_in_flight,
                            Recompute recompute) {
  Schedule schedule = empty_schedule(name, stages, microbatches, 1, Placement::Interleaved, recompute);
  BRIGADE_CHECK_VALUE(max_in_flight >= 1, "schedule ", name,
                      ": the cap on microbatches in flight must be >= 1", " (found ", max_in_flight, ")");
  const int M = microbatches;
  auto states = std::make_shared<std::vector<StageState>>(static_cast<size_t>(stages));
  const PassPicker pick = [states, M, max_in_flight](int s, double now,
                                                     const UnitTimeline& timeline) -> std::optional<Action> {
    StageState& st = (*states)[static_cast<size_t>(s)];
    if (st.next_backward < M && timeline.ready(s, Bi(st.next_backward), now)) {
      st.pending_weights.push_back(st.next_backward);
      return Bi(st.next_backward++);
    }
    if (st.next_forward < M && st.in_flight < max_in_flight && timeline.ready(s, F(st.next_forward), now)) {
      ++st.in_flight;
      return F(st.next_forward++);
    }
    if (!st.pending_weights.empty()) {
      const int m = st.pending_weights.front();
      st.pending_weights.pop_front();
      --st.in_flight;
      return Bw(m);
    }
    return std::nullopt;
  };
  schedule.actions = list_schedule(schedule.layout(), M, pick);
  return finish_schedule(std::move(schedule));
}

Schedule zb_h2(int stages, int microbatches, Recompute recompute) {
  BRIGADE_CHECK_VALUE(stages >= 1, "schedule zb-h2: stages must be >= 1 (found ", stages, ")");
  return capped_zero_bubble("zb-h2", stages, microbatches, 2 * stages - 1, recompute);
}

}  // namespace brigade::pipeline
