// MpiTransport: the Transport (pipeline/run/transport.h) between processes, on MPI point-to-point messages.
//
// A message is matched by its TransferTag: the source is the rank of the producing stage, and the MPI tag
// packs (microbatch, producer chunk, consumer chunk, direction); see mpi_tag(). It travels as two MPI
// messages with that tag, a small header (dtype and shape) and the tensor's bytes, so that neither end
// copies: the sender posts both with MPI_Isend straight from the tensor (kept alive until MPI is done with
// it), the receiver probes for the header, allocates the tensor and receives the bytes into it. MPI never
// lets the second message of a (source, tag) pair overtake the first, so the bytes are always the
// header's.
//
// Device tensors travel through host memory: send() waits for the tensor's ready event and copies it to
// the host; the receiving stage copies the host tensor to its device (Stage::hand_over). (CUDA-aware MPI
// and pinned staging buffers are not used.)
//
// Waits poll (mpi_calls.h: wait_for), so a receive gives up at the timeout and stops as soon as another
// rank reports a failure; abort() reports this rank's failure to every other rank.
//
// Progress. MPI moves a large message (above the eager limit: 64 KiB over TCP) only while the sender is
// inside an MPI call, and a stage that has posted its send goes on computing. So while sends are in flight a
// thread of the transport tests them every 50 us (measured: without it, 2 processes over TCP took 280 ms per
// step of the default model against 100 ms over shared memory, whose large messages the receiver copies).
#pragma once

#include <mpi.h>

#include <condition_variable>
#include <list>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "pipeline/dist/job_failure.h"
#include "pipeline/run/transport.h"

namespace brigade::pipeline::dist {

class MpiTransport : public Transport {
 public:
  /// @param tensors       a communicator of its own for the tensors (not freed here)
  /// @param rank          this process's rank in it
  /// @param rank_of_stage the rank that runs each stage of this rank's pipeline
  MpiTransport(MPI_Comm tensors, int rank, std::vector<int> rank_of_stage, double recv_timeout_seconds);
  ~MpiTransport() override;

  void send(const TransferTag& tag, const Tensor& tensor, const Event& ready) override;
  Message recv(const TransferTag& tag) override;
  void abort(const std::string& reason) override;
  bool aborted() const override;
  std::string abort_reason() const override;
  Traffic traffic() const override;
  void reset() override;

  /// The MPI tag of a message: ((microbatch * 256 + from_chunk) * 256 + to_chunk) * 2 + gradient.
  /// ValueError beyond 2^14 microbatches or 256 chunks (MPI guarantees tags up to 32767 only, but every
  /// MPI in use allows 2^31 - 1; the constructor checks MPI_TAG_UB).
  static int mpi_tag(const TransferTag& tag);

 private:
  struct Outgoing {
    MPI_Request requests[2];
    std::vector<int64_t> header;
    Tensor tensor;  // alive until MPI has sent its bytes
  };
  int rank_of(int stage, const TransferTag& tag) const;
  void release_finished_sends();  // caller holds mutex_
  void progress_loop();           // the progress thread (see "Progress" above)

  MPI_Comm comm_;
  int rank_;
  std::vector<int> rank_of_stage_;
  double recv_timeout_seconds_;
  mutable std::mutex mutex_;
  std::list<Outgoing> outgoing_;
  JobFailure failure_;  // this rank's abort, or another rank's failure
  Traffic traffic_;
  std::condition_variable sends_posted_;
  bool stopping_ = false;
  std::thread progress_;  // last: started once everything above exists
};

}  // namespace brigade::pipeline::dist
