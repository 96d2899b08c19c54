// The list scheduler on a unit-cost timeline (see list_scheduler.h).
#include "pipeline/schedule/list_scheduler.h"

#include <algorithm>
#include <limits>
#include <set>

#include "pipeline/schedule/validate.h"

namespace brigade::pipeline {

namespace {

int slot_of(ActionKind kind) {
  switch (kind) {
    case ActionKind::Forward:
      return 0;
    case ActionKind::BackwardInput:
      return 1;
    case ActionKind::BackwardWeight:
      return 2;
    default:
      break;
  }
  BRIGADE_THROW(ValueError, "list scheduler: only F, Bi and Bw run on the unit timeline, found ",
                kind_name(kind));
}

}  // namespace

UnitTimeline::UnitTimeline(ChunkLayout layout, int microbatches)
    : layout_(layout),
      microbatches_(microbatches),
      ends_(static_cast<size_t>(3) * layout.model_chunks() * microbatches, -1.0) {}

double UnitTimeline::end_of(ActionKind kind, int model_chunk, int microbatch) const {
  return ends_[(static_cast<size_t>(slot_of(kind)) * layout_.model_chunks() + model_chunk) * microbatches_ +
               microbatch];
}

void UnitTimeline::record(int stage, const Action& pass, double end) {
  const int k = layout_.model_chunk(stage, pass.chunk);
  ends_[(static_cast<size_t>(slot_of(pass.kind)) * layout_.model_chunks() + k) * microbatches_ +
        pass.microbatch] = end;
}

bool UnitTimeline::ready(int stage, const Action& pass, double now) const {
  const int k = layout_.model_chunk(stage, pass.chunk), m = pass.microbatch;
  auto done = [&](ActionKind kind, int chunk) {
    const double end = end_of(kind, chunk, m);
    return end >= 0.0 && end <= now;
  };
  switch (pass.kind) {
    case ActionKind::Forward:
      return k == 0 || done(ActionKind::Forward, k - 1);
    case ActionKind::BackwardInput:
      return done(ActionKind::Forward, k) &&
             (k + 1 == layout_.model_chunks() || done(ActionKind::BackwardInput, k + 1));
    case ActionKind::BackwardWeight:
      return done(ActionKind::BackwardInput, k);
    default:
      return false;
  }
}

std::vector<std::vector<Action>> list_schedule(const ChunkLayout& layout, int microbatches,
                                               const PassPicker& pick) {
  const int S = layout.stages;
  const size_t passes = static_cast<size_t>(3) * layout.virtual_chunks * microbatches;
  UnitTimeline timeline(layout, microbatches);
  std::vector<std::vector<Action>> order(static_cast<size_t>(S));
  std::vector<double> free_at(static_cast<size_t>(S), 0.0);
  std::set<double> events{0.0};  // the times at which something may change: pass ends
  double now = 0.0;
  for (;;) {
    bool finished = true;
    for (int s = 0; s < S; ++s) {
      auto& list = order[static_cast<size_t>(s)];
      if (list.size() == passes) continue;
      finished = false;
      if (free_at[static_cast<size_t>(s)] > now) continue;
      const std::optional<Action> pass = pick(s, now, timeline);
      if (!pass) continue;
      BRIGADE_CHECK(timeline.ready(s, *pass, now), "list scheduler: stage ", s, " picked ", to_string(*pass),
                    " at time ", now, " before its inputs exist (a bug in the generator)");
      timeline.record(s, *pass, now + 1.0);
      free_at[static_cast<size_t>(s)] = now + 1.0;
      events.insert(now + 1.0);
      list.push_back(*pass);
    }
    if (finished) return order;
    const auto next = events.upper_bound(now);
    if (next == events.end()) {
      throw ScheduleError("list scheduler: no stage can pick a pass at time " + std::to_string(now) +
                          " and nothing is running (a bug in the generator's picker)");
    }
    now = *next;
  }
}

}  // namespace brigade::pipeline
