// The executor: layout, per-step bindings (tied-weight replicas, dropout generators), the stage threads,
// the barrier, and the step's report.
#include "pipeline/run/executor.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <numeric>

#include "autograd/autocast.h"
#include "kernels/kernels.h"
#include "nn/gpt.h"
#include "nn/layers.h"
#include "pipeline/plan/partition.h"
#include "pipeline/run/stage.h"
#include "pipeline/run/stage_thread.h"
#include "pipeline/schedule/generators.h"
#include "pipeline/schedule/validate.h"
#include "tensor/grad_mode.h"
#include "tensor/stream.h"

namespace brigade::pipeline {

void PipelineConfig::validate() const {
  BRIGADE_CHECK_VALUE(stages >= 1, "PipelineConfig: stages must be >= 1, found ", stages);
  BRIGADE_CHECK_VALUE(microbatches >= 1, "PipelineConfig: microbatches must be >= 1, found ", microbatches);
  BRIGADE_CHECK_VALUE(virtual_chunks >= 1, "PipelineConfig: virtual_chunks must be >= 1, found ",
                      virtual_chunks);
  BRIGADE_CHECK_VALUE(grad_clip >= 0.0 && std::isfinite(grad_clip),
                      "PipelineConfig: grad_clip must be >= 0 (0: no clipping), found ", grad_clip);
  BRIGADE_CHECK_VALUE(recv_timeout_seconds >= 0.0,
                      "PipelineConfig: recv_timeout_seconds must be >= 0 (0: none), found ",
                      recv_timeout_seconds);
  BRIGADE_CHECK_VALUE(
      threads_per_stage >= 0,
      "PipelineConfig: threads_per_stage must be >= 0 (0: chosen from the core count), found ",
      threads_per_stage);
  BRIGADE_CHECK_VALUE(replicas >= 1, "PipelineConfig: replicas must be >= 1, found ", replicas);
  BRIGADE_CHECK_VALUE(bucket_bytes >= 1, "PipelineConfig: bucket_bytes must be >= 1, found ", bucket_bytes);
  BRIGADE_CHECK_VALUE(devices.size() <= 1 || devices.size() == static_cast<size_t>(stages),
                      "PipelineConfig: devices lists ", devices.size(), " devices for ", stages,
                      " stages; give one per stage, or one for all");
}

namespace {

using TensorId = const void*;
TensorId id_of(const Tensor& t) {
  return t.unsafe_impl_id();
}

/// A parameter slot of a module inside a layer: where a tensor can be swapped.
struct SlotRef {
  nn::Module* module;
  std::string name;
};

/// Every parameter slot of `layer` (recursively) holding the tensor `id`.
std::vector<SlotRef> slots_holding(nn::Module& layer, TensorId id) {
  std::vector<SlotRef> out;
  for (auto& [path, module] : layer.named_modules()) {
    (void)path;
    for (auto& [name, tensor] : module->named_parameters(/*recurse=*/false)) {
      if (id_of(tensor) == id) out.push_back({module, name});
    }
  }
  return out;
}

/// A fresh leaf with p's values on `device` (sharing p's storage when it is already there).
Tensor make_replica(const Tensor& p, const Device& device) {
  Tensor replica = p.device() == device ? p.detach() : p.detach().to(device);
  replica.set_requires_grad(p.requires_grad());
  return replica;
}

int64_t grad_bytes(const std::vector<Tensor>& params) {
  int64_t bytes = 0;
  for (const Tensor& p : params) {
    if (p.grad().defined()) bytes += static_cast<int64_t>(p.grad().nbytes());
  }
  return bytes;
}

/// What one stage reports of a step that failed.
struct StageFailure {
  bool failed = false;  // this stage raised the error (not stopped by another's abort)
  int order = 0;        // which failed first
  int step = -1;
  Action action;
  std::string message;
  std::exception_ptr cause;
};

}  // namespace

struct Pipeline::Impl {
  struct Shared {
    Tensor param;  // the model's tensor (lives on the owner stage's device)
    std::string name;
    std::vector<int> stages;  // ascending; stages[0] owns it
  };
  std::vector<std::pair<int, int>> bounds;                    // per model chunk: layers [begin, end)
  std::vector<Device> devices;                                // per stage
  std::vector<int> stage_threads;                             // per stage: OpenMP threads (0: not local)
  std::vector<std::unique_ptr<detail::Stage>> stages;         // the local stages, in stage order
  std::vector<std::unique_ptr<detail::StageThread>> threads;  // one per local stage
  std::vector<Shared> shared;
  std::vector<Fault> faults;
  GradientReducer* reducer = nullptr;  // runs the Reduce actions (data parallel)
  LossFn loss;
  std::chrono::steady_clock::time_point origin;  // time 0 of the last step's trace

  class Bindings;  // what a step swaps into the model (below)

  // The constructor's parts, in order (see Pipeline::Pipeline).
  void place_parameters(nn::Sequential& model, const Schedule& schedule);
  void create_stages(nn::Sequential& model, const Schedule& schedule, const PipelineConfig& config);
  // forward_backward's parts.
  std::vector<StageFailure> run_stages(const detail::StepInputs& inputs, const Schedule& schedule,
                                       Transport& transport);
  StepResult report(nn::Sequential& model, const Schedule& schedule, const Transport& transport) const;

  /// The local stage `s`, or null when another process runs it.
  detail::Stage* stage_at(int s) const {
    for (const auto& stage : stages) {
      if (stage->index() == s) return stage.get();
    }
    return nullptr;
  }
  /// Layers of `stage` (all its chunks), in local chunk order.
  std::vector<int> layers_of(const Schedule& schedule, int stage) const {
    std::vector<int> out;
    for (int c = 0; c < schedule.virtual_chunks; ++c) {
      const auto [begin, end] = bounds[static_cast<size_t>(schedule.model_chunk(stage, c))];
      for (int i = begin; i < end; ++i) out.push_back(i);
    }
    return out;
  }
  /// The parameters `stage`'s replicas average, each with the layer whose gradient bucket holds it
  /// (reduce_buckets.h): not the tied ones (their own collective sums them); a parameter used by several
  /// chunks of the stage goes with the chunk whose gradients become final last, at its last layer there.
  std::vector<std::pair<Tensor, int>> reduced_parameters(nn::Sequential& model, const Schedule& schedule,
                                                         int stage) const {
    const std::vector<int> chunks = chunks_by_last_gradient_write(schedule, stage);
    std::vector<TensorId> seen;
    for (const Shared& t : shared) seen.push_back(id_of(t.param));
    std::vector<std::pair<Tensor, int>> out;
    for (int c : chunks) {
      const auto [begin, end] = bounds[static_cast<size_t>(schedule.model_chunk(stage, c))];
      for (int layer = end - 1; layer >= begin; --layer) {
        for (const Tensor& t : model.at(layer)->parameters()) {
          if (std::find(seen.begin(), seen.end(), id_of(t)) != seen.end()) continue;
          seen.push_back(id_of(t));
          out.emplace_back(t, layer);
        }
      }
    }
    return out;
  }
  /// With D > 1 replicas: the gradient buckets of every stage, and their Reduce actions in `schedule`.
  void insert_gradient_reduces(nn::Sequential& model, Schedule& schedule, int64_t bucket_bytes) const {
    std::vector<std::vector<int64_t>> bytes(static_cast<size_t>(schedule.stages),
                                            std::vector<int64_t>(model.size(), 0));
    for (int s = 0; s < schedule.stages; ++s) {
      for (const auto& [t, layer] : reduced_parameters(model, schedule, s))
        bytes[static_cast<size_t>(s)][static_cast<size_t>(layer)] += static_cast<int64_t>(t.nbytes());
    }
    insert_reduces(schedule, gradient_buckets(schedule, bounds, bytes, bucket_bytes));
  }
  /// The distinct parameter tensors the stage's layers hold now.
  std::vector<Tensor> params_of(nn::Sequential& model, const Schedule& schedule, int stage) const {
    std::vector<Tensor> out;
    std::vector<TensorId> seen;
    for (int i : layers_of(schedule, stage)) {
      for (const Tensor& t : model.at(i)->parameters()) {
        if (std::find(seen.begin(), seen.end(), id_of(t)) != seen.end()) continue;
        seen.push_back(id_of(t));
        out.push_back(t);
      }
    }
    return out;
  }
};

/// What a step swaps into the model and must put back: tied-weight replicas, dropout generators.
class Pipeline::Impl::Bindings {
 public:
  Bindings(nn::Sequential& model, const Schedule& schedule, Impl& impl) {
    try {
      for (const auto& shared : impl.shared) {
        for (size_t k = 1; k < shared.stages.size(); ++k) {
          const int stage = shared.stages[k];
          Replica r{shared.param, make_replica(shared.param, impl.devices[static_cast<size_t>(stage)]), {}};
          for (int layer : impl.layers_of(schedule, stage)) {
            for (SlotRef& slot : slots_holding(*model.at(layer), id_of(shared.param))) {
              slot.module->set_parameter(slot.name, r.replica);
              r.slots.push_back(std::move(slot));
            }
          }
          replicas_.push_back(std::move(r));
        }
      }
      for (const auto& stage : impl.stages) {
        for (int layer : impl.layers_of(schedule, stage->index())) {
          model.at(layer)->apply([&](nn::Module& m) {
            if (auto* dropout = dynamic_cast<nn::Dropout*>(&m)) {
              dropouts_.emplace_back(dropout, dropout->generator());
              dropout->set_generator(&stage->generator());
            }
          });
        }
      }
    } catch (...) {
      restore();
      throw;
    }
  }
  ~Bindings() { restore(); }
  Bindings(const Bindings&) = delete;
  Bindings& operator=(const Bindings&) = delete;

  /// Adds each replica's gradient into its parameter's .grad (the barrier has passed).
  void merge_gradients() {
    NoGradGuard no_grad;
    for (Replica& r : replicas_) {
      Tensor g = r.replica.grad();
      if (!g.defined()) continue;
      if (g.device() != r.param.device()) g = g.to(r.param.device());
      Tensor current = r.param.grad();
      if (current.defined()) {
        kernels::add_(current, g);
      } else {
        r.param.set_grad(g);  // the replica's own fresh tensor: nobody else aliases it
      }
      r.replica.set_grad(Tensor());
    }
  }

  /// Puts the parameters and generators back (idempotent).
  void restore() {
    for (Replica& r : replicas_) {
      for (SlotRef& slot : r.slots) slot.module->set_parameter(slot.name, r.param);
    }
    replicas_.clear();
    for (auto& [dropout, generator] : dropouts_) dropout->set_generator(generator);
    dropouts_.clear();
  }

 private:
  struct Replica {
    Tensor param, replica;
    std::vector<SlotRef> slots;
  };
  std::vector<Replica> replicas_;
  std::vector<std::pair<nn::Dropout*, Generator*>> dropouts_;
};

namespace {

/// Sets the parameters' gradients aside so that the step's gradients start from nothing (exact memory
/// accounting, and a failed step can put everything back).
class GradientStash {
 public:
  explicit GradientStash(const std::vector<Tensor>& params) : params_(params) {
    for (Tensor& p : params_) {
      Tensor g = p.grad();
      if (!g.defined()) continue;
      stashed_.emplace_back(p, g);
      p.set_grad(Tensor());
    }
  }
  /// After a good step: .grad = what it was + the step's gradient (as an unpipelined backward adds).
  void add_back() {
    NoGradGuard no_grad;
    for (auto& [p, old] : stashed_) {
      Tensor fresh = p.grad();
      if (fresh.defined()) kernels::add_(old, fresh);
      p.set_grad(old);
    }
    stashed_.clear();
  }
  /// After a failed step: .grad = what it was.
  void put_back() {
    for (Tensor& p : params_) p.set_grad(Tensor());
    for (auto& [p, old] : stashed_) p.set_grad(old);
    stashed_.clear();
  }

 private:
  std::vector<Tensor> params_;
  std::vector<std::pair<Tensor, Tensor>> stashed_;
};

}  // namespace

namespace {

// Layout: model chunk k holds layers [bounds[k].first, bounds[k].second) (chunk_bounds checks the balance).
// The schedule says how many chunks each stage holds (a V schedule holds two whatever the config asked).
std::vector<std::pair<int, int>> chunk_layout(const PipelineConfig& config, const Schedule& schedule,
                                              int layers) {
  const int S = schedule.stages, v = schedule.virtual_chunks, K = S * v;
  BRIGADE_CHECK_VALUE(layers >= K, "Pipeline: ", S, " stages x ", v, " virtual chunks = ", K,
                      " model chunks, but the model has only ", layers,
                      " layers (every chunk needs at least one layer)");
  const std::vector<int> cuts = chunk_bounds(config.balance, S, v, layers, "Pipeline: the balance");
  std::vector<std::pair<int, int>> bounds;
  for (int k = 0; k < K; ++k)
    bounds.emplace_back(cuts[static_cast<size_t>(k)], cuts[static_cast<size_t>(k) + 1]);
  return bounds;
}

// Devices: the config's, one per stage or one for all; by default the device of the model's parameters.
std::vector<Device> choose_devices(const PipelineConfig& config, const nn::Sequential& model) {
  const auto params = model.parameters();
  const Device model_device = params.empty() ? Device::cpu() : params.front().device();
  std::vector<Device> devices;
  for (int s = 0; s < config.stages; ++s) {
    if (config.devices.empty()) {
      devices.push_back(model_device);
    } else {
      devices.push_back(config.devices.size() == 1 ? config.devices[0]
                                                   : config.devices[static_cast<size_t>(s)]);
    }
  }
  return devices;
}

}  // namespace

// Tied parameters: which stages use each parameter; the first one owns it (and its device). Every
// parameter moves to its owner's device (every slot that holds it is updated), and the ones used on
// several stages are recorded in `shared`, for the replicas of a step (Bindings).
void Pipeline::Impl::place_parameters(nn::Sequential& model, const Schedule& schedule) {
  const int S = schedule.stages;
  const auto named = model.named_parameters();  // before the moves: it names the tensors by their old ids
  std::map<TensorId, std::vector<int>> users;
  std::vector<TensorId> order;
  for (int s = 0; s < S; ++s) {
    for (const Tensor& t : params_of(model, schedule, s)) {
      auto& list = users[id_of(t)];
      if (list.empty()) order.push_back(id_of(t));
      if (list.empty() || list.back() != s) list.push_back(s);
    }
  }
  std::map<TensorId, Tensor> moved;
  for (int s = 0; s < S; ++s) {
    for (const Tensor& t : params_of(model, schedule, s)) {
      const Device& device = devices[static_cast<size_t>(s)];
      if (users[id_of(t)].front() != s || t.device() == device || moved.count(id_of(t))) continue;
      Tensor m = t.detach().to(device);
      m.set_requires_grad(t.requires_grad());
      if (t.grad().defined()) m.set_grad(t.grad().to(device));
      moved.emplace(id_of(t), m);
    }
  }
  for (int i = 0; i < static_cast<int>(model.size()) && !moved.empty(); ++i) {
    for (const auto& [id, tensor] : moved) {
      for (SlotRef& slot : slots_holding(*model.at(i), id)) slot.module->set_parameter(slot.name, tensor);
    }
  }
  for (TensorId id : order) {
    if (users[id].size() < 2) continue;
    for (const auto& [name, t] : named) {
      if (id_of(t) != id) continue;
      shared.push_back({moved.count(id) ? moved.at(id) : t, name, users[id]});
      break;
    }
  }
}

// Stage creation: each stage's chunks, device, memory scope, dropout seed and thread.
void Pipeline::Impl::create_stages(nn::Sequential& model, const Schedule& schedule,
                                   const PipelineConfig& config) {
  std::vector<int> local = config.local_stages;
  if (local.empty()) {
    for (int s = 0; s < schedule.stages; ++s) local.push_back(s);
  }
  std::sort(local.begin(), local.end());
  // The local CPU stages run at once in this process and share its cores (the thread budget).
  int cpu_stages = 0;
  for (int s : local) cpu_stages += devices[static_cast<size_t>(s)].is_cpu() ? 1 : 0;
  stage_threads.assign(static_cast<size_t>(schedule.stages), 0);
  for (int s : local) {
    const bool on_cpu = devices[static_cast<size_t>(s)].is_cpu();
    const int omp_threads = config.threads_per_stage > 0
                                ? config.threads_per_stage
                                : stage_thread_budget(on_cpu, cpu_stages, omp_get_num_procs());
    stage_threads[static_cast<size_t>(s)] = omp_threads;
    std::vector<std::pair<int, int>> chunks;
    for (int c = 0; c < schedule.virtual_chunks; ++c)
      chunks.push_back(bounds[static_cast<size_t>(schedule.model_chunk(s, c))]);
    stages.push_back(std::make_unique<detail::Stage>(
        s, schedule, model, std::move(chunks), devices[static_cast<size_t>(s)], loss,
        config.scope_prefix + std::to_string(s), config.seed + static_cast<uint64_t>(s), omp_threads,
        config.layer_recompute));
    threads.push_back(std::make_unique<detail::StageThread>());
    if (config.pin_stage_threads) {
      const int core = s % std::max(1, omp_get_num_procs());
      threads.back()->start([core] { (void)pin_thread_to_core(core); });
      threads.back()->wait();
    }
  }
}

Pipeline::Pipeline(nn::Sequential& model, PipelineConfig config, LossFn loss,
                   std::unique_ptr<Transport> transport)
    : model_(model), config_(std::move(config)) {
  config_.validate();
  schedule_ = schedule_for(config_.schedule, config_.stages, config_.microbatches, config_.virtual_chunks,
                           config_.recompute, config_.schedule_lists);
  transport_ =
      transport ? std::move(transport) : std::make_unique<InProcessTransport>(config_.recv_timeout_seconds);
  validate(schedule_, transport_->model());
  impl_ = std::make_unique<Impl>();
  impl_->loss = loss ? std::move(loss) : LossFn(&nn::GPT::loss);
  impl_->bounds = chunk_layout(config_, schedule_, static_cast<int>(model_.size()));
  BRIGADE_CHECK_VALUE(config_.layer_recompute.empty() ||
                          static_cast<int64_t>(config_.layer_recompute.size()) == model_.size(),
                      "PipelineConfig: layer_recompute has ", config_.layer_recompute.size(),
                      " entries; the model has ", model_.size(), " layers");
  impl_->devices = choose_devices(config_, model_);
  impl_->place_parameters(model_, schedule_);
  if (config_.replicas > 1) {
    impl_->insert_gradient_reduces(model_, schedule_, config_.bucket_bytes);
    validate(schedule_, transport_->model());
  }
  impl_->create_stages(model_, schedule_, config_);
}

Pipeline::~Pipeline() = default;

std::pair<int, int> Pipeline::chunk_layers(int stage, int chunk) const {
  BRIGADE_CHECK_VALUE(
      stage >= 0 && stage < schedule_.stages && chunk >= 0 && chunk < schedule_.virtual_chunks,
      "Pipeline::chunk_layers: (stage ", stage, ", chunk ", chunk, ") outside ", schedule_.stages,
      " stages x ", schedule_.virtual_chunks, " chunks");
  return impl_->bounds[static_cast<size_t>(schedule_.model_chunk(stage, chunk))];
}

const Device& Pipeline::device(int stage) const {
  BRIGADE_CHECK_VALUE(stage >= 0 && stage < schedule_.stages, "Pipeline::device: stage ", stage,
                      " outside [0, ", schedule_.stages, ")");
  return impl_->devices[static_cast<size_t>(stage)];
}

int stage_thread_budget(bool on_cpu, int cpu_stages, int cores) {
  if (!on_cpu) return 1;
  return std::max(1, cores / std::max(1, cpu_stages));
}

int Pipeline::threads(int stage) const {
  BRIGADE_CHECK_VALUE(stage >= 0 && stage < schedule_.stages, "Pipeline::threads: stage ", stage,
                      " outside [0, ", schedule_.stages, ")");
  return impl_->stage_threads[static_cast<size_t>(stage)];
}

std::string Pipeline::thread_budget() const {
  std::vector<int> local;  // the stages this process runs
  for (int t : impl_->stage_threads) {
    if (t > 0) local.push_back(t);
  }
  const auto [low, high] = std::minmax_element(local.begin(), local.end());
  const std::string per_stage =
      *low == *high ? std::to_string(*low) : std::to_string(*low) + "-" + std::to_string(*high);
  return std::to_string(local.size()) + " stage threads x " + per_stage + " OpenMP thread" +
         (*high == 1 ? "" : "s") + (config_.threads_per_stage > 0 ? " (set)" : " (automatic)") + " on " +
         std::to_string(omp_get_num_procs()) + " cores";
}

std::vector<GeneratorState> Pipeline::generator_states() const {
  std::vector<GeneratorState> states;
  for (const auto& stage : impl_->stages) states.push_back(stage->generator().state());
  return states;
}

void Pipeline::set_generator_states(const std::vector<GeneratorState>& states) {
  BRIGADE_CHECK_VALUE(states.size() == impl_->stages.size(), "Pipeline::set_generator_states: expected ",
                      impl_->stages.size(), " states (one per local stage), got ", states.size());
  for (size_t s = 0; s < states.size(); ++s) impl_->stages[s]->generator().set_state(states[s]);
}

std::vector<std::string> Pipeline::tied_parameter_names() const {
  std::vector<std::string> out;
  for (const auto& shared : impl_->shared) out.push_back(shared.name);
  return out;
}

std::vector<Pipeline::TiedParameter> Pipeline::tied_parameters() const {
  std::vector<TiedParameter> out;
  for (const auto& shared : impl_->shared) out.push_back({shared.name, shared.param, shared.stages});
  return out;
}

std::vector<Tensor> Pipeline::stage_parameters(int stage) const {
  BRIGADE_CHECK_VALUE(stage >= 0 && stage < schedule_.stages, "Pipeline::stage_parameters: stage ", stage,
                      " outside [0, ", schedule_.stages, ")");
  return impl_->params_of(model_, schedule_, stage);
}

void Pipeline::set_gradient_reducer(GradientReducer* reducer) {
  impl_->reducer = reducer;
}

std::vector<std::vector<Tensor>> Pipeline::bucket_parameters(int stage) const {
  BRIGADE_CHECK_VALUE(stage >= 0 && stage < schedule_.stages, "Pipeline::bucket_parameters: stage ", stage,
                      " outside [0, ", schedule_.stages, ")");
  if (schedule_.buckets.empty()) return {};
  const auto& buckets = schedule_.buckets[static_cast<size_t>(stage)];
  std::vector<std::vector<Tensor>> out(buckets.size());
  for (const auto& [t, layer] : impl_->reduced_parameters(model_, schedule_, stage)) {
    for (size_t b = 0; b < buckets.size(); ++b) {
      const auto [first, end] = std::make_pair(buckets[b].first_layer, buckets[b].end_layer);
      if (layer >= first && layer < end) out[b].push_back(t);
    }
  }
  return out;
}

void Pipeline::fail_at(int stage, int step) {
  BRIGADE_CHECK_VALUE(stage >= 0 && stage < schedule_.stages && step >= 0 &&
                          step < static_cast<int>(schedule_.actions[static_cast<size_t>(stage)].size()),
                      "Pipeline::fail_at: no action ", step, " on stage ", stage);
  impl_->faults.push_back({stage, step, std::nullopt, -1});
}

void Pipeline::fail_at(int stage, ActionKind kind, int microbatch) {
  BRIGADE_CHECK_VALUE(stage >= 0 && stage < schedule_.stages, "Pipeline::fail_at: stage ", stage,
                      " outside [0, ", schedule_.stages, ")");
  impl_->faults.push_back({stage, -1, kind, microbatch});
}

void Pipeline::clear_faults() {
  impl_->faults.clear();
}

namespace {

// The batch cut into M microbatches (views), with the step's loss scale (the loss is the microbatch mean).
detail::StepInputs microbatches_of(const Tensor& ids, const Tensor& targets, int M) {
  BRIGADE_CHECK_VALUE(ids.defined() && ids.dim() >= 1, "Pipeline: ids must be a tensor [B, ...]");
  BRIGADE_CHECK_VALUE(targets.defined() && targets.dim() >= 1 && targets.size(0) == ids.size(0),
                      "Pipeline: targets must be [B, ...] with the B of ids (", ids.size(0), "), found ",
                      targets.defined() ? shape_str(targets.shape()) : std::string("an undefined tensor"));
  const int64_t batch = ids.size(0);
  BRIGADE_CHECK_VALUE(batch % M == 0, "Pipeline: a batch of ", batch, " samples does not divide into ", M,
                      " equal microbatches (", batch, " % ", M, " = ", batch % M,
                      "); use a batch size that is a multiple of the microbatch count");
  detail::StepInputs inputs;
  const int64_t per = batch / M;
  for (int i = 0; i < M; ++i) {
    inputs.ids.push_back(ids.narrow(0, i * per, per));
    inputs.targets.push_back(targets.narrow(0, i * per, per));
  }
  inputs.loss_scale = 1.0 / M;
  return inputs;
}

// Runs one stage's list on the calling thread. A failure is recorded with where it happened (the action
// the stage was at) and aborts the transport, so that every other stage stops at its next action or wakes
// from its blocked recv; a stage stopped that way records nothing.
void run_capturing(detail::Stage& stage, const Schedule& schedule, const detail::StepInputs& inputs,
                   Transport& transport, std::atomic<int>& failure_order, StageFailure& failure) {
  try {
    stage.run(inputs, transport);
    return;
  } catch (const TransportAborted&) {
    return;  // another stage failed first and stopped this one
  } catch (const std::exception& e) {
    failure.message = e.what();
    failure.cause = std::current_exception();
  } catch (...) {
    failure.message = "unknown exception";
    failure.cause = std::current_exception();
  }
  failure.failed = true;
  failure.order = failure_order.fetch_add(1);
  failure.step = stage.current_step();
  const int s = stage.index();
  const auto& list = schedule.actions[static_cast<size_t>(s)];
  std::string where = "stage " + std::to_string(s);
  if (failure.step >= 0 && failure.step < static_cast<int>(list.size())) {
    failure.action = list[static_cast<size_t>(failure.step)];
    where += ", action " + std::to_string(failure.step) + " (" +
             to_string(failure.action, schedule.virtual_chunks > 1) + ")";
  }
  failure.message = where + ": " + failure.message;
  transport.abort(failure.message);
}

// The first stage that failed, or null.
const StageFailure* first_failure(const std::vector<StageFailure>& failures) {
  const StageFailure* first = nullptr;
  for (const StageFailure& f : failures) {
    if (f.failed && (!first || f.order < first->order)) first = &f;
  }
  return first;
}

}  // namespace

// Launch: every stage's list on its thread, under the caller's autocast (autocast is per thread: each
// stage runs under the caller's mixed-precision setting, --dtype bf16). Returns once all have finished.
std::vector<StageFailure> Pipeline::Impl::run_stages(const detail::StepInputs& inputs,
                                                     const Schedule& schedule, Transport& transport) {
  std::vector<StageFailure> failures(stages.size());
  std::atomic<int> failure_order{0};
  const std::optional<DType> autocast = autograd::autocast_dtype();
  for (size_t s = 0; s < stages.size(); ++s) {
    threads[s]->start([&, s] {
      autograd::AutocastGuard autocast_guard(autocast);
      run_capturing(*stages[s], schedule, inputs, transport, failure_order, failures[s]);
    });
  }
  for (auto& thread : threads) thread->wait();
  return failures;
}

// Report: the trace of every stage, the step's time, bubble and traffic, each stage's memory and the
// losses (StepResult, executor.h).
StepResult Pipeline::Impl::report(nn::Sequential& model, const Schedule& schedule,
                                  const Transport& transport) const {
  StepResult result;
  ExecutionTrace& trace = result.trace;
  trace.schedule = schedule;
  for (int s = 0; s < schedule.stages; ++s) {
    const detail::Stage* stage = stage_at(s);
    trace.devices.push_back(devices[static_cast<size_t>(s)]);
    trace.compute_streams.push_back(stage ? stage->compute_stream().id() : -1);
    trace.copy_streams.push_back(stage ? stage->copy_stream().id() : -1);
    trace.stages.push_back(stage ? stage->trace() : std::vector<TraceEvent>{});
    trace.peak_bytes.push_back(stage ? stage->peak_bytes() : 0);
  }
  result.step_ms = trace.span_ms();
  const std::vector<double> busy = trace.busy_ms();
  const std::vector<double> bubbles = trace.bubbles();
  result.traffic = transport.traffic();
  for (const auto& stage_ptr : stages) {
    const detail::Stage& stage = *stage_ptr;
    const int s = stage.index();
    StageReport r;
    r.stage = s;
    r.device = stage.device();
    r.layers = stage.chunks();
    const std::vector<Tensor> params = params_of(model, schedule, s);
    for (const Tensor& p : params) r.parameter_bytes += static_cast<int64_t>(p.nbytes());
    r.peak_bytes = stage.peak_bytes();
    r.gradient_bytes = grad_bytes(params);
    r.activation_peak_bytes = std::max<int64_t>(0, r.peak_bytes - r.gradient_bytes);
    r.busy_ms = busy[static_cast<size_t>(s)];
    r.bubble = bubbles[static_cast<size_t>(s)];
    result.bubble += r.bubble / static_cast<double>(stages.size());
    result.stages.push_back(std::move(r));
  }
  // The stage that holds the last model chunk computed the losses (the last stage, or stage 0 in a V).
  const detail::Stage* loss_stage = stage_at(schedule.stage_of(schedule.model_chunks() - 1));
  if (loss_stage == nullptr) {
    result.loss = std::numeric_limits<double>::quiet_NaN();  // another process has them
    return result;
  }
  result.microbatch_losses = loss_stage->losses();
  result.loss = std::accumulate(result.microbatch_losses.begin(), result.microbatch_losses.end(), 0.0) /
                schedule.microbatches;
  return result;
}

StepResult Pipeline::forward_backward(const Tensor& ids, const Tensor& targets) {
  Impl& im = *impl_;
  detail::StepInputs inputs = microbatches_of(ids, targets, schedule_.microbatches);
  inputs.faults = im.faults;
  inputs.check_finite = config_.check_finite;
  if (!schedule_.buckets.empty()) {
    inputs.reducer = im.reducer;
    for (int s = 0; s < schedule_.stages; ++s)
      inputs.buckets.push_back(im.stage_at(s) ? bucket_parameters(s) : std::vector<std::vector<Tensor>>{});
  }

  // Work the caller queued on its own streams (an optimizer step, the batch's upload) must be done before
  // the stages' streams, which do not wait for the caller's, read the parameters and the inputs.
  for (const Device& device : im.devices) Stream::current(device).synchronize();
  Stream::current(ids.device()).synchronize();
  Stream::current(targets.device()).synchronize();

  GradientStash stash(model_.parameters());
  Impl::Bindings bindings(model_, schedule_, im);
  transport_->reset();
  for (auto& stage : im.stages) stage->begin_step();
  inputs.origin = std::chrono::steady_clock::now();
  im.origin = inputs.origin;

  const std::vector<StageFailure> failures = im.run_stages(inputs, schedule_, *transport_);

  // Failure: nothing is half-updated; the model's parameters and gradients are as before the step.
  const StageFailure* first = first_failure(failures);
  if (first || transport_->aborted()) {
    for (auto& stage : im.stages) stage->clear();
    if (inputs.reducer) inputs.reducer->clear();
    bindings.restore();
    stash.put_back();
    std::vector<StageCursor> cursors;
    for (size_t i = 0; i < im.stages.size(); ++i) {
      const detail::Stage& stage = *im.stages[i];
      const auto& list = schedule_.actions[static_cast<size_t>(stage.index())];
      StageCursor c{stage.index(), stage.current_step(), Action{}, failures[i].failed};
      if (c.step >= 0 && c.step < static_cast<int>(list.size())) c.action = list[static_cast<size_t>(c.step)];
      cursors.push_back(c);
    }
    if (!first) {
      throw PipelineError("pipeline step aborted: " + transport_->abort_reason(), -1, -1, Action{}, {},
                          std::move(cursors));
    }
    const int stage = im.stages[static_cast<size_t>(first - failures.data())]->index();
    throw PipelineError(first->message, stage, first->step, first->action, first->cause, std::move(cursors));
  }

  // The barrier has passed: every stage finished its backward. Report, then merge tied gradients.
  StepResult result = im.report(model_, schedule_, *transport_);
  result.origin_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(im.origin.time_since_epoch()).count();
  bindings.merge_gradients();
  bindings.restore();
  stash.add_back();
  return result;
}

Tensor Pipeline::forward(const Tensor& ids, int microbatches) {
  Impl& im = *impl_;
  BRIGADE_CHECK_VALUE(static_cast<int>(im.stages.size()) == schedule_.stages,
                      "Pipeline::forward: ", schedule_.stages - static_cast<int>(im.stages.size()),
                      " of the stages live in other processes; a forward pass needs every stage here");
  BRIGADE_CHECK_VALUE(ids.defined() && ids.dim() >= 1, "Pipeline::forward: ids must be a tensor [B, ...]");
  const int64_t batch = ids.size(0);
  int M = microbatches;
  if (M <= 0) {
    M = static_cast<int>(std::min<int64_t>(schedule_.microbatches, std::max<int64_t>(batch, 1)));
    while (batch % M != 0) --M;
  }
  const Schedule lists = forward_only(schedule_.stages, M, schedule_.virtual_chunks, schedule_.placement);
  validate(lists, transport_->model());
  detail::StepInputs inputs = microbatches_of(ids, ids, M);  // no targets: the outputs are the result
  inputs.lists = &lists;
  inputs.faults = im.faults;
  for (const Device& device : im.devices) Stream::current(device).synchronize();
  Stream::current(ids.device()).synchronize();

  Impl::Bindings bindings(model_, schedule_, im);  // tied weights: each stage reads its own replica
  transport_->reset();
  for (auto& stage : im.stages) stage->begin_step();
  inputs.origin = std::chrono::steady_clock::now();
  const std::vector<StageFailure> failures = im.run_stages(inputs, lists, *transport_);
  const StageFailure* first = first_failure(failures);
  if (first || transport_->aborted()) {
    for (auto& stage : im.stages) stage->clear();
    if (!first) throw PipelineError("forward aborted: " + transport_->abort_reason(), -1, -1, Action{}, {});
    const int stage = static_cast<int>(first - failures.data());
    throw PipelineError(first->message, stage, first->step, first->action, first->cause);
  }
  // The microbatches' outputs, back into one batch on the last stage's device.
  const std::vector<Tensor>& parts =
      im.stages[static_cast<size_t>(lists.stage_of(lists.model_chunks() - 1))]->outputs();
  Shape shape = parts.front().shape();
  shape[0] = batch;
  Tensor out = empty(shape, TensorOptions().dtype(parts.front().dtype()).device(parts.front().device()));
  const int64_t per = batch / M;
  NoGradGuard no_grad;
  for (int i = 0; i < M; ++i) out.narrow(0, i * per, per).copy_(parts[static_cast<size_t>(i)]);
  for (auto& stage : im.stages) stage->clear();
  return out;
}

StepResult Pipeline::train_step(const Tensor& ids, const Tensor& targets, nn::Optimizer& optimizer) {
  model_.zero_grad();
  StepResult result = forward_backward(ids, targets);
  const auto start = std::chrono::steady_clock::now();
  const std::vector<Tensor> params = model_.parameters();
  const double max_norm =
      config_.grad_clip > 0.0 ? config_.grad_clip : std::numeric_limits<double>::infinity();
  result.grad_norm = nn::clip_grad_norm(params, max_norm);
  BRIGADE_CHECK(std::isfinite(result.grad_norm), "Pipeline::train_step: the gradient norm is ",
                result.grad_norm, "; the optimizer did not step");
  optimizer.step();
  const auto end = std::chrono::steady_clock::now();
  using Ms = std::chrono::duration<double, std::milli>;
  result.optimizer_ms = Ms(end - start).count();
  result.trace.optimizer_start_ms = Ms(start - impl_->origin).count();
  result.trace.optimizer_end_ms = Ms(end - impl_->origin).count();
  return result;
}

}  // namespace brigade::pipeline
