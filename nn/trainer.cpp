// The training loop; what it does and guarantees is described in nn/trainer.h.
#include "nn/trainer.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "autograd/autocast.h"
#include "nn/data.h"
#include "nn/optim.h"
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

std::vector<int64_t> encode_or_explain(const CharTokenizer& tokenizer, const std::string& text,
                                       const std::string& what) {
  try {
    return tokenizer.encode(text);
  } catch (const ValueError& e) {
    BRIGADE_THROW(ValueError, "train: the ", what,
                  " has a character the checkpoint's vocabulary lacks: ", e.what());
  }
}

// Mean loss over eval_iters fixed validation batches (the same windows every time).
double evaluate(GPT& model, const TrainData& data, const TrainOptions& options, int64_t block,
                const Device& device) {
  NoGradGuard no_grad;
  const bool was_training = model.is_training();
  model.eval();
  Generator eval_generator(mix_seed(options.seed, kEvalSalt));
  double total = 0.0;
  for (int64_t i = 0; i < options.eval_iters; ++i) {
    Batch batch = random_batch(data.val, options.batch, block, eval_generator, device, data.val_starts);
    total += GPT::loss(model.forward(batch.x), batch.y).item();
  }
  model.train(was_training);
  return total / static_cast<double>(options.eval_iters);
}

ExactMatchScore score(GPT& model, const TrainData& data, int64_t count, const Device& device) {
  const AdditionTask& task = *data.task;
  return score_exact_match_batched(
      task,
      [&](const std::vector<std::string>& prompts) {
        return greedy_complete(model, data.tokenizer, prompts, task.completion_length(), device);
      },
      std::min<int64_t>(count, static_cast<int64_t>(task.heldout_problems().size())), kScoreBatch);
}

// Field tables shared by to_json and from_json, so the two cannot drift apart.
template <typename Fn>
void for_each_field(TrainOptions& o, Fn&& fn) {
  fn("data", o.data);
  fn("layers", o.layers);
  fn("heads", o.heads);
  fn("embd", o.embd);
  fn("block", o.block);
  fn("batch", o.batch);
  fn("steps", o.steps);
  fn("lr", o.lr);
  fn("min_lr", o.min_lr);
  fn("warmup", o.warmup);
  fn("weight_decay", o.weight_decay);
  fn("dropout", o.dropout);
  fn("grad_clip", o.grad_clip);
  fn("eval_every", o.eval_every);
  fn("eval_iters", o.eval_iters);
  fn("device", o.device);
  fn("threads", o.threads);
  fn("dtype", o.dtype);
  fn("seed", o.seed);
  fn("save", o.save);
  fn("save_every", o.save_every);
  fn("resume", o.resume);
  fn("metrics", o.metrics);
  fn("stages", o.stages);
  fn("microbatches", o.microbatches);
  fn("schedule", o.schedule);
  fn("virtual", o.virtual_chunks);
  fn("recompute", o.recompute);
  fn("partition", o.partition);
  fn("balance", o.balance);
  fn("devices", o.devices);
  fn("memory_budget", o.memory_budget);
  fn("trace", o.trace);
  fn("timeline", o.timeline);
}

}  // namespace

// ---- TrainOptions -----------------------------------------------------------------------------------------

void TrainOptions::validate() const {
  auto positive = [](const char* flag, int64_t value) {
    BRIGADE_CHECK_VALUE(value > 0, flag, " must be a positive integer, found ", value);
  };
  auto non_negative = [](const char* flag, int64_t value) {
    BRIGADE_CHECK_VALUE(value >= 0, flag, " must be >= 0, found ", value);
  };
  positive("--layers", layers);
  positive("--heads", heads);
  positive("--embd", embd);
  BRIGADE_CHECK_VALUE(embd % heads == 0, "--heads ", heads, " does not divide --embd ", embd,
                      " (each head gets embd / heads channels)");
  BRIGADE_CHECK_VALUE(block >= 0, "--block must be a positive integer (or 0 for automatic), found ", block);
  positive("--batch", batch);
  non_negative("--steps", steps);
  BRIGADE_CHECK_VALUE(std::isfinite(lr) && lr > 0.0, "--lr must be a positive number, found ", lr);
  BRIGADE_CHECK_VALUE(std::isfinite(min_lr) && min_lr >= 0.0 && min_lr <= lr,
                      "--min-lr must be in [0, --lr = ", lr, "], found ", min_lr);
  non_negative("--warmup", warmup);
  BRIGADE_CHECK_VALUE(std::isfinite(weight_decay) && weight_decay >= 0.0,
                      "--weight-decay must be >= 0, found ", weight_decay);
  BRIGADE_CHECK_VALUE(dropout >= 0.0 && dropout < 1.0, "--dropout must be in [0, 1), found ", dropout);
  BRIGADE_CHECK_VALUE(std::isfinite(grad_clip) && grad_clip >= 0.0,
                      "--grad-clip must be >= 0 (0: off), found ", grad_clip);
  non_negative("--eval-every", eval_every);
  positive("--eval-iters", eval_iters);
  BRIGADE_CHECK_VALUE(threads >= 0, "--threads must be >= 0 (0: OpenMP's default), found ", threads);
  non_negative("--save-every", save_every);
  BRIGADE_CHECK_VALUE(save_every == 0 || !save.empty(), "--save-every ", save_every, " needs --save FILE");
  try {
    (void)Device::parse(device);
  } catch (const DeviceError&) {
    BRIGADE_THROW(ValueError, "--device '", device, "' is not a device: expected cpu, cuda or cuda:N");
  }
  BRIGADE_CHECK_VALUE(dtype == "fp32" || dtype == "bf16", "--dtype must be fp32 or bf16, found '", dtype,
                      "'");
  // The pipeline's numbers (its names are checked by pipeline/run/train_runner.h, which knows them).
  positive("--stages", stages);
  positive("--microbatches", microbatches);
  positive("--virtual", virtual_chunks);
  BRIGADE_CHECK_VALUE(batch % microbatches == 0, "--batch ", batch, " is not divisible by --microbatches ",
                      microbatches, " (every microbatch must have batch / microbatches sequences)");
  const int64_t model_layers = layers + 2;  // embed, the blocks, head: what the pipeline cuts
  BRIGADE_CHECK_VALUE(stages * virtual_chunks <= model_layers, "--stages ", stages,
                      virtual_chunks > 1 ? " x --virtual " + std::to_string(virtual_chunks) : std::string(),
                      " needs ", stages * virtual_chunks,
                      " model chunks of at least one layer, but the model has ", model_layers,
                      " layers (embed, ", layers, layers == 1 ? " block" : " blocks",
                      ", head): use fewer stages or more --layers");
}

bool TrainOptions::uses_pipeline() const {
  return stages > 1 || microbatches > 1 || virtual_chunks > 1 || recompute != "never" || !balance.empty() ||
         !devices.empty() || !memory_budget.empty() || !trace.empty() || !timeline.empty();
}

int64_t TrainOptions::resolved_block() const {
  if (block > 0) return block;
  return data.empty() ? AdditionTask().line_length() : 64;
}

std::string TrainOptions::to_json() const {
  Json j = Json::object();
  TrainOptions copy = *this;
  for_each_field(copy, [&](const char* key, auto& value) { j[key] = value; });
  return j.dump();
}

TrainOptions TrainOptions::from_json(const std::string& text) {
  Json j;
  try {
    j = Json::parse(text);
  } catch (const Json::exception& e) {
    BRIGADE_THROW(ValueError, "TrainOptions.from_json: not valid JSON (", e.what(), ")");
  }
  BRIGADE_CHECK_VALUE(j.is_object(), "TrainOptions.from_json: expected a JSON object, found ", j.type_name());
  TrainOptions o;
  for_each_field(o, [&](const char* key, auto& value) {
    if (!j.contains(key)) return;
    using T = std::decay_t<decltype(value)>;
    const Json& v = j[key];
    bool ok = false;
    if constexpr (std::is_same_v<T, std::string>) {
      ok = v.is_string();
    } else if constexpr (std::is_same_v<T, double>) {
      ok = v.is_number();
    } else if constexpr (std::is_unsigned_v<T>) {
      ok = v.is_number_unsigned();
    } else {
      ok = v.is_number_integer();
    }
    BRIGADE_CHECK_VALUE(ok, "TrainOptions.from_json: field '", key, "' has the wrong type: ", v.dump());
    value = v.get<T>();
  });
  return o;
}

// ---- data -------------------------------------------------------------------------------------------------

TrainData load_train_data(const TrainOptions& options, int64_t block, const CharTokenizer* tokenizer) {
  TrainData data;
  if (options.data.empty()) {
    auto task = std::make_shared<AdditionTask>();
    std::string heldout_text;
    for (const AdditionProblem& p : task->heldout_problems()) heldout_text += task->line(p);
    data.tokenizer = tokenizer ? *tokenizer : CharTokenizer::from_text(task->train_text());
    data.train = encode_or_explain(data.tokenizer, task->train_text(), "default corpus");
    data.val = encode_or_explain(data.tokenizer, heldout_text, "default corpus");
    const int64_t newline = data.tokenizer.id_of(U'\n');
    data.train_starts = line_starts(data.train, newline, block);
    data.val_starts = line_starts(data.val, newline, block);
    BRIGADE_CHECK_VALUE(!data.train_starts.empty() && !data.val_starts.empty(), "train: --block ", block,
                        " is too long for the default corpus");
    data.description = task->describe();
    data.task = std::move(task);
    return data;
  }
  const std::string text = read_text_file(options.data);
  data.tokenizer = tokenizer ? *tokenizer : CharTokenizer::from_text(text);
  const std::vector<int64_t> tokens =
      encode_or_explain(data.tokenizer, text, "data file '" + options.data + "'");
  BRIGADE_CHECK_VALUE(static_cast<int64_t>(tokens.size()) >= 10 * (block + 1), "data file '", options.data,
                      "' has ", tokens.size(), " characters: too few for --block ", block, " (need at least ",
                      10 * (block + 1), " so that the 10% validation part holds a window)");
  TokenSplit split = split_tokens(tokens, 0.9);
  data.train = std::move(split.train);
  data.val = std::move(split.val);
  std::ostringstream description;
  description << "'" << options.data << "': " << tokens.size() << " characters, vocabulary "
              << data.tokenizer.vocab_size() << " (" << data.train.size() << " train, " << data.val.size()
              << " validation)";
  data.description = description.str();
  return data;
}

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

std::vector<std::string> greedy_complete(GPT& model, const CharTokenizer& tokenizer,
                                         const std::vector<std::string>& prompts, int64_t max_new_tokens,
                                         const Device& device) {
  if (prompts.empty()) return {};
  std::vector<int64_t> ids;
  int64_t length = -1;
  for (const std::string& prompt : prompts) {
    std::vector<int64_t> row = tokenizer.encode(prompt);
    BRIGADE_CHECK_VALUE(length < 0 || static_cast<int64_t>(row.size()) == length,
                        "greedy_complete: prompts must all have one length, found ", length, " and ",
                        row.size());
    length = static_cast<int64_t>(row.size());
    ids.insert(ids.end(), row.begin(), row.end());
  }
  const auto count = static_cast<int64_t>(prompts.size());
  Tensor out = model.generate(from_vector(ids, {count, length}, device), max_new_tokens, /*temperature=*/0.0);
  const std::vector<int64_t> all = out.to_vector<int64_t>();  // [count, length + max_new_tokens]
  const int64_t width = length + max_new_tokens;
  std::vector<std::string> completions;
  for (int64_t b = 0; b < count; ++b) {
    completions.push_back(tokenizer.decode(
        std::vector<int64_t>(all.begin() + b * width + length, all.begin() + (b + 1) * width)));
  }
  return completions;
}

// ---- the loop ---------------------------------------------------------------------------------------------

double UnpipelinedRunner::forward_backward(GPT& model, const Batch& batch) {
  Tensor loss = GPT::loss(model.forward(batch.x), batch.y);
  const double value = loss.item();
  if (std::isfinite(value)) loss.backward();
  return value;
}

TrainResult train(const TrainOptions& requested, const TrainHooks& hooks, StepRunner* runner) {
  const Clock::time_point run_start = Clock::now();
  requested.validate();
  UnpipelinedRunner plain;
  if (runner == nullptr) {
    BRIGADE_CHECK_VALUE(!requested.uses_pipeline(), "train: these options use the pipeline (--stages ",
                        requested.stages, " --microbatches ", requested.microbatches,
                        ", ...), which nn::train cannot run alone: pass a pipeline::PipelineRunner "
                        "(pipeline/run/train_runner.h), or set stages = microbatches = 1 for the plain loop");
    runner = &plain;
  }
  TrainOptions options = requested;
  // The whole run (steps, evaluations, completions; pipeline stages inherit it) under --dtype's autocast.
  autograd::AutocastGuard autocast(autograd::autocast_dtype_from_name(options.dtype));
  options.block = options.resolved_block();
  const int64_t block = options.block;
  auto message = [&](const std::string& text) {
    if (hooks.on_message) hooks.on_message(text);
  };
  if (options.threads > 0) omp_set_num_threads(options.threads);
  const Device device = checked_device(options.device);
  reset_peak_memory(device);

  // Model, data, optimizer: fresh, or restored from a checkpoint.
  std::optional<Checkpoint> checkpoint;
  if (!options.resume.empty()) {
    checkpoint = load_checkpoint(options.resume);
    check_resume_compatible(options, *checkpoint);
  }
  TrainData data = load_train_data(options, block, checkpoint ? &checkpoint->info.tokenizer : nullptr);
  GPTConfig config;
  if (checkpoint) {
    config = checkpoint->config;
    config.dropout = options.dropout;
  } else {
    config.vocab_size = data.tokenizer.vocab_size();
    config.block_size = block;
    config.n_layer = options.layers;
    config.n_head = options.heads;
    config.n_embd = options.embd;
    config.dropout = options.dropout;
  }
  GPT model(config, options.seed);
  model.to(device);
  if (checkpoint) model.load_state_dict(checkpoint->model, /*strict=*/true);
  model.train();
  if (runner != &plain) {
    // The engine sees a batch drawn with its own generator, so the training stream is the same with or
    // without it; it may move parameters, so the optimizer is made afterwards.
    Generator sample_generator(mix_seed(options.seed, kSampleSalt));
    const Batch sample =
        random_batch(data.train, options.batch, block, sample_generator, device, data.train_starts);
    runner->prepare(model, sample);
    if (checkpoint && !checkpoint->info.engine_state.empty()) {
      runner->restore_state(checkpoint->info.engine_state);
    }
  }
  Generator generator(mix_seed(options.seed, kTrainSalt));
  set_dropout_generator(model, &generator);
  AdamW optimizer(
      decay_groups(model, options.weight_decay),
      AdamWOptions{
          .lr = options.lr, .beta1 = 0.9, .beta2 = 0.99, .eps = 1e-8, .weight_decay = options.weight_decay});
  int64_t start = 0;
  if (checkpoint) {
    checkpoint->restore_optimizer(optimizer, "AdamW");
    generator.set_state(checkpoint->info.generator);
    start = checkpoint->info.step;
  }
  const CosineSchedule schedule{.max_lr = options.lr,
                                .min_lr = options.min_lr,
                                .warmup_steps = options.warmup,
                                .decay_steps = std::max(options.steps, options.warmup)};

  TrainResult result;
  result.start_step = start;
  result.config = config;
  result.device = device.str();
  result.params = model.num_parameters();
  {
    std::ostringstream line;
    line << "data: " << data.description;
    message(line.str());
    line.str("");
    line << "model: " << config.n_layer << (config.n_layer == 1 ? " layer, " : " layers, ") << config.n_head
         << (config.n_head == 1 ? " head, embd " : " heads, embd ") << config.n_embd << ", block "
         << config.block_size << ", vocab " << config.vocab_size << ", " << result.params << " parameters on "
         << device.str() << "; batch " << options.batch << ", " << options.steps << " steps";
    message(line.str());
    if (checkpoint) {
      line.str("");
      line << "resumed from '" << options.resume << "' at step " << start;
      message(line.str());
    }
    const std::string engine = runner->describe();
    if (!engine.empty()) message(engine);
  }

  int64_t last_saved = -1;
  auto save = [&](int64_t completed) {
    const CheckpointInfo info{.tokenizer = data.tokenizer,
                              .step = completed,
                              .generator = generator.state(),
                              .train_args = options.to_json(),
                              .partition = runner->partition_json(model),
                              .engine_state = runner->state_json()};
    save_checkpoint(options.save, model, &optimizer, info);
    last_saved = completed;
    message("saved checkpoint '" + options.save + "' (step " + std::to_string(completed) + ")");
  };
  auto stop_non_finite = [&](const char* what, double value, int64_t step) {
    std::ostringstream text;
    text << "training stopped: the " << what << " is " << value << " at step " << step + 1 << " of "
         << options.steps << " (try a lower --lr or --grad-clip); ";
    if (last_saved >= 0) {
      text << "the last checkpoint, '" << options.save << "' (step " << last_saved << "), is intact";
    } else if (!options.resume.empty()) {
      text << "nothing was saved in this run; '" << options.resume << "' is intact";
    } else {
      text << "no checkpoint was written";
    }
    BRIGADE_THROW(NonFiniteLossError, text.str());
  };

  std::vector<double> step_ms;
  double loss_since_eval = 0.0;
  int64_t steps_since_eval = 0;
  auto run_eval = [&](int64_t completed, bool final) {
    EvalReport report;
    report.step = completed;
    report.train_loss = steps_since_eval > 0 ? loss_since_eval / static_cast<double>(steps_since_eval)
                                             : std::numeric_limits<double>::quiet_NaN();
    report.val_loss = evaluate(model, data, options, block, device);
    if (data.task) {
      ExactMatchScore s = score(
          model, data, final ? static_cast<int64_t>(data.task->heldout_problems().size()) : kProgressProblems,
          device);
      report.accuracy = s.accuracy();
      report.problems = s.total;
      if (final) {
        result.accuracy = s.accuracy();
        result.correct = s.correct;
        result.total = s.total;
        result.mistakes = s.mistakes;
      }
    }
    result.val_loss = report.val_loss;
    loss_since_eval = 0.0;
    steps_since_eval = 0;
    if (hooks.on_eval) hooks.on_eval(report);
  };

  const int64_t tokens_per_step = options.batch * block;
  for (int64_t step = start; step < options.steps; ++step) {
    if (hooks.before_step) hooks.before_step(step, model);
    const Clock::time_point step_start = Clock::now();
    const double lr = schedule.lr_at(step);
    optimizer.set_lr(lr);
    Batch batch = random_batch(data.train, options.batch, block, generator, device, data.train_starts);
    const double loss_value = runner->forward_backward(model, batch);
    if (!std::isfinite(loss_value)) stop_non_finite("loss", loss_value, step);
    const double norm =
        clip_grad_norm(model.parameters(),
                       options.grad_clip > 0.0 ? options.grad_clip : std::numeric_limits<double>::infinity());
    if (!std::isfinite(norm)) stop_non_finite("gradient norm", norm, step);
    optimizer.step();
    optimizer.zero_grad();
    const double ms = 1e3 * seconds_since(step_start);
    step_ms.push_back(ms);
    result.losses.push_back(loss_value);
    loss_since_eval += loss_value;
    ++steps_since_eval;
    const int64_t completed = step + 1;
    if (hooks.on_step) {
      hooks.on_step(StepReport{completed, options.steps, loss_value, lr, norm, ms, tokens_per_step});
    }
    if (!options.save.empty() && options.save_every > 0 && completed % options.save_every == 0)
      save(completed);
    if (options.eval_every > 0 && completed % options.eval_every == 0 && completed < options.steps) {
      run_eval(completed, /*final=*/false);
    }
  }

  result.steps = std::max(start, options.steps);
  run_eval(result.steps, /*final=*/true);
  if (!options.save.empty() && last_saved != result.steps) save(result.steps);

  result.final_loss = result.losses.empty() ? std::numeric_limits<double>::quiet_NaN() : result.losses.back();
  result.ms_per_step = steady_state_median(step_ms);
  result.tokens_per_s =
      result.ms_per_step > 0.0 ? 1e3 * static_cast<double>(tokens_per_step) / result.ms_per_step : 0.0;
  result.peak_bytes = memory_stats(device).peak_bytes;
  result.wall_s = seconds_since(run_start);
  return result;
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
