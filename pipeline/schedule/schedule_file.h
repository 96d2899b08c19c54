// Schedules in files: brigade's own JSON, and the CSV of PyTorch's torch.distributed.pipelining, so that
// a schedule written for PyTorch runs here (and one found here runs there).
//
// brigade's JSON is lossless: every field of the Schedule, and each stage's list exactly as it runs, every
// action as its label (to_string with the chunk shown):
//   {"format": "brigade.schedule", "version": 1, "name": "zb-v", "stages": 2, "microbatches": 4,
//    "virtual_chunks": 2, "placement": "v", "recompute": "never",
//    "actions": [["F0.c0", "send F0.c0 ->s1", "F1.c0", ..., "step"], ["recv F0.c0 <-s0", ...]]}
//
// PyTorch's CSV has one row per rank (stage) and one action per cell, "<stage><type><microbatch>", where
// PyTorch's "stage" is brigade's model chunk (the rank that holds it is the stage here):
//   F  forward                     I  input gradient (Bi)        W  weight gradient (Bw)
//   B  full backward (B)           SEND_F / RECV_F / SEND_B / RECV_B  the transfers
//   (a;b)OVERLAP_F_B  a forward and a backward PyTorch overlaps; brigade runs a, then b
//   an empty cell                  an idle step of PyTorch's lock-step picture: skipped
//   UNSHARD, RESHARD, REDUCE_GRAD  FSDP's and data parallelism's actions: nothing to do here, skipped
// e.g. 2 ranks, 1F1B with 3 microbatches:   0F0,0F1,0B0,0F2,0B1,0B2
//                                           1F0,1B0,1F1,1B1,1F2,1B2
// Reading one infers S (rows), the model chunks and M (the largest indices + 1), v = chunks / S, and the
// placement from which rank each chunk is on (Megatron's interleaved or PyTorch's "v" layout, the two of
// schedule.h); a file without transfers gets them (insert_transfers), one with any is taken as it is;
// every list gets its optimizer step; the recompute policy is never (PyTorch has no R action: with_recompute
// adds them). Writing one leaves out R and the step, and the transfers unless asked for (PyTorch's
// "compute_only" format, which its _load_csv reads by default; with transfers, its "compute_comms").
//
// Refusals. A file that cannot be read, parsed or run is refused with a ScheduleFileError that names the
// action (its row, column and text: "row 2, column 7 ('1B0')", or for JSON "actions[1][6] ('B0.c0')") and
// the reason: an action that does not parse, a chunk on two ranks, a layout that is neither placement, or
// whatever the validator finds (validate.h: counts, order, transfers, deadlock), with its marked grid.
#pragma once

#include <string>

#include "pipeline/schedule/schedule.h"
#include "pipeline/schedule/validate.h"

namespace brigade::pipeline {

/// A schedule file that cannot be read or run (a ScheduleError: a ValueError).
class ScheduleFileError : public ScheduleError {
  using ScheduleError::ScheduleError;
};

/// brigade's JSON of `schedule` (see above), one stage's list per line.
std::string schedule_to_json(const Schedule& schedule);
/// Parses and validates brigade's JSON; `source` names it in errors (a path). ScheduleFileError.
Schedule schedule_from_json(const std::string& text, const std::string& source = "JSON");

/// PyTorch's CSV of `schedule`: compute actions only, or with the transfers. R and the optimizer step are
/// left out (PyTorch has neither).
std::string schedule_to_pytorch_csv(const Schedule& schedule, bool with_transfers = false);
/// Parses and validates PyTorch's CSV, naming the schedule `name`; `source` names it in errors.
/// ScheduleFileError.
Schedule schedule_from_pytorch_csv(const std::string& text, const std::string& name = "csv",
                                   const std::string& source = "CSV");

/// Reads a schedule file by its extension: .json (brigade's) or .csv (PyTorch's; named after the file's
/// stem). ScheduleFileError for another extension, a file that cannot be read, or an invalid schedule.
Schedule read_schedule_file(const std::string& path);
/// Writes `schedule` by the extension of `path` (.json, or .csv with or without transfers). IOError when
/// the file cannot be written, ValueError for another extension.
void write_schedule_file(const Schedule& schedule, const std::string& path, bool with_transfers = false);

/// `schedule` recomputing per `policy`: R actions placed as the generators place them (insert_recompute).
/// Unchanged for Recompute::Never or the policy it has; ValueError when it already recomputes otherwise.
Schedule with_recompute(Schedule schedule, Recompute policy);

}  // namespace brigade::pipeline
