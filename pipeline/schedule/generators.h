// Schedule generators: GPipe, 1F1B, interleaved 1F1B and ZB-H1, as per-stage instruction lists.
//
// Each generator first decides the order of the compute actions (F, B, Bi, Bw) on every stage; then two
// passes shared by all of them complete the lists:
//   1. insert_transfers: a Recv right before every F/B/Bi whose input comes from another stage and a Send
//      right after every F/B/Bi whose output goes to another stage;
//   2. insert_recompute: where the policy recomputes (stage, chunk, microbatch), F keeps only the chunk's
//      input and an R is placed before the backward — see below;
// and finally an OptimizerStep ends every list.
//
// Where R goes. R must come after its F and before its backward. Running it early (right after F, say)
// would hold the recreated activations as long as no recomputation at all, which defeats it. We put R(j)
// immediately before the backward of j, in front of the Recv that waits for j's gradient: the stage runs R
// while the gradient travels back from the next stage. In 1F1B's steady state that is exactly the slot
// where the stage would otherwise idle (after F(i) and its Send it waits for the gradient of j); it is the
// earliest slot that does not make a second recomputed microbatch live at once, so the number of
// microbatches holding full activations never exceeds what the schedule without recomputation holds (with
// B it is one recomputed microbatch at a time; zb-h1's deferred Bw keep theirs until the Bw, as they must).
// On the last model chunk the gradient comes from the local loss, so R there cannot hide behind a wait.
#pragma once

#include <string>
#include <vector>

#include "pipeline/schedule/schedule.h"

namespace brigade::pipeline {

/// The schedule names make_schedule knows, in a stable order: gpipe, 1f1b, interleaved, zb-h1.
const std::vector<std::string>& schedule_names();

/// Builds the named schedule. Throws ValueError for an unknown name (listing the valid ones), S < 1, M < 1,
/// v < 1, v > 1 for a schedule other than "interleaved", or (interleaved) M not a multiple of S.
Schedule make_schedule(const std::string& name, int stages, int microbatches, int virtual_chunks = 1,
                       Recompute recompute = Recompute::Never);

/// GPipe (fill-drain): every stage runs F0..F(M-1), then B(M-1)..B0. The backward runs newest first, as
/// autograd would on the whole batch, so the last microbatch's backward follows its forward at once
/// (which is why except-last keeps its activations). Stage s holds all M microbatches at the peak.
Schedule gpipe(int stages, int microbatches, Recompute recompute = Recompute::Never);

/// 1F1B (PipeDream-Flush): stage s runs min(S - s - 1, M) warm-up forwards, then alternates one forward
/// and one backward, then drains the remaining backwards. Same bubble as GPipe; at most S - s
/// microbatches in flight on stage s instead of M.
Schedule one_f_one_b(int stages, int microbatches, Recompute recompute = Recompute::Never);

/// Interleaved 1F1B (Megatron): v chunks per stage. Microbatches go through in groups of S: forward
/// virtual step k runs microbatch (k / (S v)) S + k % S on chunk (k / S) % v; backward runs the chunks in
/// reverse. Stage s warms up with 2 (S - s - 1) + (v - 1) S forwards (at most v M). M must be a multiple of
/// S (ValueError naming both otherwise).
Schedule interleaved(int stages, int microbatches, int virtual_chunks,
                     Recompute recompute = Recompute::Never);

/// ZB-H1 (Zero Bubble, Qi et al. 2024): the backward of stages s > 0 is split into Bi (input gradient, on
/// the critical path) and Bw (weight gradient, deferrable). Stage s has 1F1B's warm-up and steady state,
/// but keeps its first s weight-gradients pending, so its input-gradients reach stage s - 1 sooner; the
/// pending Bw fill the drain at the end. Stage 0 sends no gradient and runs full B. At most S microbatches
/// are in flight on any stage (1F1B's peak), and with F = Bi = Bw the bubble is a third of 1F1B's.
Schedule zb_h1(int stages, int microbatches, Recompute recompute = Recompute::Never);

/// Pass 1 above: adds the Send/Recv actions to lists of compute actions (idempotent only on lists
/// without transfers). Exposed for hand-written schedules.
void insert_transfers(Schedule& schedule);
/// Pass 2 above: adds R per schedule.recompute (requires transfers already inserted).
void insert_recompute(Schedule& schedule);

}  // namespace brigade::pipeline
