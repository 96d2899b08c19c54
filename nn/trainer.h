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
// The step's forward and backward are a StepRunner's (below): the model's own by default, a pipeline's with
// pipeline/run/train_runner.h (a pipelined step equals the unpipelined step on the full batch); the rest of
// the step is the same for every engine.
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
// \endcode
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "nn/checkpoint.h"
#include "nn/corpus.h"
#include "nn/data.h"
#include "nn/gpt.h"
#include "nn/tokenizer.h"
#include "tensor/error.h"

namespace brigade::nn {

/// The settings of a training run. Field names mirror the `brigade train` flags (--min-lr is min_lr, ...).
struct TrainOptions {
  std::string data;  ///< UTF-8 text file; empty: the embedded addition corpus (nn/corpus.h)
  int64_t layers = 2;
  int64_t heads = 4;
  int64_t embd = 64;
  int64_t block = 0;  ///< context length; 0: automatic (one line of the default corpus, 64 with data)
  int64_t batch = 128;
  int64_t steps = 3000;
  double lr = 3e-3;
  double min_lr = 3e-4;
  int64_t warmup = 100;
  double weight_decay = 0.1;
  double dropout = 0.0;
  double grad_clip = 1.0;    ///< 0: no clipping (the norm is still computed and checked)
  int64_t eval_every = 250;  ///< 0: only at the end
  int64_t eval_iters = 20;
  std::string device = "cpu";
  /// fp32, or bf16: mixed precision through autocast (autograd/autocast.h): bf16 GEMM inputs with fp32
  /// accumulation, fp32 norms, softmax and loss, fp32 master weights, gradients and AdamW state.
  std::string dtype = "fp32";
  /// OpenMP threads for the CPU kernels; 0: leave OpenMP's setting (OMP_NUM_THREADS, or every core).
  /// The default is 1: the default model's ops are too small to gain from a second thread, and OpenMP
  /// threads that spin at barriers make a run many times slower as soon as another process wants a core
  /// (measured on 2 cores: 21 ms/step with 1 thread, 316 ms/step with 2 while a compiler ran).
  int threads = 1;
  uint64_t seed = 1337;
  std::string save;        ///< checkpoint path; empty: no checkpoint
  int64_t save_every = 0;  ///< also save every N steps (0: only at the end)
  std::string resume;      ///< checkpoint to resume from; empty: a fresh model
  std::string metrics;     ///< JSON file for the final figures; empty: none

  // Pipeline parallelism (DESIGN.md, pipeline/). Plain data here, so that nn can validate the numbers, save
  // them in checkpoints' train_args and inherit them on --resume; the pipeline layer
  // (pipeline/run/train_runner.h) checks the names and runs them. nn::train alone runs only the plain loop
  // (see uses_pipeline()). The library's defaults are the plain loop; `brigade train` defaults to
  // --stages 2 --microbatches 4.
  int64_t stages = 1;                ///< pipeline stages S
  int64_t microbatches = 1;          ///< M: the batch is cut into M microbatches (batch % M == 0)
  std::string schedule = "1f1b";     ///< gpipe, 1f1b, interleaved, zb-h1
  int64_t virtual_chunks = 1;        ///< --virtual v: model chunks per stage (interleaved only)
  std::string recompute = "never";   ///< never, always, except-last
  std::string partition = "params";  ///< params, time, memory (or balance, with --balance)
  std::string balance;               ///< layers per model chunk, "3,3,2"; empty: cut by `partition`
  std::string devices;               ///< one device per stage or one for all, "cuda:0,cuda:0"; empty: device
  std::string memory_budget;         ///< per-stage budget ("512MiB"), certified before any step; empty: none
  std::string trace;                 ///< Chrome trace JSON of one steady step; empty: none
  std::string timeline;              ///< SVG timeline of that step; empty: none

  /// ValueError naming the flag and the value for the first invalid setting (negative or zero sizes,
  /// heads not dividing embd, learning rates, dropout outside [0, 1), an unknown device string, ...).
  /// Does not touch files or devices.
  void validate() const;
  /// block, or its automatic value.
  int64_t resolved_block() const;
  /// Whether the run needs the pipeline engine: more than one stage, microbatch or chunk, or any pipeline
  /// setting away from what the plain loop does (recompute, balance, devices, budget, trace, timeline).
  bool uses_pipeline() const;
  /// Every field as one JSON object (stored in checkpoints as "brigade.train_args").
  std::string to_json() const;
  /// Parses to_json()'s output; missing fields keep their defaults, unknown ones are ignored (a newer
  /// brigade may add some); wrong types are ValueErrors naming the field.
  static TrainOptions from_json(const std::string& text);
};

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

/// The engine of one step's forward and backward. train() does everything else of a step the same way for
/// every engine (the learning rate, the batch, the NaN stop, clipping, the optimizer step, zero_grad), so
/// an engine only decides how the gradients of the batch's mean loss get into the parameters' .grad.
/// The default (UnpipelinedRunner) is the model's own forward and backward; pipeline/run/train_runner.h runs
/// the step as a pipeline (nn does not depend on pipeline/: the caller passes the engine in).
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
  /// Checkpoints' "brigade.partition" metadata (JSON object text); empty: the unpipelined partition.
  virtual std::string partition_json(const GPT& model) const {
    (void)model;
    return {};
  }
  /// State the engine needs to resume exactly, as JSON object text (empty: none), saved in checkpoints as
  /// "brigade.engine_state" (nn/checkpoint.h).
  virtual std::string state_json() const { return {}; }
  /// Called after prepare() when resuming from a checkpoint that carries engine state: `json` is what
  /// state_json() returned when it was saved (possibly by another engine; ignore what does not apply).
  virtual void restore_state(const std::string& json) { (void)json; }
  /// A line for the log after prepare() (empty: none).
  virtual std::string describe() const { return {}; }
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

/// The tokenized training and validation text of a run.
struct TrainData {
  CharTokenizer tokenizer;
  std::vector<int64_t> train, val;
  std::vector<int64_t> train_starts, val_starts;  ///< window starts (line starts); empty: any position
  std::shared_ptr<const AdditionTask> task;       ///< the default corpus, or null with --data
  std::string description;
};

/// Reads options.data (IOError naming the path when missing, empty, unreadable or not UTF-8) or builds
/// the default corpus, tokenizes it (with `tokenizer` when given, e.g. a resumed checkpoint's: a character
/// outside its vocabulary is a ValueError) and splits it 90/10 (the default corpus validates on its
/// held-out problems). Windows of `block` tokens must fit in both parts (ValueError otherwise).
TrainData load_train_data(const TrainOptions& options, int64_t block,
                          const CharTokenizer* tokenizer = nullptr);

/// ValueError when the explicit model flags of `options` disagree with the checkpoint's model (a resumed
/// run keeps the checkpoint's layers, heads, embd and block).
void check_resume_compatible(const TrainOptions& options, const Checkpoint& checkpoint);

/// Runs the whole loop (see the header comment) with `runner` as the step engine (nullptr: the plain
/// loop, UnpipelinedRunner). Throws ValueError for invalid options (and for options that use the pipeline
/// without a runner: see pipeline/run/train_runner.h), IOError for unreadable data or checkpoints,
/// DeviceError for an unavailable device, NonFiniteLossError on divergence, and whatever runner->prepare()
/// refuses.
TrainResult train(const TrainOptions& options, const TrainHooks& hooks = {}, StepRunner* runner = nullptr);

/// Greedy completions of `prompts` (all of one length) by `model`, `max_new_tokens` characters each.
std::vector<std::string> greedy_complete(GPT& model, const CharTokenizer& tokenizer,
                                         const std::vector<std::string>& prompts, int64_t max_new_tokens,
                                         const Device& device);

}  // namespace brigade::nn
