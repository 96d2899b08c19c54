// ZB-V, V-Half and V-Min (see v_shape.h).
#include "pipeline/schedule/v_shape.h"

#include <algorithm>
#include <array>
#include <deque>
#include <map>
#include <memory>

#include "pipeline/schedule/generators.h"
#include "pipeline/schedule/list_scheduler.h"
#include "tensor/error.h"

namespace brigade::pipeline {

namespace {

constexpr int kPeriod = 6;  // time units of one microbatch's passes on one stage: F, Bi, Bw of two chunks

// Appends passes of a chunk in microbatch order: the next F, Bi or Bw of chunk 0 or 1.
class PassCounter {
 public:
  explicit PassCounter(std::vector<Action>& list) : list_(list) {}
  void forward(int chunk) { list_.push_back(F(next_[0][chunk]++, chunk)); }
  void input_grad(int chunk) { list_.push_back(Bi(next_[1][chunk]++, chunk)); }
  void weight_grad(int chunk) { list_.push_back(Bw(next_[2][chunk]++, chunk)); }
  int forwards(int chunk) const { return next_[0][chunk]; }
  int input_grads(int chunk) const { return next_[1][chunk]; }
  int weight_grads(int chunk) const { return next_[2][chunk]; }

 private:
  std::vector<Action>& list_;
  std::array<std::array<int, 2>, 3> next_{};
};

// One stage of ZB-V for n microbatches (n >= 2S - 1: the shape needs that many to fill its warm-up).
std::vector<Action> zb_v_stage(int S, int s, int n) {
  std::vector<Action> list;
  PassCounter next(list);
  for (int i = 0; i < 2 * (S - s) - 1; ++i) next.forward(0);
  for (int i = 0; i < s; ++i) {
    next.forward(1);
    next.forward(0);
  }
  for (int i = 0; i < S - s; ++i) {
    next.forward(1);
    next.input_grad(1);
    next.weight_grad(1);
  }
  // Steady state: one microbatch of each chunk per round, until chunk 1 has caught up with chunk 0.
  while (next.forwards(1) < next.forwards(0) || next.forwards(0) < n) {
    if (next.forwards(0) < n) next.forward(0);
    next.input_grad(0);
    next.weight_grad(0);
    next.forward(1);
    next.input_grad(1);
    next.weight_grad(1);
  }
  // Cool-down: the remaining input gradients first; the weight gradients fill the drain.
  for (int i = 0; i < s; ++i) {
    next.input_grad(0);
    next.input_grad(1);
  }
  for (int i = 0; i < S - s; ++i) {
    next.input_grad(0);
    next.weight_grad(0);
  }
  while (next.weight_grads(1) < next.input_grads(1)) next.weight_grad(1);
  while (next.weight_grads(0) < next.input_grads(0)) next.weight_grad(0);
  return list;
}

// ---- building blocks --------------------------------------------------------------------------------------

// The passes of one stage of a block, in the order of their start times, with the Bw in the free slots.
std::vector<Action> block_order(const BuildingBlock::Offsets& o, int microbatches) {
  std::map<int, Action> starts;  // time -> pass
  for (int m = 0; m < microbatches; ++m) {
    const int t = kPeriod * m;
    starts.emplace(o.forward0 + t, F(m, 0));
    starts.emplace(o.forward1 + t, F(m, 1));
    starts.emplace(o.input_grad1 + t, Bi(m, 1));
    starts.emplace(o.input_grad0 + t, Bi(m, 0));
  }
  std::vector<Action> order;
  std::deque<Action> pending;  // weight gradients whose Bi has run, oldest first
  const int end = starts.rbegin()->first;
  for (int t = 0; t <= end; ++t) {
    const auto it = starts.find(t);
    if (it != starts.end()) {
      order.push_back(it->second);
      if (it->second.kind == ActionKind::BackwardInput)
        pending.push_back(Bw(it->second.microbatch, it->second.chunk));
    } else if (!pending.empty()) {
      order.push_back(pending.front());
      pending.pop_front();
    }
  }
  order.insert(order.end(), pending.begin(), pending.end());
  return order;
}

// Chunk activations held at the peak of an order (F adds one, Bw frees it).
int peak_in_flight(const std::vector<Action>& order) {
  int live = 0, peak = 0;
  for (const Action& a : order) {
    live += a.kind == ActionKind::Forward ? 1 : a.kind == ActionKind::BackwardWeight ? -1 : 0;
    peak = std::max(peak, live);
  }
  return peak;
}

// Refuses a block whose passes collide or start before their input is made (unit costs, no transfer time).
void check_block(const std::string& name, const BuildingBlock& block) {
  const int S = static_cast<int>(block.stages.size());
  for (int s = 0; s < S; ++s) {
    const auto& o = block.stages[static_cast<size_t>(s)];
    std::array<int, 4> slots = {o.forward0 % kPeriod, o.forward1 % kPeriod, o.input_grad1 % kPeriod,
                                o.input_grad0 % kPeriod};
    std::sort(slots.begin(), slots.end());
    BRIGADE_CHECK_VALUE(std::adjacent_find(slots.begin(), slots.end()) == slots.end(), "schedule ", name,
                        ": two passes of stage ", s, "'s building block start in the same slot of the ",
                        kPeriod, "-unit period");
    auto after = [&](int t, int before, const char* what) {
      BRIGADE_CHECK_VALUE(t >= before + 1, "schedule ", name, ": stage ", s, "'s building block starts ",
                          what, " at ", t, ", before its input is made at ", before + 1);
    };
    if (s > 0) after(o.forward0, block.stages[static_cast<size_t>(s) - 1].forward0, "F chunk 0");
    after(o.forward1, s + 1 < S ? block.stages[static_cast<size_t>(s) + 1].forward1 : o.forward0,
          "F chunk 1");
    after(o.input_grad1,
          s > 0 ? std::max(o.forward1, block.stages[static_cast<size_t>(s) - 1].input_grad1) : o.forward1,
          "Bi chunk 1");
    after(o.input_grad0,
          s + 1 < S ? std::max(o.forward0, block.stages[static_cast<size_t>(s) + 1].input_grad0)
                    : std::max(o.forward0, o.input_grad1),
          "Bi chunk 0");
  }
}

// One stage's state while the squeezed block runs on the unit timeline.
struct SqueezeState {
  std::vector<Action> order;  // the block's order of the passes not run yet
  int cap = 0;                // the block's peak of chunk activations
  int in_flight = 0;
  int forwards_left = 0;
  bool backward_started = false;
};

// What a stage of a squeezed block runs at `now` (the rules of v_shape.h), or nothing.
std::optional<Action> squeeze_pick(SqueezeState& st, int s, double now, const UnitTimeline& timeline) {
  if (st.order.empty()) return std::nullopt;
  auto ready = [&](size_t i) { return timeline.ready(s, st.order[i], now); };
  std::optional<size_t> pick;
  if (ready(0)) pick = 0;
  for (size_t i = 0; !pick && !st.backward_started && i < st.order.size(); ++i) {
    const Action& a = st.order[i];
    if (a.kind != ActionKind::Forward) break;  // only the forwards that come next
    const int room = a.chunk == 0 ? 2 : 1;     // a chunk-0 forward leaves room for its chunk-1 forward
    if (ready(i) && st.in_flight + room <= st.cap) pick = i;
  }
  for (size_t i = 0; !pick && st.forwards_left == 0 && i < st.order.size(); ++i) {
    if (st.order[i].kind == ActionKind::BackwardInput && ready(i)) pick = i;
  }
  for (size_t i = 0; !pick && i < st.order.size(); ++i) {
    if (st.order[i].kind == ActionKind::BackwardWeight && ready(i)) pick = i;
  }
  if (!pick) return std::nullopt;
  const Action a = st.order[*pick];
  st.order.erase(st.order.begin() + static_cast<std::ptrdiff_t>(*pick));
  if (a.kind == ActionKind::Forward) ++st.in_flight, --st.forwards_left;
  if (a.kind == ActionKind::BackwardInput) st.backward_started = true;
  if (a.kind == ActionKind::BackwardWeight) --st.in_flight;
  return a;
}

}  // namespace

Schedule zb_v(int stages, int microbatches, Recompute recompute) {
  Schedule schedule = empty_schedule("zb-v", stages, microbatches, 2, Placement::V, recompute);
  // Built for at least 2S - 1 microbatches, then the passes of the microbatches that do not exist are
  // dropped: what remains keeps every dependency the full shape respects.
  const int n = std::max(microbatches, 2 * stages - 1);
  for (int s = 0; s < stages; ++s) {
    for (const Action& a : zb_v_stage(stages, s, n)) {
      if (a.microbatch < microbatches) schedule.actions[static_cast<size_t>(s)].push_back(a);
    }
  }
  return finish_schedule(std::move(schedule));
}

BuildingBlock v_min_block(int stages) {
  const int S = stages, d = S % 3 == 0 ? 2 : 0;
  BuildingBlock block;
  for (int s = 0; s < S; ++s) block.stages.push_back({s, 2 * S - 1 - s, 2 * S + d + s, 4 * S + d - 1 - s});
  return block;
}

BuildingBlock v_half_block(int stages) {
  const int S = stages, d = S % 2 == 0 ? 3 : 0;
  BuildingBlock block;
  for (int s = 0; s < S; ++s)
    block.stages.push_back({2 * s, 3 * S - 2 - s, 3 * S + d + 2 * s - 1, 6 * S + d - s - 2});
  return block;
}

Schedule schedule_from_block(const std::string& name, const BuildingBlock& block, int microbatches,
                             Recompute recompute) {
  const int S = static_cast<int>(block.stages.size());
  Schedule schedule = empty_schedule(name, S, microbatches, 2, Placement::V, recompute);
  check_block(name, block);
  auto states = std::make_shared<std::vector<SqueezeState>>();
  for (const BuildingBlock::Offsets& o : block.stages) {
    SqueezeState st;
    st.order = block_order(o, microbatches);
    st.cap = peak_in_flight(st.order);
    st.forwards_left = 2 * microbatches;
    states->push_back(std::move(st));
  }
  const PassPicker pick = [states](int s, double now, const UnitTimeline& timeline) {
    return squeeze_pick((*states)[static_cast<size_t>(s)], s, now, timeline);
  };
  schedule.actions = list_schedule(schedule.layout(), microbatches, pick);
  return finish_schedule(std::move(schedule));
}

Schedule v_half(int stages, int microbatches, Recompute recompute) {
  BRIGADE_CHECK_VALUE(stages >= 1, "schedule v-half: stages must be >= 1 (found ", stages, ")");
  return schedule_from_block("v-half", v_half_block(stages), microbatches, recompute);
}

Schedule v_min(int stages, int microbatches, Recompute recompute) {
  BRIGADE_CHECK_VALUE(stages >= 1, "schedule v-min: stages must be >= 1 (found ", stages, ")");
  return schedule_from_block("v-min", v_min_block(stages), microbatches, recompute);
}

}  // namespace brigade::pipeline
