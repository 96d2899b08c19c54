// The planner's parts below its search (planner.h): the configurations of the space in the search's
// order, and the scores of one candidate. Internal to pipeline/plan (planner.cpp, tests).
#pragma once

#include <string>
#include <vector>

#include "pipeline/plan/memory_model.h"
#include "pipeline/plan/planner.h"

namespace brigade::pipeline::plan_detail {

/// One (S, D, M, v, schedule) of the space.
struct Config {
  int stages = 1, replicas = 1, microbatches = 1, virtual_chunks = 1;
  std::string schedule;
};

/// Every configuration of `request` for a model of `layers` layers, in the search's fixed order: S, D,
/// schedule (catalogue order), v, M ascending. One stage runs only 1f1b (every schedule is the plain loop).
std::vector<Config> configurations(const PlanRequest& request, int layers);

/// What every candidate of one (configuration, partition) shares.
struct Setting {
  const PlanRequest& request;
  const Config& config;
  const ModelProfile& profile;  ///< at the configuration's microbatch size
  const Partition& partition;
};

/// The lower bound on any candidate's step time (planner.h, "Search").
double lower_bound_ms(const Setting& setting);

/// The memory model's plan for one recompute choice of the setting (its partition as a balance).
MemoryPlan memory_plan(const Setting& setting, Recompute policy, const std::vector<LayerRecompute>& layers);

/// The simulated score of one recompute choice: times, bubble, recompute time, traffic (peak_bytes and
/// refusal are the caller's).
PlanCandidate score(const Setting& setting, Recompute policy, const std::vector<LayerRecompute>& layers);

}  // namespace brigade::pipeline::plan_detail
