// The schedule validator: is this IR something every stage can run, in order, to the end?
//
// Checks, in this order (the first problem found is reported):
//   1. sizes: S, M, v >= 1 and one list per stage; every action's microbatch, chunk and peer in range,
//      and a transfer's peer is the stage that holds the neighbouring model chunk;
//   2. counts: every (stage, chunk, microbatch) has exactly one F and either one B or one Bi and one Bw;
//      exactly one R where the recompute policy recomputes it and none elsewhere; no duplicates;
//      exactly one OptimizerStep per stage, at the end of its list;
//   3. order within a stage: F before its backward, Bi before Bw, R after F and before the backward;
//      a Recv before the action that consumes it, a Send after the action that produced it; every gradient
//      bucket of the stage (Schedule::buckets) reduced by exactly one Reduce, after the last B or Bw of its
//      chunk (the last action that writes its gradients) and before the optimizer step;
//   4. matching: every F/B/Bi whose input (output) crosses stages is preceded by its Recv (followed by its
//      Send), and every Send has exactly one matching Recv on its peer, and vice versa;
//   5. a deadlock dry run: all lists run round by round, each stage advancing while its next action's
//      inputs are available (Sends never block, a Recv waits for its Send); a round without progress
//      before every list has finished is a deadlock. Cross-stage order (F of a chunk after F of the
//      previous chunk, B after B of the next chunk) follows from 3-5.
//   6. with TransferModel::Rendezvous (a transport that matches messages in order per pair and whose sends
//      wait for their receive, as NCCL's do; pair_order.h): each pair's sends and receives name their
//      messages in one order, and a dry run in which a send completes only together with its receive
//      finishes. The default model (Buffered: matched by tag, sends never block) is the in-process
//      transport's and MPI's (its non-blocking sends return at once, whatever the message's size).
// Errors name the stage, the step (index in the stage's list) and the action, and print the stage x step
// grid with the offending action(s) marked [like this].
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "pipeline/schedule/schedule.h"
#include "tensor/error.h"

namespace brigade::pipeline {

/// An invalid schedule (a ValueError: the configuration, not the machine, is wrong).
class ScheduleError : public ValueError {
  using ValueError::ValueError;
};

/// What is wrong with a schedule and where.
struct ScheduleIssue {
  std::string message;  ///< one line, e.g. "stage 1 step 2: B3 comes before its F3 (step 5)"
  std::vector<std::pair<int, int>> marks;  ///< (stage, step) of the offending action(s); may be empty
};

/// How the transport that runs a schedule delivers its messages (check 6 above).
enum class TransferModel {
  Buffered,    ///< matched by tag; a send never blocks (in-process mailboxes, MPI's non-blocking sends)
  Rendezvous,  ///< matched in order per pair; a send waits until its receive is posted (NCCL)
};
/// "buffered", "rendezvous".
const char* to_string(TransferModel model);

/// The first problem with `schedule` on a transport of `model`, or nullopt when it is valid.
std::optional<ScheduleIssue> find_issue(const Schedule& schedule,
                                        TransferModel model = TransferModel::Buffered);

/// Throws ScheduleError("validate <describe>: <message>" + the marked grid) when `schedule` is invalid.
void validate(const Schedule& schedule, TransferModel model = TransferModel::Buffered);

}  // namespace brigade::pipeline
