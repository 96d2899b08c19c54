// The planner (plan/planner.h) on a real model: what `brigade plan` and `brigade train --plan auto` feed
// it. The profile of every microbatch size the search asks for is measured on the model itself
// (profile_layers on the first rows of a sample batch, with its loss and the attention core's
// recomputation), on the model's device with the stages' thread count.
//
// \code
//   brigade::pipeline::PlanRequest request = brigade::pipeline::plan_request_for(options);
//   request.profile = brigade::pipeline::model_profiler(model, sample, options.threads);
//   brigade::pipeline::price_executor(request, model, options.threads);   // optimizer step, hand-off
//   brigade::pipeline::Plan plan = brigade::pipeline::plan_pipeline(request);
// \endcode
#pragma once

#include <cstdint>
#include <functional>

#include "nn/data.h"
#include "nn/gpt.h"
#include "nn/train_options.h"
#include "pipeline/plan/planner.h"
#include "pipeline/run/executor.h"

namespace brigade::pipeline {

/// Profiles `model` at `samples` sequences per microbatch, the first rows of `sample` (which needs at
/// least as many), timed like PipelineRunner's profile: the thread's CPU clock on a CPU with one thread per
/// stage (`threads` == 1), events otherwise; `threads` > 0 sets the OpenMP threads while it runs. The layers
/// are timed twice, with the deferred Bw's runs (measure_deferred_weight) between, and each keeps its faster
/// times. Each profile also carries the executor's factors over those layers at its size
/// (measure_action_factors), the deferred Bw's and the cold backward's (measure_cold_backward).
std::function<ModelProfile(int64_t)> model_profiler(nn::GPT& model, const nn::Batch& sample, int threads);

/// How much longer the executor's actions take than the profiled layers (plan/profile.h:
/// ModelProfile::action_forward_factor and action_backward_factor).
struct ActionFactors {
  double forward = 1.0;
  double backward = 1.0;
};

/// Measures the factors against `profile` (the layers of `model` profiled on the first rows of `sample`):
/// the executor runs the whole model as one stage on microbatches of the profile's size (up to 16 of
/// them) for one warm-up and `steps` forward-backward passes; each F (B) action's time over the sum of the
/// profiled layers' forward (backward) times is one sample, and the median over the actions is kept (1
/// when below: the executor cannot run a chunk faster than its layers, so that is noise). Timed like the
/// profile (the thread's CPU clock on a CPU with `threads` == 1, the actions' wall-clock times otherwise).
/// The model's gradients are left as they were. Costs (steps + 1) forward-backward passes over up to 16
/// microbatches.
ActionFactors measure_action_factors(nn::GPT& model, const nn::Batch& sample, const ModelProfile& profile,
                                     int threads, int steps = 3);

/// How much longer a deferred Bw action takes than one right after its own Bi (plan/profile.h:
/// ModelProfile::deferred_weight_factor), for the first chunk (`first`: its Bw is its whole backward) and
/// for a chunk with a real split (`split`).
struct DeferredWeightFactors {
  double first = 1.0;
  double split = 1.0;
};

/// Measures them: the whole model as one stage in two chunks (zb-v's V on one stage), `microbatches` (>= 2)
/// microbatches of `samples` rows of `sample`, `steps` forward-backward passes after a warm-up, once as
/// zb-v generates it (each Bw right after its Bi) and once as deferred_weight_schedule lists it; per chunk,
/// the median deferred Bw over the median adjacent one (1 when below: noise). Timed like the profile (the
/// thread's CPU clock on a CPU with `threads` == 1, the actions' wall-clock times otherwise). The model
/// needs 2 layers or more; its gradients are left as they were. Costs 2 (steps + 1) forward-backward passes.
DeferredWeightFactors measure_deferred_weight(nn::GPT& model, const nn::Batch& sample, int64_t samples,
                                              int microbatches, int threads, int steps = 3);

/// How much longer a cold backward takes than a warm one (plan/profile.h:
/// ModelProfile::cold_backward_factor): the whole model as one stage, `microbatches` (>= 2) microbatches of
/// `samples` rows of `sample`, in 1F1B's order (each B right after its own F) and in GPipe's (every F
/// first: each B but the last microbatch's after other microbatches' forwards), the two taking turns: a
/// warm-up pass each, then `steps` forward-backward passes each. The median cold B over the median warm
/// one, at least 1.
double measure_cold_backward(nn::GPT& model, const nn::Batch& sample, int64_t samples, int microbatches,
                             int threads, int steps = 4);

/// The one-stage zb-v lists with each chunk's Bw moved to right after the next microbatch's Bi of that
/// chunk, the last microbatch's to just before the optimizer step: every Bw follows another action than its
/// own Bi, as a zero-bubble schedule's deferred ones do (measure_deferred_weight).
Schedule deferred_weight_schedule(int microbatches);

/// What train_step runs after the pipeline, in ms: the gradient norm over every parameter and one AdamW
/// step (the optimizer brigade train uses), on one thread after every stage's backward. Measured on clones of
/// the model's parameters with random gradients (the model is left as it is): the median of `repeats`
/// steps after one warm-up, timed like the layer profile (the thread's CPU clock on a CPU with one thread,
/// events otherwise); `threads` > 0 sets the OpenMP threads while it runs.
double measure_optimizer_ms(const nn::GPT& model, int threads, int repeats = 5);

/// Prices what the executor pays beside the layers' work (measured on this machine): the optimizer step
/// (measure_optimizer_ms) and, unless `request` already has a link (latency or bandwidth given, or a
/// link_origin set), the in-process link of stages that are threads of one process (run/hand_off.h), with
/// link_origin saying which.
void price_executor(PlanRequest& request, const nn::GPT& model, int threads);

/// The devices --plan auto plans for: --plan-devices, else on a CPU its cores / --threads (at least 1)
/// and on a GPU one.
int plan_devices_of(const nn::TrainOptions& options);

/// The request of --plan auto for these options: the devices above, --memory-budget each, the batch. Its
/// profile, link and optimizer step are unset (model_profiler, price_executor).
PlanRequest plan_request_for(const nn::TrainOptions& options);

/// The executor's configuration of `candidate` (one replica): schedule, stages, microbatches, chunks,
/// recomputation (policy and per-layer plan) and balance; the rest PipelineConfig's defaults.
PipelineConfig pipeline_config_of(const PlanCandidate& candidate);

/// Writes `candidate`'s configuration into the pipeline flags of `options` (stages, microbatches,
/// schedule, virtual, recompute, balance).
void apply_plan(const PlanCandidate& candidate, nn::TrainOptions& options);

}  // namespace brigade::pipeline
