// The planner on a real model (see plan_model.h).
#include "pipeline/run/plan_model.h"

#include <omp.h>

#include <algorithm>
#include <ctime>
#include <limits>
#include <memory>
#include <thread>
#include <vector>

#include "nn/optim.h"
#include "nn/statistics.h"
#include "pipeline/plan/memory_model.h"
#include "pipeline/run/hand_off.h"
#include "pipeline/schedule/generators.h"
#include "tensor/error.h"
#include "tensor/generator.h"
#include "tensor/stream.h"

namespace brigade::pipeline {

namespace {

// The layers of `model` at `samples` sequences per microbatch (model_profiler).
ModelProfile profile_at(nn::GPT& model, const nn::Batch& sample, int threads, int64_t samples) {
  BRIGADE_CHECK_VALUE(samples >= 1 && samples <= sample.x.size(0), "plan: a microbatch of ", samples,
                      " samples from a sample batch of ", sample.x.size(0));
  const Tensor ids = sample.x.narrow(0, 0, samples), targets = sample.y.narrow(0, 0, samples);
  ProfileOptions po;
  po.repeats = 3;
  po.warmup = 1;
  po.loss = [targets](const Tensor& logits) { return nn::GPT::loss(logits, targets); };
  po.thread_cpu_time = ids.device().is_cpu() && threads == 1;
  po.attention_core = true;
  const int before = omp_get_max_threads();
  if (threads > 0) omp_set_num_threads(threads);
  ModelProfile profile = profile_layers(model, ids, po);
  omp_set_num_threads(before);
  return profile;
}

// `t`'s first `samples` rows twice: two microbatches where a sample holds one.
Tensor rows_twice(const Tensor& t, int64_t samples) {
  Shape shape = t.shape();
  shape[0] = 2 * samples;
  Tensor out = empty(shape, TensorOptions(t.dtype()).device(t.device()));
  out.narrow(0, 0, samples).copy_(t.narrow(0, 0, samples));
  out.narrow(0, samples, samples).copy_(t.narrow(0, 0, samples));
  return out;
}

// Each layer's times from `other` where they are shorter (both profiles of the same model and size).
void keep_faster_layers(ModelProfile& profile, const ModelProfile& other) {
  for (size_t i = 0; i < profile.layers.size(); ++i) {
    LayerProfile& l = profile.layers[i];
    const LayerProfile& o = other.layers[i];
    l.forward_ms = std::min(l.forward_ms, o.forward_ms);
    l.backward_ms = std::min(l.backward_ms, o.backward_ms);
    l.attention_core_ms = std::min(l.attention_core_ms, o.attention_core_ms);
    if (l.split_measured() && o.split_measured()) {
      l.backward_input_ms = std::min(l.backward_input_ms, o.backward_input_ms);
      l.backward_weight_ms = std::min(l.backward_weight_ms, o.backward_weight_ms);
    }
  }
}

// The whole model as one stage on `microbatches` microbatches of `samples` rows of `sample`, as the
// measurements below run it: each of `configs` (its stages, microbatches and threads set here) is one
// pipeline, and the pipelines take turns pass by pass (so that a slow spell of the machine falls on them
// alike): one warm-up pass each, then `steps` forward-backward passes each. visit(c, events, k, ms) sees
// every action of config c's steady passes, with its time taken like the profile's (the thread's CPU clock
// on a CPU with `threads` == 1, wall clock otherwise).
template <typename Visit>
void run_one_stage(nn::GPT& model, const nn::Batch& sample, int64_t samples, int microbatches, int threads,
                   std::vector<PipelineConfig> configs, int steps, Visit visit) {
  const bool cpu_time = sample.x.device().is_cpu() && threads == 1;
  const Tensor ids = sample.x.narrow(0, 0, samples * microbatches);
  const Tensor targets = sample.y.narrow(0, 0, samples * microbatches);
  std::vector<std::unique_ptr<Pipeline>> pipelines;
  for (PipelineConfig& config : configs) {
    config.stages = 1;
    config.microbatches = microbatches;
    config.threads_per_stage = std::max(1, threads);
    config.check_finite = false;
    pipelines.push_back(std::make_unique<Pipeline>(model, config));
  }
  for (int i = 0; i <= steps; ++i) {
    for (size_t c = 0; c < pipelines.size(); ++c) {
      const StepResult r = pipelines[c]->forward_backward(ids, targets);
      if (i == 0) continue;  // warm-up
      const std::vector<TraceEvent>& events = r.trace.stages.front();
      for (size_t k = 0; k < events.size(); ++k) {
        const TraceEvent& e = events[k];
        visit(c, events, k, e.ms(cpu_time));
      }
    }
  }
}

}  // namespace

Schedule deferred_weight_schedule(int microbatches) {
  Schedule s = make_schedule("zb-v", 1, microbatches);
  std::vector<Action>& list = s.actions[0];
  for (int chunk = 0; chunk < 2; ++chunk) {
    for (int m = 0; m < microbatches; ++m) {
      const Action w = Bw(m, chunk);
      list.erase(std::find(list.begin(), list.end(), w));
      const auto after = m + 1 < microbatches ? std::find(list.begin(), list.end(), Bi(m + 1, chunk))
                                              : std::find(list.begin(), list.end(), optimizer_step()) - 1;
      list.insert(after + 1, w);
    }
  }
  return s;
}

DeferredWeightFactors measure_deferred_weight(nn::GPT& model, const nn::Batch& sample, int64_t samples,
                                              int microbatches, int threads, int steps) {
  BRIGADE_CHECK_VALUE(model.size() >= 2 && microbatches >= 2 && samples * microbatches <= sample.x.size(0),
                      "measure_deferred_weight: needs 2 layers and 2 microbatches of ", samples,
                      " samples from a sample batch of ", sample.x.size(0), " (got ", model.size(),
                      " layers, ", microbatches, " microbatches)");
  PipelineConfig config;
  config.schedule = "zb-v";
  config.virtual_chunks = 2;
  const GradientsSetAside aside(model);
  // Each chunk's Bw times (the first chunk's apart), keeping only the adjacent ones or the deferred ones.
  struct ChunkWeightTimes {
    std::vector<double> first, split;
  } adjacent, deferred;
  auto weight_times = [&](ChunkWeightTimes& times, bool deferred_ones) {
    run_one_stage(model, sample, samples, microbatches, threads, {config}, steps,
                  [&](size_t, const std::vector<TraceEvent>& events, size_t k, double ms) {
                    const Action& a = events[k].action;
                    // A Bw is never first: its Bi comes before it.
                    if (a.kind != ActionKind::BackwardWeight ||
                        is_deferred_weight(a, events[k - 1].action) != deferred_ones)
                      return;
                    (a.chunk == 0 ? times.first : times.split).push_back(ms);
                  });
  };
  weight_times(adjacent, false);
  config.schedule_lists = deferred_weight_schedule(microbatches);
  weight_times(deferred, true);
  auto ratio = [](const std::vector<double>& late, const std::vector<double>& early) {
    if (late.empty() || early.empty() || nn::median(early) <= 0) return 1.0;
    return std::max(1.0, nn::median(late) / nn::median(early));
  };
  return {ratio(deferred.first, adjacent.first), ratio(deferred.split, adjacent.split)};
}

double measure_cold_backward(nn::GPT& model, const nn::Batch& sample, int64_t samples, int microbatches,
                             int threads, int steps) {
  BRIGADE_CHECK_VALUE(microbatches >= 2 && samples * microbatches <= sample.x.size(0),
                      "measure_cold_backward: needs 2 microbatches of ", samples,
                      " samples from a sample batch of ", sample.x.size(0), " (got ", microbatches,
                      " microbatches)");
  const GradientsSetAside aside(model);
  // On one stage, 1F1B runs each backward right after its own forward (warm) and GPipe runs every forward
  // first, so that each backward but the last microbatch's follows other microbatches' forwards (cold).
  // A pass's first backward allocates the parameters' gradients (the stash clears them each step): that
  // is 1F1B's microbatch 0 and GPipe's last, so both orders leave it out.
  std::vector<double> warm, cold;
  PipelineConfig one_f_one_b, gpipe;
  one_f_one_b.schedule = "1f1b";
  gpipe.schedule = "gpipe";
  run_one_stage(model, sample, samples, microbatches, threads, {one_f_one_b, gpipe}, steps,
                [&](size_t c, const std::vector<TraceEvent>& events, size_t k, double ms) {
                  const Action& a = events[k].action;
                  if (a.kind != ActionKind::Backward) return;
                  if (c == 0 && a.microbatch != 0) warm.push_back(ms);
                  if (c == 1 && a.microbatch != microbatches - 1) cold.push_back(ms);
                });
  if (warm.empty() || cold.empty() || nn::median(warm) <= 0) return 1.0;
  return std::max(1.0, nn::median(cold) / nn::median(warm));
}

std::function<ModelProfile(int64_t)> model_profiler(nn::GPT& model, const nn::Batch& sample, int threads) {
  return [&model, sample, threads](int64_t samples) {
    // The layers are timed twice, the deferred Bw's runs between, and each layer keeps its faster times:
    // on a shared machine a slow spell during one profile (seen here: a whole size's layers 36 % slow,
    // in thread CPU time) would otherwise price that microbatch size against the others.
    ModelProfile profile = profile_at(model, sample, threads, samples);
    // At least two microbatches, so that a Bw can be deferred and a backward run cold: a sample of one
    // gives its rows twice.
    const auto microbatches = static_cast<int>(std::min<int64_t>(16, sample.x.size(0) / samples));
    const nn::Batch runs =
        microbatches >= 2 ? sample : nn::Batch{rows_twice(sample.x, samples), rows_twice(sample.y, samples)};
    DeferredWeightFactors deferred;
    if (model.size() >= 2)
      deferred = measure_deferred_weight(model, runs, samples, std::max(2, microbatches), threads);
    profile.cold_backward_factor =
        measure_cold_backward(model, runs, samples, std::max(2, microbatches), threads);
    keep_faster_layers(profile, profile_at(model, sample, threads, samples));
    const ActionFactors factors = measure_action_factors(model, sample, profile, threads);
    profile.action_forward_factor = factors.forward;
    profile.action_backward_factor = factors.backward;
    profile.deferred_weight_factor = deferred.split;
    profile.deferred_first_weight_factor = deferred.first;
    return profile;
  };
}

ActionFactors measure_action_factors(nn::GPT& model, const nn::Batch& sample, const ModelProfile& profile,
                                     int threads, int steps) {
  const int64_t b = profile.microbatch_size;
  BRIGADE_CHECK_VALUE(b >= 1 && b <= sample.x.size(0) && steps >= 1,
                      "measure_action_factors: a microbatch of ", b, " samples from a sample batch of ",
                      sample.x.size(0), ", ", steps, " steps");
  const int microbatches = static_cast<int>(std::min<int64_t>(16, sample.x.size(0) / b));
  double layers_f = 0.0, layers_b = 0.0;
  for (const LayerProfile& layer : profile.layers)
    layers_f += layer.forward_ms, layers_b += layer.backward_ms;
  const GradientsSetAside aside(model);  // as profile_layers does
  std::vector<double> ratio_f, ratio_b;
  run_one_stage(model, sample, b, microbatches, threads, {PipelineConfig{}}, steps,
                [&](size_t, const std::vector<TraceEvent>& events, size_t k, double ms) {
                  const ActionKind kind = events[k].action.kind;
                  if (kind == ActionKind::Forward && layers_f > 0) ratio_f.push_back(ms / layers_f);
                  if (kind == ActionKind::Backward && layers_b > 0) ratio_b.push_back(ms / layers_b);
                });
  ActionFactors factors;
  factors.forward = ratio_f.empty() ? 1.0 : std::max(1.0, nn::median(ratio_f));
  factors.backward = ratio_b.empty() ? 1.0 : std::max(1.0, nn::median(ratio_b));
  return factors;
}

double measure_optimizer_ms(const nn::GPT& model, int threads, int repeats) {
  BRIGADE_CHECK_VALUE(repeats >= 1, "measure_optimizer_ms: repeats must be >= 1, got ", repeats);
  std::vector<Tensor> params;
  Generator generator(0);
  for (const Tensor& p : model.parameters()) {
    Tensor clone = p.detach().clone();
    clone.set_requires_grad(true);
    clone.set_grad(randn(p.shape(), TensorOptions(p.dtype()).device(p.device()), &generator));
    params.push_back(clone);
  }
  if (params.empty()) return 0.0;
  const Device device = params.front().device();
  const bool cpu_time = device.is_cpu() && threads == 1;
  const int before = omp_get_max_threads();
  if (threads > 0) omp_set_num_threads(threads);
  nn::AdamW optimizer(params);
  std::vector<double> ms;
  for (int i = 0; i <= repeats; ++i) {
    Stream stream = Stream::current(device);
    Event start(true), end(true);
    const double cpu_start = cpu_time ? thread_cpu_ms() : 0.0;
    start.record(stream);
    (void)nn::clip_grad_norm(params, std::numeric_limits<double>::infinity());
    optimizer.step();
    end.record(stream);
    const double cpu_end = cpu_time ? thread_cpu_ms() : 0.0;
    end.synchronize();
    if (i > 0) ms.push_back(cpu_time ? cpu_end - cpu_start : start.elapsed_ms(end));
  }
  omp_set_num_threads(before);
  return nn::median(ms);
}

void price_executor(PlanRequest& request, const nn::GPT& model, int threads) {
  request.optimizer_ms = measure_optimizer_ms(model, threads);
  // A link given (by its figures, or named as given even when free) is kept.
  if (!request.link_origin.empty() || request.link != LinkModel{}) {
    if (request.link_origin.empty()) request.link_origin = "given";
    return;
  }
  request.link = in_process_link();
  request.link_origin = "measured: one hand-off between two stage threads";
}

int plan_devices_of(const nn::TrainOptions& o) {
  if (o.plan_devices > 0) return static_cast<int>(o.plan_devices);
  if (Device::parse(o.device).is_cuda()) return 1;
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return std::max(1, cores / std::max(1, o.threads));
}

PlanRequest plan_request_for(const nn::TrainOptions& o) {
  PlanRequest r;
  r.devices = plan_devices_of(o);
  r.device_memory = o.memory_budget.empty() ? 0 : parse_bytes(o.memory_budget);
  r.batch = o.batch;
  return r;
}

PipelineConfig pipeline_config_of(const PlanCandidate& c) {
  PipelineConfig pc;
  pc.schedule = c.schedule;
  pc.stages = c.stages;
  pc.microbatches = c.microbatches;
  pc.virtual_chunks = c.virtual_chunks;
  pc.recompute = c.policy;
  pc.layer_recompute = c.layer_recompute;
  pc.balance = c.balance;
  return pc;
}

void apply_plan(const PlanCandidate& c, nn::TrainOptions& o) {
  o.stages = c.stages;
  o.microbatches = c.microbatches;
  o.schedule = c.schedule;
  o.virtual_chunks = schedule_traits(c.schedule).chunks_per_stage == 0 ? c.virtual_chunks : 1;
  o.recompute = c.recompute_text();
  o.balance.clear();
  for (size_t i = 0; i < c.balance.size(); ++i) o.balance += (i ? "," : "") + std::to_string(c.balance[i]);
  o.partition = "balance";
}

}  // namespace brigade::pipeline
