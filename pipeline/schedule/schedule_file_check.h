// What the schedule file readers (schedule_json.cpp, schedule_csv.cpp) share: where each action came from
// in the file, and refusals that name it (schedule_file.h, "Refusals").
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "pipeline/schedule/schedule.h"

namespace brigade::pipeline::detail {

/// Where an action of a parsed schedule came from: "row 2, column 7" and its text "1B0"; empty for the
/// actions the reader added (transfers, the optimizer step).
struct ActionOrigin {
  std::string where;
  std::string text;
};
using Origins = std::vector<std::vector<ActionOrigin>>;  // per stage, parallel to Schedule::actions

/// Throws ScheduleFileError "<source>: <where> ('<text>'): <reason>".
[[noreturn]] void refuse(const std::string& source, const std::string& where, const std::string& text,
                         const std::string& reason);
/// Throws ScheduleFileError "<source>: <reason>" (a problem of the file as a whole).
[[noreturn]] void refuse(const std::string& source, const std::string& reason);

/// The origins of `schedule`'s lists after a pass that added actions to lists whose compute actions came
/// from `before` (matched by kind, chunk and microbatch, in order): the added ones get empty origins.
Origins match_origins(const Schedule& before, const Origins& origins, const Schedule& after);

/// Refuses counts that `actions` actions cannot run (every model chunk x microbatch needs its F) before a
/// reader sizes anything by them.
void check_sizes(uint64_t chunks, uint64_t microbatches, size_t actions, const std::string& source);

/// check_sizes, then validates `schedule`; when it is invalid, refuses it naming the file action at (or next
/// to) the first marked one, with the validator's message and grid.
void check_parsed(const Schedule& schedule, const Origins& origins, const std::string& source);

}  // namespace brigade::pipeline::detail
