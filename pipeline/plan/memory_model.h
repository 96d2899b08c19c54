// The memory model: predicts each stage's peak memory for a (partition, schedule, microbatches,
// recompute) choice from measured per-layer sizes, before anything runs, and certifies a configuration
// against a per-stage budget.
//
// What "peak" means. A stage's memory during a training step has two parts:
//   resident   its parameters and optimizer state: allocated before the step, alive throughout;
//   step peak  the highest total, over the step, of what the stage allocates during the step (its memory
//              scope): its parameter gradients, its saved activations, its outputs while the next stage
//              still holds them, and the temporaries of the running action.
// The executor reports the step peak as StageReport::peak_bytes (the scope's peak minus its level at the
// start of the step, run/executor.h) and the resident part as StageReport::parameter_bytes; predictions are
// compared with those figures, like with like:
//   predicted total = parameters + optimizer state + step peak
//
// Sizes, for stage s and microbatch size b (the profile was taken at size b0; r = b / b0 scales every
// activation and workspace figure, parameters do not):
//   parameters   P_s = bytes of the distinct parameter tensors its layers use (a tied weight counts on
//                every stage that uses it: each such stage holds its own gradient of it)
//   optimizer    k P_s with k state tensors per parameter (AdamW: m and v, k = 2)
//   per chunk c  full_c = r * sum over c's layers of activation_bytes (saved tensors and outputs, the loss
//                on the last chunk); boundary_c = r * output_bytes of c's last layer: what a recomputed
//                microbatch keeps in this stage's scope (its output, until the next stage is done with
//                it; 0 for the last chunk, whose output only feeds the loss).
//
// The step peak is found by walking the stage's action list, as the executor runs it:
//   live activations  the activation ledger (activation_ledger.h), the very walk the simulator makes:
//                F adds full_c (boundary_c when the policy recomputes that microbatch), R adds
//                full_c - boundary_c, B or Bw frees the (chunk, microbatch)'s bytes when it ends; Bi frees
//                all but pending_c, what the chunk's layers keep for Bw (LayerProfile::split_pending_bytes,
//                measured with SplitBackward), except on the first chunk: its input, the token ids, has
//                no gradient, so its Bi runs nothing and frees nothing, and its Bw is a whole B.
//                Its maximum is the "activations" column, and one recompute
//                buffer is counted exactly where the schedule holds it.
//   gradients G       the bytes of the gradients that exist when the action starts: a chunk's parameter
//                gradients are created by its first B (or Bw) of the step and live to the end.
//   in transit        after the stage's first B/Bi of a chunk that has an upstream stage, one input
//                gradient (r * the chunk's input bytes) is held until the previous stage has used it.
//   the action itself, walking the chunk's layers i as the action does:
//     F, R   max over i of  fwd_ws_i - (activations of the layers after i, not allocated yet)
//            (a recomputed F runs without grad: max over i of fwd_ws_i on top of its boundary)
//     B, Bi, Bw   max over i, from the last layer down, of  bwd_ws_i - (activations of the layers after i,
//            already freed) + (gradients of the layers from i on that this B creates, if it is the
//            chunk's first backward; never for Bi; a Bi of the first chunk: 0)
//   candidate(action) = live + G + in transit + max(0, the action's term); step peak = max over actions.
// The prediction reports the action at the peak and the three parts of its candidate. (fwd_ws, bwd_ws:
// the per-layer workspaces of profile.h; they are net figures, so the walk above adds them to the level
// where the layer starts.)
//
// Certification. certify() refuses a plan whose predicted total on some stage exceeds the budget, naming
// the stage, the prediction (broken down as above) and the cheapest change that fits, tried in this
// order, one change at a time: more microbatches (the smallest count, dividing the batch, that fits),
// recompute except-last, recompute always, 1f1b instead of gpipe, more stages (the fewest that fit,
// repartitioned by the same method). When no single change fits, the cheapest combination of them that
// fits (fewest changes, then the cheapest in the same order, dearest dimension first: stages, schedule,
// recompute, microbatches); when nothing fits it says so, with the lowest peak any combination reaches.
//
// \code
//   auto profile = brigade::pipeline::profile_layers(model, ids_microbatch, {.loss = loss});
//   brigade::pipeline::MemoryPlan plan{.schedule = "gpipe", .stages = 4, .microbatches = 8,
//                                      .batch_size = 64};
//   auto prediction = brigade::pipeline::certify(profile, plan, 2LL << 30);   // throws when over 2 GiB
//   std::cout << prediction.table();
// \endcode
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "pipeline/plan/partition.h"
#include "pipeline/plan/profile.h"
#include "pipeline/schedule/schedule.h"

namespace brigade::pipeline {

// ---- Activation sizes in any unit (the simulator's, or bytes): what the activation ledger counts --------

/// Activation sizes of one model chunk for one microbatch.
struct ActivationSizes {
  double full = 1.0;      ///< everything the backward needs
  double boundary = 0.0;  ///< the chunk's input, all that is kept between F and R when recomputing
  /// What is kept between Bi and Bw of a split backward (the weight gradients' inputs and the output
  /// gradients of the weight-side nodes; may exceed `full`). Negative: Bi frees nothing and allocates
  /// nothing (the chunk keeps what F or R left until Bw), as on the first chunk, whose input has no gradient.
  double pending = -1.0;
  /// What a recomputed microbatch holds after its R, when more than `full`: per-layer recomputation
  /// recomputes checkpoints inside the chunk, and each recomputed checkpoint holds a second copy of its
  /// output beside the first (which the next layer saved at F). Negative: `full`.
  double replayed = -1.0;
  double after_replay() const { return replayed < 0.0 ? full : replayed; }
};

/// Activation memory model. Uniform: `full` is one stage's activations (each of its v chunks holds
/// full / v), `boundary` is one chunk's input (not divided: a cut carries the same hidden state wherever
/// it is). per_chunk (size S * v, indexed by model chunk: ChunkLayout::model_chunk) overrides, e.g. with
/// measured bytes.
struct MemoryModel {
  ActivationSizes uniform;
  std::vector<ActivationSizes> per_chunk;
  /// Parses "full=1,boundary=0.1"; ValueError otherwise.
  static MemoryModel parse(const std::string& text);
  /// The sizes of local chunk `chunk` of `stage` in `layout`.
  ActivationSizes chunk(const ChunkLayout& layout, int stage, int chunk) const;
};

// ---- The prediction, in bytes ---------------------------------------------------------------------------

/// What the memory model predicts for: a partition, a schedule and a batch.
struct MemoryPlan {
  std::string schedule = "1f1b";  ///< a generator's name (schedule/generators.h: schedule_names())
  int stages = 1;
  int microbatches = 1;
  int virtual_chunks = 1;
  Recompute recompute = Recompute::Never;
  /// What recomputed microbatches recompute, per layer (schedule/layer_recompute.h); empty: whole chunks.
  /// A recomputed chunk then keeps, between F and R, per layer: n its activations, a its activations less
  /// the attention core's (LayerProfile::attention_core_bytes), f nothing but the output of the last layer
  /// of each span of f layers (none for the model's last layer, whose output only feeds the loss). After
  /// R it holds its full activations plus a second copy of each recomputed checkpoint's output (an a
  /// layer's core output, the same size as the layer's; a span of f layers that does not end the chunk).
  std::vector<LayerRecompute> layer_recompute;
  /// Lists to predict instead of generating `schedule` by name (PipelineConfig::schedule_lists).
  std::optional<Schedule> schedule_lists;
  /// Samples per step, cut into `microbatches` microbatches of batch_size / microbatches. 0: each
  /// microbatch has the profiled size.
  int64_t batch_size = 0;
  PartitionMethod partition = PartitionMethod::Parameters;
  std::vector<int> balance;         ///< layers per model chunk, for PartitionMethod::Balance
  int optimizer_state_tensors = 2;  ///< per parameter: AdamW 2 (m, v), SGD with momentum 1, plain SGD 0

  /// "gpipe, 4 stages x 8 microbatches of 2, recompute never, partition by params".
  std::string describe() const;
};

/// One stage's prediction, in bytes.
struct StageMemory {
  int stage = 0;
  int64_t parameter_bytes = 0;   ///< P_s
  int64_t optimizer_bytes = 0;   ///< k P_s
  int64_t gradient_bytes = 0;    ///< the stage's gradients once they all exist (= P_s)
  int64_t activation_bytes = 0;  ///< the largest live activations over the step (the simulator's peak)
  int peak_in_flight = 0;        ///< (chunk, microbatch) pairs holding activations at that peak (simulator)
  int peak_full = 0;             ///< of those, holding their full activations

  /// The action at the step peak and the parts of its candidate (see the header comment).
  int peak_step = -1;  ///< index in the stage's action list
  Action peak_action;
  int64_t peak_activations = 0;  ///< live activations while it runs
  int64_t peak_gradients = 0;    ///< gradients existing then (plus those it creates: in peak_workspace)
  int64_t peak_workspace = 0;    ///< in-transit gradient + the action's own term

  /// What the executor's StageReport::peak_bytes measures.
  int64_t step_peak_bytes() const { return peak_activations + peak_gradients + peak_workspace; }
  /// Everything the stage's device holds at the peak: resident + step peak.
  int64_t total_bytes() const { return parameter_bytes + optimizer_bytes + step_peak_bytes(); }
};

struct MemoryPrediction {
  MemoryPlan plan;
  Partition partition;
  int64_t microbatch_size = 0;  ///< samples per microbatch the prediction is for
  std::vector<StageMemory> stages;

  /// The stage with the largest total (the first on ties).
  int worst_stage() const;
  /// The largest total over stages.
  int64_t peak_bytes() const;
  /// One row per stage: parameters, optimizer state, gradients, peak activations (with microbatches in
  /// flight), the action at the step peak with its workspace, predicted step peak and total. With
  /// `measured_step_peaks` (one per stage, e.g. StageReport::peak_bytes) it adds the measured step peak and
  /// the relative error beside the prediction.
  std::string table(const std::vector<int64_t>& measured_step_peaks = {}) const;
};

/// Predicts every stage's memory. ValueError for an invalid plan (the schedule's and the partition's
/// errors), a batch not divisible by the microbatches, or a profile without measured activations.
MemoryPrediction predict_memory(const ModelProfile& profile, const MemoryPlan& plan);

/// The outcome of checking a plan against a budget.
struct Certificate {
  bool fits = false;
  int64_t budget_bytes = 0;
  MemoryPrediction prediction;
  int stage = -1;  ///< the worst stage over the budget (-1 when it fits)
  /// The cheapest change that fits (see the header comment), if any, and what it is, e.g.
  /// "--microbatches 16", "--recompute except-last", "--schedule 1f1b", "--stages 6", or a combination
  /// "--microbatches 32 --recompute always".
  std::optional<MemoryPlan> suggestion;
  std::string change;
  std::optional<MemoryPrediction> suggestion_prediction;
  /// A readable verdict: fits, or refused with the stage, the prediction and the suggestion.
  std::string message;
};

/// Checks `plan` against `budget_bytes` per stage without throwing.
Certificate check_memory(const ModelProfile& profile, const MemoryPlan& plan, int64_t budget_bytes);

/// Refuses a plan that does not fit: throws OutOfMemoryError with Certificate::message (the stage, its
/// predicted peak and the cheapest change that fits). Returns the prediction when it fits.
MemoryPrediction certify(const ModelProfile& profile, const MemoryPlan& plan, int64_t budget_bytes);

/// Parses a byte count for --memory-budget: "1073741824", "512MiB", "1.5GiB", "2G", "64KB". K, M, G, T
/// alone or with "iB" are powers of 1024; with "B" alone (KB, MB, ...) powers of 1000. ValueError naming
/// the text otherwise.
int64_t parse_bytes(const std::string& text);

}  // namespace brigade::pipeline
