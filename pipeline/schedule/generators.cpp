// Schedule generators (see generators.h for each schedule's shape and the R placement rule).
#include "pipeline/schedule/generators.h"

#include <algorithm>
#include <deque>
#include <sstream>

#include "tensor/error.h"

namespace brigade::pipeline {

namespace {

Schedule empty_schedule(const std::string& name, int stages, int microbatches, int virtual_chunks,
                        Recompute recompute) {
  BRIGADE_CHECK_VALUE(stages >= 1, "schedule ", name, ": stages must be >= 1 (found ", stages, ")");
  BRIGADE_CHECK_VALUE(microbatches >= 1, "schedule ", name, ": microbatches must be >= 1 (found ",
                      microbatches, ")");
  BRIGADE_CHECK_VALUE(virtual_chunks >= 1, "schedule ", name, ": virtual chunks must be >= 1 (found ",
                      virtual_chunks, ")");
  Schedule schedule;
  schedule.name = name;
  schedule.stages = stages;
  schedule.microbatches = microbatches;
  schedule.virtual_chunks = virtual_chunks;
  schedule.recompute = recompute;
  schedule.actions.resize(static_cast<size_t>(stages));
  return schedule;
}

// The two passes every generator shares, then the optimizer step.
Schedule finish(Schedule schedule) {
  insert_transfers(schedule);
  insert_recompute(schedule);
  for (auto& list : schedule.actions) list.push_back(optimizer_step());
  return schedule;
}

}  // namespace

const std::vector<std::string>& schedule_names() {
  static const std::vector<std::string> names = {"gpipe", "1f1b", "interleaved", "zb-h1"};
  return names;
}

Schedule make_schedule(const std::string& name, int stages, int microbatches, int virtual_chunks,
                       Recompute recompute) {
  const auto& names = schedule_names();
  if (std::find(names.begin(), names.end(), name) == names.end()) {
    std::ostringstream valid;
    for (size_t i = 0; i < names.size(); ++i) valid << (i ? ", " : "") << names[i];
    BRIGADE_THROW(ValueError, "schedule: unknown name '", name, "' (valid: ", valid.str(), ")");
  }
  BRIGADE_CHECK_VALUE(virtual_chunks >= 1, "schedule ", name, ": virtual chunks must be >= 1 (found ",
                      virtual_chunks, ")");
  if (name == "interleaved") return interleaved(stages, microbatches, virtual_chunks, recompute);
  BRIGADE_CHECK_VALUE(virtual_chunks == 1, "schedule ", name, ": virtual chunks (found ", virtual_chunks,
                      ") need the interleaved schedule; ", name, " holds one chunk per stage (v = 1)");
  if (name == "gpipe") return gpipe(stages, microbatches, recompute);
  if (name == "1f1b") return one_f_one_b(stages, microbatches, recompute);
  return zb_h1(stages, microbatches, recompute);
}

Schedule gpipe(int stages, int microbatches, Recompute recompute) {
  Schedule schedule = empty_schedule("gpipe", stages, microbatches, 1, recompute);
  for (int s = 0; s < stages; ++s) {
    auto& list = schedule.actions[s];
    for (int i = 0; i < microbatches; ++i) list.push_back(F(i));
    for (int i = microbatches - 1; i >= 0; --i) list.push_back(B(i));
  }
  return finish(std::move(schedule));
}

Schedule one_f_one_b(int stages, int microbatches, Recompute recompute) {
  Schedule schedule = empty_schedule("1f1b", stages, microbatches, 1, recompute);
  for (int s = 0; s < stages; ++s) {
    auto& list = schedule.actions[s];
    const int warmup = std::min(stages - s - 1, microbatches);
    for (int i = 0; i < warmup; ++i) list.push_back(F(i));
    for (int i = warmup; i < microbatches; ++i) {  // steady state: one forward, one backward
      list.push_back(F(i));
      list.push_back(B(i - warmup));
    }
    for (int j = microbatches - warmup; j < microbatches; ++j) list.push_back(B(j));  // cool-down
  }
  return finish(std::move(schedule));
}

Schedule interleaved(int stages, int microbatches, int virtual_chunks, Recompute recompute) {
  Schedule schedule = empty_schedule("interleaved", stages, microbatches, virtual_chunks, recompute);
  BRIGADE_CHECK_VALUE(microbatches % stages == 0, "schedule interleaved: microbatches (", microbatches,
                      ") must be a multiple of stages (", stages, "): microbatches go through in groups of ",
                      stages);
  const int S = stages, v = virtual_chunks;
  const int total = v * microbatches;  // (microbatch, chunk) pairs per stage
  // Virtual step k: which microbatch, and which chunk (forward order; the backward reverses the chunks).
  auto microbatch_of = [&](int k) { return (k / (S * v)) * S + k % S; };
  auto chunk_of = [&](int k) { return (k % (S * v)) / S; };
  for (int s = 0; s < S; ++s) {
    auto& list = schedule.actions[s];
    // Megatron's warm-up: enough forwards that the first backward of chunk v-1 can come back; with v = 1
    // it is 1F1B's.
    const int warmup = std::min(v == 1 ? S - s - 1 : 2 * (S - s - 1) + (v - 1) * S, total);
    auto forward = [&](int k) { list.push_back(F(microbatch_of(k), chunk_of(k))); };
    auto backward = [&](int k) { list.push_back(B(microbatch_of(k), v - 1 - chunk_of(k))); };
    for (int k = 0; k < warmup; ++k) forward(k);
    for (int k = 0; k < total - warmup; ++k) {
      forward(warmup + k);
      backward(k);
    }
    for (int k = total - warmup; k < total; ++k) backward(k);
  }
  return finish(std::move(schedule));
}

Schedule zb_h1(int stages, int microbatches, Recompute recompute) {
  Schedule schedule = empty_schedule("zb-h1", stages, microbatches, 1, recompute);
  for (int s = 0; s < stages; ++s) {
    auto& list = schedule.actions[s];
    const int warmup = std::min(stages - s - 1, microbatches);
    std::deque<int> pending;  // microbatches whose Bi ran and whose Bw has not
    auto backward = [&](int j) {
      if (s == 0) {  // nothing upstream waits for stage 0's input-gradient: no reason to split
        list.push_back(B(j));
        return;
      }
      list.push_back(Bi(j));
      pending.push_back(j);
      if (static_cast<int>(pending.size()) > s) {  // keep s weight-gradients pending, run the oldest
        list.push_back(Bw(pending.front()));
        pending.pop_front();
      }
    };
    for (int i = 0; i < warmup; ++i) list.push_back(F(i));
    for (int i = warmup; i < microbatches; ++i) {
      list.push_back(F(i));
      backward(i - warmup);
    }
    for (int j = microbatches - warmup; j < microbatches; ++j) backward(j);
    for (int j : pending) list.push_back(Bw(j));  // the deferred weight-gradients fill the drain
  }
  return finish(std::move(schedule));
}

void insert_transfers(Schedule& schedule) {
  const int last = schedule.model_chunks() - 1;
  for (int s = 0; s < schedule.stages; ++s) {
    std::vector<Action> out;
    for (const Action& a : schedule.actions[s]) {
      const int k = schedule.model_chunk(s, a.chunk);
      // A neighbour chunk on another stage needs a message; on this stage (S = 1) the hand-off is local.
      const bool prev_remote = k > 0 && schedule.stage_of(k - 1) != s;
      const bool next_remote = k < last && schedule.stage_of(k + 1) != s;
      const int prev_stage = schedule.stage_of(k + schedule.model_chunks() - 1);
      const int next_stage = schedule.stage_of(k + 1);
      if (a.kind == ActionKind::Forward) {
        if (prev_remote) out.push_back(recv_activation(a.microbatch, a.chunk, prev_stage));
        out.push_back(a);
        if (next_remote) out.push_back(send_activation(a.microbatch, a.chunk, next_stage));
      } else if (a.kind == ActionKind::Backward || a.kind == ActionKind::BackwardInput) {
        if (next_remote) out.push_back(recv_grad(a.microbatch, a.chunk, next_stage));
        out.push_back(a);
        if (prev_remote) out.push_back(send_grad(a.microbatch, a.chunk, prev_stage));
      } else {
        out.push_back(a);
      }
    }
    schedule.actions[s] = std::move(out);
  }
}

void insert_recompute(Schedule& schedule) {
  if (schedule.recompute == Recompute::Never) return;
  for (auto& list : schedule.actions) {
    std::vector<Action> out;
    for (const Action& a : list) {
      const bool backward = a.kind == ActionKind::Backward || a.kind == ActionKind::BackwardInput;
      if (backward && recomputes(schedule.recompute, a.microbatch, schedule.microbatches)) {
        // In front of the Recv that waits for this backward's gradient, if there is one.
        const bool waits = !out.empty() && out.back().kind == ActionKind::RecvGrad &&
                           out.back().microbatch == a.microbatch && out.back().chunk == a.chunk;
        out.insert(waits ? out.end() - 1 : out.end(), R(a.microbatch, a.chunk));
      }
      out.push_back(a);
    }
    list = std::move(out);
  }
}

}  // namespace brigade::pipeline
