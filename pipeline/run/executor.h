// The executor: runs one training step of a Sequential as a pipeline, exactly as a Schedule (the IR)
// says, and reports what happened (loss, per-stage memory, bubble, traffic, a trace).
//
// Layout. The model's L layers are cut into S * v consecutive model chunks (PipelineConfig::balance, or
// as even as possible); the schedule's placement says which stage runs model chunk k, as which local chunk
// (schedule/schedule.h: ChunkLayout). Each stage's layers live on its device (PipelineConfig::devices); the
// constructor moves them there.
//
// One step (forward_backward):
//   1. the batch [B, ...] is cut into M microbatches of B / M samples (B must be divisible by M);
//   2. one host thread per stage (started with the Pipeline and kept from step to step) walks the stage's
//      action list in order, under MemoryScope("stage<s>"),
//      with the stage's compute stream current (StreamGuard) and its own Generator for dropout:
//        F   runs the chunk's layers (Sequential::forward_range) on the microbatch: the ids slice for model
//            chunk 0, otherwise the received activation, detached into a fresh leaf that requires grad so
//            that the chunk's backward yields its input gradient. The last model chunk also computes the
//            microbatch loss (loss_fn on the targets slice). Where the list holds an R for this
//            (microbatch, chunk), F runs without grad and keeps only its input and the generator state.
//        R   re-runs that forward with grad, from the kept input and with the generator set back to its
//            state at F (so dropout draws the same masks), then restores the generator. This is what
//            autograd::checkpoint + recompute_ahead do, done by the stage itself: the split backward
//            (Bi/Bw) must walk the recomputed graph, which a checkpoint node keeps hidden inside its own
//            all-at-once backward.
//        B   backpropagates from the loss (scaled by 1/M: the step's loss is the mean of the microbatch
//            means) or from the received output gradient; the input gradient goes upstream.
//        Bi  the input gradient only, Bw the parameter gradients later (backward/split_backward.h).
//        send/recv  hand tensors over through the Transport with an Event recorded on the producer's
//            compute stream; the consumer's stream waits on it before reading. A hand-off between two
//            devices is copied on the consumer's copy stream (a peer copy between GPUs).
//        step  the stage synchronises its streams and arrives at the barrier (see "Optimizer" below).
//      Reduce  (data parallel, D > 1) starts the all-reduce of one gradient bucket over the stage's replicas
//            (GradientReducer::start) and goes on; the stage's step action waits for all of them.
//   3. after every stage has arrived, gradients of tied weights used on several stages are summed into
//      the one parameter (see "Tied weights"), and the caller's model holds, in .grad, exactly the
//      gradients of an unpipelined backward of the mean loss over the whole batch.
// So a pipelined step equals the unpipelined step on the full batch: the loss is the mean over
// microbatches of each microbatch's mean loss, which is the batch mean when every microbatch has the same
// number of counted targets (always, without ignore_index targets).
//
// Optimizer. train_step runs one optimizer over all parameters on the calling thread after the barrier
// (the simplest correct choice: the user's optimizer, its state and its learning-rate schedule stay one
// object, and no stage can step before every stage has finished its backward). The IR's per-stage step
// actions are the barrier; the trace draws the optimizer step on every stage's lane.
//
// Tied weights. A parameter used by layers on several stages (GPT's embed.wte.weight, used by "embed" on
// the first stage and by the LM head on the last) must not have two threads accumulate into one .grad. For
// the duration of a step every stage but the first that uses it gets its own replica: a separate leaf
// tensor (sharing the storage on the same device, a copy on another device) put into that stage's module
// slots. After the barrier each replica's gradient is added into the parameter's .grad and the slots get
// the parameter back. Outside a step the model is exactly as the caller built it.
//
// Dropout. Each stage draws from its own Generator (seeded from PipelineConfig::seed and the stage), so
// recomputation replays the masks exactly and stages never interleave draws. Masks therefore differ from
// an unpipelined run's (different draw order); the equivalence above is exact without dropout.
//
// Failures. An exception in a stage (an injected fault, OOM, a shape error, a non-finite loss) aborts the
// transport, so every other stage stops at its next action or wakes from its blocked recv; the threads
// are joined and the caller gets one PipelineError: "stage 2, action 7 (B3): <what went wrong>". Nothing
// is half-updated: the parameters and the optimizer are untouched (the optimizer only runs after a
// complete step), and every parameter's .grad is put back to what it was before the step.
//
// Memory (StageReport). Each stage's figures come from its memory scope over the step:
//   peak_bytes            the scope's peak minus its in-use bytes at the start of the step: everything the
//                         stage allocated and held at once (activations, gradients created in the step,
//                         backward temporaries, its outputs while the next stage still holds them).
//   gradient_bytes        bytes of the stage's parameter gradients created during the step.
//   activation_peak_bytes peak_bytes - gradient_bytes (parameters are allocated outside the scope). It is
//                         exact when the peak comes after the stage's first backward (which allocates the
//                         gradients); a peak before that (GPipe's end of the forwards) is under-counted by
//                         the gradients not yet allocated, so it never over-states activations.
// A tensor handed to a stage on the same device is not copied: its bytes stay counted by the producing
// stage until the consumer frees it (the allocator charges the scope that allocated a block).
//
// \code
//   brigade::nn::GPT model(config, /*seed=*/1);
//   brigade::pipeline::PipelineConfig pc;
//   pc.schedule = "1f1b"; pc.stages = 4; pc.microbatches = 8;
//   pc.recompute = brigade::pipeline::Recompute::ExceptLast;
//   brigade::pipeline::Pipeline pipe(model, pc);
//   brigade::nn::AdamW opt(brigade::nn::decay_groups(model, 0.1));   // after the Pipeline (it moves layers)
//   brigade::pipeline::StepResult r = pipe.train_step(ids, targets, opt);
//   std::printf("loss %.4f, bubble %.1f%%\n", r.loss, 100 * r.bubble);
//   write_file("trace.json", brigade::pipeline::chrome_trace_json(r.trace));
// \endcode
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "nn/optim.h"
#include "nn/sequential.h"
#include "pipeline/run/gradient_reducer.h"
#include "pipeline/run/trace.h"
#include "pipeline/run/transport.h"
#include "pipeline/schedule/layer_recompute.h"
#include "pipeline/schedule/reduce_buckets.h"
#include "pipeline/schedule/schedule.h"
#include "tensor/device.h"
#include "tensor/error.h"
#include "tensor/generator.h"
#include "tensor/tensor.h"

namespace brigade::pipeline {

/// Where a stage's list stood when a step stopped: `step` is the index of the action it was running or
/// about to run (blocked in, for a Recv); the actions before it are done. step = -1: it had not started.
struct StageCursor {
  int stage = 0;
  int step = -1;
  Action action;        ///< the action at `step` (default when step is -1 or past the end)
  bool failed = false;  ///< this stage raised the step's error (the others were stopped by it)
};

/// A step failed in a stage. what(): "stage 2, action 7 (B3): <the stage's error>".
class PipelineError : public Error {
 public:
  PipelineError(const std::string& message, int stage, int step, Action action, std::exception_ptr cause,
                std::vector<StageCursor> cursors = {})
      : Error(message),
        stage_(stage),
        step_(step),
        action_(action),
        cause_(std::move(cause)),
        cursors_(std::move(cursors)) {}
  /// The failed stage; -1 when the step was stopped by a failure elsewhere (another process).
  int stage() const { return stage_; }
  /// Index of the failed action in the stage's list.
  int step() const { return step_; }
  const Action& action() const { return action_; }
  /// The original exception (rethrow it to inspect its type).
  const std::exception_ptr& cause() const { return cause_; }
  /// Where each of this process's stages stood, in stage order.
  const std::vector<StageCursor>& cursors() const { return cursors_; }

 private:
  int stage_, step_;
  Action action_;
  std::exception_ptr cause_;
  std::vector<StageCursor> cursors_;
};

/// Thrown by an injected fault (Pipeline::fail_at).
class InjectedFault : public Error {
  using Error::Error;
};

struct PipelineConfig {
  std::string schedule = "1f1b";  ///< a generator's name (schedule/generators.h: schedule_names())
  int stages = 1;                 ///< S
  int microbatches = 1;           ///< M; the batch must be divisible by it
  int virtual_chunks = 1;  ///< v, for the schedules that take it (schedule/generators.h: ScheduleTraits)
  Recompute recompute = Recompute::Never;
  /// What the recomputed microbatches recompute, per model layer (schedule/layer_recompute.h): empty
  /// recomputes whole chunks; otherwise one entry per layer of the model.
  std::vector<LayerRecompute> layer_recompute;
  /// Lists to run instead of generating `schedule` by name (e.g. read from a file, schedule/schedule_file.h):
  /// they are validated and run as they are; stages, microbatches, virtual_chunks and recompute must be
  /// theirs.
  std::optional<Schedule> schedule_lists;
  /// Layers per model chunk (S * v entries, each >= 1, summing to the model's layers), e.g. from a
  /// Partition's balance(). Empty: as even as possible, whatever the layer count (the first chunks get
  /// the extra layers).
  std::vector<int> balance;
  /// One device per stage, or one device for every stage. Empty: the device of the model's parameters.
  std::vector<Device> devices;
  uint64_t seed = 0;  ///< stage s draws dropout masks from Generator(seed + s)
  /// Clip the global gradient norm to this in train_step (0: no clipping; the norm is still reported).
  double grad_clip = 0.0;
  /// Stop the step with an error when a microbatch loss is NaN or infinite (no optimizer step follows).
  bool check_finite = true;
  /// A recv waiting longer than this fails the step (0: wait forever). A validated schedule cannot
  /// deadlock; this is a safety net against bugs, not a tuning knob.
  double recv_timeout_seconds = 0.0;
  /// D: data-parallel replicas of this pipeline (each on processes of its own, pipeline/dist/). With D > 1
  /// every stage's parameters are cut into gradient buckets of at most bucket_bytes and its list gets one
  /// Reduce per bucket (schedule/reduce_buckets.h), which the step runs through the GradientReducer given
  /// to set_gradient_reducer. Tied weights (used on several stages) are in no bucket.
  int replicas = 1;
  int64_t bucket_bytes = kDefaultBucketBytes;
  /// The stages this process runs (empty: every stage, each on a thread of this process). A run across
  /// processes (pipeline/dist/) gives each process its stage and a transport to the others: the other
  /// stages' layers stay in the model, unused, and the StepResult reports this process's stages only.
  std::vector<int> local_stages;
  /// Memory scopes are named "<prefix><stage>".
  std::string scope_prefix = "stage";
  /// OpenMP threads for each stage's kernels. 0: chosen from the core count (stage_thread_budget): the
  /// stages on the CPU run at the same time, so each gets cores / (CPU stages), at least 1, and S stage
  /// threads x their OpenMP teams never oversubscribe the cores. Pipeline::threads(stage) reports it.
  int threads_per_stage = 0;
  /// Pin stage s's thread to core s mod (the cores OpenMP sees) for the Pipeline's life (where the machine
  /// allows; pin_thread_to_core, stage_thread.h). Off by default: a benchmark that compares schedules
  /// turns it on so that the scheduler does not move a stage between cores or put two stages on one.
  bool pin_stage_threads = false;

  /// ValueError naming the field for counts < 1 (replicas and bucket_bytes too), a negative clip, timeout
  /// or thread count, a devices
  /// list whose size is neither 0, 1 nor stages, or local stages out of range or repeated.
  void validate() const;
};

/// OpenMP threads for one stage's kernels when threads_per_stage is 0: a stage on the CPU gets
/// max(1, cores / cpu_stages) (the CPU stages run at once and share the cores evenly); a stage on a GPU
/// gets 1 (its host thread only launches kernels). cores: omp_get_num_procs() in Pipeline.
int stage_thread_budget(bool on_cpu, int cpu_stages, int cores);

/// Where an injected fault fires: the action at index `step` of `stage`'s list, or (step < 0) the first
/// action of `kind` on `stage` for `microbatch` (-1: any microbatch).
struct Fault {
  int stage = 0;
  int step = -1;
  std::optional<ActionKind> kind;
  int microbatch = -1;
};

/// One stage's figures for one step.
struct StageReport {
  int stage = 0;
  Device device = Device::cpu();
  std::vector<std::pair<int, int>> layers;  ///< [begin, end) per local chunk
  int64_t parameter_bytes = 0;  ///< its distinct parameters (a tied weight on each stage using it)
  int64_t peak_bytes = 0;       ///< see "Memory" above
  int64_t gradient_bytes = 0;
  int64_t activation_peak_bytes = 0;
  double busy_ms = 0.0;  ///< time in F, B, Bi, Bw and R
  double bubble = 0.0;   ///< 1 - busy / step time
};

/// What one step did.
struct StepResult {
  /// Mean of the microbatch losses; NaN in a process that does not run the stage computing the loss
  /// (PipelineConfig::local_stages).
  double loss = 0.0;
  std::vector<double> microbatch_losses;  ///< unscaled, per microbatch (empty where loss is NaN)
  double step_ms = 0.0;             ///< first action start to last action end over all stages (no optimizer)
  double optimizer_ms = 0.0;        ///< train_step's clipping and optimizer step
  double grad_norm = -1.0;          ///< global gradient norm before clipping (train_step; -1 otherwise)
  double bubble = 0.0;              ///< mean over (local) stages of their idle fraction of step_ms
  Traffic traffic;                  ///< bytes of activations and gradients sent between stages
  std::vector<StageReport> stages;  ///< the local stages, in stage order
  /// Every executed action with its times (chrome_trace_json, render_measured_svg); a stage this process
  /// does not run has no events.
  ExecutionTrace trace;
  /// The trace's time 0 on this process's steady clock (nanoseconds since the clock's epoch): what a merge
  /// of the traces of several processes aligns (trace_merge.h).
  int64_t origin_ns = 0;
};

class Pipeline {
 public:
  /// Computes the loss of the last layer's output against the targets (default: GPT::loss, the mean
  /// cross-entropy of logits [B, T, V] against ids [B, T]).
  using LossFn = std::function<Tensor(const Tensor& output, const Tensor& targets)>;

  /// Builds the schedule (make_schedule + validate) and the layout, and moves each stage's layers to its
  /// device. ValueError for an invalid config: an unknown schedule (listing the valid ones), more model
  /// chunks than layers, a balance of the wrong size or sum, ...
  /// @param transport defaults to an InProcessTransport.
  Pipeline(nn::Sequential& model, PipelineConfig config, LossFn loss = {},
           std::unique_ptr<Transport> transport = nullptr);
  ~Pipeline();
  Pipeline(const Pipeline&) = delete;
  Pipeline& operator=(const Pipeline&) = delete;

  const PipelineConfig& config() const { return config_; }
  const Schedule& schedule() const { return schedule_; }
  /// Layers [begin, end) of local chunk `chunk` of `stage`.
  std::pair<int, int> chunk_layers(int stage, int chunk = 0) const;
  const Device& device(int stage) const;
  /// The OpenMP threads `stage`'s kernels run on: PipelineConfig::threads_per_stage, or the automatic
  /// budget (stage_thread_budget, over the CPU stages of this process) when that is 0; 0 for a stage
  /// another process runs.
  int threads(int stage) const;
  /// "2 stage threads x 1 OpenMP thread on 2 cores": the thread budget, for logs.
  std::string thread_budget() const;
  /// The parameters whose uses sit on more than one stage, with their model-wide names.
  std::vector<std::string> tied_parameter_names() const;
  /// A parameter used on several stages: its name, the model's tensor, and the stages (ascending).
  struct TiedParameter {
    std::string name;
    Tensor param;
    std::vector<int> stages;
  };
  std::vector<TiedParameter> tied_parameters() const;
  /// The distinct parameters of `stage`'s layers (a tied one on every stage that uses it), as the model
  /// holds them outside a step.
  std::vector<Tensor> stage_parameters(int stage) const;

  /// One forward and backward over the batch: gradients accumulate into the parameters' .grad (added to
  /// whatever they held before), no optimizer step. ids [B, ...] feeds layer 0, targets [B, ...] the loss.
  /// ValueError when B is not divisible by the microbatches or the leading sizes differ; PipelineError
  /// when a stage fails.
  StepResult forward_backward(const Tensor& ids, const Tensor& targets);

  /// The model's output on `ids` [B, ...] computed through the pipeline, without grad: a forward-only
  /// schedule (forward_only, schedule/generators.h: validated like every schedule) with the training
  /// schedule's stages, chunks and placement, in `microbatches` microbatches (0: the largest count up to
  /// the training schedule's M that divides B). Returns the last layer's output [B, ...] on the last stage's
  /// device, equal to the unpipelined forward of the whole batch row for row (each microbatch runs the
  /// same ops on its rows). What evaluation and sampling run, so that a model whose stages sit on several
  /// devices never has to run on one. Every stage must be in this process (ValueError otherwise);
  /// PipelineError when a stage fails.
  Tensor forward(const Tensor& ids, int microbatches = 0);

  /// zero_grad, forward_backward, clip (PipelineConfig::grad_clip), optimizer.step(). The optimizer must
  /// hold the model's parameters (create it after the Pipeline). Throws without stepping when the
  /// gradient norm is not finite.
  StepResult train_step(const Tensor& ids, const Tensor& targets, nn::Optimizer& optimizer);

  /// Test hooks: the next steps fail at the given action (until clear_faults()).
  void fail_at(int stage, int step);
  void fail_at(int stage, ActionKind kind, int microbatch = -1);
  void clear_faults();

  /// The local stages' dropout generators, in stage order (all stages: stage s at index s): what a
  /// checkpoint stores so that a resumed run draws the masks the uninterrupted run would have drawn.
  /// set_ ValueError unless one state per local stage.
  std::vector<GeneratorState> generator_states() const;
  void set_generator_states(const std::vector<GeneratorState>& states);

  /// What runs the schedule's Reduce actions (needed when PipelineConfig::replicas > 1; not owned; null:
  /// none). Set it before the first step.
  void set_gradient_reducer(GradientReducer* reducer);
  /// The parameters of each gradient bucket of `stage` (Schedule::buckets[stage], in bucket order).
  std::vector<std::vector<Tensor>> bucket_parameters(int stage) const;

  /// The transport (e.g. to read InProcessTransport::pending()).
  Transport& transport() { return *transport_; }

 private:
  struct Impl;
  nn::Sequential& model_;
  PipelineConfig config_;
  Schedule schedule_;
  std::unique_ptr<Transport> transport_;
  std::unique_ptr<Impl> impl_;  // the stages refer to schedule_: destroyed first
};

}  // namespace brigade::pipeline
