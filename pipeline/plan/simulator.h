// The pipeline simulator: runs a schedule's lists against per-action costs and reports the timeline, the
// step time, the bubble and the activation memory of every stage — predicted from the same IR the
// executor runs.
//
// Time model. Every stage runs its list in order on one compute lane, starting at 0. A compute action
// (F, B, Bi, Bw, R, step) starts when the previous action on its stage has ended and its inputs are there
// (schedule/dependencies.h) and lasts its cost. What an action costs depends on what its stage ran before
// it, through the caches: a Bw not right after its own Bi costs ChunkCosts::weight_deferred, and a
// microbatch's first backward action costs ChunkCosts::cold times more when another microbatch's (or
// chunk's) forward ran on the stage since its own (is_cold_backward). A Send takes no time on the lane (the
// copy runs on the stage's copy stream); its message reaches the peer `transfer` later, or, with a link
// model, latency + bytes / bandwidth of the link between the two stages later (link_model.h). A Recv lasts
// until its message is there: that wait is idle time. The step time T is when the last stage finishes; stage
// s's bubble is (T - busy_s)/T, where busy_s sums its compute actions (R and the optimizer step included);
// the overall bubble is the mean over stages.
//
// Data parallel. A Reduce (schedule.h, "Data parallel") takes no time on its stage's compute lane: its
// all-reduce runs on the stage's comm lane, from the Reduce (or the end of the previous all-reduce on that
// lane) for link.allreduce_ms(bucket bytes, replicas) (Costs::replica_link; a ring over the replicas,
// link_model.h), while the compute lane goes on. The stage's optimizer step starts when both lanes are
// done; the time it waits for the comm lane is the all-reduce's exposed part (StageStats::exposed_reduce),
// and it is in the step time. The replicas run the same lists, so one replica's timeline is every one's.
//
// Textbook bubbles (uniform costs, no transfer time, no step cost; derived in docs/schedules.md):
//   gpipe, 1f1b:  T = (M + S - 1)(f + b) on every stage, bubble (S - 1)/(M + S - 1), whatever f and b;
//   interleaved:  chunk costs f/v and b/v, T = (v M + S - 1)(f + b)/v, bubble (S - 1)/(v M + S - 1)
//                 (Megatron's (S - 1)/(v M) of the ideal compute time M (f + b));
//   zb-h1:        with Bi = b - w = w = f (the paper's F = B = W), T = 3 M f + (S - 1) f, bubble
//                 (S - 1)/(3 M + S - 1): a third of 1F1B's (S - 1) 3f idle time.
//
// Idle time inside a stage's span (StageStats::span): the papers' zero-bubble schedules (zb-h2, zb-v) have
// none with F = Bi = Bw, although their step still has the pipeline's skew, (S - 1) f for zb-h2.
//
// Memory, per stage, in the units of MemoryModel (memory_model.h; one stage's full activations of one
// microbatch by default): the activation ledger (activation_ledger.h) walked over the stage's list, the
// same walk the memory model makes in bytes. The peak includes the action that is running.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "pipeline/plan/link_model.h"
#include "pipeline/plan/memory_model.h"
#include "pipeline/schedule/schedule.h"

namespace brigade::pipeline {

/// Costs of the actions of one model chunk for one microbatch.
struct ChunkCosts {
  double forward = 1.0;
  double backward = 2.0;  ///< the whole backward B (one action)
  double weight = 1.0;    ///< Bw, the weight-gradient half of a split backward
  double recompute = 1.0;
  /// The bytes of the messages it sends, for a link model (Costs::link): its output (an activation) and
  /// its input-gradient, the size of its input.
  int64_t output_bytes = 0;
  int64_t input_bytes = 0;
  /// Bi, the input-gradient half of a split backward. Negative: backward - weight (the split costs what B
  /// costs). Measured, Bi + Bw exceeds B (backward/split_backward.h: two walks instead of one), so a
  /// profile that times the halves sets both. (Last, so that {f, b, w, r} initialisers keep their order.)
  double input = -1.0;
  /// Bw when it does not follow its own Bi on the stage (other actions ran between them: a zero-bubble
  /// schedule's deferred weight gradients). The activations and output gradients it reads have left the
  /// core's caches by then; measured on a CPU, such a Bw takes about a fifth longer than one right after its
  /// Bi (run/plan_model.h: measure_deferred_weight). Negative: `weight`, deferred or not.
  double weight_deferred = -1.0;
  /// How much longer the backward action that first reads a microbatch's activations (its B; its Bi, or
  /// its Bw where Bi has nothing to do, as on the first chunk) takes when another microbatch's or chunk's
  /// forward or recompute ran on the stage since its own: those activations have been pushed out of the
  /// core's caches (measured on a CPU: 5-10 % at a few samples a microbatch; run/plan_model.h:
  /// measure_cold_backward, fitted across the microbatch sizes: factor_fit.h). 1: warm or cold alike.
  double cold = 1.0;

  /// Bi's cost: `input`, or backward - weight when that is negative.
  double backward_input() const { return input >= 0 ? input : backward - weight; }
  /// Bw's cost, right after its Bi or deferred.
  double backward_weight(bool deferred) const {
    return deferred && weight_deferred >= 0 ? weight_deferred : weight;
  }
};

/// Action costs in any time unit (e.g. 1 = one forward, or milliseconds when measured).
struct Costs {
  /// Uniform costs of one *stage* (all its layers) for one microbatch. With v chunks per stage each
  /// chunk's action costs 1/v of these, so interleaved and plain schedules of one model compare directly.
  double forward = 1.0;
  double backward = 2.0;
  double weight = 1.0;      ///< part of backward: Bi = backward - weight, Bw = weight
  double recompute = -1.0;  ///< negative: same as forward
  double step = 0.0;        ///< the optimizer step, per stage
  double transfer = 0.0;    ///< from a Send to its message being available to the Recv
  /// A link model for every message instead of `transfer` (link_model.h): a message takes
  /// latency + bytes / bandwidth, its bytes from per_chunk (ChunkCosts::output_bytes for an activation,
  /// input_bytes for a gradient; 0 with uniform costs).
  std::optional<LinkModel> link;
  /// Links of particular stage pairs (from, to), overriding `link` (or `transfer`) for their messages.
  std::map<std::pair<int, int>, LinkModel> stage_links;
  /// Data parallel: how many replicas reduce each gradient bucket, and the link between them (no link: the
  /// Reduces take no time).
  int replicas = 1;
  std::optional<LinkModel> replica_link;
  /// Measured costs per model chunk (size S * v, indexed by model chunk: ChunkLayout::model_chunk), used
  /// instead of the uniform ones (and not divided by v) when not empty.
  std::vector<ChunkCosts> per_chunk;

  /// Parses "f=1,b=2,w=1" (keys f|forward, b|backward, w|weight, r|recompute, step, t|transfer; missing
  /// keys keep their defaults). ValueError naming the bad item and the valid keys otherwise.
  static Costs parse(const std::string& text);
  /// The costs of local chunk `chunk` of `stage` in `layout`.
  ChunkCosts chunk(const ChunkLayout& layout, int stage, int chunk) const;
  /// How long the message of a Send action on `stage` takes: `transfer`, or the link's time for its bytes.
  double message_time(const Schedule& schedule, int stage, const Action& send) const;
  /// How long the all-reduce of a Reduce action on `stage` takes: replica_link's ring over `replicas` for
  /// its bucket's bytes (0 without a replica link).
  double reduce_time(const Schedule& schedule, int stage, const Action& reduce) const;
  /// Throws ValueError when a cost is negative, weight > backward where Bi is derived from them, or
  /// per_chunk has the wrong size.
  void check(int stages, int virtual_chunks) const;
};

/// One executed action with its simulated start and end (a Reduce: its all-reduce on the comm lane).
struct TimedAction {
  int step = 0;  ///< index in the stage's list
  Action action;
  double start = 0.0, end = 0.0;
  /// A Send: when its message is there for the Recv (its end plus the time the message takes on the link);
  /// -1 for every other action.
  double arrival = -1.0;
};

/// One step of a stage's activation memory over time: from `time` on (until the next point) the stage
/// holds `live` (MemoryModel units).
struct MemoryPoint {
  double time = 0.0;
  double live = 0.0;
  bool operator==(const MemoryPoint&) const = default;
};

/// Per-stage figures.
struct StageStats {
  double busy = 0.0;  ///< time in compute actions
  /// How long the optimizer step waited for the stage's all-reduces after its last compute action (0
  /// without Reduce actions): the part of the data-parallel all-reduce that the backward did not hide.
  double exposed_reduce = 0.0;
  double bubble = 0.0;  ///< (step time - busy) / step time
  /// From the start of the stage's first compute action to the end of its last: the part of the step the
  /// stage is in use. span - busy is the idle time inside it, the bubble the zero-bubble papers count (an
  /// optimizer step that does not wait for the other stages lets the next step fill the rest).
  double span = 0.0;
  int peak_in_flight = 0;    ///< most (chunk, microbatch) pairs holding any activation at once (F .. B/Bw)
  int peak_full = 0;         ///< most holding their full activations at once
  double peak_memory = 0.0;  ///< in MemoryModel units
  /// The live activations over the step, as the ledger walks the stage's actions: starting at {0, 0}, one
  /// point wherever an action's start (F, R allocate) or end (Bi, B, Bw free) changes them, in time order
  /// (two points may share a time: the end of one action and the start of the next). Its highest point is
  /// peak_memory.
  std::vector<MemoryPoint> memory;
};

/// The simulated step.
struct Timeline {
  Schedule schedule;
  Costs costs;
  std::vector<std::vector<TimedAction>> stages;  ///< per stage, in list order
  std::vector<StageStats> stats;                 ///< per stage
  double step_time = 0.0;
  double bubble = 0.0;  ///< mean of the stages' bubbles
};

/// Whether `a` is the action that first reads its microbatch's activations on its stage (a B; a Bi, or a
/// Bw when the chunk's Bi costs nothing), run after another microbatch's or chunk's forward or recompute:
/// `last_forward` is the stage's latest F, or R that recomputed something, before `a` (nullptr: none yet).
bool is_cold_backward(const Action& a, const Action* last_forward, const ChunkCosts& c);

/// Time summed over a step per (model chunk, kind) of its F, B, Bi, Bw and R actions: a prediction and a
/// measurement (trace.h) compared action kind by action kind.
using ActionTotals = std::map<std::pair<int, ActionKind>, double>;

/// The simulated step's ActionTotals.
ActionTotals action_totals(const Timeline& timeline);

/// Validates `schedule` (ScheduleError if invalid) and simulates one step.
Timeline simulate(const Schedule& schedule, const Costs& costs = {}, const MemoryModel& memory = {});

/// The textbook bubble for uniform costs and no transfer time: (S-1)/(M+S-1) for gpipe and 1f1b,
/// (S-1)/(vM+S-1) for interleaved. ValueError for other names (zb-h1's depends on the costs).
double textbook_bubble(const std::string& name, int stages, int microbatches, int virtual_chunks = 1);

}  // namespace brigade::pipeline
