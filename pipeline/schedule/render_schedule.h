// Pictures of a schedule's lists, without times: the stage x step grid the validator prints in its errors
// (validate.h) and the lists spelled out. The pictures of a simulated timeline, with times, are
// plan/render_timeline.h; those of a measured step are run/trace.h.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "pipeline/schedule/schedule.h"

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

/// The row label of `stage` among `stages`: "s3", padded after the "s" to the widest stage number
/// ("s 3" among 12 stages) so that rows line up.
std::string stage_row_name(int stage, int stages);

}  // namespace brigade::pipeline
