// Per-stage cost factors: stages that are not alike, e.g. a heavy last stage that also computes the
// language-model head and the loss (`brigade schedule --stage-costs 1,1,1,2`, or `last=2`).
//
// A factor multiplies the costs of everything its stage computes (F, B, Bi, Bw, R; not the optimizer step
// or the transfers): with uniform costs, local chunk c of stage s costs costs.chunk(layout, s, c) (a 1/v
// share of the stage's costs) times factors[s]; measured per-chunk costs are scaled the same way. The
// result is a Costs with per_chunk filled, which the simulator (simulator.h) reads as it reads measured
// costs.
#pragma once

#include <string>
#include <vector>

#include "pipeline/plan/simulator.h"
#include "pipeline/schedule/schedule.h"

namespace brigade::pipeline {

/// The factors `text` gives `stages` stages: a list with one number per stage ("1,1,1,2"), or items
/// "s<k>=x" (stage k) and "last=x" (stage S-1), the stages not named keeping 1 ("last=2", "s0=1.5,last=2").
/// ValueError naming the item for a negative factor, a stage out of range, a list of the wrong length or
/// something that is not a number.
std::vector<double> parse_stage_factors(const std::string& text, int stages);

/// `costs` with stage s's compute costs multiplied by factors[s] (see above). ValueError when there are not
/// layout.stages factors or one is negative.
Costs scale_stage_costs(const Costs& costs, const ChunkLayout& layout, const std::vector<double>& factors);

}  // namespace brigade::pipeline
