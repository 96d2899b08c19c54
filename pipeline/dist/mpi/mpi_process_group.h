// ProcessGroup (pipeline/run/process_group.h) on an MPI communicator. Collectives are the non-blocking
// MPI ones (MPI_Iallreduce, MPI_Ibcast) completed through wait_for (mpi_calls.h), so a wait stops at the
// timeout or as soon as another rank reports a failure.
#pragma once

#include <mpi.h>

#include "pipeline/dist/mpi/mpi_calls.h"
#include "pipeline/run/process_group.h"

namespace brigade::pipeline::dist {

class MpiProcessGroup : public ProcessGroup {
 public:
  /// A group of the ranks of `parent` (duplicated: the group's messages never mix with the parent's).
  MpiProcessGroup(MPI_Comm parent, double timeout_seconds);
  ~MpiProcessGroup() override;
  MpiProcessGroup(const MpiProcessGroup&) = delete;
  MpiProcessGroup& operator=(const MpiProcessGroup&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void all_reduce_sum(std::vector<double>& values) override;
  void all_reduce_sum(const Tensor& tensor) override;
  std::unique_ptr<PendingAllReduce> start_all_reduce_sum(const Tensor& tensor) override;
  void broadcast(const Tensor& tensor, int root) override;
  double ping_pong(int peer, int64_t bytes, int repeats) override;
  double clock_offset(int peer, int repeats) override;
  std::vector<std::string> all_gather(const std::string& text) override;
  void set_timeout(double seconds) override { timeout_seconds_ = seconds; }
  std::unique_ptr<ProcessGroup> split(int color) override;
  std::unique_ptr<Transport> make_transport(std::vector<int> rank_of_stage,
                                            double recv_timeout_seconds) override;
  bool nccl_built() const override;
  std::unique_ptr<Transport> make_nccl_transport(std::vector<int> rank_of_stage, double recv_timeout_seconds,
                                                 Device device) override;

 private:
  void complete(MPI_Request& request, const std::string& what);

  Communicators comms_;
  int rank_ = 0, size_ = 1;
  double timeout_seconds_;
};

}  // namespace brigade::pipeline::dist
