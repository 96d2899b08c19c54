// The activation ledger: when the activations of each (chunk, microbatch) of one stage are allocated and
// freed as the stage runs its action list. It is the one statement of the IR's activation lifetimes;
// the simulator (simulator.h) walks it in abstract units for its memory figures, the memory model
// (memory_model.h) walks it in bytes, so the two agree by construction.
//
// What a (chunk, microbatch) holds, and which action moves it (sizes are its ActivationSizes):
//
//   None ──F──> Full       F allocates the full activations when it starts ...
//   None ──F──> Boundary   ... or only the chunk's input when the policy recomputes that microbatch;
//   Boundary ──R──> Full   R recreates the full activations when it starts (ActivationSizes::after_replay:
//                          with per-layer recomputation, plus second copies of the checkpoints' outputs);
//   Full ──Bi──> Pending   Bi, when it ends, frees all but what the weight gradients still need (with a
//                          negative ActivationSizes::pending it frees nothing and the slot stays Full);
//   any ──B, Bw──> None    B (or Bw after Bi) frees the rest when it ends.
//
// Transfers and the optimizer step hold no activations. A walk calls begin(action) and end(action) for
// every action in list order; between the two, live() includes the running action's allocation, which is
// where a peak is read.
//
// \code
//   ActivationLedger ledger(schedule, stage, sizes);
//   for (const Action& a : schedule.actions[stage]) {
//     if (!ActivationLedger::tracks(a.kind)) continue;
//     ledger.begin(a);
//     peak = std::max(peak, ledger.live());
//     ledger.end(a);
//   }
// \endcode
#pragma once

#include <vector>

#include "pipeline/plan/memory_model.h"
#include "pipeline/schedule/schedule.h"

namespace brigade::pipeline {

/// What one (chunk, microbatch) holds at a point of the stage's list.
enum class Held {
  None,      ///< nothing: before its F, or after its last backward
  Boundary,  ///< the chunk's input only: F ran without keeping activations, R has not run yet
  Full,      ///< everything its backward needs
  Pending,   ///< after Bi, before Bw: what the weight gradients need (ActivationSizes::pending)
};

class ActivationLedger {
 public:
  /// The ledger of `stage` of `schedule`, with `sizes` per chunk (MemoryModel::chunk).
  ActivationLedger(const Schedule& schedule, int stage, const MemoryModel& sizes);

  /// False for the actions that hold no activations (transfers, the optimizer step): a walk skips them.
  static bool tracks(ActionKind kind);

  /// The allocation at the start of `action` (F, R); other actions allocate nothing.
  void begin(const Action& action);
  /// The release at the end of `action` (Bi, B, Bw); other actions free nothing.
  void end(const Action& action);

  /// What the stage's activations add up to now.
  double live() const { return live_; }
  /// (chunk, microbatch) pairs holding anything.
  int in_flight() const { return in_flight_; }
  /// Pairs holding their full activations, or a pending split backward's.
  int full() const { return full_; }
  Held held(int chunk, int microbatch) const;

 private:
  Held& slot(const Action& action);
  double& full_bytes(const Action& action);

  const Schedule& schedule_;
  int stage_;
  const MemoryModel& sizes_;
  std::vector<Held> held_;          // per (chunk, microbatch): chunk * M + microbatch
  std::vector<double> full_bytes_;  // per (chunk, microbatch): what Full (full, or after_replay) or
                                    // Pending (pending) holds
  double live_ = 0.0;
  int in_flight_ = 0, full_ = 0;
};

}  // namespace brigade::pipeline
