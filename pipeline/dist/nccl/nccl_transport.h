// NcclTransport: the Transport (pipeline/run/transport.h) for device tensors between processes, on NCCL's
// point-to-point send and receive. Built where CUDA, MPI and NCCL (from the CUDA toolkit) are all found.
//
// Bootstrap. The constructor is collective over the process group: rank 0 creates an ncclUniqueId, MPI
// broadcasts it, and every rank joins one NCCL communicator of the group's size on its stage's device.
//
// A message. The receiver must know the tensor's shape before NCCL can receive it, and NCCL cannot probe:
// so a small MPI header (dtype and shape, matched by the TransferTag exactly as MpiTransport's) goes first,
// and the bytes follow by ncclSend / ncclRecv on the transport's stream on the device. send() makes that
// stream wait for the tensor's ready event and returns at once; recv() waits (polled, with the deadline) for
// the header only, enqueues the receive and returns the tensor with an event recorded after it: the
// consuming stage's stream waits on that event, not the host.
//
// Semantics. NCCL pairs the k-th send from a to b with the k-th receive on b from a, and a send does not
// complete (its stream waits) until the receive is posted; one stream carries all of a rank's NCCL
// operations. So model() is TransferModel::Rendezvous, and the Pipeline validates its schedule for that:
// GPipe runs, while 1F1B's steady state (an activation and a gradient sent towards each other at once) is
// refused before any step with the deadlock named (schedule/pair_order.h).
//
// Failure. abort() reports the failure to every rank (MpiWorld) and aborts the NCCL communicator, which
// releases the device operations waiting for a peer that is gone.
#pragma once

#include <mpi.h>
#include <nccl.h>

#include <list>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "pipeline/dist/job_failure.h"
#include "pipeline/run/transport.h"
#include "tensor/stream.h"

namespace brigade::pipeline::dist {

class NcclTransport : public Transport {
 public:
  /// Collective over `headers`' ranks. @param headers a communicator of its own for the headers (not freed
  /// here); @param rank_of_stage the rank of each stage of this rank's pipeline; @param device this rank's
  /// CUDA device.
  NcclTransport(MPI_Comm headers, std::vector<int> rank_of_stage, double recv_timeout_seconds, Device device);
  ~NcclTransport() override;

  void send(const TransferTag& tag, const Tensor& tensor, const Event& ready) override;
  Message recv(const TransferTag& tag) override;
  void abort(const std::string& reason) override;
  bool aborted() const override;
  std::string abort_reason() const override;
  Traffic traffic() const override;
  void reset() override;
  TransferModel model() const override { return TransferModel::Rendezvous; }

 private:
  struct Outgoing {
    MPI_Request header_request = MPI_REQUEST_NULL;
    std::vector<int64_t> header;
    Tensor tensor;  // alive until `sent` has completed on the stream
    Event sent;
  };
  int rank_of(int stage, const TransferTag& tag) const;
  void release_finished();  // caller holds mutex_

  MPI_Comm headers_;
  int rank_ = 0;
  std::vector<int> rank_of_stage_;
  double recv_timeout_seconds_;
  Device device_;
  Stream stream_;
  ncclComm_t comm_ = nullptr;
  mutable std::mutex mutex_;
  std::list<Outgoing> outgoing_;
  JobFailure failure_;  // this rank's abort, or another rank's failure
  Traffic traffic_;
};

}  // namespace brigade::pipeline::dist
