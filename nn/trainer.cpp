// The training loop; what it does and guarantees is described in nn/trainer.h.
#include "nn/trainer.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "nn/data.h"
#include "nn/statistics.h"
#include "tensor/grad_mode.h"
#include "tensor/memory.h"

namespace brigade::nn {
namespace {

using Json = nlohmann::json;
using Clock = std::chrono::steady_clock;

// The training and evaluation generators are keyed by the run's seed but must not replay the stream that
// initialised the weights (GPT draws from Generator(seed)), so each gets its own derived seed.
uint64_t mix_seed(uint64_t seed, uint64_t salt) {
  uint64_t z = seed + salt * 0x9e3779b97f4a7c15ull;  // splitmix64 finaliser
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
constexpr uint64_t kTrainSalt = 1, kEvalSalt = 2, kSampleSalt = 3;

// Held-out problems scored at intermediate evaluations (all of them at the end).
constexpr int64_t kProgressProblems = 200;
constexpr int64_t kScoreBatch = 250;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

Device checked_device(const std::string& name) {
  const Device device = Device::parse(name);  // DeviceError for an unknown name
  if (device.is_cuda()) {
    const int count = cuda_device_count();
    BRIGADE_CHECK_DEVICE(device.index < count, "train: device ", device.str(), " is not available (", count,
                         " CUDA device", count == 1 ? "" : "s",
                         count == 0 ? ": " + cuda_unavailable_reason() : std::string(), ")");
  }
  return device;
}

// Mean loss over eval_iters fixed validation batches (the same windows every time).
double validation_loss(GPT& model, StepRunner& runner, const TrainData& data, const TrainOptions& options,
                       const Device& device) {
  NoGradGuard no_grad;
  const bool was_training = model.is_training();
  model.eval();
  Generator eval_generator(mix_seed(options.seed, kEvalSalt));
  double total = 0.0;
  for (int64_t i = 0; i < options.eval_iters; ++i) {
    Batch batch =
        random_batch(data.val, options.batch, options.block, eval_generator, device, data.val_starts);
    const Tensor logits = runner.forward(model, batch.x);
    total += GPT::loss(logits, batch.y.to(logits.device())).item();
  }
  model.train(was_training);
  return total / static_cast<double>(options.eval_iters);
}

ExactMatchScore score(GPT& model, StepRunner& runner, const TrainData& data, int64_t count,
                      const Device& device) {
  const auto forward = [&](const Tensor& ids) { return runner.forward(model, ids); };
  const AdditionTask& task = *data.task;
  return score_exact_match_batched(
      task,
      [&](const std::vector<std::string>& prompts) {
        return greedy_complete(model, data.tokenizer, prompts, task.completion_length(), device, forward);
      },
      std::min<int64_t>(count, static_cast<int64_t>(task.heldout_problems().size())), kScoreBatch);
}

}  // namespace

void check_resume_compatible(const TrainOptions& options, const Checkpoint& checkpoint) {
  const GPTConfig& c = checkpoint.config;
  auto same = [&](const char* flag, int64_t mine, int64_t theirs) {
    BRIGADE_CHECK_VALUE(mine == theirs, flag, " ", mine, " differs from the checkpoint's model (", theirs,
                        "); a resumed run keeps the checkpoint's model shape");
  };
  same("--layers", options.layers, c.n_layer);
  same("--heads", options.heads, c.n_head);
  same("--embd", options.embd, c.n_embd);
  same("--block", options.resolved_block(), c.block_size);
}

// ---- the step engine -------------------------------------------------------------------------------------

double UnpipelinedRunner::forward_backward(GPT& model, const Batch& batch) {
  Tensor loss = GPT::loss(model.forward(batch.x), batch.y);
  const double value = loss.item();
  if (std::isfinite(value)) loss.backward();
  return value;
}

// ---- the session: setup -----------------------------------------------------------------------------------

TrainSession::TrainSession(const TrainOptions& options, const TrainHooks& hooks, StepRunner* runner)
    : started_(Clock::now()),
      options_(checked(options, runner)),
      hooks_(hooks),
      runner_(runner != nullptr ? runner : &plain_),
      // The whole run (steps, evaluations, completions; pipeline stages inherit it) under --dtype's autocast.
      autocast_(autograd::autocast_dtype_from_name(options_.dtype)),
      generator_(mix_seed(options_.seed, kTrainSalt)),
      schedule_{.max_lr = options_.lr,
                .min_lr = options_.min_lr,
                .warmup_steps = options_.warmup,
                .decay_steps = std::max(options_.steps, options_.warmup)} {
  if (options_.threads > 0) omp_set_num_threads(options_.threads);
  device_ = checked_device(options_.device);
  reset_peak_memory(device_);
  std::optional<Checkpoint> checkpoint;
  if (!options_.resume.empty()) {
    checkpoint = load_checkpoint(options_.resume);
    check_resume_compatible(options_, *checkpoint);
  }
  data_ = load_train_data(options_, options_.block, checkpoint ? &checkpoint->info.tokenizer : nullptr);
  build_model(checkpoint);
  prepare_runner(checkpoint);
  make_optimizer(checkpoint);
  log_setup(checkpoint.has_value());
}

TrainOptions TrainSession::checked(const TrainOptions& requested, const StepRunner* runner) {
  requested.validate();
  BRIGADE_CHECK_VALUE(runner != nullptr || !requested.uses_pipeline(),
                      "train: these options use the pipeline (--stages ", requested.stages,
                      " --microbatches ", requested.microbatches,
                      ", ...), which nn::train cannot run alone: pass a pipeline::PipelineRunner "
                      "(pipeline/run/train_runner.h), or set stages = microbatches = 1 for the plain loop");
  TrainOptions options = requested;
  options.block = options.resolved_block();
  return options;
}

void TrainSession::build_model(const std::optional<Checkpoint>& checkpoint) {
  if (checkpoint) {
    config_ = checkpoint->config;
  } else {
    config_.vocab_size = data_.tokenizer.vocab_size();
    config_.block_size = options_.block;
    config_.n_layer = options_.layers;
    config_.n_head = options_.heads;
    config_.n_embd = options_.embd;
  }
  config_.dropout = options_.dropout;
  model_ = std::make_unique<GPT>(config_, options_.seed);
  model_->to(device_);
  if (checkpoint) model_->load_state_dict(checkpoint->model, /*strict=*/true);
  model_->train();
  result_.config = config_;
  result_.device = device_.str();
  result_.params = model_->num_parameters();
}

void TrainSession::prepare_runner(const std::optional<Checkpoint>& checkpoint) {
  if (runner_ == &plain_) return;
  // The engine sees a batch drawn with its own generator, so the training stream is the same with or
  // without it; it may move parameters, so the optimizer is made afterwards.
  Generator sample_generator(mix_seed(options_.seed, kSampleSalt));
  const Batch sample = random_batch(data_.train, options_.batch, options_.block, sample_generator, device_,
                                    data_.train_starts);
  runner_->prepare(*model_, sample);
  if (checkpoint && !checkpoint->info.engine_state.empty())
    runner_->restore_state(checkpoint->info.engine_state);
}

void TrainSession::make_optimizer(const std::optional<Checkpoint>& checkpoint) {
  set_dropout_generator(*model_, &generator_);
  optimizer_ = std::make_unique<AdamW>(decay_groups(*model_, options_.weight_decay),
                                       AdamWOptions{.lr = options_.lr,
                                                    .beta1 = 0.9,
                                                    .beta2 = 0.99,
                                                    .eps = 1e-8,
                                                    .weight_decay = options_.weight_decay});
  if (checkpoint) {
    checkpoint->restore_optimizer(*optimizer_, "AdamW");
    generator_.set_state(checkpoint->info.generator);
    step_ = checkpoint->info.step;
  }
  result_.start_step = step_;
}

void TrainSession::log_setup(bool resumed) const {
  message("data: " + data_.description);
  std::ostringstream line;
  line << "model: " << config_.n_layer << (config_.n_layer == 1 ? " layer, " : " layers, ") << config_.n_head
       << (config_.n_head == 1 ? " head, embd " : " heads, embd ") << config_.n_embd << ", block "
       << config_.block_size << ", vocab " << config_.vocab_size << ", " << result_.params
       << " parameters on " << device_.str() << "; batch " << options_.batch << ", " << options_.steps
       << " steps";
  message(line.str());
  if (resumed) message("resumed from '" + options_.resume + "' at step " + std::to_string(step_));
  const std::string engine = runner_->describe();
  if (!engine.empty()) message(engine);
}

void TrainSession::message(const std::string& text) const {
  if (hooks_.on_message) hooks_.on_message(text);
}

// ---- the session: step, save, evaluate, finish
// --------------------------------------------------------------

StepReport TrainSession::step() {
  BRIGADE_CHECK_VALUE(!done(), "TrainSession::step: the run's ", options_.steps, " steps are done");
  if (hooks_.before_step) hooks_.before_step(step_, *model_);
  const Clock::time_point start = Clock::now();
  const double lr = schedule_.lr_at(step_);
  optimizer_->set_lr(lr);
  const Batch batch =
      random_batch(data_.train, options_.batch, options_.block, generator_, device_, data_.train_starts);
  const double loss = runner_->forward_backward(*model_, batch);
  if (!std::isfinite(loss)) stop_non_finite("loss", loss);
  const double max_norm =
      options_.grad_clip > 0.0 ? options_.grad_clip : std::numeric_limits<double>::infinity();
  const double norm = runner_->clip_grad_norm(*model_, max_norm);
  if (!std::isfinite(norm)) stop_non_finite("gradient norm", norm);
  optimizer_->step();
  optimizer_->zero_grad();
  const double ms = 1e3 * seconds_since(start);
  step_ms_.push_back(ms);
  result_.losses.push_back(loss);
  loss_since_eval_ += loss;
  ++steps_since_eval_;
  ++step_;
  const StepReport report{step_, options_.steps, loss, lr, norm, ms, options_.batch * options_.block};
  if (hooks_.on_step) hooks_.on_step(report);
  return report;
}

void TrainSession::stop_non_finite(const char* what, double value) const {
  std::ostringstream text;
  text << "training stopped: the " << what << " is " << value << " at step " << step_ + 1 << " of "
       << options_.steps << " (try a lower --lr or --grad-clip); ";
  if (last_saved_ >= 0) {
    text << "the last checkpoint, '" << options_.save << "' (step " << last_saved_ << "), is intact";
  } else if (!options_.resume.empty()) {
    text << "nothing was saved in this run; '" << options_.resume << "' is intact";
  } else {
    text << "no checkpoint was written";
  }
  BRIGADE_THROW(NonFiniteLossError, text.str());
}

bool TrainSession::save_due() const {
  return !options_.save.empty() && options_.save_every > 0 && step_ > result_.start_step &&
         step_ % options_.save_every == 0 && last_saved_ != step_;
}

void TrainSession::save() {
  BRIGADE_CHECK_VALUE(!options_.save.empty(), "TrainSession::save: the options name no checkpoint (--save)");
  const CheckpointInfo info{.tokenizer = data_.tokenizer,
                            .step = step_,
                            .generator = generator_.state(),
                            .train_args = options_.to_json(),
                            .partition = runner_->partition_json(*model_),
                            .engine_state = runner_->state_json()};
  runner_->save_checkpoint(options_.save, *model_, *optimizer_, info);
  last_saved_ = step_;
  message("saved checkpoint '" + options_.save + "' (step " + std::to_string(step_) + ")");
}

bool TrainSession::evaluation_due() const {
  return options_.eval_every > 0 && step_ > result_.start_step && step_ % options_.eval_every == 0 &&
         step_ < options_.steps && last_evaluated_ != step_;
}

EvalReport TrainSession::evaluate() {
  return run_evaluation(/*final=*/false);
}

EvalReport TrainSession::run_evaluation(bool final) {
  EvalReport report;
  report.step = step_;
  report.train_loss = steps_since_eval_ > 0 ? loss_since_eval_ / static_cast<double>(steps_since_eval_)
                                            : std::numeric_limits<double>::quiet_NaN();
  runner_->before_evaluation(*model_);
  report.val_loss = validation_loss(*model_, *runner_, data_, options_, device_);
  if (data_.task) {
    const int64_t problems =
        final ? static_cast<int64_t>(data_.task->heldout_problems().size()) : kProgressProblems;
    const ExactMatchScore s = score(*model_, *runner_, data_, problems, device_);
    report.accuracy = s.accuracy();
    report.problems = s.total;
    if (final) {
      result_.accuracy = s.accuracy();
      result_.correct = s.correct;
      result_.total = s.total;
      result_.mistakes = s.mistakes;
    }
  }
  runner_->after_evaluation();
  result_.val_loss = report.val_loss;
  loss_since_eval_ = 0.0;
  steps_since_eval_ = 0;
  last_evaluated_ = step_;
  if (hooks_.on_eval) hooks_.on_eval(report);
  return report;
}

TrainResult TrainSession::finish() {
  BRIGADE_CHECK_VALUE(!finished_, "TrainSession::finish: the session has finished already");
  finished_ = true;
  result_.steps = step_;
  run_evaluation(/*final=*/true);
  if (!options_.save.empty() && last_saved_ != step_) save();
  result_.final_loss =
      result_.losses.empty() ? std::numeric_limits<double>::quiet_NaN() : result_.losses.back();
  result_.ms_per_step = steady_state_median(step_ms_);
  const auto tokens_per_step = static_cast<double>(options_.batch * options_.block);
  result_.tokens_per_s = result_.ms_per_step > 0.0 ? 1e3 * tokens_per_step / result_.ms_per_step : 0.0;
  result_.peak_bytes = memory_stats(device_).peak_bytes;
  result_.wall_s = seconds_since(started_);
  return std::move(result_);
}

// ---- the loop ---------------------------------------------------------------------------------------------

TrainResult train(const TrainOptions& options, const TrainHooks& hooks, StepRunner* runner) {
  TrainSession session(options, hooks, runner);
  while (!session.done()) {
    session.step();
    if (session.save_due()) session.save();
    if (session.evaluation_due()) session.evaluate();
  }
  return session.finish();
}

// ---- metrics ----------------------------------------------------------------------------------------------

std::string TrainResult::metrics_json(const TrainOptions& options) const {
  auto number = [](double value) { return std::isfinite(value) ? Json(value) : Json(nullptr); };
  TrainOptions resolved = options;
  resolved.block = options.resolved_block();
  Json j = {
      {"final_loss", number(final_loss)},
      {"val_loss", number(val_loss)},
      {"tokens_per_s", tokens_per_s},
      {"ms_per_step", ms_per_step},
      {"params", params},
      {"peak_bytes", peak_bytes},
      {"accuracy", accuracy ? Json(*accuracy) : Json(nullptr)},
      {"correct", correct},
      {"heldout", total},
      {"steps", steps},
      {"start_step", start_step},
      {"wall_s", wall_s},
      {"device", device},
      {"config", Json::parse(config.to_json())},
      {"train_args", Json::parse(resolved.to_json())},
      // The pipeline's figures are added by its engine (pipeline/run/train_runner.h); the plain loop is one
      // stage with one microbatch and no schedule.
      {"stages", options.uses_pipeline() ? options.stages : 1},
      {"microbatches", options.uses_pipeline() ? options.microbatches : 1},
      {"schedule", options.uses_pipeline() ? Json(options.schedule) : Json(nullptr)},
  };
  return j.dump(2) + "\n";
}

}  // namespace brigade::nn
