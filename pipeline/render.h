// Pictures of schedules: ASCII grids for terminals and error messages, an SVG timeline, a JSON dump.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "pipeline/schedule.h"
#include "pipeline/simulator.h"

namespace brigade::pipeline {

/// The stage x step grid: one row per stage, one column per position in the stage's list (no time), e.g.
///   step |  0    1      2    3
///   s0   | F0 F0>s1    F1 F1>s1 ...
/// Transfers are drawn compactly: "F3>s1" sends F3's activation to stage 1, "F3<s0" receives it, "B3>s0"
/// and "B3<s2" do the same for gradients. Cells in `marks` ((stage, step) pairs) are drawn [like this].
/// With max_columns > 0 only a window of that many steps around the marks (or the start) is drawn.
std::string render_order_grid(const Schedule& schedule, const std::vector<std::pair<int, int>>& marks = {},
                              int max_columns = 0);

/// The stage lists spelled out, one line per stage: "s1: recv F0 <-s0, F0, send F0 ->s2, ...".
std::string render_stage_lists(const Schedule& schedule);

/// The simulated timeline as a stage x time grid: one column per time quantum (the shortest compute action,
/// or step_time / max_columns if that gives more columns), compute actions labelled where they start and
/// drawn with '-' while they run, idle time as '.', e.g. with F = 1, B = 2:
///   s0 | F0 F1  .  .  . B0--- B1---
/// Interleaved chunks are letters here to keep cells narrow: "F3b" is F3 of the stage's chunk 1.
std::string render_time_grid(const Timeline& timeline, int max_columns = 200);

/// A self-contained SVG picture of the timeline: one lane per stage, a colored box per compute action
/// (labelled where it fits, chunks as letters: "F3b" is F3 of chunk 1, in a lighter shade), idle time as the
/// bare lane, a time axis, a legend, and each stage's bubble and peak activations at the end of its lane.
std::string render_svg(const Timeline& timeline);

/// The SVG fill colour of an action kind, shared by the simulated (render_svg) and measured (trace.h)
/// pictures so that they read alike.
const char* svg_color(ActionKind kind);
/// A round axis tick spacing (1, 2 or 5 times a power of ten) giving about `target` ticks over [0, span].
double tick_step(double span, int target);

/// The timeline as JSON: the schedule's parameters, costs, step time, bubble, per-stage statistics and
/// every action with its stage, step, kind, label, microbatch, chunk, peer, start and end.
std::string render_json(const Timeline& timeline);

}  // namespace brigade::pipeline
