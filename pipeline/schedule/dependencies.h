// What each action of a schedule waits for, and a record of what has happened so far.
//
// This is the one place that knows the data dependencies of the IR; the validator's deadlock dry run and
// the simulator both walk the stage lists with it (the dry run with zero costs, the simulator with times).
//   F(i, c)        needs the activation of (i, model chunk k-1): its Recv on this stage, or, when chunk
//                  k-1 lives on the same stage (S = 1), that chunk's F;
//   B/Bi(i, c)     needs its own F, and the gradient of (i, k+1): its Recv, or the local B/Bi of k+1
//                  (the last model chunk's gradient comes from its own loss);
//   Bw(i, c), R    need Bi(i, c), respectively F(i, c);
//   Send           needs the action that produced the tensor (F for activations, B/Bi for gradients);
//   Recv           needs the matching Send on the peer (its message arrives `latency` after the Send);
//   Reduce         needs nothing beyond its place after its chunk's last B/Bw (its replicas are not modelled:
//                  they run the same list);
//   OptimizerStep  needs nothing beyond its place at the end of the list.
// Ordering within a stage (F before R before B, Bi before Bw, ...) is the list order itself; the validator
// checks it separately.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "pipeline/schedule/schedule.h"

namespace brigade::pipeline {

class Progress {
 public:
  /// Requires actions whose microbatch, chunk and peer are in range (the validator checks that first).
  explicit Progress(const Schedule& schedule);

  /// The earliest time at which `action` on `stage` may start given what has completed so far (0 when it
  /// needs nothing), or nullopt when a prerequisite has not happened yet; then `waiting_for` (if given)
  /// names it, e.g. "recv F3 <-s0 on stage 1" or "send B2 ->s0 on stage 1".
  std::optional<double> ready_at(int stage, const Action& action, std::string* waiting_for = nullptr) const;

  /// Records that `action` on `stage` ended at `end`. A Send's message becomes available to its Recv at
  /// end + latency.
  void complete(int stage, const Action& action, double end, double latency = 0.0);

 private:
  struct Slot {
    bool done = false;
    double time = 0.0;
  };
  // Events per (stage, chunk, microbatch).
  enum Event {
    kForward,
    kInputGrad,
    kActivationArrived,
    kGradArrived,
    kActivationReceived,
    kGradReceived,
    kEventCount
  };
  size_t index(Event event, int stage, int chunk, int microbatch) const;
  const Slot& slot(Event event, int stage, int chunk, int microbatch) const;
  bool need(Event event, int stage, int chunk, int microbatch, double& ready, std::string* waiting_for,
            const std::string& what) const;

  const Schedule& schedule_;
  std::vector<Slot> slots_;
};

}  // namespace brigade::pipeline
