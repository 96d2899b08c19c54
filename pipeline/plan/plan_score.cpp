// The planner's space and scores: its configurations in order, a candidate's simulated step, its bound
// (planner.h; the search is planner.cpp, the table plan_table.cpp).
#include "pipeline/plan/plan_score.h"

#include <algorithm>

#include "pipeline/plan/simulator.h"
#include "pipeline/schedule/generators.h"
#include "pipeline/schedule/reduce_buckets.h"
#include "tensor/error.h"

namespace brigade::pipeline {

namespace plan_detail {

namespace {

// One stage is the plain loop whatever the schedule: only 1f1b is searched there.
std::vector<std::string> schedules_of(const PlanRequest& r, int stages) {
  if (stages == 1) return {"1f1b"};
  return r.schedules.empty() ? schedule_names() : r.schedules;
}

}  // namespace

// Every configuration in the search's fixed order: S, D, schedule (catalogue order), v, M ascending.
std::vector<Config> configurations(const PlanRequest& r, int layers) {
  std::vector<Config> out;
  for (int S = 1; S <= r.devices; ++S) {
    for (int D = 1; D <= r.max_replicas && S * D <= r.devices; ++D) {
      if (r.batch % D != 0) continue;
      const int64_t per_replica = r.batch / D;
      for (const std::string& name : schedules_of(r, S)) {
        const int fixed = schedule_traits(name).chunks_per_stage;
        const int v_min = fixed > 0 ? fixed : 2, v_max = fixed > 0 ? fixed : r.max_virtual;
        for (int v = v_min; v <= v_max; ++v) {
          if (S * v > layers) continue;
          for (int M = smallest_microbatches(name, S); M <= r.max_microbatches && M <= per_replica; ++M) {
            if (per_replica % M != 0 || (name == "interleaved" && M % S != 0)) continue;
            out.push_back({S, D, M, v, name});
          }
        }
      }
    }
  }
  return out;
}

namespace {

// The gradient bytes each layer adds to its stage's buckets, as the executor counts them: not the weights
// tied across stages; a parameter used by several chunks of a stage with the chunk whose gradients become
// final last, at its last layer there.
std::vector<std::vector<int64_t>> bucket_layer_bytes(const Setting& s, const Schedule& schedule) {
  const int layers = s.partition.num_layers();
  std::vector<std::vector<int64_t>> bytes(static_cast<size_t>(schedule.stages),
                                          std::vector<int64_t>(static_cast<size_t>(layers), 0));
  for (int st = 0; st < schedule.stages; ++st) {
    const std::vector<int> chunks = chunks_by_last_gradient_write(schedule, st);
    std::vector<std::string> seen;
    for (const SharedParameter& shared : s.partition.shared)
      if (shared.stages.size() > 1) seen.push_back(shared.name);
    for (int c : chunks) {
      const ChunkPlan& chunk = s.partition.chunks[static_cast<size_t>(schedule.model_chunk(st, c))];
      for (int layer = chunk.end - 1; layer >= chunk.begin; --layer) {
        for (const ParameterInfo& p : s.profile.layers[static_cast<size_t>(layer)].parameter_list) {
          if (std::find(seen.begin(), seen.end(), p.name) != seen.end()) continue;
          seen.push_back(p.name);
          bytes[static_cast<size_t>(st)][static_cast<size_t>(layer)] += p.bytes;
        }
      }
    }
  }
  return bytes;
}

// The candidate's schedule: with D > 1, a Reduce per gradient bucket (schedule/reduce_buckets.h).
Schedule schedule_of(const Setting& s, Recompute policy) {
  const Config& c = s.config;
  Schedule schedule = make_schedule(c.schedule, c.stages, c.microbatches, c.virtual_chunks, policy);
  if (c.replicas <= 1) return schedule;
  std::vector<std::pair<int, int>> bounds;
  for (const ChunkPlan& chunk : s.partition.chunks) bounds.emplace_back(chunk.begin, chunk.end);
  insert_reduces(schedule,
                 gradient_buckets(schedule, bounds, bucket_layer_bytes(s, schedule), s.request.bucket_bytes));
  return schedule;
}

// The bytes of the parameter named `name` (0 when no layer holds it).
int64_t parameter_bytes_of(const ModelProfile& profile, const std::string& name) {
  for (const LayerProfile& l : profile.layers)
    for (const ParameterInfo& p : l.parameter_list)
      if (p.name == name) return p.bytes;
  return 0;
}

// The tied weights' gradients summed across stages after the step: one message of their bytes.
int64_t tied_bytes_of(const Setting& s) {
  int64_t bytes = 0;
  for (const SharedParameter& shared : s.partition.shared)
    bytes += parameter_bytes_of(s.profile, shared.name);
  return bytes;
}

// The optimizer step after the pipeline: the whole model on one thread with one replica (the executor's
// train_step), the largest stage's share across processes (each rank steps its own stage).
double optimizer_ms_of(const Setting& s) {
  if (s.config.replicas == 1) return s.request.optimizer_ms;
  int64_t total = 0, largest = 0;
  std::vector<std::string> seen;
  for (const LayerProfile& l : s.profile.layers)
    for (const ParameterInfo& p : l.parameter_list)
      if (std::find(seen.begin(), seen.end(), p.name) == seen.end()) seen.push_back(p.name), total += p.bytes;
  for (const StagePlan& st : s.partition.stage_plans) largest = std::max(largest, st.parameter_bytes);
  return total > 0 ? s.request.optimizer_ms * static_cast<double>(largest) / static_cast<double>(total) : 0.0;
}

}  // namespace

// A lower bound on the step time of any candidate of this setting (planner.h, "Search").
double lower_bound_ms(const Setting& s) {
  const Costs costs = profile_costs(s.profile, s.partition);
  std::vector<double> busy(static_cast<size_t>(s.config.stages), 0.0);
  double path = 0.0;
  for (size_t k = 0; k < costs.per_chunk.size(); ++k) {
    const ChunkCosts& c = costs.per_chunk[k];
    // A schedule runs B or Bi + Bw: the cheaper of the two bounds both.
    const double fb = c.forward + std::min(c.backward, c.backward_input() + c.weight);
    busy[static_cast<size_t>(s.partition.chunks[k].stage)] += s.config.microbatches * fb;
    path += fb;
  }
  // One chunk per stage: every bucket is final at the stage's last backward, so its whole all-reduce (at
  // least the ring over all its bytes in one message) follows the stage's compute.
  if (s.config.virtual_chunks == 1 && s.config.replicas > 1) {
    for (size_t st = 0; st < s.partition.stage_plans.size(); ++st) {
      int64_t bytes = s.partition.stage_plans[st].parameter_bytes;
      for (const SharedParameter& shared : s.partition.shared) {  // tied across stages: in no bucket
        const bool here = std::find(shared.stages.begin(), shared.stages.end(), static_cast<int>(st)) !=
                          shared.stages.end();
        if (here && shared.stages.size() > 1) bytes -= parameter_bytes_of(s.profile, shared.name);
      }
      busy[st] += s.request.link.allreduce_ms(std::max<int64_t>(0, bytes), s.config.replicas);
    }
  }
  return std::max(path, *std::max_element(busy.begin(), busy.end())) + optimizer_ms_of(s);
}

MemoryPlan memory_plan(const Setting& s, Recompute policy, const std::vector<LayerRecompute>& layers) {
  MemoryPlan plan;
  plan.schedule = s.config.schedule;
  plan.stages = s.config.stages;
  plan.microbatches = s.config.microbatches;
  plan.virtual_chunks = s.config.virtual_chunks;
  plan.recompute = policy;
  plan.layer_recompute = layers;
  plan.batch_size = s.profile.microbatch_size * s.config.microbatches;
  plan.partition = PartitionMethod::Balance;
  plan.balance = s.partition.layer_counts();
  plan.optimizer_state_tensors = s.request.optimizer_state_tensors;
  return plan;
}

// The simulated score of one recompute choice (memory filled in by the caller).
PlanCandidate score(const Setting& s, Recompute policy, const std::vector<LayerRecompute>& layers) {
  const Config& c = s.config;
  PlanCandidate p;
  p.stages = c.stages, p.replicas = c.replicas, p.microbatches = c.microbatches;
  p.virtual_chunks = c.virtual_chunks, p.schedule = c.schedule, p.placement = s.partition.placement;
  p.policy = policy, p.layer_recompute = layers, p.cut = s.partition.method;
  p.balance = s.partition.layer_counts(), p.microbatch_size = s.profile.microbatch_size;
  const Schedule schedule = schedule_of(s, policy);
  Costs costs = profile_costs(s.profile, s.partition, layers);
  if (s.request.link != LinkModel{}) costs.link = s.request.link;
  costs.replicas = c.replicas;
  costs.replica_link = s.request.link;
  const Timeline t = simulate(schedule, costs);
  p.pipeline_ms = t.step_time, p.bubble = t.bubble;
  p.action_ms = action_totals(t);
  for (const StageStats& st : t.stats) p.allreduce_ms = std::max(p.allreduce_ms, st.exposed_reduce);
  int64_t messages = 0;
  for (int st = 0; st < c.stages; ++st) {
    double r = 0.0;
    for (const TimedAction& a : t.stages[static_cast<size_t>(st)]) {
      if (a.action.kind == ActionKind::Recompute) r += a.end - a.start;
      if (a.action.kind != ActionKind::SendActivation && a.action.kind != ActionKind::SendGrad) continue;
      const TransferTag tag = transfer_tag(schedule, st, a.action);
      const ChunkCosts from = costs.chunk(schedule.layout(), tag.from_stage, tag.from_chunk);
      messages += tag.gradient ? from.input_bytes : from.output_bytes;
    }
    p.recompute_ms = std::max(p.recompute_ms, r);
  }
  const int64_t tied = c.stages > 1 ? tied_bytes_of(s) : 0;
  p.tied_ms = tied > 0 ? s.request.link.transfer_ms(tied) : 0.0;
  p.optimizer_ms = optimizer_ms_of(s);
  p.step_ms = p.pipeline_ms + p.tied_ms + p.optimizer_ms;
  int64_t reduced = 0;
  for (size_t st = 0; st < schedule.buckets.size(); ++st)
    for (const GradientBucket& b : schedule.buckets[st])
      reduced += LinkModel::allreduce_bytes_sent(b.bytes, c.replicas);
  p.traffic_bytes = c.replicas * (messages + reduced + tied);
  return p;
}

}  // namespace plan_detail
}  // namespace brigade::pipeline
