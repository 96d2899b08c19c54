// A list scheduler on a unit-cost timeline: the engine of the generators whose order is found by running
// the pipeline in the mind (zb-h2, v-half, v-min, zero_bubble.h and v_shape.h) instead of being written
// down as a formula.
//
// The timeline is the zero-bubble papers' setting: every pass of one chunk for one microbatch (F, Bi and
// Bw) takes one time unit, and messages between stages take none. A full B would take two units; the
// schedules found here split every backward. Whenever a stage is free at time t, its picker chooses what
// it runs next from the passes that are ready at t (their inputs exist by then): it may also choose
// nothing, and then the stage waits until something changes. The engine advances t from event to event
// (the end of some pass) until every stage has run its 3 v M passes, and returns the order in which each
// stage ran them: that order is the schedule. The timeline itself is not kept: the simulator replays the
// order with whatever costs it is given (plan/simulator.h), and with uniform costs it finds the same
// times or better (it starts every action as early as the order allows).
//
// A picker that never chooses anything while passes remain would stall the engine: it throws
// ScheduleError (a bug in the generator, not in the input).
#pragma once

#include <functional>
#include <optional>
#include <vector>

#include "pipeline/schedule/schedule.h"

namespace brigade::pipeline {

/// What has run on the unit-cost timeline so far, and when each pass ended.
class UnitTimeline {
 public:
  UnitTimeline(ChunkLayout layout, int microbatches);

  const ChunkLayout& layout() const { return layout_; }
  int microbatches() const { return microbatches_; }
  /// Whether the inputs of `pass` (F, Bi or Bw on `stage`) exist at time `now`: F needs the previous model
  /// chunk's F, Bi its own F and the next model chunk's Bi (the last chunk's gradient comes from its own
  /// loss), Bw its own Bi. Does not check that the pass has not run yet.
  bool ready(int stage, const Action& pass, double now) const;
  /// Records that `pass` on `stage` ends at `end` (list_schedule calls it when a stage starts a pass).
  void record(int stage, const Action& pass, double end);

 private:
  double end_of(ActionKind kind, int model_chunk, int microbatch) const;

  ChunkLayout layout_;
  int microbatches_;
  std::vector<double> ends_;  // per (F | Bi | Bw, model chunk, microbatch): end time, or -1 not run
};

/// Chooses what `stage` runs at `now` (a pass that is ready then), or nothing (the stage waits).
using PassPicker = std::function<std::optional<Action>(int stage, double now, const UnitTimeline&)>;

/// Runs the timeline described above and returns, per stage, the passes in the order they ran.
std::vector<std::vector<Action>> list_schedule(const ChunkLayout& layout, int microbatches,
                                               const PassPicker& pick);

}  // namespace brigade::pipeline
