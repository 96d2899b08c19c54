// The MPI side of pipeline/dist, shared by its .cpp files (never included by a public header): checked
// calls and the one wait loop that every blocking operation goes through.
#pragma once

#include <mpi.h>

#include <string>

#include "pipeline/dist/mpi_world.h"

namespace brigade::pipeline::dist {

/// Throws Error naming the call and MPI's message unless rc is MPI_SUCCESS (the communicators use
/// MPI_ERRORS_RETURN, so errors come back as codes).
void check_mpi(int rc, const char* call);

/// The communicators a group is made of: collectives and point-to-point tensors never share one, so a
/// message can never match a receive of the other kind.
struct Communicators {
  MPI_Comm collectives = MPI_COMM_NULL;
  MPI_Comm tensors = MPI_COMM_NULL;
};

/// Polls `done()` until it returns true. Between polls it checks MpiWorld::failed() (another rank's
/// failure: throws TransportAborted with its message) and the deadline (timeout_seconds > 0: throws
/// TransportTimeout "<what>: nothing after N s"). The first polls only yield the core (a message that is
/// about to arrive costs no sleep); later ones sleep a little, so that a rank waiting for a long stage does
/// not take a core from it on an oversubscribed machine.
template <typename Done>
void wait_for(Done&& done, double timeout_seconds, const std::string& what);

// ---- implementation details of wait_for ------------------------------------------------------------------
namespace detail {
/// One poll's pause: yields for the first polls, then sleeps up to 200 us.
void pause(int poll);
[[noreturn]] void give_up(const std::string& what, double timeout_seconds);
[[noreturn]] void stopped_by_failure(const std::string& reason);
}  // namespace detail

template <typename Done>
void wait_for(Done&& done, double timeout_seconds, const std::string& what) {
  MpiWorld& world = MpiWorld::get();
  const double deadline = timeout_seconds > 0.0 ? world.now() + timeout_seconds : 0.0;
  for (int poll = 0;; ++poll) {
    if (done()) return;
    std::string reason;
    if (world.failed(&reason)) detail::stopped_by_failure(reason);
    if (deadline > 0.0 && world.now() > deadline) detail::give_up(what, timeout_seconds);
    detail::pause(poll);
  }
}

}  // namespace brigade::pipeline::dist
