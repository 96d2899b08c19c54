// The pipeline as nn::train's step engine; what it does and reports is described in train_runner.h.
#include "pipeline/run/train_runner.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "nn/statistics.h"
#include "pipeline/run/plan_model.h"
#include "pipeline/run/trace.h"
#include "pipeline/run/trace_merge.h"
#include "pipeline/schedule/generators.h"
#include "pipeline/schedule/schedule_file.h"

namespace brigade::pipeline {
namespace {

using Json = nlohmann::json;

std::vector<std::string> split_commas(const std::string& text) {
  std::vector<std::string> items;
  std::string item;
  std::istringstream in(text);
  while (std::getline(in, item, ',')) items.push_back(item);
  if (!text.empty() && text.back() == ',') items.emplace_back();
  return items;
}

// Rethrows a ValueError from the pipeline's parsers with the flag in front, so that the CLI's usage error
// names the flag the user typed.
template <typename F>
auto with_flag(const char* flag, const std::string& value, F&& f) {
  try {
    return f();
  } catch (const ValueError& e) {
    BRIGADE_THROW(ValueError, flag, " '", value, "': ", e.what());
  }
}

PartitionMethod method_of(const nn::TrainOptions& o) {
  return o.balance.empty() ? parse_partition_method(o.partition) : PartitionMethod::Balance;
}

// Dropout masks of the stages: a seed of their own, so they do not replay the weights' stream.
uint64_t stage_seed(uint64_t seed) {
  uint64_t z = seed + 4 * 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Step 1 of PipelineRunner::prepare: how the layers are profiled (3 repeats after a warm-up, the loss on
// `targets` for the head).
ProfileOptions profile_options(const nn::TrainOptions& o, const Tensor& ids, const Tensor& targets,
                               const std::vector<LayerRecompute>& layer_recompute) {
  ProfileOptions po;
  po.repeats = 3;
  po.warmup = 1;
  po.loss = [targets](const Tensor& logits) { return nn::GPT::loss(logits, targets); };
  po.seed = o.seed;
  // The thread's CPU clock ignores the time the thread waits for a core on a busy machine (exact with one
  // OpenMP thread per stage, the default).
  po.thread_cpu_time = ids.device().is_cpu() && o.threads == 1;
  po.attention_core = std::find(layer_recompute.begin(), layer_recompute.end(),
                                LayerRecompute::AttentionCore) != layer_recompute.end();
  return po;
}

// Step 3 of PipelineRunner::prepare: the memory predicted for the plan, certified against --memory-budget
// (when given) before anything runs: MemoryBudgetExceeded with certify's message.
MemoryPrediction plan_memory(const ModelProfile& profile, const nn::TrainOptions& o, const Schedule& schedule,
                             const std::vector<LayerRecompute>& layer_recompute, const PartitionOptions& part,
                             const std::optional<Schedule>& from_file) {
  MemoryPlan plan;
  plan.schedule = o.schedule;
  plan.stages = static_cast<int>(o.stages);
  plan.microbatches = static_cast<int>(o.microbatches);
  plan.virtual_chunks = schedule.virtual_chunks;
  plan.recompute = schedule.recompute;
  plan.layer_recompute = layer_recompute;
  plan.schedule_lists = from_file;
  plan.batch_size = o.batch;
  plan.partition = part.method;
  plan.balance = part.balance;
  plan.optimizer_state_tensors = 2;  // AdamW: m and v
  if (o.memory_budget.empty()) return predict_memory(profile, plan);
  try {
    return certify(profile, plan, parse_bytes(o.memory_budget));
  } catch (const OutOfMemoryError& e) {
    std::string message = e.what();
    const size_t where = message.rfind(" [");  // the library's " [file.cpp:123]" suffix
    if (where != std::string::npos && message.back() == ']') message.erase(where);
    throw MemoryBudgetExceeded("--memory-budget " + o.memory_budget + ": " + message);
  }
}

}  // namespace

// ---- checking the flags -----------------------------------------------------------------------------------

FaultInjection parse_fault_injection(const std::string& text) {
  auto bad = [&](const std::string& why) {
    BRIGADE_THROW(ValueError, "--fail-at '", text, "': ", why,
                  " (expected N:S:ACTION, e.g. 3:1:B2: stage 1 fails at B2 of the 3rd step)");
  };
  std::vector<std::string> fields;
  std::string field;
  std::istringstream in(text);
  while (std::getline(in, field, ':')) fields.push_back(field);
  if (fields.size() != 3) bad("three fields separated by ':'");
  FaultInjection f;
  try {
    f.step = std::stoi(fields[0]);
    f.stage = std::stoi(fields[1]);
  } catch (const std::exception&) {
    bad("the step and the stage must be integers");
  }
  if (f.step < 1 || f.stage < 0) bad("the step must be >= 1 and the stage >= 0");
  const std::string& label = fields[2];
  size_t digits = label.find_first_of("0123456789");
  if (digits == std::string::npos || digits == 0) bad("the action must be a kind and a microbatch, like B2");
  const std::string kind = label.substr(0, digits);
  const std::map<std::string, ActionKind> kinds = {{"F", ActionKind::Forward},
                                                   {"B", ActionKind::Backward},
                                                   {"Bi", ActionKind::BackwardInput},
                                                   {"Bw", ActionKind::BackwardWeight},
                                                   {"R", ActionKind::Recompute}};
  if (!kinds.count(kind)) bad("unknown action kind '" + kind + "' (F, B, Bi, Bw or R)");
  f.kind = kinds.at(kind);
  try {
    f.microbatch = std::stoi(label.substr(digits));
  } catch (const std::exception&) {
    bad("the microbatch must be an integer");
  }
  return f;
}

std::vector<Device> stage_devices(const nn::TrainOptions& options) {
  std::vector<Device> devices;
  if (options.devices.empty()) {
    devices.assign(static_cast<size_t>(options.stages), Device::parse(options.device));
    return devices;
  }
  for (const std::string& item : split_commas(options.devices)) {
    try {
      devices.push_back(Device::parse(item));
    } catch (const DeviceError&) {
      BRIGADE_THROW(ValueError, "--devices '", options.devices, "': '", item,
                    "' is not a device (expected cpu, cuda or cuda:N, one per stage or one for all)");
    }
  }
  BRIGADE_CHECK_VALUE(devices.size() == 1 || static_cast<int64_t>(devices.size()) == options.stages,
                      "--devices '", options.devices, "' names ", devices.size(), " devices; expected 1 or ",
                      options.stages, " (one per stage of --stages ", options.stages, ")");
  if (devices.size() == 1) devices.assign(static_cast<size_t>(options.stages), devices.front());
  return devices;
}

std::vector<LayerRecompute> layer_recompute_of(const nn::TrainOptions& o) {
  // The GPT as a Sequential: embed, the blocks (each with attention), head.
  std::vector<bool> has_attention(static_cast<size_t>(o.layers) + 2, true);
  has_attention.front() = has_attention.back() = false;
  return with_flag("--recompute", o.recompute,
                   [&] { return RecomputeSetting::parse(o.recompute).resolve(has_attention); });
}

Schedule schedule_of(const nn::TrainOptions& o) {
  const int S = static_cast<int>(o.stages), M = static_cast<int>(o.microbatches);
  const Recompute recompute =
      with_flag("--recompute", o.recompute, [&] { return RecomputeSetting::parse(o.recompute).policy; });
  if (!o.schedule_file.empty()) {
    Schedule file;
    try {
      file = read_schedule_file(o.schedule_file);
    } catch (const ScheduleFileError& e) {  // its message starts with the path
      BRIGADE_THROW(ValueError, "--schedule-file ", e.what());
    }
    BRIGADE_CHECK_VALUE(file.stages == S && file.microbatches == M, "--schedule-file '", o.schedule_file,
                        "' runs ", file.stages, " stages x ", file.microbatches,
                        " microbatches: give --stages ", file.stages, " --microbatches ", file.microbatches);
    BRIGADE_CHECK_VALUE(o.virtual_chunks == 1 || o.virtual_chunks == file.virtual_chunks, "--virtual ",
                        o.virtual_chunks, ": --schedule-file '", o.schedule_file, "' runs ",
                        file.virtual_chunks, " chunks per stage");
    return with_flag("--recompute", o.recompute, [&] { return with_recompute(file, recompute); });
  }
  const std::vector<std::string>& names = schedule_names();
  if (std::find(names.begin(), names.end(), o.schedule) == names.end()) {
    BRIGADE_THROW(ValueError, "--schedule '", o.schedule,
                  "' is not a schedule; expected one of: ", schedule_name_list());
  }
  // The chunks per stage the schedule runs with (a V schedule holds two without --virtual).
  const int requested = static_cast<int>(o.virtual_chunks);
  const int fixed = schedule_traits(o.schedule).chunks_per_stage;
  BRIGADE_CHECK_VALUE(requested == 1 || fixed == 0 || requested == fixed, "--virtual ", requested,
                      " needs --schedule interleaved or looped-bfs (", o.schedule, " runs ", fixed,
                      fixed == 1 ? " chunk" : " chunks", " per stage)");
  // The schedule's own checks (e.g. interleaved needs M to be a multiple of S).
  return with_flag("--schedule", o.schedule,
                   [&] { return make_schedule(o.schedule, S, M, requested, recompute); });
}

void check_train_options(const nn::TrainOptions& o) {
  o.validate();
  const int S = static_cast<int>(o.stages);
  const int layers = static_cast<int>(o.layers) + 2;
  const PartitionMethod method =
      with_flag("--partition", o.partition, [&] { return parse_partition_method(o.partition); });
  BRIGADE_CHECK_VALUE(method != PartitionMethod::Balance || !o.balance.empty(),
                      "--partition balance needs --balance (the layers per stage, e.g. 2,2)");
  const Schedule schedule = schedule_of(o);
  (void)layer_recompute_of(o);  // a per-layer plan must fit the model
  const int v = schedule.virtual_chunks;
  BRIGADE_CHECK_VALUE(S * v <= layers, "--schedule ", schedule.name, " with --stages ", S,
                      v > 1 ? " x " + std::to_string(v) + " chunks" : std::string(), " needs ", S * v,
                      " model chunks of at least one layer, but the model has ", layers, " layers (embed, ",
                      o.layers, " blocks, head): use fewer stages or more --layers");
  // A layout by hand, checked by chunk_bounds (the one check of a balance); without --balance every layer
  // count works (S v <= layers is checked above).
  if (!o.balance.empty()) {
    const std::vector<int> balance =
        with_flag("--balance", o.balance, [&] { return parse_balance(o.balance); });
    (void)chunk_bounds(balance, S, v, layers, "--balance '" + o.balance + "'");
  }
  (void)stage_devices(o);  // every entry a device, one per stage or one for all
  if (!o.fail_at.empty()) {
    const FaultInjection f = parse_fault_injection(o.fail_at);
    BRIGADE_CHECK_VALUE(f.stage < S, "--fail-at '", o.fail_at, "': stage ", f.stage, " outside the ", S,
                        " stages");
  }
  if (!o.memory_budget.empty()) {
    const int64_t budget =
        with_flag("--memory-budget", o.memory_budget, [&] { return parse_bytes(o.memory_budget); });
    BRIGADE_CHECK_VALUE(budget > 0, "--memory-budget '", o.memory_budget, "' must be a positive byte count");
  }
}

// ---- the runner -------------------------------------------------------------------------------------------

PipelineRunner::PipelineRunner(const nn::TrainOptions& options, ProcessGroup* world)
    : options_(options), world_(world) {
  if (!options.fail_at.empty()) fault_ = parse_fault_injection(options.fail_at);
  if (world_ != nullptr) {
    // The processes exist before the plan: their count fixes S x D.
    BRIGADE_CHECK_VALUE(options.plan.empty(),
                        "--plan auto plans one process (its stages as threads or "
                        "streams); for ",
                        world_->size(), " processes run brigade plan --devices ", world_->size(),
                        " --replicas D and launch the pick's flags with mpirun");
    layout_ = RankLayout{static_cast<int>(options.stages), static_cast<int>(options.data_parallel)};
    layout_->check(world_->size());
  } else {
    BRIGADE_CHECK_VALUE(options.data_parallel == 1, "--data-parallel ", options.data_parallel,
                        " runs one process per stage and replica: launch brigade with mpirun -np ",
                        options.stages * options.data_parallel, " (docs/distributed.md)");
  }
}

PipelineRunner::~PipelineRunner() = default;

void PipelineRunner::plan_auto(nn::GPT& model, const nn::Batch& sample) {
  PlanRequest request = plan_request_for(options_);
  request.profile = model_profiler(model, sample, options_.threads);
  price_executor(request, model, options_.threads);
  plan_ = plan_pipeline(request);
  if (plan_->ranked.empty()) {
    try {
      (void)plan_->best();
    } catch (const ValueError& e) {
      throw MemoryBudgetExceeded(std::string("--plan auto: ") + e.what());
    }
  }
  apply_plan(plan_->best(), options_);
}

void PipelineRunner::prepare(nn::GPT& model, const nn::Batch& sample) {
  if (options_.plan == "auto") plan_auto(model, sample);
  check_train_options(options_);
  const nn::TrainOptions& o = options_;
  const int S = static_cast<int>(o.stages), M = static_cast<int>(o.microbatches);
  const std::vector<Device> devices = stage_devices(o);
  // The schedule decides the chunks per stage and where they go (a V schedule holds two).
  const Schedule schedule = schedule_of(o);
  const int v = schedule.virtual_chunks;
  const std::optional<Schedule> from_file =
      o.schedule_file.empty() ? std::nullopt : std::optional<Schedule>(schedule);

  // 1. Per-layer profile at the run's microbatch size, on the model's device.
  const int64_t per = o.batch / M;
  const Tensor ids = sample.x.narrow(0, 0, per), targets = sample.y.narrow(0, 0, per);
  const std::vector<LayerRecompute> layer_recompute = layer_recompute_of(o);
  profile_ = profile_layers(model, ids, profile_options(o, ids, targets, layer_recompute));

  // 2. The cut.
  PartitionOptions part;
  part.method = method_of(o);
  part.stages = S;
  part.virtual_chunks = v;
  part.placement = schedule.placement;
  if (!o.balance.empty()) part.balance = parse_balance(o.balance);
  partition_ = make_partition(*profile_, part);
  if (world_ != nullptr) agree_on_partition();

  // 3. Memory: predicted for the plan, certified against the budget before anything runs.
  prediction_ = plan_memory(*profile_, o, schedule, layer_recompute, part, from_file);

  // 4. The pipeline.
  config_.schedule = o.schedule;
  config_.stages = S;
  config_.microbatches = M;
  config_.virtual_chunks = v;
  config_.recompute = schedule.recompute;
  config_.layer_recompute = layer_recompute;
  config_.schedule_lists = from_file;
  config_.balance = partition_->layer_counts();
  config_.devices = devices;
  config_.seed = stage_seed(o.seed);
  config_.grad_clip = 0.0;       // nn::train clips, as in the plain loop
  config_.check_finite = false;  // nn::train stops on a non-finite loss, as in the plain loop
  config_.threads_per_stage = o.threads;
  config_.replicas = layout_ ? layout_->replicas : 1;
  config_.bucket_bytes = std::max<int64_t>(1, std::llround(o.bucket_mb * 1048576.0));
  std::unique_ptr<Transport> transport = world_ != nullptr ? join_processes(schedule, devices) : nullptr;
  pipeline_ = std::make_unique<Pipeline>(model, config_, Pipeline::LossFn{}, std::move(transport));

  // The prediction of the step from the layer profile (plan/partition.h: profile_costs), with the links'
  // transfer time across processes.
  Costs costs = profile_costs(*profile_, *partition_, layer_recompute);
  if (world_ != nullptr) connect_processes(costs);
  simulated_ = simulate(pipeline_->schedule(), costs);
  peak_activation_bytes_.assign(static_cast<size_t>(S), 0);
  peak_step_bytes_.assign(static_cast<size_t>(S), 0);
}

double PipelineRunner::forward_backward(nn::GPT& model, const nn::Batch& batch) {
  (void)model;  // the pipeline holds it
  require_prepared("forward_backward");
  ++steps_started_;
  // --fail-at: armed for this one step (replica 0's stage only, across processes).
  pipeline_->clear_faults();
  if (fault_ && fault_->step == steps_started_ && (!collectives_ || collectives_->replica() == 0))
    pipeline_->fail_at(fault_->stage, fault_->kind, fault_->microbatch);
  if (collectives_) return forward_backward_across_processes(batch);
  StepResult result = pipeline_->forward_backward(batch.x, batch.y);
  bubbles_.push_back(result.bubble);
  step_ms_.push_back(result.step_ms);
  for (const StageReport& stage : result.stages) {
    const auto s = static_cast<size_t>(stage.stage);
    peak_activation_bytes_[s] = std::max(peak_activation_bytes_[s], stage.activation_peak_bytes);
    peak_step_bytes_[s] = std::max(peak_step_bytes_[s], stage.peak_bytes);
  }
  const double loss = result.loss;
  last_ = std::move(result);
  return loss;
}

std::string PipelineRunner::partition_json(const nn::GPT& model) const {
  (void)model;
  require_prepared("partition_json");
  Json balance = Json::array();
  for (int count : partition_->layer_counts()) balance.push_back(count);
  Json j = {{"stages", options_.stages},
            {"virtual", partition_->virtual_chunks},
            {"placement", to_string(partition_->placement)},
            {"balance", balance},
            {"method", to_string(partition_->method)},
            {"schedule", pipeline_->schedule().name},
            {"microbatches", options_.microbatches},
            {"recompute", options_.recompute}};
  return j.dump();
}

Tensor PipelineRunner::forward(nn::GPT& model, const Tensor& ids) {
  require_prepared("forward");
  // Across processes every rank holds the whole model for evaluations (before_evaluation synchronises
  // it); in one process the stages run it as a forward-only schedule, wherever they are.
  if (collectives_) return model.forward(ids);
  return pipeline_->forward(ids);
}

std::vector<int> PipelineRunner::layer_stages(const nn::GPT& model) const {
  require_prepared("layer_stages");
  std::vector<int> stages(static_cast<size_t>(model.size()), 0);
  for (int s = 0; s < pipeline_->config().stages; ++s) {
    for (int c = 0; c < pipeline_->schedule().virtual_chunks; ++c) {
      const auto [begin, end] = pipeline_->chunk_layers(s, c);
      for (int layer = begin; layer < end; ++layer) stages[static_cast<size_t>(layer)] = s;
    }
  }
  return stages;
}

std::string PipelineRunner::state_json() const {
  require_prepared("state_json");
  std::vector<GeneratorState> states = pipeline_->generator_states();
  if (collectives_) {
    // Across processes (every rank saves at once): every stage's generator, from the ranks of replica 0.
    const GeneratorState mine = states.front();
    const std::vector<std::string> all =
        world_->all_gather(std::to_string(mine.seed) + " " + std::to_string(mine.offset));
    states.clear();
    for (int s = 0; s < layout_->stages; ++s) {
      std::istringstream in(all[static_cast<size_t>(layout_->rank_of(0, s))]);
      GeneratorState state;
      in >> state.seed >> state.offset;
      states.push_back(state);
    }
  }
  Json generators = Json::array();
  for (const GeneratorState& state : states)
    generators.push_back({{"seed", state.seed}, {"offset", state.offset}});
  return Json{{"stage_generators", generators}}.dump();
}

void PipelineRunner::restore_state(const std::string& json) {
  require_prepared("restore_state");
  const Json state = Json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (!state.is_object() || !state.contains("stage_generators")) return;  // another engine's state
  const Json& saved = state["stage_generators"];
  // Saved with another number of stages: those masks cannot be reproduced, the stages keep their seeds.
  if (!saved.is_array() || saved.size() != static_cast<size_t>(options_.stages)) return;
  std::vector<GeneratorState> states;
  for (const Json& entry : saved) {
    BRIGADE_CHECK_VALUE(entry.is_object() && entry.contains("seed") && entry.contains("offset") &&
                            entry["seed"].is_number_unsigned() && entry["offset"].is_number_unsigned(),
                        "PipelineRunner::restore_state: each stage generator must be {\"seed\": uint, "
                        "\"offset\": uint}, found ",
                        entry.dump());
    states.push_back({entry["seed"].get<uint64_t>(), entry["offset"].get<uint64_t>()});
  }
  // Across processes this rank's stage takes its own.
  if (collectives_) states = {states[static_cast<size_t>(collectives_->stage())]};
  pipeline_->set_generator_states(states);
}

std::string PipelineRunner::describe() const {
  require_prepared("describe");
  std::ostringstream out;
  out << "pipeline: " << pipeline_->schedule().name;
  if (!options_.schedule_file.empty()) out << " (from " << options_.schedule_file << ")";
  out << ", " << options_.stages << " stages x " << options_.microbatches << " microbatches of "
      << options_.batch / options_.microbatches;
  if (partition_->virtual_chunks > 1) {
    out << ", " << partition_->virtual_chunks << " chunks per stage";
    if (partition_->placement == Placement::V) out << " (V placement)";
  }
  out << ", recompute " << options_.recompute << ", partition by " << to_string(partition_->method)
      << " (balance " << partition_->balance() << ") on " << pipeline_->device(0).str();
  if (collectives_) {
    out << " (" << layout_->ranks() << " processes: " << layout_->stages << " stages x " << layout_->replicas
        << (layout_->replicas == 1 ? " replica, " : " replicas, ") << transport_name_ << ")";
  } else if (options_.stages > 1) {
    out << " (" << pipeline_->thread_budget() << ")";
  }
  return out.str();
}

void PipelineRunner::require_prepared(const char* what) const {
  BRIGADE_CHECK(pipeline_ != nullptr, "PipelineRunner::", what, ": prepare() has not run");
}

void PipelineRunner::require_step(const char* what) const {
  require_prepared(what);
  BRIGADE_CHECK(last_.has_value(), "PipelineRunner::", what, ": no step has run");
}

const ModelProfile& PipelineRunner::profile() const {
  require_prepared("profile");
  return *profile_;
}
const Partition& PipelineRunner::partition() const {
  require_prepared("partition");
  return *partition_;
}
const MemoryPrediction& PipelineRunner::prediction() const {
  require_prepared("prediction");
  return *prediction_;
}
const Timeline& PipelineRunner::simulated() const {
  require_prepared("simulated");
  return *simulated_;
}
const Pipeline& PipelineRunner::pipeline() const {
  require_prepared("pipeline");
  return *pipeline_;
}
const StepResult& PipelineRunner::last_step() const {
  require_step("last_step");
  return *last_;
}

double PipelineRunner::bubble_measured() const {
  require_step("bubble_measured");
  // Steady state: the first steps pay for allocator warm-up and first-touch page faults (as ms_per_step).
  return nn::steady_state_median(bubbles_);
}

double PipelineRunner::step_ms_measured() const {
  require_step("step_ms_measured");
  return nn::steady_state_median(step_ms_);
}

double PipelineRunner::bubble_simulated() const {
  return simulated().bubble;
}

double PipelineRunner::bubble_simulated_from_trace() const {
  // Across processes: from the merged trace (gather_trace), which rank 0 alone holds.
  if (collectives_ && !merged_) return std::numeric_limits<double>::quiet_NaN();
  return simulate_measured(step_trace()).bubble;
}

const ExecutionTrace& PipelineRunner::step_trace() const {
  return merged_ ? *merged_ : last_step().trace;
}

std::string PipelineRunner::summary() const {
  std::ostringstream out;
  if (plan_) {
    out << plan_->table();
    if (last_) {
      char line[256];
      std::snprintf(
          line, sizeof line,
          "plan auto: step predicted %.2f ms, measured %.2f ms (the pipeline's first action to its last, "
          "without the optimizer step; median over steady steps, %+.1f%%)\n\n",
          plan_->best().pipeline_ms, step_ms_measured(),
          100.0 * (plan_->best().pipeline_ms - step_ms_measured()) / step_ms_measured());
      out << line;
    }
  }
  out << partition().table();
  if (last_) {
    out << "\n" << prediction().table(peak_step_bytes_);
    const Traffic& t = last_->traffic;
    char line[512];
    const double from_trace = bubble_simulated_from_trace();
    if (std::isnan(from_trace)) {  // across processes
      std::snprintf(
          line, sizeof line,
          "\nbubble: measured %.1f%% (median over steady steps, mean over the ranks; simulated %.1f%% "
          "from the layer profile)\n",
          100.0 * bubble_measured(), 100.0 * bubble_simulated());
    } else {
      std::snprintf(line, sizeof line,
                    "\nbubble: measured %.1f%% (median over steady steps; simulated %.1f%% from the layer "
                    "profile, %.1f%% from this run's action times)\n",
                    100.0 * bubble_measured(), 100.0 * bubble_simulated(), 100.0 * from_trace);
    }
    out << line;
    for (size_t b = 0; b < links_.size(); ++b) {
      std::snprintf(
          line, sizeof line, "link s%zu-s%zu (ping-pong at start): %s; an activation of %s in %.1f us\n", b,
          b + 1, links_[b].describe().c_str(), format_bytes(static_cast<double>(activation_bytes())).c_str(),
          1e3 * links_[b].transfer_ms(activation_bytes()));
      out << line;
    }
    if (replica_link_) {
      double exposed = 0.0;
      for (const StageStats& st : simulated().stats) exposed = std::max(exposed, st.exposed_reduce);
      std::snprintf(line, sizeof line,
                    "link r0-r1 (replicas, ping-pong at start): %s; the largest gradient bucket (%s) "
                    "all-reduced in %.1f us; simulated exposed all-reduce %.2f ms\n",
                    replica_link_->describe().c_str(),
                    format_bytes(static_cast<double>(largest_bucket_bytes())).c_str(),
                    1e3 * replica_link_->allreduce_ms(largest_bucket_bytes(), layout_->replicas), exposed);
      out << line;
    }
    if (!links_.empty() || replica_link_) {
      std::snprintf(
          line, sizeof line,
          "step time: measured %.2f ms (rank 0's span, median over steady steps), simulated %.2f ms "
          "from the layer profile and the links\n",
          nn::steady_state_median(step_spans_), simulated().step_time);
      out << line;
    }
    out << "traffic per step: " << format_bytes(static_cast<double>(t.activation_bytes))
        << " of activations in " << t.activation_messages << " messages, "
        << format_bytes(static_cast<double>(t.gradient_bytes)) << " of gradients in " << t.gradient_messages
        << " messages\n";
    if (merged_) {  // across processes: per link, from the merged trace of the last step
      for (const LinkTraffic& link : link_traffic(*merged_)) {
        std::snprintf(line, sizeof line,
                      "  s%d -> s%d: %s in %lld messages, %.3f GB/s achieved (bytes over the time from each "
                      "send to the end of its receive)\n",
                      link.from_stage, link.to_stage, format_bytes(static_cast<double>(link.bytes)).c_str(),
                      static_cast<long long>(link.messages), link.achieved_bytes_per_second() / 1e9);
        out << line;
      }
    }
  } else {
    out << "\n" << prediction().table();
  }
  return out.str();
}

std::string PipelineRunner::add_metrics(const std::string& metrics_json) const {
  Json j = Json::parse(metrics_json);
  const MemoryPrediction& p = prediction();
  Json predicted_total = Json::array(), predicted_step = Json::array();
  for (const StageMemory& s : p.stages) {
    predicted_total.push_back(s.total_bytes());
    predicted_step.push_back(s.step_peak_bytes());
  }
  Json balance = Json::array();
  for (int count : partition().layer_counts()) balance.push_back(count);
  j["schedule"] = pipeline().schedule().name;
  if (!options_.schedule_file.empty()) j["schedule_file"] = options_.schedule_file;
  j["stages"] = options_.stages;
  j["microbatches"] = options_.microbatches;
  j["virtual"] = partition().virtual_chunks;
  j["recompute"] = options_.recompute;
  j["partition"] = {{"method", to_string(partition().method)}, {"balance", balance}};
  j["bubble_simulated"] = bubble_simulated();
  j["step_time_simulated_ms"] = simulated().step_time;
  if (!links_.empty() || replica_link_) {
    Json links = Json::array();
    for (const LinkModel& link : links_)
      links.push_back(
          {{"latency_seconds", link.latency_ms / 1e3}, {"bytes_per_second", link.bytes_per_ms * 1e3}});
    j["links"] = links;
    j["step_time_measured_ms"] =
        step_spans_.empty() ? Json(nullptr) : Json(nn::steady_state_median(step_spans_));
  }
  j["predicted_peak_bytes"] = predicted_total;
  j["predicted_step_peak_bytes"] = predicted_step;
  if (plan_) {
    j["plan"] = {{"flags", plan_->best().flags()}, {"predicted_step_ms", plan_->best().pipeline_ms}};
    if (last_) j["plan"]["measured_step_ms"] = step_ms_measured();
  }
  if (last_) {
    const Traffic& t = last_->traffic;
    j["bubble_measured"] = bubble_measured();
    j["bubble_simulated_from_trace"] = bubble_simulated_from_trace();
    j["peak_activation_bytes"] = peak_activation_bytes_;
    j["peak_step_bytes"] = peak_step_bytes_;
    j["traffic_bytes_per_step"] = t.total_bytes();
    j["traffic"] = {{"activation_bytes", t.activation_bytes},
                    {"gradient_bytes", t.gradient_bytes},
                    {"activation_messages", t.activation_messages},
                    {"gradient_messages", t.gradient_messages}};
  } else {
    j["bubble_measured"] = nullptr;
    j["bubble_simulated_from_trace"] = nullptr;
    j["peak_activation_bytes"] = nullptr;
    j["peak_step_bytes"] = nullptr;
    j["traffic_bytes_per_step"] = nullptr;
  }
  return j.dump(2) + "\n";
}

std::string PipelineRunner::trace_json() const {
  return chrome_trace_json(step_trace(), &simulated());
}

std::string PipelineRunner::timeline_svg() const {
  return render_measured_svg(step_trace(), &simulated());
}

}  // namespace brigade::pipeline
