// The schedule IR: one instruction list per pipeline stage, run in order (docs/design.md, the pipeline's
// spine).
//
// A Schedule is the single source of truth for a pipelined training step. The same lists are validated
// (validate.h), simulated (plan/simulator.h), drawn (render_schedule.h, plan/render_timeline.h) and executed
// (run/executor.h: the executor walks each stage's list on that stage's worker thread, one action after
// the other, exactly in this order).
//
// Model layout. The model is cut into S * v consecutive "model chunks"; stage s holds v of them, its local
// chunks 0 .. v-1, and the schedule's Placement says which (ChunkLayout below is the one place that maps
// between the two numberings):
//   interleaved  local chunk c of stage s is model chunk c * S + s (Megatron's layout): a microbatch visits
//                stage 0, 1, ..., S-1, then stage 0 again with chunk 1, and so on;
//   v            stage s holds model chunks s and 2S-1-s (the zero-bubble papers' V shape): a microbatch goes
//                down the stages with chunk 0 and back up with chunk 1, so the turn (on stage S-1) and the
//                loss (on stage 0, beside the embedding) need no transfer. With v > 2 the path zigzags.
// Plain schedules have v = 1, where both placements agree and chunk is always 0.
//
// Transfers. F of model chunk k consumes the activation produced by model chunk k-1 and B (or Bi) of model
// chunk k consumes the input-gradient produced by model chunk k+1. When the two chunks sit on different
// stages the producer's list holds a Send right after the producing action and the consumer's list holds
// the matching Recv right before the consuming action. Sends never block (the transport buffers the
// tensor and an event marks it ready); a Recv blocks until the matching Send has happened. When both
// chunks sit on the same stage (only with S = 1) the hand-off is local and there is no Send/Recv.
//
// Every action's `chunk` is the local chunk of the stage that runs it (for a Recv: the chunk that will
// consume the tensor; for a Send: the chunk that produced it). transfer_tag() names the message both ends
// agree on, independent of which end you look from.
//
// Data parallel. With D > 1 replicas of the pipeline, each stage's replicas average their gradients. A
// stage's parameters are cut into gradient buckets (Schedule::buckets: consecutive layers of one local
// chunk, up to a byte cap; reduce_buckets.h) and the list holds one Reduce per bucket, right after the
// action that finalises the bucket's gradients (the last B or Bw of its chunk): the stage starts the
// bucket's all-reduce there without waiting for it, and runs on while it travels; the optimizer step waits
// for all of them. A Reduce takes no time on the stage's compute lane; the simulator times it on a comm
// lane of its own.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace brigade::pipeline {

/// What one instruction does.
enum class ActionKind {
  Forward,         ///< F: forward of (microbatch, chunk); saves activations unless recomputation is on
  Backward,        ///< B: full backward (input gradient and weight gradient) of (microbatch, chunk)
  BackwardInput,   ///< Bi: gradient w.r.t. the chunk's input only (zero-bubble split; sent upstream)
  BackwardWeight,  ///< Bw: gradient w.r.t. the chunk's parameters (zero-bubble split; deferrable)
  Recompute,       ///< R: re-run the forward of (microbatch, chunk) with grad on, ahead of its backward
  SendActivation,  ///< post the output of F(microbatch, chunk) to stage `peer`
  RecvActivation,  ///< wait for the input of F(microbatch, chunk) from stage `peer`
  SendGrad,        ///< post the input-gradient of B/Bi(microbatch, chunk) to stage `peer`
  RecvGrad,        ///< wait for the output-gradient of B/Bi(microbatch, chunk) from stage `peer`
  Reduce,         ///< start the all-reduce of gradient bucket `bucket` (of local chunk `chunk`) over replicas
  OptimizerStep,  ///< the stage's single optimizer step after every gradient has accumulated
};

/// Short name of a kind as used in labels: "F", "B", "Bi", "Bw", "R", "sendF", "recvF", "sendB", "recvB",
/// "reduce", "step".
const char* kind_name(ActionKind kind);
/// True for F, B, Bi, Bw, R and OptimizerStep: the actions that occupy a stage's compute stream (not the
/// transfers, not Reduce).
bool is_compute(ActionKind kind);
/// True for F, B, Bi, Bw and R: the compute actions that do a chunk's work (is_compute without the
/// optimizer step).
bool is_work(ActionKind kind);
/// True for the four Send/Recv kinds.
bool is_transfer(ActionKind kind);

/// One instruction of a stage's list.
struct Action {
  ActionKind kind = ActionKind::Forward;
  int microbatch = -1;  ///< 0 .. M-1; -1 for OptimizerStep
  int chunk = 0;        ///< local chunk (virtual stage) on the executing stage, 0 .. v-1
  int peer = -1;        ///< the other stage of a Send/Recv; -1 otherwise
  int bucket = -1;      ///< Reduce: the gradient bucket (index in Schedule::buckets[stage]); -1 otherwise

  bool operator==(const Action&) const = default;
};

/// Whether `weight`, a Bw, is deferred: `before`, the compute action its stage ran just before it, is not
/// its own Bi (same microbatch and chunk). A deferred Bw reads inputs that other actions have pushed out
/// of the caches (ChunkCosts::weight_deferred).
bool is_deferred_weight(const Action& weight, const Action& before);

/// Factories, so that hand-written schedules (tests, docs) read like the pictures.
Action F(int microbatch, int chunk = 0);
Action B(int microbatch, int chunk = 0);
Action Bi(int microbatch, int chunk = 0);
Action Bw(int microbatch, int chunk = 0);
Action R(int microbatch, int chunk = 0);
Action send_activation(int microbatch, int chunk, int to_stage);
Action recv_activation(int microbatch, int chunk, int from_stage);
Action send_grad(int microbatch, int chunk, int to_stage);
Action recv_grad(int microbatch, int chunk, int from_stage);
/// Reduce of gradient bucket `bucket`, which holds layers of local chunk `chunk` (microbatch -1).
Action reduce(int bucket, int chunk);
Action optimizer_step();

/// A compact label: "F3", "B3", "Bi3", "Bw3", "R3", "step"; chunk > 0 or v > 1 adds ".c1" ("F3.c1");
/// transfers read "send F3 ->s2", "recv F3 <-s0", "send B3 ->s1", "recv B3 <-s3" (F = activation,
/// B = gradient); a Reduce reads "AR<bucket>" ("AR0", "AR2.c1": all-reduce of bucket 2, of chunk 1). Pass
/// show_chunk = true to always print the chunk (interleaved schedules do).
std::string to_string(const Action& action, bool show_chunk = false);

/// Activation recomputation policy (torchgpipe's checkpoint modes).
enum class Recompute {
  Never,       ///< keep every activation from F until its backward
  Always,      ///< keep only the chunk's input after F; R recreates the activations before the backward
  ExceptLast,  ///< like Always, but the last microbatch (M-1) keeps its activations
};
const char* to_string(Recompute policy);
/// Parses "never", "always", "except-last"; ValueError listing the valid names otherwise.
Recompute parse_recompute(const std::string& name);
/// Whether `policy` recomputes microbatch `microbatch` of `microbatches`.
bool recomputes(Recompute policy, int microbatch, int microbatches);

/// The message a Send and its Recv agree on: which tensor, from where to where.
struct TransferTag {
  bool gradient = false;  ///< false: activation (forward direction); true: input-gradient (backward)
  int microbatch = -1;
  int from_stage = -1, from_chunk = -1;  ///< producer
  int to_stage = -1, to_chunk = -1;      ///< consumer
  bool operator==(const TransferTag&) const = default;
};

/// How the model chunks are laid out on the stages (see "Model layout" above).
enum class Placement {
  Interleaved,  ///< local chunk c of stage s is model chunk c * S + s
  V,            ///< local chunk c of stage s is c * S + s for even c, c * S + S - 1 - s for odd c
};
/// "interleaved", "v".
const char* to_string(Placement placement);
/// Parses the names above; ValueError listing them otherwise.
Placement parse_placement(const std::string& name);

/// Which stage holds which model chunk, and as which local chunk: the one statement of the layout, used by
/// the schedule's dependencies and transfers, the simulator's and the memory model's per-chunk figures,
/// the partition and the executor.
struct ChunkLayout {
  Placement placement = Placement::Interleaved;
  int stages = 1;          ///< S
  int virtual_chunks = 1;  ///< v

  /// S * v.
  int model_chunks() const { return stages * virtual_chunks; }
  /// The model chunk that local chunk `chunk` of `stage` holds.
  int model_chunk(int stage, int chunk) const;
  /// The stage that holds model chunk `model_chunk`.
  int stage_of(int model_chunk) const;
  /// Its local chunk on that stage.
  int chunk_of(int model_chunk) const { return model_chunk / stages; }
  bool operator==(const ChunkLayout&) const = default;
};

/// A gradient bucket of one stage: consecutive layers of one of its local chunks whose gradients one Reduce
/// all-reduces over the replicas (reduce_buckets.h builds them).
struct GradientBucket {
  int chunk = 0;                       ///< local chunk
  int first_layer = 0, end_layer = 0;  ///< model layers [first_layer, end_layer)
  int64_t bytes = 0;                   ///< gradient bytes reduced (each parameter in one bucket)
  bool operator==(const GradientBucket&) const = default;
};

/// A pipelined training step: per stage, the list of actions that stage runs in order.
struct Schedule {
  std::string name;        ///< a generator's name (generators.h), a file's, or anything for hand-written ones
  int stages = 1;          ///< S
  int microbatches = 1;    ///< M
  int virtual_chunks = 1;  ///< v: model chunks per stage
  Placement placement = Placement::Interleaved;
  Recompute recompute = Recompute::Never;
  /// An inference schedule (forward_only, generators.h): F and the activations' transfers only, no
  /// backward, no recomputation, no optimizer step; the validator holds it to exactly that.
  bool forward_only = false;
  std::vector<std::vector<Action>> actions;  ///< actions[stage] in execution order
  /// Per stage, its gradient buckets (data parallel; see "Data parallel" above): each one is reduced by
  /// exactly one Reduce of the stage's list. Empty: no Reduce (one replica).
  std::vector<std::vector<GradientBucket>> buckets;

  ChunkLayout layout() const { return ChunkLayout{placement, stages, virtual_chunks}; }
  /// S * v: how many consecutive pieces the model is cut into.
  int model_chunks() const { return stages * virtual_chunks; }
  /// Model chunk held by local chunk `chunk` of `stage` (ChunkLayout::model_chunk).
  int model_chunk(int stage, int chunk) const { return layout().model_chunk(stage, chunk); }
  int stage_of(int model_chunk) const { return layout().stage_of(model_chunk); }
  int chunk_of(int model_chunk) const { return layout().chunk_of(model_chunk); }
  /// "1f1b: 4 stages x 8 microbatches" (+ ", 2 virtual chunks", ", V placement", ", recompute always").
  std::string describe() const;
};

/// The message a Send or Recv action on `stage` carries. Requires a transfer action whose microbatch,
/// chunk and peer are in range; throws ValueError naming the action otherwise.
TransferTag transfer_tag(const Schedule& schedule, int stage, const Action& action);

}  // namespace brigade::pipeline
