// Schedule generators: the catalogue of named schedules (make_schedule), GPipe, 1F1B, interleaved 1F1B,
// ZB-H1 and LoopedBFS here; ZB-H2 in zero_bubble.h; ZB-V, V-Half and V-Min in v_shape.h; DualPipeV in
// dualpipe.h. Each is a per-stage instruction list (schedule.h).
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

#include <optional>
#include <string>
#include <vector>

#include "pipeline/schedule/schedule.h"

namespace brigade::pipeline {

/// What a named schedule is: where its chunks go, how many each stage holds, what it asks of M.
struct ScheduleTraits {
  const char* name;
  Placement placement;
  /// Model chunks per stage: 1 or 2, fixed; 0 when it takes any v (interleaved, looped-bfs).
  int chunks_per_stage;
  bool splits_backward;  ///< runs Bi and Bw (zero bubble) instead of B
  const char* summary;   ///< one line, for --help and tables
};

/// Every named schedule, in a stable order: gpipe, 1f1b, interleaved, zb-h1, zb-h2, zb-v, v-half, v-min,
/// dualpipev, looped-bfs.
const std::vector<ScheduleTraits>& schedule_catalogue();
/// The catalogue's names, in its order.
const std::vector<std::string>& schedule_names();
/// The names joined: "gpipe, 1f1b, ..." (for messages and --help).
std::string schedule_name_list();
/// The traits of `name`; ValueError listing the valid names otherwise.
const ScheduleTraits& schedule_traits(const std::string& name);
/// The chunks per stage `name` runs with when asked for `virtual_chunks`: the fixed count of a schedule
/// that has one (when asked for 1, the default, or for that count), else `virtual_chunks`. ValueError for
/// another count on a fixed schedule, naming the schedules that take one.
int chunks_per_stage(const std::string& name, int virtual_chunks);

/// The fewest microbatches `name` runs with on `stages` stages: 1, S for interleaved (whose microbatches go
/// in groups of S, so M must also be a multiple of S), 2S for dualpipev.
int smallest_microbatches(const std::string& name, int stages);

/// Builds the named schedule. Throws ValueError for an unknown name (listing the valid ones), S < 1, M < 1,
/// v < 1, a v that the schedule does not take (chunks_per_stage), (interleaved) M not a multiple of S, or
/// (dualpipev) M < 2S.
Schedule make_schedule(const std::string& name, int stages, int microbatches, int virtual_chunks = 1,
                       Recompute recompute = Recompute::Never);

/// The schedule a configuration asks for: `lists` when given (a schedule read from a file, say), after
/// checking that its stages, microbatches and recompute policy are the ones given and that its chunks per
/// stage are virtual_chunks or what chunks_per_stage(its name) makes of it (ValueError naming the
/// difference); else make_schedule(name, ...).
Schedule schedule_for(const std::string& name, int stages, int microbatches, int virtual_chunks,
                      Recompute recompute, const std::optional<Schedule>& lists);

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

/// LoopedBFS (PyTorch's ScheduleLoopedBFS): v chunks per stage in interleaved placement, breadth first:
/// every stage runs the forwards of all M microbatches on its chunk 0, then on chunk 1, ..., then the
/// backwards chunk by chunk from the last, newest microbatch first. GPipe over v times as many, thinner
/// stages: the fill and the drain shrink to 1/v, every stage holds all v M chunk activations at the peak.
Schedule looped_bfs(int stages, int microbatches, int virtual_chunks, Recompute recompute = Recompute::Never);

/// The forward-only schedule that evaluation and sampling run through a pipeline (Schedule::forward_only):
/// every stage runs F of each of its chunks, in model-chunk order, for microbatches 0..M-1, with the
/// activations' Send/Recv; no backward, no optimizer step. For one chunk per stage it is GPipe's fill
/// without the drain: (M + S - 1) forward times with uniform costs, the bubble (S - 1) / (M + S - 1).
/// The placement is the training schedule's, so the same stages hold the same layers. ValueError for
/// S, M or v < 1.
Schedule forward_only(int stages, int microbatches, int virtual_chunks = 1,
                      Placement placement = Placement::Interleaved);

/// A schedule of these sizes with empty lists, for a generator to fill. ValueError for S, M or v < 1.
Schedule empty_schedule(const std::string& name, int stages, int microbatches, int virtual_chunks,
                        Placement placement, Recompute recompute);
/// What every generator does once the compute order is decided: insert_transfers, insert_recompute,
/// then an OptimizerStep at the end of every list.
Schedule finish_schedule(Schedule schedule);

/// Pass 1 above: adds the Send/Recv actions to lists of compute actions (idempotent only on lists
/// without transfers). Exposed for hand-written schedules.
void insert_transfers(Schedule& schedule);
/// Pass 2 above: adds R per schedule.recompute (requires transfers already inserted).
void insert_recompute(Schedule& schedule);

}  // namespace brigade::pipeline
