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
// start of the step, executor.h) and the resident part as StageReport::parameter_bytes; predictions are
// compared with those figures, like with like:
//   predicted total = parameters + optimizer state + step peak
//   step peak       = gradients + activations + workspace
// where, for stage s with model chunks C_s and microbatch size b (the profile was taken at size b0,
// r = b / b0):
//   parameters   P_s = bytes of the distinct parameter tensors its layers use (a tied weight counts on
//                every stage that uses it: each such stage holds its own gradient of it)
//   gradients    P_s (gradients have their parameter's dtype and shape)
//   optimizer    k P_s with k state tensors per parameter (AdamW: m and v, k = 2)
//   activations  the simulator's peak of live activation memory on stage s (simulator.h), fed per model
//                chunk c with  full_c = r * sum over c's layers of activation_bytes  (saved tensors and
//                outputs, loss included on the last chunk) and  boundary_c = r * output_bytes of c's last
//                layer (what a recomputed microbatch keeps in this stage's scope: its output, until the
//                next stage is done with it; 0 for the last chunk, whose output only feeds the loss). The
//                simulator counts, per (chunk, microbatch), full_c from F to the end of its B (or Bw), or
//                boundary_c from F until R and full_c from R to the end of the backward, so one recompute
//                buffer is counted exactly where the schedule holds it.
//   workspace    r * (the largest forward or backward workspace of a layer of the stage, profile.h, plus
//                one input gradient on its way upstream: the stage's first layer's input bytes, except on
//                the stage holding model chunk 0 alone, whose input needs no gradient)
// Activations and workspace scale linearly with the microbatch size; parameters do not.
//
// Certification. certify() refuses a plan whose predicted total on some stage exceeds the budget, naming
// the stage, the prediction (broken down as above) and the cheapest change that fits, tried in this
// order, one change at a time: more microbatches (the smallest count, dividing the batch, that fits),
// recompute except-last, recompute always, 1f1b instead of gpipe, more stages (the fewest that fit,
// repartitioned by the same method). If none fits it says so.
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

#include "pipeline/partition.h"
#include "pipeline/profile.h"
#include "pipeline/schedule.h"

namespace brigade::pipeline {

/// What the memory model predicts for: a partition, a schedule and a batch.
struct MemoryPlan {
  std::string schedule = "1f1b";  ///< gpipe, 1f1b, interleaved, zb-h1
  int stages = 1;
  int microbatches = 1;
  int virtual_chunks = 1;
  Recompute recompute = Recompute::Never;
  /// Samples per step, cut into `microbatches` microbatches of batch_size / microbatches. 0: each
  /// microbatch has the profiled size.
  int64_t batch_size = 0;
  PartitionMethod partition = PartitionMethod::Parameters;
  std::vector<int> balance;       ///< layers per model chunk, for PartitionMethod::Balance
  int optimizer_state_tensors = 2;  ///< per parameter: AdamW 2 (m, v), SGD with momentum 1, plain SGD 0

  /// "gpipe, 4 stages x 8 microbatches of 2, recompute never, partition by params".
  std::string describe() const;
};

/// One stage's prediction, in bytes.
struct StageMemory {
  int stage = 0;
  int64_t parameter_bytes = 0;
  int64_t gradient_bytes = 0;
  int64_t optimizer_bytes = 0;
  int64_t activation_bytes = 0;  ///< peak live activations (simulator)
  int64_t workspace_bytes = 0;
  int peak_in_flight = 0;        ///< (chunk, microbatch) pairs holding activations at the peak (simulator)
  int peak_full = 0;             ///< of those, holding their full activations

  /// What the executor's StageReport::peak_bytes measures: gradients + activations + workspace.
  int64_t step_peak_bytes() const { return gradient_bytes + activation_bytes + workspace_bytes; }
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
  /// One row per stage: parameters, gradients, optimizer state, activations (with microbatches in
  /// flight), workspace, predicted step peak and total. With `measured_step_peaks` (one per stage, e.g.
  /// StageReport::peak_bytes) it adds the measured step peak and the relative error beside the
  /// prediction.
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
  /// The first single change that fits (see the header comment), if any, and what it is, e.g.
  /// "--microbatches 16", "--recompute except-last", "--schedule 1f1b", "--stages 6".
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
