// The planner: searches pipeline configurations, certifies each with the memory model, scores it with
// the simulator on measured layer costs, and ranks what fits (what `brigade plan` prints and
// `brigade train --plan auto` runs).
//
// The space. A candidate is (S stages, D data-parallel replicas, M microbatches, v chunks per stage,
// schedule, recompute policy and per-stage recompute set, partition), with S D <= the devices, D dividing
// the global batch B and M dividing the replica's batch B / D. Each replica runs the same pipeline on its
// B / D samples; its microbatch has b = B / (D M) samples. For every (S, D, M, v, schedule):
//   partition   the exact min-max cut of the layers' measured time, and the cut of their activation bytes
//               when it differs (partition.h), on the profile taken at b samples per microbatch;
//   recompute   never, or a policy (except-last, always) with a choice per stage: n (keep everything), a
//               (the attention cores of its blocks) or f (every layer in full) (schedule/layer_recompute.h).
//               A stage's memory depends only on its own choice, so the memory model predicts each choice
//               once for every stage; each stage then takes the fitting choice whose R costs least
//               (n, then the cheaper of a and f). Stretching an action never shortens a step (the
//               simulator's times are maxima of sums), so that choice is also the fastest that fits.
// Score: the simulated step (simulator.h) with the profile's per-chunk costs at b samples, each message
// timed on the link by its bytes; with D > 1 the schedule holds a Reduce per gradient bucket
// (schedule/reduce_buckets.h) whose all-reduce (a ring over D, link_model.h) runs on the stage's comm lane
// beside the rest of the backward, so the step includes only its exposed part (allreduce_ms); plus, across
// stages, the sum of tied weights' gradients (one message of the tied bytes) and the optimizer step
// (PlanRequest::optimizer_ms). Certification: predict_memory's total per stage (parameters, gradients,
// optimizer state, step peak) against the device memory; a candidate over it is refused, with the stage.
//
// Search. Exhaustive when the space has at most PlanRequest::exhaustive_limit configurations. Beyond
// that, a configuration is skipped without being scored when a lower bound on its step time exceeds the
// keep-th best step found so far: the busiest stage's compute (every F and B of its chunks for M
// microbatches, no recomputation) and one microbatch's critical path (its F and B through every chunk,
// the pipeline's fill and drain: the bubble formulas' (S - 1)(f + b) term made exact for unequal
// stages), plus its all-reduce and optimizer step. A configuration whose parameters, gradients and optimizer
// state alone exceed a device is refused before anything is simulated. The order of the search is fixed, so
// the result is deterministic for a given profile.
//
// \code
//   brigade::pipeline::PlanRequest request;
//   request.profile = [&](int64_t samples) { return profile_at(samples); };
//   request.devices = 4; request.device_memory = 2LL << 30; request.batch = 64;
//   brigade::pipeline::Plan plan = brigade::pipeline::plan_pipeline(request);
//   std::cout << plan.table();
// \endcode
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "pipeline/plan/factor_fit.h"
#include "pipeline/plan/link_model.h"
#include "pipeline/plan/partition.h"
#include "pipeline/plan/profile.h"
#include "pipeline/plan/simulator.h"
#include "pipeline/schedule/layer_recompute.h"
#include "pipeline/schedule/reduce_buckets.h"
#include "pipeline/schedule/schedule.h"

namespace brigade::pipeline {

struct PlanRequest {
  /// The measured layers at a microbatch of `samples` samples (profile_layers on the target device with
  /// ProfileOptions::attention_core, or a hand-made profile). Called once per microbatch size the search
  /// needs, the whole batch first, all of them before the search (their factors are fitted across the
  /// sizes: factor_fit.h).
  std::function<ModelProfile(int64_t samples)> profile;
  int devices = 1;            ///< how many devices (a stage or a replica each)
  int64_t device_memory = 0;  ///< bytes each; 0: no limit
  LinkModel link;             ///< between devices: stage to stage and replica to replica
  /// Where the link comes from, for the table ("given", "measured: one hand-off between two stage
  /// threads"); empty: not said.
  std::string link_origin;
  /// One optimizer step over the whole model on one thread, ms (measured: run/plan_model.h). The executor
  /// runs it after every stage's backward (D = 1: the whole model on the calling thread); across
  /// processes each replica's ranks step their own stage's parameters, so a candidate with D > 1 pays the
  /// share of its largest stage. 0: not priced.
  double optimizer_ms = 0.0;
  int64_t batch = 1;  ///< global batch, samples per step
  /// Data-parallel replicas D the search may use (up to this many). D > 1 runs as S x D processes
  /// (mpirun -np S*D brigade train --data-parallel D); --plan auto plans one process (D = 1).
  int max_replicas = 1;
  /// With D > 1: the gradient buckets' cap (schedule/reduce_buckets.h), as brigade train --bucket-mb.
  int64_t bucket_bytes = kDefaultBucketBytes;
  std::vector<std::string> schedules;  ///< empty: the whole catalogue (schedule/generators.h)
  int max_virtual = 2;                 ///< v for the schedules that take any (interleaved, looped-bfs)
  int max_microbatches = 32;
  int optimizer_state_tensors = 2;  ///< AdamW
  int keep = 10;                    ///< candidates kept and printed
  int exhaustive_limit = 400;       ///< configurations searched without the bound
  /// Price the profiles' factors from a line through all the sizes (factor_fit.h); false: each size's
  /// as measured.
  bool fit_factors = true;
  /// ValueError naming the field for counts below 1, a negative memory, an unknown schedule (the profile
  /// function is plan_pipeline's to check).
  void validate() const;
};

/// One scored configuration.
struct PlanCandidate {
  int stages = 1, replicas = 1, microbatches = 1, virtual_chunks = 1;
  std::string schedule = "1f1b";
  Placement placement = Placement::Interleaved;
  Recompute policy = Recompute::Never;
  std::vector<LayerRecompute> layer_recompute;  ///< empty: whole chunks (or nothing with never)
  std::string stage_choices;                    ///< one letter per stage: n, a, f ("" with never)
  PartitionMethod cut = PartitionMethod::Time;  ///< what the partition was cut on
  std::vector<int> balance;                     ///< layers per model chunk
  int64_t microbatch_size = 0;                  ///< samples

  double step_ms = 0.0;      ///< pipeline_ms + tied_ms + optimizer_ms
  double pipeline_ms = 0.0;  ///< the simulated step, the replicas' all-reduces included
  /// The all-reduces' exposed part (the longest wait of a stage's optimizer step for them; in pipeline_ms)
  /// and the tied weights' message after the step.
  double allreduce_ms = 0.0, tied_ms = 0.0;
  double optimizer_ms = 0.0;        ///< the optimizer step after the pipeline (PlanRequest::optimizer_ms)
  double bubble = 0.0;              ///< the simulated mean idle fraction of the pipeline step
  double recompute_ms = 0.0;        ///< R time on the busiest stage
  std::vector<int64_t> peak_bytes;  ///< predicted total per stage
  int64_t traffic_bytes = 0;        ///< per step: stage messages of every replica + all-reduce
  std::string refusal;              ///< why it does not fit ("" when it does)
  /// The simulated step's time per (model chunk, action kind): what a measured step (trace.h:
  /// action_totals) is compared against, kind by kind.
  ActionTotals action_ms;

  /// What --recompute takes: "never", "always", "except-last:nnaaf..." (a per-layer plan).
  std::string recompute_text() const;
  /// The brigade train flags of this configuration.
  std::string flags() const;
  int64_t max_peak_bytes() const;
  /// Runs the same program as `other`: the same S, D, M, chunks, placement, cut and recomputation, and
  /// action lists equal action for action (two schedule names may generate one program; the executor
  /// runs them alike, so a benchmark measures one of them).
  bool same_program(const PlanCandidate& other) const;
};

struct Plan {
  PlanRequest request;
  std::vector<PlanCandidate> ranked;   ///< fitting candidates, best first (at most request.keep)
  std::vector<PlanCandidate> refused;  ///< a few that did not fit, with the reason (at most keep)
  int configurations = 0;              ///< (S, D, M, v, schedule) combinations in the space
  int scored = 0;                      ///< candidates simulated
  int pruned = 0;                      ///< configurations skipped by the bound
  int over_budget = 0;                 ///< candidates refused by the memory model
  bool exhaustive = true;
  int num_layers = 0;
  /// The profiles' factors as measured at each profiled size and as priced (fitted across them).
  std::vector<FactorFit> factors;

  /// The best candidate; ValueError when nothing fits (naming the lowest peak found).
  const PlanCandidate& best() const;
  /// The ranked table: step time, bubble, peak memory per stage, traffic, configuration, and per row why
  /// it lost to the first; then the refused ones and the search's counts.
  std::string table() const;
};

/// Searches and ranks (see above). ValueError for an invalid request; a Plan with no ranked candidate
/// when nothing fits (Plan::best() then explains).
Plan plan_pipeline(const PlanRequest& request);

/// A profile taken at `base.microbatch_size` samples scaled to `samples`: times and activation bytes
/// linearly (parameters not). For hand-made cost models and tests; the CLI measures every size.
ModelProfile scale_profile(const ModelProfile& base, int64_t samples);

}  // namespace brigade::pipeline
