// Schedule generators (see generators.h for each schedule's shape and the R placement rule).
#include "pipeline/schedule/generators.h"

#include <algorithm>
#include <deque>

#include "pipeline/schedule/dualpipe.h"
#include "pipeline/schedule/v_shape.h"
#include "pipeline/schedule/zero_bubble.h"
#include "tensor/error.h"

namespace brigade::pipeline {

Schedule empty_schedule(const std::string& name, int stages, int microbatches, int virtual_chunks,
                        Placement placement, Recompute recompute) {
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
  schedule.placement = placement;
  schedule.recompute = recompute;
  schedule.actions.resize(static_cast<size_t>(stages));
  return schedule;
}

Schedule finish_schedule(Schedule schedule) {
  insert_transfers(schedule);
  insert_recompute(schedule);
  for (auto& list : schedule.actions) list.push_back(optimizer_step());
  return schedule;
}

const std::vector<ScheduleTraits>& schedule_catalogue() {
  using P = Placement;
  static const std::vector<ScheduleTraits> catalogue = {
      {"gpipe", P::Interleaved, 1, false, "all forwards, then all backwards (fill-drain)"},
      {"1f1b", P::Interleaved, 1, false,
       "one forward, one backward: GPipe's bubble at S microbatches' memory"},
      {"interleaved", P::Interleaved, 0, false, "1F1B over v chunks per stage: the bubble divided by v"},
      {"zb-h1", P::Interleaved, 1, true, "1F1B with split backwards: a third of its bubble, same memory"},
      {"zb-h2", P::Interleaved, 1, true, "no idle time inside each stage's span, at 2S - 1 microbatches"},
      {"zb-v", P::V, 2, true, "two chunks in a V: no idle time inside the spans at 1F1B's memory"},
      {"v-half", P::V, 2, true, "V building block: about half 1F1B's bubble at half its memory"},
      {"v-min", P::V, 2, true, "V building block: about 2/3 of 1F1B's bubble at a third of its memory"},
      {"dualpipev", P::V, 2, true, "DualPipe cut in half: forward-backward pairs in a V (M >= 2S)"},
      {"looped-bfs", P::Interleaved, 0, false, "GPipe over v chunks per stage, breadth first"},
  };
  return catalogue;
}

const std::vector<std::string>& schedule_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const ScheduleTraits& t : schedule_catalogue()) out.push_back(t.name);
    return out;
  }();
  return names;
}

std::string schedule_name_list() {
  std::string out;
  for (const std::string& name : schedule_names()) out += (out.empty() ? "" : ", ") + name;
  return out;
}

const ScheduleTraits& schedule_traits(const std::string& name) {
  for (const ScheduleTraits& t : schedule_catalogue()) {
    if (name == t.name) return t;
  }
  BRIGADE_THROW(ValueError, "schedule: unknown name '", name, "' (valid: ", schedule_name_list(), ")");
}

int chunks_per_stage(const std::string& name, int virtual_chunks) {
  const ScheduleTraits& t = schedule_traits(name);
  BRIGADE_CHECK_VALUE(virtual_chunks >= 1, "schedule ", name, ": virtual chunks must be >= 1 (found ",
                      virtual_chunks, ")");
  if (t.chunks_per_stage == 0) return virtual_chunks;
  BRIGADE_CHECK_VALUE(virtual_chunks == 1 || virtual_chunks == t.chunks_per_stage, "schedule ", name,
                      ": virtual chunks (found ", virtual_chunks, ") are for interleaved and looped-bfs; ",
                      name, " holds ", t.chunks_per_stage, t.chunks_per_stage == 1 ? " chunk" : " chunks",
                      " per stage");
  return t.chunks_per_stage;
}

int smallest_microbatches(const std::string& name, int stages) {
  (void)schedule_traits(name);  // an unknown name is refused
  if (name == "interleaved") return stages;
  if (name == "dualpipev") return 2 * stages;
  return 1;
}

Schedule make_schedule(const std::string& name, int stages, int microbatches, int virtual_chunks,
                       Recompute recompute) {
  const int v = chunks_per_stage(name, virtual_chunks);
  if (name == "gpipe") return gpipe(stages, microbatches, recompute);
  if (name == "1f1b") return one_f_one_b(stages, microbatches, recompute);
  if (name == "interleaved") return interleaved(stages, microbatches, v, recompute);
  if (name == "zb-h1") return zb_h1(stages, microbatches, recompute);
  if (name == "zb-h2") return zb_h2(stages, microbatches, recompute);
  if (name == "zb-v") return zb_v(stages, microbatches, recompute);
  if (name == "v-half") return v_half(stages, microbatches, recompute);
  if (name == "v-min") return v_min(stages, microbatches, recompute);
  if (name == "dualpipev") return dualpipe_v(stages, microbatches, recompute);
  return looped_bfs(stages, microbatches, v, recompute);
}

Schedule schedule_for(const std::string& name, int stages, int microbatches, int virtual_chunks,
                      Recompute recompute, const std::optional<Schedule>& lists) {
  if (!lists) return make_schedule(name, stages, microbatches, virtual_chunks, recompute);
  const Schedule& s = *lists;
  auto differs = [&](const char* what, const std::string& given, const std::string& theirs) {
    BRIGADE_THROW(ValueError, "schedule '", s.name, "' has ", theirs, " ", what,
                  ", the configuration asks for ", given);
  };
  if (s.stages != stages) differs("stages", std::to_string(stages), std::to_string(s.stages));
  if (s.microbatches != microbatches)
    differs("microbatches", std::to_string(microbatches), std::to_string(s.microbatches));
  if (s.recompute != recompute)
    differs("as its recompute policy", to_string(recompute), to_string(s.recompute));
  if (s.virtual_chunks != virtual_chunks && virtual_chunks != 1)
    differs("chunks per stage", std::to_string(virtual_chunks), std::to_string(s.virtual_chunks));
  return s;
}

Schedule gpipe(int stages, int microbatches, Recompute recompute) {
  Schedule schedule = empty_schedule("gpipe", stages, microbatches, 1, Placement::Interleaved, recompute);
  for (int s = 0; s < stages; ++s) {
    auto& list = schedule.actions[s];
    for (int i = 0; i < microbatches; ++i) list.push_back(F(i));
    for (int i = microbatches - 1; i >= 0; --i) list.push_back(B(i));
  }
  return finish_schedule(std::move(schedule));
}

Schedule one_f_one_b(int stages, int microbatches, Recompute recompute) {
  Schedule schedule = empty_schedule("1f1b", stages, microbatches, 1, Placement::Interleaved, recompute);
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
  return finish_schedule(std::move(schedule));
}

Schedule interleaved(int stages, int microbatches, int virtual_chunks, Recompute recompute) {
  Schedule schedule =
      empty_schedule("interleaved", stages, microbatches, virtual_chunks, Placement::Interleaved, recompute);
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
  return finish_schedule(std::move(schedule));
}

Schedule zb_h1(int stages, int microbatches, Recompute recompute) {
  Schedule schedule = empty_schedule("zb-h1", stages, microbatches, 1, Placement::Interleaved, recompute);
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
  return finish_schedule(std::move(schedule));
}

Schedule looped_bfs(int stages, int microbatches, int virtual_chunks, Recompute recompute) {
  Schedule schedule =
      empty_schedule("looped-bfs", stages, microbatches, virtual_chunks, Placement::Interleaved, recompute);
  for (auto& list : schedule.actions) {
    for (int c = 0; c < virtual_chunks; ++c) {
      for (int i = 0; i < microbatches; ++i) list.push_back(F(i, c));
    }
    for (int c = virtual_chunks - 1; c >= 0; --c) {
      for (int i = microbatches - 1; i >= 0; --i) list.push_back(B(i, c));
    }
  }
  return finish_schedule(std::move(schedule));
}

Schedule forward_only(int stages, int microbatches, int virtual_chunks, Placement placement) {
  Schedule schedule =
      empty_schedule("forward", stages, microbatches, virtual_chunks, placement, Recompute::Never);
  schedule.forward_only = true;
  const ChunkLayout layout = schedule.layout();
  // Model-chunk order: every input a chunk needs comes from a lower model chunk, whose forwards all come
  // earlier on their own stage, so no stage ever waits on one that waits on it.
  for (int k = 0; k < schedule.model_chunks(); ++k) {
    auto& list = schedule.actions[static_cast<size_t>(layout.stage_of(k))];
    for (int m = 0; m < microbatches; ++m) list.push_back(F(m, layout.chunk_of(k)));
  }
  insert_transfers(schedule);
  return schedule;
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
      const int prev_stage = k > 0 ? schedule.stage_of(k - 1) : -1;
      const int next_stage = k < last ? schedule.stage_of(k + 1) : -1;
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
