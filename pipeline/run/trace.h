// Traces of executed steps: when every action of the IR ran on every stage, and pictures of it.
//
// Times are milliseconds since the step began. On the CPU every action is timed with the host's steady
// clock (a CPU stream runs its work on the calling thread). On a GPU the compute actions (F, B, Bi, Bw,
// R) are timed with CUDA events on the stage's compute stream, placed on the host time line through a
// reference event recorded while that stream was idle; Send/Recv are host-side operations and keep the
// host clock there too: a Recv lasts as long as its stage waited for the message (plus the hand-off
// copy's enqueueing).
//
// Measured bubble: the step time T is the span from the first action's start to the last action's end
// over all stages (the optimizer step is not part of it); stage s's bubble is (T - busy_s) / T, where
// busy_s sums the durations of its F, B, Bi, Bw and R. This is the simulator's definition (plan/simulator.h)
// applied to measured times, so the two compare directly.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "pipeline/plan/simulator.h"
#include "pipeline/schedule/schedule.h"
#include "tensor/device.h"

namespace brigade::pipeline {

/// One executed action.
struct TraceEvent {
  int step = 0;  ///< index in the stage's list
  Action action;
  double start_ms = 0.0, end_ms = 0.0;
  /// CPU stages: the CPU time the stage's thread spent in the action (its own work, not the time it waited
  /// for a core on a busy machine, nor kernels' other OpenMP threads); -1 where not measured (GPU stages).
  double cpu_ms = -1.0;
  int64_t bytes = 0;        ///< transfers: bytes of the message
  int64_t scope_bytes = 0;  ///< the stage's memory scope after the action, relative to the step's start
  /// The scope's highest point while the action ran (allocator stats, relative to the step's start): the
  /// stage's measured peak (ExecutionTrace::peak_bytes) is the largest of these.
  int64_t scope_peak_bytes = 0;

  /// How long the action took: cpu_ms with `thread_cpu_time` where measured, its wall-clock duration
  /// otherwise.
  double ms(bool thread_cpu_time) const {
    return thread_cpu_time && cpu_ms >= 0.0 ? cpu_ms : end_ms - start_ms;
  }
};

/// Every executed action of one step.
struct ExecutionTrace {
  Schedule schedule;
  std::vector<Device> devices;                  ///< per stage
  std::vector<int> compute_streams;             ///< per stage: Stream::id() of its compute stream
  std::vector<int> copy_streams;                ///< per stage: Stream::id() of its copy stream
  std::vector<std::vector<TraceEvent>> stages;  ///< per stage, in execution order
  std::vector<int64_t> peak_bytes;   ///< per stage: its memory scope's peak over the step (StageReport)
  double optimizer_start_ms = -1.0;  ///< train_step's optimizer step (-1: none)
  double optimizer_end_ms = -1.0;

  /// First start to last end over all stages' actions (0 for an empty trace).
  double span_ms() const;
  /// Per stage: the summed durations of F, B, Bi, Bw and R.
  std::vector<double> busy_ms() const;
  /// Per stage: (span - busy) / span.
  std::vector<double> bubbles() const;
  /// Mean of bubbles().
  double bubble() const;
};

/// Mean measured costs per model chunk (ms): forward, backward (B, or Bi + Bw), weight (Bw; for chunks
/// that only ran B, half the backward), recompute (R; the forward when none ran). Feed it to simulate() to
/// compare the measured step with the schedule's prediction from the same costs.
/// @param thread_cpu_time use each action's cpu_ms instead of its wall-clock duration (CPU stages; an
///        action without cpu_ms keeps its duration): the costs the step would have had with a core per
///        stage to itself.
Costs measured_costs(const ExecutionTrace& trace, bool thread_cpu_time = false);

/// The measured step's ActionTotals (simulator.h), with each action's cpu_ms where `thread_cpu_time` and
/// measured.
ActionTotals action_totals(const ExecutionTrace& trace, bool thread_cpu_time = false);

/// simulate(trace.schedule, measured_costs(trace, thread_cpu_time)).
Timeline simulate_measured(const ExecutionTrace& trace, bool thread_cpu_time = false);

/// Chrome trace / Perfetto JSON (open in ui.perfetto.dev or chrome://tracing; written by chrome_trace.cpp):
/// process "measured" with a compute track and a copy track per stage (named with the device and the stream
/// id), one slice per action, flow arrows from each Send to its Recv, the optimizer step on every compute
/// track, and a memory counter per stage ("stage s memory", "ph": "C": the scope's live bytes, at each
/// action's start its peak during the action, at its end what it holds after); with `simulated`, a second
/// process "simulated" with one track per stage (its times taken as ms) and a counter per stage ("stage s
/// activations": the simulator's memory curve, StageStats::memory, in its units).
std::string chrome_trace_json(const ExecutionTrace& trace, const Timeline* simulated = nullptr);

/// A self-contained SVG of the executed step: per stage a lane of compute actions (colored by kind, chunks
/// of interleaved schedules lighter), a thin lane below it with the time spent in Send/Recv, each stage's
/// measured idle fraction and scope peak at the right, a millisecond axis and a legend.
/// With `simulated` (the schedule simulated in milliseconds, e.g. from the layer profile) its timeline is
/// drawn under the measured one on the same axis: the step as predicted beside the step as it ran.
std::string render_measured_svg(const ExecutionTrace& trace, const Timeline* simulated = nullptr);

}  // namespace brigade::pipeline
