// Pictures of a simulated timeline: a stage x time grid for terminals, an SVG timeline, a JSON dump.
// (The stage x step grid of a schedule's lists, without times, is schedule/render_schedule.h.)
#pragma once

#include <string>
#include <vector>

#include "pipeline/plan/simulator.h"
#include "pipeline/schedule/schedule.h"

namespace brigade::pipeline {

/// The simulated timeline as a stage x time grid: one column per time quantum (the shortest compute action,
/// or step_time / max_columns if that gives more columns), compute actions labelled where they start and
/// drawn with '-' while they run, idle time as '.', e.g. with F = 1, B = 2:
///   s0 | F0 F1  .  .  . B0--- B1---
/// Interleaved chunks are letters here to keep cells narrow: "F3b" is F3 of the stage's chunk 1.
std::string render_time_grid(const Timeline& timeline, int max_columns = 200);

/// A self-contained SVG picture of the timeline: one lane per stage, a colored box per compute action
/// (labelled where it fits, chunks as letters: "F3b" is F3 of chunk 1, in a lighter shade), idle time as the
/// bare lane; under each lane a band with the stage's live activations over time (StageStats::memory, drawn
/// to the largest peak of the picture), an arrow per message from the end of its Send to the time it is
/// there (slanted when messages take time); a time axis, a legend, and at the right of each lane the stage's
/// idle fraction and peak microbatches in flight ("idle 27.3%, 4 in flight"), and of its band the peak of its
/// live activations in the timeline's units ("memory peak 4"). Drawn with svg_timeline.h, as the measured
/// step's picture (run/trace.h) is.
std::string render_svg(const Timeline& timeline);

/// Several timelines in one SVG, one block each as render_svg draws it, stacked top to bottom and drawn to
/// one time scale and one memory scale, so that the schedules compare at a glance (brigade schedule
/// --compare).
std::string render_compare_svg(const std::vector<Timeline>& timelines);

/// The timeline as one block of a larger picture, drawn on a time axis given from outside: `span` time units
/// across `plot` pixels from x = `left`, titled `title` over `caption`, with the legend. Returns the block's
/// SVG elements (for SvgTimeline::document); `height` receives its height. The measured step's picture
/// (run/trace.h) draws its simulated twin under it with this, on one millisecond axis.
std::string render_svg_block(const Timeline& timeline, const std::string& title, const std::string& caption,
                             double span, double left, double plot, double* height);

/// The timeline as JSON: the schedule's parameters, costs (per_chunk: the per-model-chunk costs, empty for
/// uniform ones), step time, bubble, per-stage statistics with the memory curve ([time, live] pairs), and
/// every action with its stage, step, kind, label, microbatch, chunk, peer, start and end (and a Send's
/// arrival). Numbers are written with the fewest digits that read back as the same double.
std::string render_json(const Timeline& timeline);

}  // namespace brigade::pipeline
