// The in-process link: what one hand-off between two stage threads costs on this machine. Stages that are
// threads of one process pass tensors through an InProcessTransport without a copy, so the link has no
// bandwidth term; what remains is a latency: one send (a lock, a map insert, a notify) and the wake-up of
// the stage waiting in its recv. The planner (plan/planner.h) and the step predictions of `brigade plan`
// and `brigade train --plan auto` take it as the latency of every message between stages.
//
// How. Two threads on two cores (as two stages are) pass a small tensor back and forth through an
// InProcessTransport, each recv waiting for a message the other thread has not sent yet (as a stage
// waiting for its input does): half the median of `rounds` round trips. Before each round the sender
// sleeps longer than a wake-up, so that the peer is asleep in its recv when the message comes. Left to the
// scheduler, the two threads would take turns on one core and the figure would be a context switch
// instead; they are pinned for the measurement (where the machine allows) and the caller's affinity is
// restored. About 200 rounds x 0.2 ms: 50 ms.
//
// \code
//   brigade::pipeline::LinkModel link = brigade::pipeline::in_process_link();   // latency=23us, no bandwidth
// \endcode
#pragma once

#include "pipeline/plan/link_model.h"

namespace brigade::pipeline {

/// One hand-off between two stage threads, in ms (see above). ValueError for rounds < 1.
double measure_hand_off_ms(int rounds = 200);

/// The link between stages that are threads of one process: latency measure_hand_off_ms(rounds),
/// infinite bandwidth.
LinkModel in_process_link(int rounds = 200);

}  // namespace brigade::pipeline
