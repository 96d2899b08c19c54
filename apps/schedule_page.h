// The schedule lab page (`brigade schedule --html FILE`): one self-contained HTML file that draws a simulated
// pipeline step and recomputes it in the browser as sliders for S, M, v, the costs and each stage's cost
// factor move. It loads nothing: its JavaScript (apps/schedule_lab/, embedded into the binary at build
// time) ports the schedule generators and the simulator from C++, and the page carries the C++ timeline of
// the configuration it was written with, which it checks itself against on load.
#pragma once

#include <string>
#include <vector>

#include "pipeline/plan/memory_model.h"
#include "pipeline/plan/simulator.h"

namespace brigade::apps {

/// What the page starts from: the configuration `reference` was simulated with.
struct SchedulePageSetup {
  pipeline::Costs costs;              ///< uniform costs (per_chunk unused: the factors scale them)
  std::vector<double> stage_factors;  ///< one per stage (all 1 without --stage-costs)
  pipeline::ActivationSizes memory;   ///< uniform activation sizes (MemoryModel::uniform)
};

/// The page, starting from `reference` (its schedule's name, S, M, v and recompute policy) and `setup`.
std::string render_schedule_page(const SchedulePageSetup& setup, const pipeline::Timeline& reference);

}  // namespace brigade::apps
