// The schedule IR: labels, factories, recompute policies and transfer tags.
#include "pipeline/schedule/schedule.h"

#include <sstream>

#include "tensor/error.h"

namespace brigade::pipeline {

const char* kind_name(ActionKind kind) {
  switch (kind) {
    case ActionKind::Forward:
      return "F";
    case ActionKind::Backward:
      return "B";
    case ActionKind::BackwardInput:
      return "Bi";
    case ActionKind::BackwardWeight:
      return "Bw";
    case ActionKind::Recompute:
      return "R";
    case ActionKind::SendActivation:
      return "sendF";
    case ActionKind::RecvActivation:
      return "recvF";
    case ActionKind::SendGrad:
      return "sendB";
    case ActionKind::RecvGrad:
      return "recvB";
    case ActionKind::Reduce:
      return "reduce";
    case ActionKind::OptimizerStep:
      return "step";
  }
  return "?";
}

bool is_transfer(ActionKind kind) {
  return kind == ActionKind::SendActivation || kind == ActionKind::RecvActivation ||
         kind == ActionKind::SendGrad || kind == ActionKind::RecvGrad;
}

bool is_compute(ActionKind kind) {
  return !is_transfer(kind) && kind != ActionKind::Reduce;
}

bool is_work(ActionKind kind) {
  return is_compute(kind) && kind != ActionKind::OptimizerStep;
}

bool is_deferred_weight(const Action& weight, const Action& before) {
  return !(before.kind == ActionKind::BackwardInput && before.microbatch == weight.microbatch &&
           before.chunk == weight.chunk);
}

namespace {
Action make(ActionKind kind, int microbatch, int chunk, int peer = -1) {
  Action action;
  action.kind = kind;
  action.microbatch = microbatch;
  action.chunk = chunk;
  action.peer = peer;
  return action;
}
}  // namespace

Action F(int microbatch, int chunk) {
  return make(ActionKind::Forward, microbatch, chunk);
}
Action B(int microbatch, int chunk) {
  return make(ActionKind::Backward, microbatch, chunk);
}
Action Bi(int microbatch, int chunk) {
  return make(ActionKind::BackwardInput, microbatch, chunk);
}
Action Bw(int microbatch, int chunk) {
  return make(ActionKind::BackwardWeight, microbatch, chunk);
}
Action R(int microbatch, int chunk) {
  return make(ActionKind::Recompute, microbatch, chunk);
}
Action send_activation(int microbatch, int chunk, int to_stage) {
  return make(ActionKind::SendActivation, microbatch, chunk, to_stage);
}
Action recv_activation(int microbatch, int chunk, int from_stage) {
  return make(ActionKind::RecvActivation, microbatch, chunk, from_stage);
}
Action send_grad(int microbatch, int chunk, int to_stage) {
  return make(ActionKind::SendGrad, microbatch, chunk, to_stage);
}
Action recv_grad(int microbatch, int chunk, int from_stage) {
  return make(ActionKind::RecvGrad, microbatch, chunk, from_stage);
}
Action reduce(int bucket, int chunk) {
  Action action = make(ActionKind::Reduce, -1, chunk);
  action.bucket = bucket;
  return action;
}
Action optimizer_step() {
  return make(ActionKind::OptimizerStep, -1, 0);
}

std::string to_string(const Action& action, bool show_chunk) {
  if (action.kind == ActionKind::OptimizerStep) return "step";
  std::ostringstream out;
  const bool chunked = show_chunk || action.chunk != 0;
  if (action.kind == ActionKind::Reduce) {
    out << "AR" << action.bucket;
    if (chunked) out << ".c" << action.chunk;
    return out.str();
  }
  auto compute_label = [&](const char* kind) {
    out << kind << action.microbatch;
    if (chunked) out << ".c" << action.chunk;
  };
  switch (action.kind) {
    case ActionKind::SendActivation:
      out << "send ";
      compute_label("F");
      out << " ->s" << action.peer;
      break;
    case ActionKind::RecvActivation:
      out << "recv ";
      compute_label("F");
      out << " <-s" << action.peer;
      break;
    case ActionKind::SendGrad:
      out << "send ";
      compute_label("B");
      out << " ->s" << action.peer;
      break;
    case ActionKind::RecvGrad:
      out << "recv ";
      compute_label("B");
      out << " <-s" << action.peer;
      break;
    default:
      compute_label(kind_name(action.kind));
  }
  return out.str();
}

const char* to_string(Recompute policy) {
  switch (policy) {
    case Recompute::Never:
      return "never";
    case Recompute::Always:
      return "always";
    case Recompute::ExceptLast:
      return "except-last";
  }
  return "?";
}

Recompute parse_recompute(const std::string& name) {
  if (name == "never") return Recompute::Never;
  if (name == "always") return Recompute::Always;
  if (name == "except-last" || name == "except_last") return Recompute::ExceptLast;
  BRIGADE_THROW(ValueError, "recompute: unknown policy '", name, "' (valid: never, always, except-last)");
}

bool recomputes(Recompute policy, int microbatch, int microbatches) {
  switch (policy) {
    case Recompute::Never:
      return false;
    case Recompute::Always:
      return true;
    case Recompute::ExceptLast:
      return microbatch != microbatches - 1;
  }
  return false;
}

const char* to_string(Placement placement) {
  switch (placement) {
    case Placement::Interleaved:
      return "interleaved";
    case Placement::V:
      return "v";
  }
  return "?";
}

Placement parse_placement(const std::string& name) {
  if (name == "interleaved") return Placement::Interleaved;
  if (name == "v" || name == "V") return Placement::V;
  BRIGADE_THROW(ValueError, "placement: unknown name '", name, "' (valid: interleaved, v)");
}

int ChunkLayout::model_chunk(int stage, int chunk) const {
  // V: the odd chunks run the stages backwards, so that consecutive model chunks meet on one stage.
  const bool reversed = placement == Placement::V && chunk % 2 == 1;
  return chunk * stages + (reversed ? stages - 1 - stage : stage);
}

int ChunkLayout::stage_of(int model_chunk) const {
  const int position = model_chunk % stages;
  const bool reversed = placement == Placement::V && (model_chunk / stages) % 2 == 1;
  return reversed ? stages - 1 - position : position;
}

std::string Schedule::describe() const {
  std::ostringstream out;
  out << name << ": " << stages << (stages == 1 ? " stage" : " stages") << " x " << microbatches
      << (microbatches == 1 ? " microbatch" : " microbatches");
  if (virtual_chunks > 1) out << ", " << virtual_chunks << " virtual chunks";
  if (placement == Placement::V && virtual_chunks > 1) out << ", V placement";
  if (recompute != Recompute::Never) out << ", recompute " << to_string(recompute);
  return out.str();
}

TransferTag transfer_tag(const Schedule& schedule, int stage, const Action& action) {
  BRIGADE_CHECK_VALUE(is_transfer(action.kind), "transfer_tag: ", to_string(action), " on stage ", stage,
                      " is not a Send/Recv");
  BRIGADE_CHECK_VALUE(
      stage >= 0 && stage < schedule.stages && action.chunk >= 0 && action.chunk < schedule.virtual_chunks,
      "transfer_tag: ", to_string(action), " on stage ", stage, " is outside ", schedule.stages, " stages x ",
      schedule.virtual_chunks, " chunks");
  const int here = schedule.model_chunk(stage, action.chunk);
  // Forward messages go from model chunk k to k+1, backward messages from k+1 to k.
  int from = here, to = here;
  switch (action.kind) {
    case ActionKind::SendActivation:
      to = here + 1;
      break;
    case ActionKind::RecvActivation:
      from = here - 1;
      break;
    case ActionKind::SendGrad:
      to = here - 1;
      break;
    case ActionKind::RecvGrad:
      from = here + 1;
      break;
    default:
      break;
  }
  BRIGADE_CHECK_VALUE(from >= 0 && to >= 0 && from < schedule.model_chunks() && to < schedule.model_chunks(),
                      "transfer_tag: ", to_string(action), " on stage ", stage, " (model chunk ", here,
                      ") has no ", (from == here ? "consumer" : "producer"), ": the model has chunks 0..",
                      schedule.model_chunks() - 1);
  TransferTag tag;
  tag.gradient = action.kind == ActionKind::SendGrad || action.kind == ActionKind::RecvGrad;
  tag.microbatch = action.microbatch;
  tag.from_stage = schedule.stage_of(from);
  tag.from_chunk = schedule.chunk_of(from);
  tag.to_stage = schedule.stage_of(to);
  tag.to_chunk = schedule.chunk_of(to);
  return tag;
}

}  // namespace brigade::pipeline
