// The V-shape schedules: two chunks per stage in V placement (schedule.h), stage s holding model chunks s
// and 2S-1-s, so that a microbatch runs down the stages and back up and stage 0 computes both the first
// layers and the loss. Every backward is split into Bi and Bw (zero bubble, generators.h: zb-h1).
//
// ZB-V (Zero Bubble, Qi et al. 2024, section 6). Each stage warms up with 2(S - s) - 1 forwards of its
// chunk 0, then s pairs (F chunk 1, F chunk 0), then S - s triples (F, Bi, Bw of chunk 1); in the steady
// state it runs F, Bi, Bw of chunk 0 then of chunk 1 for one microbatch each; the cool-down runs the
// remaining Bi, with the weight gradients deferred to fill the drain. With F = Bi = Bw (no transfer
// time, M >= 2S - 1) no stage idles between its first and last action, and every stage holds at most 2S
// chunk activations, S microbatches' worth of a stage: 1F1B's peak ("zero bubble at 1x memory").
//
// V-Half and V-Min (Pipeline Parallelism with Controllable Memory, Qi et al. 2024). A schedule is one
// microbatch's "building block" repeated every 6 time units (the 6 passes F, Bi, Bw of two chunks, one
// unit each): the block gives, per stage, when the F of chunk 0, the F of chunk 1, the Bi of chunk 1 and
// the Bi of chunk 0 of microbatch 0 start, microbatch m starting 6m later; the Bw go into the free slots in
// the order of their Bi. How long a microbatch lives on a stage, from its F to its last Bw, divided by 6
// is how many microbatches a stage holds at once: the block decides the memory. The published blocks
// (offsets in time units, stage s of S; d = 2 when 3 divides S for V-Min, 3 when S is even for V-Half,
// else 0, so that no two passes of a stage collide):
//   V-Min   F0: s      F1: 2S - 1 - s   Bi1: 2S + d + s        Bi0: 4S + d - 1 - s
//   V-Half  F0: 2s     F1: 3S - 2 - s   Bi1: 3S + d + 2s - 1   Bi0: 6S + d - s - 2
// Repeating the block leaves holes where it starts and ends (the warm-up and cool-down); the list
// scheduler (list_scheduler.h) squeezes them: each stage runs its passes in the block's order as early as
// their inputs allow, and where the next pass is not ready it may run instead, before its first backward,
// one of the forwards that come next in its order (if its activations stay under the block's peak), after
// its last forward any backward that is ready, and otherwise a weight gradient whose Bi has run.
// What they cost (F = Bi = Bw; tests/pipeline/schedule_figures_test.cpp): V-Half holds (S + 2) / 2
// (rounded down) microbatches' worth of activations and idles about half of 1F1B's time, V-Min holds
// (S + 4) / 3 (rounded down) and idles about two thirds of it.
#pragma once

#include <string>
#include <vector>

#include "pipeline/schedule/schedule.h"

namespace brigade::pipeline {

/// ZB-V with S stages and M microbatches (v = 2, V placement). ValueError for S < 1 or M < 1.
Schedule zb_v(int stages, int microbatches, Recompute recompute = Recompute::Never);

/// V-Half (v = 2, V placement). ValueError for S < 1 or M < 1.
Schedule v_half(int stages, int microbatches, Recompute recompute = Recompute::Never);

/// V-Min (v = 2, V placement). ValueError for S < 1 or M < 1.
Schedule v_min(int stages, int microbatches, Recompute recompute = Recompute::Never);

/// A V-shape building block: per stage, the start times of F chunk 0, F chunk 1, Bi chunk 1 and Bi
/// chunk 0 of microbatch 0 (microbatch m starts 6m later).
struct BuildingBlock {
  struct Offsets {
    int forward0 = 0, forward1 = 0, input_grad1 = 0, input_grad0 = 0;
  };
  std::vector<Offsets> stages;
};

/// The blocks above.
BuildingBlock v_min_block(int stages);
BuildingBlock v_half_block(int stages);

/// The schedule of `block` (see above), named `name`. ValueError when two passes of a stage collide
/// (start in the same slot of the 6-unit period) or a block starts a pass before its input is made.
Schedule schedule_from_block(const std::string& name, const BuildingBlock& block, int microbatches,
                             Recompute recompute = Recompute::Never);

}  // namespace brigade::pipeline
