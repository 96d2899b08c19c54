// One trace of a step that ran across processes, merged on rank 0 (--trace, --timeline, the bubble
// simulated from the measured actions, the traffic per link).
//
// Each rank's StepResult holds the events of its own stage, timed from its own step start on its own
// steady clock. At start, rank 0 estimates every other rank's clock offset by timestamped ping-pongs
// (ProcessGroup::clock_offset: the shortest round trip's midpoint). A rank's events then move onto rank 0's
// time line by (its step start - its offset) - rank 0's step start, and each Send and its Recv, on two
// ranks, line up: chrome_trace_json draws an arrow from one to the other.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "pipeline/run/executor.h"
#include "pipeline/run/trace.h"

namespace brigade::pipeline {

/// The events of `stage` in `result`, with the step's start (StepResult::origin_ns), as text.
std::string stage_events_text(const StepResult& result, int stage);

/// Puts the events that stage_events_text wrote on another rank into `merged` (which has one entry per
/// stage), on the time line of the rank whose step started at origin_ns, given the writer's clock offset
/// from that rank (seconds: its clock minus ours). ValueError for text that is not stage_events_text's.
void merge_stage_events(ExecutionTrace& merged, const std::string& text, int64_t origin_ns,
                        double offset_seconds);

/// The messages of one link (an ordered pair of stages) in a step.
struct LinkTraffic {
  int from_stage = 0, to_stage = 0;
  int64_t bytes = 0, messages = 0;
  /// Summed over the messages: from the Send's start to the end of its Recv (the Recv's wait included).
  double in_flight_ms = 0.0;
  /// bytes / in_flight_ms: what the link delivered while messages were on their way (0 when none).
  double achieved_bytes_per_second() const;
};

/// Per link, in (from, to) order, from the Send and Recv events of `trace`.
std::vector<LinkTraffic> link_traffic(const ExecutionTrace& trace);

}  // namespace brigade::pipeline
