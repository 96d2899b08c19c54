// The planner's search and scoring (see planner.h; the table is plan_table.cpp).
#include "pipeline/plan/planner.h"

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <tuple>

#include "pipeline/plan/memory_model.h"
#include "pipeline/plan/plan_score.h"
#include "pipeline/plan/simulator.h"
#include "pipeline/schedule/generators.h"
#include "tensor/error.h"

namespace brigade::pipeline {

void PlanRequest::validate() const {
  BRIGADE_CHECK_VALUE(devices >= 1, "plan: devices must be >= 1, got ", devices);
  BRIGADE_CHECK_VALUE(device_memory >= 0, "plan: device memory must be >= 0 (0: no limit), got ",
                      device_memory);
  BRIGADE_CHECK_VALUE(batch >= 1, "plan: the global batch must be >= 1, got ", batch);
  BRIGADE_CHECK_VALUE(max_replicas >= 1, "plan: max_replicas must be >= 1, got ", max_replicas);
  BRIGADE_CHECK_VALUE(max_virtual >= 1 && max_microbatches >= 1 && keep >= 1,
                      "plan: max_virtual, max_microbatches and keep must be >= 1");
  for (const std::string& name : schedules) (void)schedule_traits(name);  // unknown names are refused
}

ModelProfile scale_profile(const ModelProfile& base, int64_t samples) {
  BRIGADE_CHECK_VALUE(base.microbatch_size > 0 && samples > 0, "scale_profile: needs a measured profile (",
                      base.microbatch_size, " samples) and samples > 0 (", samples, ")");
  const double r = static_cast<double>(samples) / static_cast<double>(base.microbatch_size);
  ModelProfile p = base;
  p.microbatch_size = samples;
  auto scale = [r](int64_t& bytes) {
    if (bytes > 0) bytes = static_cast<int64_t>(static_cast<double>(bytes) * r + 0.5);
  };
  for (LayerProfile& l : p.layers) {
    l.forward_ms *= r;
    l.backward_ms *= r;
    l.attention_core_ms *= r;
    if (l.split_measured()) l.backward_input_ms *= r, l.backward_weight_ms *= r;
    for (int64_t* bytes : {&l.activation_bytes, &l.output_bytes, &l.input_bytes, &l.forward_workspace_bytes,
                           &l.backward_workspace_bytes, &l.split_pending_bytes, &l.attention_core_bytes,
                           &l.attention_replay_bytes})
      scale(*bytes);
  }
  return p;
}

namespace {

using plan_detail::Config;
using plan_detail::Setting;

bool fits(const MemoryPrediction& p, int stage, int64_t budget) {
  return budget <= 0 || p.stages[static_cast<size_t>(stage)].total_bytes() <= budget;
}

std::vector<int64_t> totals(const MemoryPrediction& p) {
  std::vector<int64_t> out;
  for (const StageMemory& m : p.stages) out.push_back(m.total_bytes());
  return out;
}

// R's cost per microbatch on a stage for each choice: n nothing, a the cores, f the forward.
double recompute_cost(const Setting& s, int stage, char choice) {
  double ms = 0.0;
  for (int k : s.partition.stage_plans[static_cast<size_t>(stage)].chunks) {
    const ChunkPlan& c = s.partition.chunks[static_cast<size_t>(k)];
    for (int i = c.begin; i < c.end; ++i) {
      const LayerProfile& l = s.profile.layers[static_cast<size_t>(i)];
      ms += choice == 'f' ? l.forward_ms : choice == 'a' && l.has_attention ? l.attention_core_ms : 0.0;
    }
  }
  return choice == 'n' ? 0.0 : ms + (choice == 'a' ? 0.0 : 1e-9);  // f after a on a tie
}

// The per-layer plan of one letter per stage.
std::vector<LayerRecompute> layers_of(const Setting& s, const std::string& choices) {
  if (choices.find_first_not_of('f') == std::string::npos) return {};  // whole chunks
  std::vector<LayerRecompute> layers(static_cast<size_t>(s.profile.num_layers()), LayerRecompute::None);
  for (const ChunkPlan& c : s.partition.chunks) {
    const char choice = choices[static_cast<size_t>(c.stage)];
    for (int i = c.begin; i < c.end; ++i) {
      const bool attention = s.profile.layers[static_cast<size_t>(i)].has_attention;
      layers[static_cast<size_t>(i)] = choice == 'f'                ? LayerRecompute::Full
                                       : choice == 'a' && attention ? LayerRecompute::AttentionCore
                                                                    : LayerRecompute::None;
    }
  }
  return layers;
}

// Best first: step time, then the largest peak, then fewer stages, replicas, microbatches, then the
// configuration's flags (a total order, so ties come out the same every time).
void rank(Plan& plan) {
  auto key = [](const PlanCandidate& c) {
    return std::make_tuple(c.step_ms, c.max_peak_bytes(), c.stages, c.replicas, c.microbatches, c.flags());
  };
  std::sort(plan.ranked.begin(), plan.ranked.end(),
            [&](const PlanCandidate& a, const PlanCandidate& b) { return key(a) < key(b); });
  if (static_cast<int>(plan.ranked.size()) > plan.request.keep)
    plan.ranked.resize(static_cast<size_t>(plan.request.keep));
  std::stable_sort(
      plan.refused.begin(), plan.refused.end(),
      [](const PlanCandidate& a, const PlanCandidate& b) { return a.max_peak_bytes() < b.max_peak_bytes(); });
  if (static_cast<int>(plan.refused.size()) > plan.request.keep)
    plan.refused.resize(static_cast<size_t>(plan.request.keep));
}

bool attention_measured(const ModelProfile& p) {
  bool any = false;
  for (const LayerProfile& l : p.layers) {
    if (l.has_attention && l.attention_core_bytes < 0) return false;
    any = any || l.has_attention;
  }
  return any;
}

class Search {
 public:
  explicit Search(const PlanRequest& request) : request_(request) {}
  Plan run();

 private:
  const ModelProfile& profile_at(int64_t samples);
  std::vector<Partition> partitions(const Config& c, const ModelProfile& profile) const;
  void evaluate(const Setting& s);
  void evaluate_policy(const Setting& s, Recompute policy, const MemoryPrediction& never);
  bool refuse_resident(const Setting& s);
  void add(PlanCandidate candidate, const MemoryPrediction& memory);
  void refuse(PlanCandidate candidate, std::string why);
  double keep_th_best() const;

  const PlanRequest& request_;
  std::map<int64_t, ModelProfile> profiles_;
  std::vector<double> best_;  // step times of fitting candidates, ascending, at most request_.keep
  Plan plan_;
};

const ModelProfile& Search::profile_at(int64_t samples) {
  auto it = profiles_.find(samples);
  if (it == profiles_.end()) it = profiles_.emplace(samples, request_.profile(samples)).first;
  BRIGADE_CHECK_VALUE(it->second.measured && it->second.microbatch_size == samples, "plan: the profile for ",
                      samples, " samples is not a measured profile of that microbatch size");
  return it->second;
}

std::vector<Partition> Search::partitions(const Config& c, const ModelProfile& profile) const {
  PartitionOptions o;
  o.stages = c.stages;
  o.virtual_chunks = c.virtual_chunks;
  o.placement = schedule_traits(c.schedule).placement;
  std::vector<Partition> out;
  for (PartitionMethod method : {PartitionMethod::Time, PartitionMethod::Memory}) {
    o.method = method;
    Partition p = make_partition(profile, o);
    const bool seen = std::any_of(out.begin(), out.end(),
                                  [&](const Partition& q) { return q.layer_counts() == p.layer_counts(); });
    if (!seen) out.push_back(std::move(p));
  }
  return out;
}

double Search::keep_th_best() const {
  return static_cast<int>(best_.size()) < request_.keep ? 1e300 : best_.back();
}

void Search::add(PlanCandidate candidate, const MemoryPrediction& memory) {
  candidate.peak_bytes = totals(memory);
  best_.insert(std::upper_bound(best_.begin(), best_.end(), candidate.step_ms), candidate.step_ms);
  if (static_cast<int>(best_.size()) > request_.keep) best_.pop_back();
  plan_.ranked.push_back(std::move(candidate));
  ++plan_.scored;
}

void Search::refuse(PlanCandidate candidate, std::string why) {
  candidate.refusal = std::move(why);
  ++plan_.over_budget;
  plan_.refused.push_back(std::move(candidate));
}

std::string mib(int64_t bytes) {
  return format_bytes(static_cast<double>(bytes));
}

// Parameters, gradients and optimizer state alone exceed a device: nothing else needs predicting.
bool Search::refuse_resident(const Setting& s) {
  if (request_.device_memory <= 0) return false;
  for (int st = 0; st < s.config.stages; ++st) {
    const int64_t resident = (2 + request_.optimizer_state_tensors) *
                             s.partition.stage_plans[static_cast<size_t>(st)].parameter_bytes;
    if (resident <= request_.device_memory) continue;
    PlanCandidate c = plan_detail::score(s, Recompute::Never, {});
    c.peak_bytes.assign(static_cast<size_t>(s.config.stages), 0);
    c.peak_bytes[static_cast<size_t>(st)] = resident;
    refuse(std::move(c), "stage " + std::to_string(st) +
                             ": parameters, gradients and optimizer state alone " + mib(resident) + " > " +
                             mib(request_.device_memory));
    return true;
  }
  return false;
}

void Search::evaluate(const Setting& s) {
  if (refuse_resident(s)) return;
  const MemoryPrediction never = predict_memory(s.profile, plan_detail::memory_plan(s, Recompute::Never, {}));
  bool all = true;
  for (int st = 0; st < s.config.stages; ++st) all = all && fits(never, st, request_.device_memory);
  if (all) {  // no recomputation can be faster than none
    add(plan_detail::score(s, Recompute::Never, {}), never);
    return;
  }
  for (Recompute policy : {Recompute::ExceptLast, Recompute::Always}) evaluate_policy(s, policy, never);
}

// One policy: each stage takes the fitting choice (n, a, f) whose R costs least (planner.h).
void Search::evaluate_policy(const Setting& s, Recompute policy, const MemoryPrediction& never) {
  const MemoryPrediction full = predict_memory(s.profile, plan_detail::memory_plan(s, policy, {}));
  std::optional<MemoryPrediction> cores;
  if (attention_measured(s.profile))
    cores = predict_memory(
        s.profile, plan_detail::memory_plan(
                       s, policy, layers_of(s, std::string(static_cast<size_t>(s.config.stages), 'a'))));
  const int64_t budget = request_.device_memory;
  std::string choices;
  for (int st = 0; st < s.config.stages; ++st) {
    char pick = 0;
    for (char option : {'n', 'a', 'f'}) {
      const MemoryPrediction* p = option == 'n'   ? &never
                                  : option == 'a' ? (cores ? &*cores : nullptr)
                                                  : &full;
      if (!p || !fits(*p, st, budget)) continue;
      if (!pick || recompute_cost(s, st, option) < recompute_cost(s, st, pick)) pick = option;
    }
    if (!pick) {
      PlanCandidate c = plan_detail::score(s, policy, {});
      c.peak_bytes = totals(full);
      refuse(std::move(c), "stage " + std::to_string(st) + ": " +
                               mib(full.stages[static_cast<size_t>(st)].total_bytes()) + " > " + mib(budget) +
                               " even recomputing every layer");
      return;
    }
    choices += pick;
  }
  if (choices.find_first_not_of('n') == std::string::npos) return;  // that is never, which did not fit
  const std::vector<LayerRecompute> layers = layers_of(s, choices);
  const MemoryPrediction chosen = predict_memory(s.profile, plan_detail::memory_plan(s, policy, layers));
  PlanCandidate c = plan_detail::score(s, policy, layers);
  c.stage_choices = choices;
  for (int st = 0; st < s.config.stages; ++st) {
    if (fits(chosen, st, budget)) continue;  // the per-stage predictions and the whole one disagree
    c.peak_bytes = totals(chosen);
    refuse(std::move(c), "stage " + std::to_string(st) + ": " +
                             mib(chosen.stages[static_cast<size_t>(st)].total_bytes()) + " > " + mib(budget));
    return;
  }
  add(std::move(c), chosen);
}

Plan Search::run() {
  request_.validate();
  BRIGADE_CHECK_VALUE(static_cast<bool>(request_.profile), "plan: no profile function (the measured layers)");
  plan_.request = request_;
  // M = 1 on one replica is always in the space: its profile (the whole batch per microbatch) is needed.
  const int layers = profile_at(request_.batch).num_layers();
  plan_.num_layers = layers;
  const std::vector<Config> configs = plan_detail::configurations(request_, layers);
  plan_.configurations = static_cast<int>(configs.size());
  plan_.exhaustive = plan_.configurations <= request_.exhaustive_limit;
  // Every size first, so that each factor is priced from a line through all of them (factor_fit.h), not
  // from one size's noisy measurement.
  for (const Config& c : configs) profile_at(request_.batch / c.replicas / c.microbatches);
  plan_.factors = fit_profile_factors(profiles_, request_.fit_factors);
  for (const Config& c : configs) {
    const ModelProfile& profile = profile_at(request_.batch / c.replicas / c.microbatches);
    for (const Partition& partition : partitions(c, profile)) {
      const Setting s{request_, c, profile, partition};
      if (!plan_.exhaustive && plan_detail::lower_bound_ms(s) > keep_th_best()) {
        ++plan_.pruned;
        continue;
      }
      evaluate(s);
    }
  }
  rank(plan_);
  return std::move(plan_);
}

}  // namespace

Plan plan_pipeline(const PlanRequest& request) {
  return Search(request).run();
}

}  // namespace brigade::pipeline
