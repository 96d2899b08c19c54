// Data dependencies of the schedule IR (see dependencies.h).
#include "pipeline/schedule/dependencies.h"

#include <algorithm>

namespace brigade::pipeline {

namespace {
// "B3/Bi3" (or "B3.c1/Bi3.c1"): the input-gradient comes from whichever of the two the schedule uses.
std::string backward_label(int microbatch, int chunk) {
  return to_string(B(microbatch, chunk)) + "/" + to_string(Bi(microbatch, chunk));
}
}  // namespace

Progress::Progress(const Schedule& schedule)
    : schedule_(schedule),
      slots_(static_cast<size_t>(kEventCount) * schedule.stages * schedule.virtual_chunks *
             schedule.microbatches) {}

size_t Progress::index(Event event, int stage, int chunk, int microbatch) const {
  const auto& s = schedule_;
  return ((static_cast<size_t>(event) * s.stages + stage) * s.virtual_chunks + chunk) * s.microbatches +
         microbatch;
}

const Progress::Slot& Progress::slot(Event event, int stage, int chunk, int microbatch) const {
  return slots_[index(event, stage, chunk, microbatch)];
}

bool Progress::need(Event event, int stage, int chunk, int microbatch, double& ready,
                    std::string* waiting_for, const std::string& what) const {
  const Slot& s = slot(event, stage, chunk, microbatch);
  if (s.done) {
    ready = std::max(ready, s.time);
    return true;
  }
  if (waiting_for) *waiting_for = what + " on stage " + std::to_string(stage);
  return false;
}

std::optional<double> Progress::ready_at(int stage, const Action& a, std::string* waiting_for) const {
  const Schedule& s = schedule_;
  const int k = s.model_chunk(stage, a.chunk);
  const int i = a.microbatch;
  double ready = 0.0;
  bool ok = true;
  switch (a.kind) {
    case ActionKind::Forward:
      if (k > 0) {
        const int prev = k - 1;
        if (s.stage_of(prev) == stage) {
          ok = need(kForward, stage, s.chunk_of(prev), i, ready, waiting_for,
                    to_string(F(i, s.chunk_of(prev)), true));
        } else {
          ok = need(kActivationReceived, stage, a.chunk, i, ready, waiting_for,
                    to_string(recv_activation(i, a.chunk, s.stage_of(prev))));
        }
      }
      break;
    case ActionKind::Backward:
    case ActionKind::BackwardInput:
      ok = need(kForward, stage, a.chunk, i, ready, waiting_for, to_string(F(i, a.chunk)));
      if (ok && k + 1 < s.model_chunks()) {
        const int next = k + 1;
        if (s.stage_of(next) == stage) {
          ok = need(kInputGrad, stage, s.chunk_of(next), i, ready, waiting_for,
                    backward_label(i, s.chunk_of(next)));
        } else {
          ok = need(kGradReceived, stage, a.chunk, i, ready, waiting_for,
                    to_string(recv_grad(i, a.chunk, s.stage_of(next))));
        }
      }
      break;
    case ActionKind::BackwardWeight:
      ok = need(kInputGrad, stage, a.chunk, i, ready, waiting_for, to_string(Bi(i, a.chunk)));
      break;
    case ActionKind::Recompute:
    case ActionKind::SendActivation:
      ok = need(kForward, stage, a.chunk, i, ready, waiting_for, to_string(F(i, a.chunk)));
      break;
    case ActionKind::SendGrad:
      ok = need(kInputGrad, stage, a.chunk, i, ready, waiting_for, backward_label(i, a.chunk));
      break;
    case ActionKind::RecvActivation:
    case ActionKind::RecvGrad: {
      const TransferTag tag = transfer_tag(s, stage, a);
      const bool gradient = a.kind == ActionKind::RecvGrad;
      const Action send =
          gradient ? send_grad(i, tag.from_chunk, stage) : send_activation(i, tag.from_chunk, stage);
      ok = need(gradient ? kGradArrived : kActivationArrived, stage, a.chunk, i, ready, nullptr, "");
      if (!ok && waiting_for) *waiting_for = to_string(send) + " on stage " + std::to_string(tag.from_stage);
      break;
    }
    case ActionKind::Reduce:  // its gradients are final: the list order says so (validate.h, check 3)
    case ActionKind::OptimizerStep:
      break;
  }
  if (!ok) return std::nullopt;
  return ready;
}

void Progress::complete(int stage, const Action& a, double end, double latency) {
  auto mark = [&](Event event, int st, int chunk, double time) {
    Slot& s = slots_[index(event, st, chunk, a.microbatch)];
    s.done = true;
    s.time = time;
  };
  switch (a.kind) {
    case ActionKind::Forward:
      mark(kForward, stage, a.chunk, end);
      break;
    case ActionKind::Backward:
    case ActionKind::BackwardInput:
      mark(kInputGrad, stage, a.chunk, end);
      break;
    case ActionKind::SendActivation:
    case ActionKind::SendGrad: {
      const TransferTag tag = transfer_tag(schedule_, stage, a);
      mark(tag.gradient ? kGradArrived : kActivationArrived, tag.to_stage, tag.to_chunk, end + latency);
      break;
    }
    case ActionKind::RecvActivation:
      mark(kActivationReceived, stage, a.chunk, end);
      break;
    case ActionKind::RecvGrad:
      mark(kGradReceived, stage, a.chunk, end);
      break;
    default:
      break;  // Bw, R and the optimizer step produce nothing another action waits on
  }
}

}  // namespace brigade::pipeline
