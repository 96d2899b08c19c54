// The activation ledger (see activation_ledger.h for the states and their transitions).
#include "pipeline/plan/activation_ledger.h"

namespace brigade::pipeline {

ActivationLedger::ActivationLedger(const Schedule& schedule, int stage, const MemoryModel& sizes)
    : schedule_(schedule),
      stage_(stage),
      sizes_(sizes),
      held_(static_cast<size_t>(schedule.virtual_chunks) * schedule.microbatches, Held::None),
      full_bytes_(held_.size(), 0.0) {}

bool ActivationLedger::tracks(ActionKind kind) {
  return is_work(kind);
}

Held& ActivationLedger::slot(const Action& action) {
  return held_[static_cast<size_t>(action.chunk) * schedule_.microbatches + action.microbatch];
}

double& ActivationLedger::full_bytes(const Action& action) {
  return full_bytes_[static_cast<size_t>(action.chunk) * schedule_.microbatches + action.microbatch];
}

Held ActivationLedger::held(int chunk, int microbatch) const {
  return held_[static_cast<size_t>(chunk) * schedule_.microbatches + microbatch];
}

void ActivationLedger::begin(const Action& a) {
  if (!tracks(a.kind) || schedule_.forward_only) return;  // a forward without a backward keeps nothing
  Held& h = slot(a);
  const ActivationSizes size = sizes_.chunk(schedule_.layout(), stage_, a.chunk);
  if (a.kind == ActionKind::Forward) {
    const bool recompute = recomputes(schedule_.recompute, a.microbatch, schedule_.microbatches);
    h = recompute ? Held::Boundary : Held::Full;
    full_bytes(a) = size.full;
    live_ += recompute ? size.boundary : size.full;
    ++in_flight_;
    if (!recompute) ++full_;
  } else if (a.kind == ActionKind::Recompute && h == Held::Boundary) {
    h = Held::Full;
    full_bytes(a) = size.after_replay();
    live_ += size.after_replay() - size.boundary;
    ++full_;
  }
}

void ActivationLedger::end(const Action& a) {
  if (!tracks(a.kind)) return;
  Held& h = slot(a);
  const ActivationSizes size = sizes_.chunk(schedule_.layout(), stage_, a.chunk);
  // A negative `pending` is a Bi that frees nothing: the slot stays Full, with what F (or R) left.
  if (a.kind == ActionKind::BackwardInput && h == Held::Full && size.pending >= 0.0) {
    live_ += size.pending - full_bytes(a);
    full_bytes(a) = size.pending;
    h = Held::Pending;
  }
  if ((a.kind == ActionKind::Backward || a.kind == ActionKind::BackwardWeight) && h != Held::None) {
    live_ -= h == Held::Boundary ? size.boundary : full_bytes(a);
    --in_flight_;
    if (h == Held::Full || h == Held::Pending) --full_;
    h = Held::None;
  }
}

}  // namespace brigade::pipeline
