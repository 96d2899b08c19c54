// ProcessGroup: the processes a pipelined run spans, and the collectives they run together.
//
// A run of S stages x D data-parallel replicas is one process per (replica, stage) (pipeline/dist/:
// rank_layout.h says which rank is which). Each process runs its own stage's list of the IR; the
// activations and gradients between stages go through a Transport (transport.h), and everything the ranks
// must agree on goes through the collectives below: the tied weights' gradients (GPT's embedding, used by
// the first and the last stage), the replicas' gradients, the global gradient norm, the logged loss.
//
// Every member of a group calls each collective in the same order with the same sizes (as in MPI). A
// collective waits at most the group's timeout and stops early when any rank of the job has failed: it
// throws TransportAborted (another rank's failure, its message) or TransportTimeout (this rank gave up),
// so that no rank waits forever for a peer that is gone.
//
// The implementation on MPI is pipeline/dist/mpi_process_group.h; a single process needs no group (the
// stages are threads sharing one model).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "pipeline/run/transport.h"
#include "tensor/tensor.h"

namespace brigade::pipeline {

/// A non-blocking all-reduce in flight (ProcessGroup::start_all_reduce_sum).
class PendingAllReduce {
 public:
  virtual ~PendingAllReduce() = default;
  /// Returns once the sums are in the tensor; gives up like every collective (the group's timeout, another
  /// rank's failure).
  virtual void wait() = 0;
  /// When the all-reduce was seen complete (valid after wait()): its progress is driven in the background,
  /// so this is when it ended, not when wait() was called.
  virtual std::chrono::steady_clock::time_point completed_at() const = 0;
};

class ProcessGroup {
 public:
  virtual ~ProcessGroup() = default;

  /// This process's rank in the group, 0 .. size() - 1.
  virtual int rank() const = 0;
  virtual int size() const = 0;

  /// values[i] = the sum of values[i] over the group's ranks (each rank gets the same sums).
  virtual void all_reduce_sum(std::vector<double>& values) = 0;
  /// The same for the elements of `tensor` (float32 or float64, contiguous, on the CPU), in place.
  virtual void all_reduce_sum(const Tensor& tensor) = 0;
  /// The same, started without waiting: the tensor must stay alive and untouched until wait() returns.
  /// Ranks start their non-blocking all-reduces in the same order (they match in order, as in MPI).
  virtual std::unique_ptr<PendingAllReduce> start_all_reduce_sum(const Tensor& tensor) = 0;
  /// Copies `root`'s `tensor` (CPU, contiguous) into every other rank's `tensor` of the same shape.
  virtual void broadcast(const Tensor& tensor, int root) = 0;

  /// Round trips of a `bytes`-byte message between this rank and `peer` (both call it, each naming the
  /// other; the lower rank sends first): one warm-up, then `repeats` timed ones. Returns their median in
  /// seconds (plan/link_model.h fits these).
  virtual double ping_pong(int peer, int64_t bytes, int repeats) = 0;
  /// The offset of `peer`'s steady clock from this rank's (peer's clock minus this one's, in seconds),
  /// estimated by `repeats` timestamped ping-pongs (both call it, each naming the other): the peer's
  /// timestamp against the midpoint of the round trip, from the shortest round trip (the least queueing).
  /// The lower rank gets the estimate; the higher one gets its negation.
  virtual double clock_offset(int peer, int repeats) = 0;
  /// Every rank's `text`, in rank order.
  virtual std::vector<std::string> all_gather(const std::string& text) = 0;
  /// Later waits give up after `seconds` (0: never). Setup (profiling, loading) may take much longer on
  /// one rank than on another; the steps then use the run's --timeout.
  virtual void set_timeout(double seconds) = 0;

  /// The sub-group of the ranks that pass the same `color` (>= 0), ranked in this group's order; every
  /// rank of this group must call it (collective). color < 0: this rank joins no sub-group (returns null).
  virtual std::unique_ptr<ProcessGroup> split(int color) = 0;

  /// A transport from this rank to the stages of its pipeline: rank_of_stage[s] is the rank (in this
  /// group) that runs stage s. Receives wait at most recv_timeout_seconds (0: forever).
  virtual std::unique_ptr<Transport> make_transport(std::vector<int> rank_of_stage,
                                                    double recv_timeout_seconds) = 0;
  /// Whether make_nccl_transport works in this build (CUDA, MPI and NCCL found).
  virtual bool nccl_built() const = 0;
  /// The same on NCCL for tensors on `device` (a CUDA device): collective over the whole group (every
  /// rank calls it). Its schedules must pass TransferModel::Rendezvous (pipeline/dist/nccl/nccl_transport.h).
  /// Error in a build without NCCL.
  virtual std::unique_ptr<Transport> make_nccl_transport(std::vector<int> rank_of_stage,
                                                         double recv_timeout_seconds, Device device) = 0;
};

}  // namespace brigade::pipeline
