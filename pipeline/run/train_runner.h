// The pipeline as the step engine of nn::train: what `brigade train --stages S --microbatches M ...` runs.
//
// PipelineRunner implements nn::StepRunner. Before the first step (prepare) it
//   1. profiles every layer of the model on its device with one microbatch of a sample batch
//      (profile_layers: per-layer forward/backward time and activation bytes),
//   2. cuts the model (make_partition: --balance, or by params, time or memory),
//   3. predicts every stage's peak memory (predict_memory) and, with a --memory-budget, certifies it:
//      a plan over the budget is refused with certify's message (MemoryBudgetExceeded) before any step,
//   4. builds the Pipeline (executor.h) with that balance, the schedule, the recompute policy, one
//      OpenMP thread pool of --threads per stage, and the stages' devices.
// Each step is then Pipeline::forward_backward on the batch: the gradients of the batch's mean loss
// accumulate into .grad exactly as the unpipelined backward would put them (executor.h), and nn::train
// clips, checks and steps as for the plain loop. The executor's own finite check is off: a NaN loss comes
// back to nn::train, which stops with the same message as the plain loop.
//
// --plan auto: before step 1, the planner (plan/planner.h, run/plan_model.h) profiles the model at every
// microbatch size it needs, searches, and its pick replaces the stages, microbatches, schedule, chunks,
// recomputation and balance; the summary then gives the pick's predicted step time beside the measured one.
//
// What it reports after the run (summary(), add_metrics()):
//   bubble measured    the median over steady steps (the first min(3, steps / 2) excluded) of
//                      StepResult::bubble: the mean over stages of their idle fraction of the step;
//   bubble simulated   two predictions from the same IR: simulate() fed with the per-layer profile's
//                      costs summed per model chunk ("from the layer profile", known before the run), and
//                      simulate_measured() of the last step's trace ("from this run's action times": the
//                      schedule's bubble with the executor's own measured costs);
//   memory             per stage, the largest measured step peak (StageReport::peak_bytes) and activation
//                      peak over the run, beside the memory model's prediction (MemoryPrediction::table);
//   traffic            bytes of activations and gradients sent between stages in one step.
// trace_json() and timeline_svg() draw the last step (a steady one) with the profile's simulated timeline
// beside it: as a Chrome trace, and as an SVG of the executed schedule over its simulated twin.
//
// Devices. The stages may share one device (CPU threads, or streams of one GPU) or sit on several
// (--devices cuda:0,cuda:1: one GPU per stage, activations and gradients handed over by peer copies).
// Evaluation and sampling run through the stages too, as a forward-only schedule (forward()), so a model
// spread over devices is never gathered onto one; the batches are drawn on --device and each stage moves
// what it reads to its own device.
//
// Across processes (a ProcessGroup, pipeline/dist/ and docs/distributed.md). Every rank builds the same
// model and this runner with the same options; rank r runs stage r % S of replica r / S (rank_layout.h) and
// takes its replica's share of each batch. The partition is rank 0's. After each step the ranks combine the
// tied and replica gradients, the loss and the figures (rank_collectives.h), and nn::train clips by the
// global norm across them (clip_grad_norm); before an evaluation every parameter is brought up to date on
// every rank (each then evaluates the whole model, and all get the same figures).
//
// Dropout. The stages draw their masks from their own generators (executor.h), seeded from --seed, and
// checkpoints store their states ("brigade.engine_state"), so a resumed pipelined run is bit-exact with
// dropout too, as long as it resumes with the same number of stages (with another, the masks after the
// resume differ from the uninterrupted run's).
//
// \code
//   brigade::nn::TrainOptions options;
//   options.stages = 2; options.microbatches = 4;
//   brigade::pipeline::check_train_options(options);      // ValueError naming the flag
//   brigade::pipeline::PipelineRunner runner(options);
//   brigade::nn::TrainResult result = brigade::nn::train(options, {}, &runner);
//   std::cout << runner.summary();
// \endcode
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "nn/trainer.h"
#include "pipeline/plan/link_model.h"
#include "pipeline/plan/memory_model.h"
#include "pipeline/plan/partition.h"
#include "pipeline/plan/planner.h"
#include "pipeline/plan/profile.h"
#include "pipeline/plan/simulator.h"
#include "pipeline/run/executor.h"
#include "pipeline/run/process_group.h"
#include "pipeline/run/rank_collectives.h"

namespace brigade::pipeline {

/// A --memory-budget refused before any step: what() is certify()'s message (the stage, its predicted
/// peak and the cheapest change that fits).
class MemoryBudgetExceeded : public OutOfMemoryError {
  using OutOfMemoryError::OutOfMemoryError;
};

/// The schedule a run trains with: the lists of --schedule-file (with the R actions --recompute asks for),
/// whose stages and microbatches must be --stages and --microbatches, or the generator --schedule names.
/// ValueError naming the flag: an unknown schedule, a file that cannot be read or run (with the action and
/// the reason), a --virtual the schedule does not take, the schedule's own conditions on the microbatches.
Schedule schedule_of(const nn::TrainOptions& options);

/// The per-layer recomputation plan of --recompute for the GPT of --layers (embed, blocks, head;
/// schedule/layer_recompute.h): empty for never, always and except-last. ValueError naming the flag.
std::vector<LayerRecompute> layer_recompute_of(const nn::TrainOptions& options);

/// ValueError naming the flag for a pipeline setting that cannot work: an unknown --schedule (listing the
/// valid ones), --recompute or --partition; --virtual v > 1 with a schedule that does not take it; more
/// model chunks (stages x the schedule's chunks per stage) than layers; the schedule's own conditions on
/// the microbatches (a multiple of the stages for interleaved, 2S for dualpipev); a --balance that is not
/// a list of stages x v positive counts summing to the model's layers; a --devices entry that is not a
/// device, or a list of the wrong length; a --memory-budget that is not a byte
/// count; what schedule_of refuses. Also runs TrainOptions::validate(). Reads --schedule-file; touches no
/// other file, and no device.
void check_train_options(const nn::TrainOptions& options);

/// --fail-at N:S:ACTION: in the N-th step (1-based) of this invocation, stage S raises an InjectedFault when
/// it reaches ACTION (of replica 0, across processes).
struct FaultInjection {
  int step = 0;
  int stage = 0;
  ActionKind kind = ActionKind::Forward;
  int microbatch = 0;
};
/// Parses --fail-at; ValueError naming the flag and the expected form.
FaultInjection parse_fault_injection(const std::string& text);

/// The devices of the stages (--devices, else --device), one entry per stage.
std::vector<Device> stage_devices(const nn::TrainOptions& options);

class PipelineRunner : public nn::StepRunner {
 public:
  /// Keeps the options (checked again in prepare with check_train_options).
  /// @param world  the processes of a run across processes (pipeline/dist/: every rank builds its runner
  ///               with the same options): this process runs stage rank % S of replica rank / S
  ///               (rank_layout.h), exchanges tensors with the others through the group's transport, and
  ///               combines gradients, loss and figures with them (rank_collectives.h). nullptr: this
  ///               process runs every stage, one thread each.
  explicit PipelineRunner(const nn::TrainOptions& options, ProcessGroup* world = nullptr);
  ~PipelineRunner() override;

  void prepare(nn::GPT& model, const nn::Batch& sample) override;
  double forward_backward(nn::GPT& model, const nn::Batch& batch) override;
  /// {"stages": S, "virtual": v, "balance": [...], "schedule": ..., "microbatches": M, "method": ...}
  std::string partition_json(const nn::GPT& model) const override;
  /// The stage of each layer (every chunk of every stage): sharded checkpoints write a shard per stage.
  std::vector<int> layer_stages(const nn::GPT& model) const override;
  /// Across processes: replica 0 of each stage writes its shard, rank 0 commits the index after a barrier
  /// (the shards must be on a file system every rank sees); `path` must name a sharded checkpoint
  /// ("<stem>.safetensors.index.json"). In one process: StepRunner's.
  void save_checkpoint(const std::string& path, const nn::GPT& model, const nn::Optimizer& optimizer,
                       const nn::CheckpointInfo& info) override;
  /// Evaluation's and sampling's logits: Pipeline::forward (a forward-only schedule through the stages,
  /// on their devices) in one process; the model's own forward across processes.
  Tensor forward(nn::GPT& model, const Tensor& ids) override;
  /// "pipeline: 1f1b, 2 stages x 4 microbatches of 32, recompute never, partition by params (balance 2,2)"
  /// {"stage_generators": [{"seed", "offset"} per stage]}: the stages' dropout generators (across
  /// processes gathered from the ranks of replica 0: collective, every rank calls it when saving).
  std::string state_json() const override;
  /// Restores the stage generators saved by state_json() with the same number of stages (otherwise the
  /// stages keep their fresh seeds: masks from another stage count cannot be reproduced); across processes
  /// each rank takes its own stage's.
  void restore_state(const std::string& json) override;
  std::string describe() const override;
  /// Across processes: the global norm over every rank (rank_collectives.h); otherwise nn's.
  double clip_grad_norm(nn::GPT& model, double max_norm) override;
  /// Across processes: every parameter brought up to date on every rank, with a long timeout (an
  /// evaluation may take longer on one rank than on another).
  void before_evaluation(nn::GPT& model) override;
  /// Across processes: every rank has finished its evaluation; the steps' timeout again.
  void after_evaluation() override;

  // After prepare():
  const ModelProfile& profile() const;
  const Partition& partition() const;
  const MemoryPrediction& prediction() const;
  /// The simulated step from the layer profile's costs.
  const Timeline& simulated() const;
  const Pipeline& pipeline() const;

  // After at least one step:
  int steps_run() const { return static_cast<int>(bubbles_.size()); }
  /// Median of StepResult::bubble over the steady steps.
  double bubble_measured() const;
  /// Median of StepResult::step_ms over the steady steps (the pipeline's forward and backward).
  double step_ms_measured() const;
  /// With --plan auto: the planner's table, whose first row this run took (nullptr otherwise).
  const Plan* plan() const { return plan_ ? &*plan_ : nullptr; }
  /// simulated().bubble.
  double bubble_simulated() const;
  /// simulate_measured(last step's trace).bubble.
  double bubble_simulated_from_trace() const;
  /// Per stage, the largest over the run of StageReport::activation_peak_bytes / peak_bytes.
  const std::vector<int64_t>& peak_activation_bytes() const { return peak_activation_bytes_; }
  const std::vector<int64_t>& peak_step_bytes() const { return peak_step_bytes_; }
  /// The last step's result (its trace, traffic and stage reports).
  const StepResult& last_step() const;

  /// The partition table, the memory table (predicted beside measured), the bubble line and the traffic.
  std::string summary() const;
  /// Adds the pipeline's figures to a metrics JSON object (TrainResult::metrics_json's text): schedule,
  /// stages, microbatches, virtual, recompute, partition {method, balance}, bubble_measured,
  /// bubble_simulated, bubble_simulated_from_trace, peak_activation_bytes and peak_step_bytes (measured,
  /// per stage), predicted_peak_bytes (total: parameters + optimizer state + step peak) and
  /// predicted_step_peak_bytes (per stage), traffic_bytes_per_step and traffic {activation_bytes,
  /// gradient_bytes, messages}.
  std::string add_metrics(const std::string& metrics_json) const;
  /// Across processes, collective (every rank calls it after the run): rank 0 merges every rank's trace of
  /// the last step onto its clock (trace_merge.h); trace_json, timeline_svg, the bubble simulated from the
  /// trace and the summary's traffic per link then use it. Nothing in one process.
  void gather_trace();
  /// Chrome trace JSON of the last step with the profile's simulated timeline beside it.
  std::string trace_json() const;
  /// SVG timeline of the last step, with the profile's simulated step under it on the same axis.
  std::string timeline_svg() const;

 private:
  double forward_backward_across_processes(const nn::Batch& batch);
  std::unique_ptr<Transport> join_processes(const Schedule& schedule, const std::vector<Device>& devices);
  void connect_processes(Costs& costs);
  void measure_links();
  std::unique_ptr<Transport> make_transport(const Schedule& schedule, const Device& device);
  void measure_clock_offsets();
  /// The merged trace (rank 0, across processes, after gather_trace), else the last step's.
  const ExecutionTrace& step_trace() const;
  int64_t activation_bytes() const;
  void require_prepared(const char* what) const;
  /// --plan auto: plans for this model and writes the pick into options_ (MemoryBudgetExceeded when
  /// nothing fits).
  void plan_auto(nn::GPT& model, const nn::Batch& sample);
  void require_step(const char* what) const;

  /// Across processes: every rank takes rank 0's partition (a profile-based cut may differ per rank).
  void agree_on_partition();

  nn::TrainOptions options_;
  ProcessGroup* world_ = nullptr;
  std::optional<RankLayout> layout_;              // across processes
  std::unique_ptr<RankCollectives> collectives_;  // across processes, after prepare()
  std::optional<FaultInjection> fault_;           // --fail-at
  std::vector<LinkModel> links_;                  // across processes: replica 0's stage s -> s + 1
  std::optional<LinkModel> replica_link_;         // D > 1: stage 0 of replica 0 <-> of replica 1
  int64_t largest_bucket_bytes() const;
  std::vector<double> step_spans_;        // across processes: rank 0's step span per step
  std::vector<double> clock_offsets_;     // rank 0: each rank's clock minus ours (seconds)
  std::optional<ExecutionTrace> merged_;  // rank 0, after gather_trace()
  std::string transport_name_;            // across processes: "MPI" or "NCCL"
  int steps_started_ = 0;
  PipelineConfig config_;
  std::optional<ModelProfile> profile_;
  std::optional<Partition> partition_;
  std::optional<MemoryPrediction> prediction_;
  std::optional<Timeline> simulated_;
  std::unique_ptr<Pipeline> pipeline_;
  std::optional<Plan> plan_;
  std::vector<double> bubbles_, step_ms_;
  std::vector<int64_t> peak_activation_bytes_, peak_step_bytes_;
  std::optional<StepResult> last_;
};

}  // namespace brigade::pipeline
