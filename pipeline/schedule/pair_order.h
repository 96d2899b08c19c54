// The order of the messages between each pair of stages, and a dry run in which a send waits for its
// receive.
//
// Transports that match messages by their tag (the in-process mailboxes, MPI) deliver whatever order the
// lists send in. Transports that match in order do not: NCCL pairs the k-th send from a to b with the k-th
// receive on b from a. And a send may block until its receive is posted: NCCL's always, MPI's for
// messages above its eager limit. So the validator (validate.h) also proves, for every schedule:
//   1. pair order: for each direction a -> b, the Sends of a to b (in a's list order) and the Recvs of b
//      from a (in b's list order) name the same messages in the same order;
//   2. rendezvous: a dry run in which a Send completes only together with its Recv (the sender waits at
//      the Send until the receiver reaches the Recv, and the receiver waits at the Recv until the sender
//      reaches the Send) still lets every list run to its end.
// A schedule that passes both runs on any of these transports, whatever their buffering.
#pragma once

#include <optional>

#include "pipeline/schedule/validate.h"

namespace brigade::pipeline {

/// The first pair whose Sends and Recvs disagree on the order of their messages: "stages 0 -> 1: message
/// 2 is `send F3 ->s1` (stage 0 step 7) but stage 1 receives `recv F2 <-s0` (step 5) there", with both
/// actions marked. Requires the checks of validate.h's 1-4 to pass (every Send has its Recv).
std::optional<ScheduleIssue> find_pair_order_issue(const Schedule& schedule);

/// The rendezvous dry run (2. above): nullopt, or the deadlock with each waiting stage, the action it is
/// blocked in and what it waits for.
std::optional<ScheduleIssue> find_rendezvous_deadlock(const Schedule& schedule);

}  // namespace brigade::pipeline
