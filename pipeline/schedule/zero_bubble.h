// ZB-H2 (Zero Bubble, Qi et al. 2024): the zero-bubble schedule that spends memory to remove the bubble.
//
// ZB-H1 (generators.h) keeps 1F1B's warm-up and only moves weight gradients (Bw) into the holes, which
// leaves a third of 1F1B's idle time. ZB-H2 also lets the stages run more forwards before their first
// backward, so that the long wait for the first gradient is filled with work, and keeps the weight
// gradients for the drain, where stage 0 would otherwise wait for the last gradients to come back. Each
// stage then works without a hole from its first forward to its last Bw.
//
// How the order is found. Rather than a formula per stage, the list scheduler (list_scheduler.h) runs the
// pipeline on the papers' unit-cost timeline (F = Bi = Bw) and every stage, whenever it is free, runs:
//   1. the oldest input-gradient Bi whose gradient has arrived (it is what the previous stage waits for);
//   2. else the next forward, if fewer than 2S - 1 microbatches hold activations on the stage (a
//      microbatch holds them from its F until its Bw);
//   3. else the oldest pending weight-gradient Bw (it fills a hole and frees activations);
//   4. else it waits.
// With a cap of S microbatches the same rules give a ZB-H1-like schedule; 2S - 1 is the smallest cap that
// leaves no hole for M >= 2S - 1 (the tests check both claims).
//
// What it costs (F = Bi = Bw, no transfer time, M >= 2S - 1): no stage idles between its first and last
// action; the step still has the pipeline's skew (stage s starts s forwards late and stage 0 ends last),
// (S - 1) F in all, which the papers hide by letting each stage start its next step's forwards before the
// others have finished (their "post-validation" of the optimizer step). Peak activations: 2S - 1
// microbatches on every stage, about twice 1F1B's S.
#pragma once

#include "pipeline/schedule/schedule.h"

namespace brigade::pipeline {

/// ZB-H2 with S stages and M microbatches (v = 1). ValueError for S < 1 or M < 1.
Schedule zb_h2(int stages, int microbatches, Recompute recompute = Recompute::Never);

/// The rules above with a cap of `max_in_flight` microbatches per stage (>= 1): what zb_h2 runs with
/// 2S - 1. Named `name`.
Schedule capped_zero_bubble(const std::string& name, int stages, int microbatches, int max_in_flight,
                            Recompute recompute = Recompute::Never);

}  // namespace brigade::pipeline
