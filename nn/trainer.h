// The training loop of `brigade train`, as a library: the CLI, the tests and user programs share it.
//
// One run: build (or resume) a GPT, then for each step s in [start, steps):
//   lr = warmup + cosine schedule(s); (x, y) = random batch drawn from the training generator;
//   loss = cross_entropy(model(x), y); stop if the loss is NaN/Inf; backward; global grad norm (clipped to
//   grad_clip when > 0); stop if the norm is NaN/Inf; AdamW step (decay on matrices only).
// Every eval_every steps (and at the end) the validation loss is the mean over eval_iters fixed batches
// (the same windows at every evaluation, drawn from their own generator, so evaluations do not disturb the
// training stream and their figures are comparable). On the default corpus the held-out exact-match
// accuracy is measured too (greedy completion of "123+045=").
//
// Determinism and resuming. Batches and dropout masks come from one Philox generator (nn/data.h); a
// checkpoint stores it with the weights, the AdamW moments and the step. A run resumed from the checkpoint of
// step k on the same device and thread count therefore computes bit-for-bit the losses the uninterrupted run
// computed from step k on.
//
// The loop is a TrainSession (below) in named parts: setup (its constructor), step, save, evaluate and
// finish; nn::train runs one from start to end. The step's forward and backward are a StepRunner's (below):
// the model's own by default, a pipeline's with pipeline/run/train_runner.h (a pipelined step equals the
// unpipelined step on the full batch); the rest of the step is the same for every engine.
//
// A non-finite loss or gradient norm stops the run with a NonFiniteLossError naming the step, before the
// optimizer touches the weights; checkpoints are only ever written after good steps, so the last one on disk
// stays intact.
//
// \code
//   brigade::nn::TrainOptions options;          // the default corpus and model
//   options.steps = 500;
//   brigade::nn::TrainResult result = brigade::nn::train(options);
//   std::printf("loss %.3f accuracy %.1f%%\n", result.final_loss, 100 * *result.accuracy);
//
//   brigade::nn::TrainSession session(options);  // or step by step
//   while (!session.done()) session.step();
//   result = session.finish();
// \endcode
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "autograd/autocast.h"
#include "nn/checkpoint.h"
#include "nn/data.h"
#include "nn/gpt.h"
#include "nn/optim.h"
#include "nn/train_data.h"
#include "nn/train_options.h"
#include "tensor/device.h"
#include "tensor/error.h"
#include "tensor/generator.h"

namespace brigade::nn {

/// What the loop reports after each step.
struct StepReport {
  int64_t step = 0;   ///< the step just completed, 1-based (== steps done)
  int64_t steps = 0;  ///< the run's total
  double loss = 0.0;
  double lr = 0.0;
  double grad_norm = 0.0;  ///< before clipping
  double step_ms = 0.0;
  int64_t tokens = 0;  ///< tokens in the step's batch
};

/// What an evaluation reports.
struct EvalReport {
  int64_t step = 0;         ///< steps completed when it ran
  double train_loss = 0.0;  ///< mean training loss since the previous evaluation
  double val_loss = 0.0;
  std::optional<double> accuracy;  ///< held-out exact match (default corpus only)
  int64_t problems = 0;            ///< how many held-out problems the accuracy is over
};

/// Observers of a run (all optional). before_step is a hook for tests (e.g. poisoning a weight to check
/// the NaN stop); it runs before step `step` (0-based) draws its batch.
struct TrainHooks {
  std::function<void(const std::string&)> on_message;
  std::function<void(const StepReport&)> on_step;
  std::function<void(const EvalReport&)> on_eval;
  std::function<void(int64_t step, GPT& model)> before_step;
};

/// The figures of a finished run (also what --metrics writes).
struct TrainResult {
  int64_t start_step = 0;      ///< 0, or the step the run resumed at
  int64_t steps = 0;           ///< steps completed at the end
  std::vector<double> losses;  ///< training loss of each step run here: losses[i] is step start_step + i
  double final_loss = 0.0;     ///< training loss of the last step (NaN when no step ran)
  double val_loss = 0.0;       ///< from the final evaluation
  double ms_per_step = 0.0;    ///< median over steady-state steps (the first few are excluded)
  double tokens_per_s = 0.0;   ///< batch * block / median step time
  double wall_s = 0.0;         ///< the whole run, data and evaluations included
  int64_t params = 0;
  int64_t peak_bytes = 0;          ///< memory_stats(device).peak_bytes over the run
  std::optional<double> accuracy;  ///< default corpus: exact match over every held-out problem
  int64_t correct = 0;
  int64_t total = 0;
  std::vector<std::string> mistakes;  ///< a few wrong completions, for logs
  GPTConfig config;
  std::string device;

  /// {"final_loss":…, "val_loss":…, "tokens_per_s":…, "ms_per_step":…, "params":…, "peak_bytes":…,
  ///  "accuracy":… (null without the default corpus), "steps":…, "config":{…}, "train_args":{…}, …}
  std::string metrics_json(const TrainOptions& options) const;
};

/// The engine of one step's forward and backward. TrainSession::step does everything else of a step the
/// same way for every engine (the learning rate, the batch, the NaN stop, clipping, the optimizer step,
/// zero_grad), so an engine only decides how the gradients of the batch's mean loss get into the parameters'
/// .grad. The default (UnpipelinedRunner) is the model's own forward and backward;
/// pipeline/run/train_runner.h runs the step as a pipeline (nn does not depend on pipeline/: the caller
/// passes the engine in).
class StepRunner {
 public:
  virtual ~StepRunner() = default;
  /// Called once, after the model is built (and restored from a checkpoint) on its device and before the
  /// optimizer exists (an engine may move parameters, e.g. to its stages' devices). `sample` is a
  /// representative batch drawn from the training data with its own generator (the training stream is not
  /// touched). May throw to refuse the run before any step.
  virtual void prepare(GPT& model, const Batch& sample) {
    (void)model;
    (void)sample;
  }
  /// The forward and backward of the mean loss over `batch` (every .grad is zero or undefined before):
  /// leaves the gradients in .grad and returns the loss. A non-finite loss is returned as it is (with or
  /// without gradients): train() stops before the optimizer touches the weights.
  virtual double forward_backward(GPT& model, const Batch& batch) = 0;
  /// The logits of `ids` for evaluation and sampling (called without grad, the model in eval mode): by
  /// default the model's own forward; the pipeline runs it through its stages as a forward-only schedule,
  /// so a model whose stages sit on several devices is never gathered onto one. The result may be on
  /// another device than `ids` (the last stage's).
  virtual Tensor forward(GPT& model, const Tensor& ids) { return model.forward(ids); }
  /// Checkpoints' "brigade.partition" metadata (JSON object text); empty: the unpipelined partition.
  virtual std::string partition_json(const GPT& model) const {
    (void)model;
    return {};
  }
  /// The stage of each layer of the model's Sequential, for sharded checkpoints (one shard per stage);
  /// empty: one stage.
  virtual std::vector<int> layer_stages(const GPT& model) const {
    (void)model;
    return {};
  }
  /// Writes the checkpoint of TrainSession::save: by default nn::save_checkpoint (single-file, or sharded by
  /// layer_stages() when `path` ends in ".index.json"). An engine whose stages live in other processes
  /// overrides it (each stage writes its shard, one process commits the index: nn/checkpoint_shards.h).
  virtual void save_checkpoint(const std::string& path, const GPT& model, const Optimizer& optimizer,
                               const CheckpointInfo& info) {
    nn::save_checkpoint(path, model, &optimizer, info, layer_stages(model));
  }
  /// State the engine needs to resume exactly, as JSON object text (empty: none), saved in checkpoints as
  /// "brigade.engine_state" (nn/checkpoint.h).
  virtual std::string state_json() const { return {}; }
  /// Called after prepare() when resuming from a checkpoint that carries engine state: `json` is what
  /// state_json() returned when it was saved (possibly by another engine; ignore what does not apply).
  virtual void restore_state(const std::string& json) { (void)json; }
  /// A line for the log after prepare() (empty: none).
  virtual std::string describe() const { return {}; }
  /// The global gradient norm over every parameter of the model, clipped to max_norm (infinity: no
  /// clipping) as nn::clip_grad_norm does. An engine whose gradients live in several processes
  /// (pipeline/dist/) sums the squares across them, so that every process clips alike and sees the same
  /// norm (and the same non-finite stop).
  virtual double clip_grad_norm(GPT& model, double max_norm) {
    return nn::clip_grad_norm(model.parameters(), max_norm);
  }
  /// Called before an evaluation (which runs the whole model): an engine whose processes each train a
  /// part of the model brings every parameter up to date here.
  virtual void before_evaluation(GPT& model) { (void)model; }
  /// Called after an evaluation, before the next step.
  virtual void after_evaluation() {}
};

/// loss = GPT::loss(model(x), y); backward unless the loss is not finite.
class UnpipelinedRunner : public StepRunner {
 public:
  double forward_backward(GPT& model, const Batch& batch) override;
};

/// Thrown when the loss or the gradient norm stops being finite. The message names the step.
class NonFiniteLossError : public Error {
  using Error::Error;
};

/// ValueError when the explicit model flags of `options` disagree with the checkpoint's model (a resumed
/// run keeps the checkpoint's layers, heads, embd and block).
void check_resume_compatible(const TrainOptions& options, const Checkpoint& checkpoint);

/// One training run, in the parts a training loop is made of. nn::train is exactly
///
///   TrainSession session(options, hooks, runner);   // setup
///   while (!session.done()) {
///     session.step();
///     if (session.save_due()) session.save();
///     if (session.evaluation_due()) session.evaluate();
///   }
///   return session.finish();                        // final evaluation and checkpoint, the figures
///
/// so a program that wants another rhythm (its own evaluations, a stop of its own) drives the parts itself:
/// evaluations and checkpoints do not touch the training stream, so the losses and the resume guarantee of
/// the header comment do not depend on when they run. The session holds --dtype's autocast (a thread-local
/// setting) from setup to its end: run it on one thread, and end sessions in the reverse order of their
/// start. --threads sets OpenMP's thread count for the whole process.
class TrainSession {
 public:
  /// Setup: validates the options, sets the threads, checks the device, builds the model (or restores it,
  /// the optimizer and the generator from options.resume), loads the data, lets `runner` (nullptr: the
  /// plain loop, UnpipelinedRunner) prepare, and logs the run's first lines. Throws ValueError for invalid
  /// options (and for options that use the pipeline without a runner: see pipeline/run/train_runner.h),
  /// IOError for unreadable data or checkpoints, DeviceError for an unavailable device, and whatever
  /// runner->prepare() refuses.
  explicit TrainSession(const TrainOptions& options, const TrainHooks& hooks = {},
                        StepRunner* runner = nullptr);
  TrainSession(const TrainSession&) = delete;
  TrainSession& operator=(const TrainSession&) = delete;

  /// Every step up to options.steps has run (at once for a run resumed at or past it).
  bool done() const { return step_ >= options_.steps; }
  /// Steps completed: the resumed step plus the steps run here.
  int64_t steps_completed() const { return step_; }

  /// One optimizer step: the learning rate of the schedule, a batch, the runner's forward and backward,
  /// the clipped gradient norm, AdamW, zero_grad. Throws NonFiniteLossError, before the optimizer touches
  /// the weights, when the loss or the norm is not finite.
  StepReport step();
  /// Whether --save-every asks for a checkpoint of the step just completed.
  bool save_due() const;
  /// Writes the checkpoint of the steps completed so far to options.save (which must be set): the
  /// weights, AdamW's moments, the generator, the step, the options and the runner's state, through the
  /// runner's save_checkpoint (sharded by stage when the name ends in ".index.json").
  void save();
  /// Whether --eval-every asks for an evaluation after the step just completed (never after the last: the
  /// final evaluation is finish()'s).
  bool evaluation_due() const;
  /// The validation loss, the mean training loss since the previous evaluation and, on the default corpus,
  /// the accuracy over the first 200 held-out problems.
  EvalReport evaluate();
  /// The end of the run: the final evaluation (every held-out problem), the final checkpoint (with --save,
  /// unless the last step was just saved) and the figures of the run. Call it once, last.
  TrainResult finish();

  /// The options of the run, with the automatic block resolved.
  const TrainOptions& options() const { return options_; }
  GPT& model() { return *model_; }
  const TrainData& data() const { return data_; }

 private:
  // The parts of setup, in the order the constructor runs them.
  static TrainOptions checked(const TrainOptions& options, const StepRunner* runner);
  void build_model(const std::optional<Checkpoint>& checkpoint);
  void prepare_runner(const std::optional<Checkpoint>& checkpoint);
  void make_optimizer(const std::optional<Checkpoint>& checkpoint);
  void log_setup(bool resumed) const;

  void message(const std::string& text) const;
  EvalReport run_evaluation(bool final);  // final: every held-out problem, and the figures into result_
  [[noreturn]] void stop_non_finite(const char* what, double value) const;

  std::chrono::steady_clock::time_point started_;  // for TrainResult::wall_s
  TrainOptions options_;                           // as given, block resolved
  TrainHooks hooks_;
  UnpipelinedRunner plain_;
  StepRunner* runner_;  // the caller's, or &plain_
  autograd::AutocastGuard autocast_;
  Device device_;
  TrainData data_;
  GPTConfig config_;
  std::unique_ptr<GPT> model_;
  Generator generator_;  // the training batches and dropout masks (saved in checkpoints)
  std::unique_ptr<AdamW> optimizer_;
  CosineSchedule schedule_;

  int64_t step_ = 0;             // steps completed (the next step's 0-based index)
  int64_t last_saved_ = -1;      // the step of the last checkpoint written here; -1: none
  int64_t last_evaluated_ = -1;  // the step of the last evaluation; -1: none
  bool finished_ = false;
  std::vector<double> step_ms_;
  double loss_since_eval_ = 0.0;
  int64_t steps_since_eval_ = 0;
  TrainResult result_;  // filled as the run goes
};

/// Runs a whole TrainSession (see its comment): the one-call form of the loop. Throws what the session's
/// setup throws, and NonFiniteLossError on divergence.
TrainResult train(const TrainOptions& options, const TrainHooks& hooks = {}, StepRunner* runner = nullptr);

}  // namespace brigade::nn
