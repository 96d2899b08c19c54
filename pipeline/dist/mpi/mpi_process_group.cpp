// MpiProcessGroup: collectives with a deadline.
#include "pipeline/dist/mpi/mpi_process_group.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>

#include "pipeline/dist/mpi/mpi_transport.h"
#if BRIGADE_WITH_NCCL
#include "pipeline/dist/nccl/nccl_transport.h"
#endif
#include "tensor/error.h"

namespace brigade::pipeline::dist {
namespace {

MPI_Datatype mpi_type_of(const Tensor& tensor, const char* what) {
  BRIGADE_CHECK_VALUE(tensor.defined() && tensor.device().is_cpu() && tensor.is_contiguous(), what,
                      ": the tensor must be contiguous on the CPU");
  switch (tensor.dtype()) {
    case DType::Float32:
      return MPI_FLOAT;
    case DType::Float64:
      return MPI_DOUBLE;
    default:
      BRIGADE_THROW(DTypeError, what, ": expected a float32 or float64 tensor, found ",
                    dtype_name(tensor.dtype()));
  }
}

// An MPI_Iallreduce in flight. MPI moves a non-blocking collective only inside MPI calls, and the stage
// that started it goes on computing: a thread of its own tests the request every 50 us (as MpiTransport's
// does for its sends), so the all-reduce runs while the stage computes and its end is known.
class MpiPendingAllReduce : public PendingAllReduce {
 public:
  MpiPendingAllReduce(MPI_Request request, double timeout_seconds, std::string what)
      : request_(request), timeout_seconds_(timeout_seconds), what_(std::move(what)) {
    poller_ = std::thread([this] { poll(); });
  }
  ~MpiPendingAllReduce() override {
    stopping_ = true;
    poller_.join();  // an unfinished request (after a failure) is left to the exit, like the others
  }
  void wait() override {
    wait_for([&] { return done_.load() || broken_.load(); }, timeout_seconds_, what_);
    BRIGADE_CHECK(!broken_.load(), what_, ": MPI_Test failed");
  }
  std::chrono::steady_clock::time_point completed_at() const override { return completed_; }

 private:
  void poll() {
    while (!stopping_.load()) {
      int done = 0;
      if (MPI_Test(&request_, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) {
        broken_ = true;
        return;
      }
      if (done) {
        completed_ = std::chrono::steady_clock::now();
        done_ = true;  // after completed_: wait() reads it once done_ is seen
        return;
      }
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }

  MPI_Request request_;
  double timeout_seconds_;
  std::string what_;
  std::chrono::steady_clock::time_point completed_{};
  std::atomic<bool> done_{false}, broken_{false}, stopping_{false};
  std::thread poller_;
};

}  // namespace

MpiProcessGroup::MpiProcessGroup(MPI_Comm parent, double timeout_seconds)
    : timeout_seconds_(timeout_seconds) {
  check_mpi(MPI_Comm_dup(parent, &comms_.collectives), "MPI_Comm_dup");
  check_mpi(MPI_Comm_dup(parent, &comms_.tensors), "MPI_Comm_dup");
  MPI_Comm_set_errhandler(comms_.collectives, MPI_ERRORS_RETURN);
  MPI_Comm_set_errhandler(comms_.tensors, MPI_ERRORS_RETURN);
  MPI_Comm_rank(comms_.collectives, &rank_);
  MPI_Comm_size(comms_.collectives, &size_);
}

MpiProcessGroup::~MpiProcessGroup() {
  if (MpiWorld::get().failed()) return;  // requests may be pending: leave the communicators to the exit
  MPI_Comm_free(&comms_.collectives);
  MPI_Comm_free(&comms_.tensors);
}

void MpiProcessGroup::complete(MPI_Request& request, const std::string& what) {
  wait_for(
      [&] {
        int done = 0;
        check_mpi(MPI_Test(&request, &done, MPI_STATUS_IGNORE), "MPI_Test");
        return done != 0;
      },
      timeout_seconds_, what);
}

void MpiProcessGroup::all_reduce_sum(std::vector<double>& values) {
  MPI_Request request;
  check_mpi(MPI_Iallreduce(MPI_IN_PLACE, values.data(), static_cast<int>(values.size()), MPI_DOUBLE, MPI_SUM,
                           comms_.collectives, &request),
            "MPI_Iallreduce");
  complete(request, "all-reduce of " + std::to_string(values.size()) + " numbers over " +
                        std::to_string(size_) + " ranks");
}

void MpiProcessGroup::all_reduce_sum(const Tensor& tensor) {
  const MPI_Datatype type = mpi_type_of(tensor, "all_reduce_sum");
  MPI_Request request;
  check_mpi(MPI_Iallreduce(MPI_IN_PLACE, tensor.data_ptr(), static_cast<int>(tensor.numel()), type, MPI_SUM,
                           comms_.collectives, &request),
            "MPI_Iallreduce");
  complete(request, "all-reduce of a tensor " + shape_str(tensor.shape()) + " over " + std::to_string(size_) +
                        " ranks");
}

std::unique_ptr<PendingAllReduce> MpiProcessGroup::start_all_reduce_sum(const Tensor& tensor) {
  const MPI_Datatype type = mpi_type_of(tensor, "start_all_reduce_sum");
  MPI_Request request;
  check_mpi(MPI_Iallreduce(MPI_IN_PLACE, tensor.data_ptr(), static_cast<int>(tensor.numel()), type, MPI_SUM,
                           comms_.collectives, &request),
            "MPI_Iallreduce");
  return std::make_unique<MpiPendingAllReduce>(
      request, timeout_seconds_,
      "all-reduce of a tensor " + shape_str(tensor.shape()) + " over " + std::to_string(size_) + " ranks");
}

void MpiProcessGroup::broadcast(const Tensor& tensor, int root) {
  const MPI_Datatype type = mpi_type_of(tensor, "broadcast");
  BRIGADE_CHECK_VALUE(root >= 0 && root < size_, "broadcast: root ", root, " outside [0, ", size_, ")");
  MPI_Request request;
  check_mpi(MPI_Ibcast(tensor.data_ptr(), static_cast<int>(tensor.numel()), type, root, comms_.collectives,
                       &request),
            "MPI_Ibcast");
  complete(request,
           "broadcast of a tensor " + shape_str(tensor.shape()) + " from rank " + std::to_string(root));
}

double MpiProcessGroup::ping_pong(int peer, int64_t bytes, int repeats) {
  BRIGADE_CHECK_VALUE(peer >= 0 && peer < size_ && peer != rank_, "ping_pong: peer ", peer,
                      " must be another rank of the group's ", size_);
  BRIGADE_CHECK_VALUE(bytes >= 0 && bytes <= (int64_t{1} << 30) && repeats >= 1, "ping_pong: ", bytes,
                      " bytes x ", repeats, " repeats (at most 1 GiB, at least one repeat)");
  constexpr int kTag = 7;  // point-to-point on the collectives' communicator: never mixed with tensors
  std::vector<char> buffer(static_cast<size_t>(bytes), 1);
  const int count = static_cast<int>(bytes);
  const std::string what =
      "ping-pong of " + std::to_string(bytes) + " bytes with rank " + std::to_string(peer);
  auto transfer = [&](bool send) {
    MPI_Request request;
    if (send) {
      check_mpi(MPI_Isend(buffer.data(), count, MPI_BYTE, peer, kTag, comms_.collectives, &request),
                "MPI_Isend");
    } else {
      check_mpi(MPI_Irecv(buffer.data(), count, MPI_BYTE, peer, kTag, comms_.collectives, &request),
                "MPI_Irecv");
    }
    complete(request, what);
  };
  std::vector<double> round_trips;
  for (int i = 0; i <= repeats; ++i) {
    const double start = MPI_Wtime();
    transfer(/*send=*/rank_ < peer);
    transfer(/*send=*/rank_ > peer);
    if (i > 0) round_trips.push_back(MPI_Wtime() - start);  // the first is the warm-up
  }
  std::sort(round_trips.begin(), round_trips.end());
  return round_trips[round_trips.size() / 2];
}

double MpiProcessGroup::clock_offset(int peer, int repeats) {
  BRIGADE_CHECK_VALUE(peer >= 0 && peer < size_ && peer != rank_ && repeats >= 1, "clock_offset: peer ", peer,
                      " must be another rank of the group's ", size_, ", repeats >= 1");
  constexpr int kTag = 8;
  const std::string what = "clock ping-pong with rank " + std::to_string(peer);
  auto now_ns = [] {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  };
  auto exchange = [&](int64_t* value, bool send) {
    MPI_Request request;
    if (send) {
      check_mpi(MPI_Isend(value, 1, MPI_INT64_T, peer, kTag, comms_.collectives, &request), "MPI_Isend");
    } else {
      check_mpi(MPI_Irecv(value, 1, MPI_INT64_T, peer, kTag, comms_.collectives, &request), "MPI_Irecv");
    }
    complete(request, what);
  };
  const bool asks = rank_ < peer;
  double best_round_trip = 1e300, offset = 0.0;
  for (int i = 0; i < repeats; ++i) {
    int64_t stamp = 0;
    if (asks) {
      const int64_t sent = now_ns();
      exchange(&stamp, /*send=*/true);
      exchange(&stamp, /*send=*/false);  // the peer's clock when it answered
      const int64_t received = now_ns();
      const double round_trip = static_cast<double>(received - sent);
      if (round_trip < best_round_trip) {
        best_round_trip = round_trip;
        offset = 1e-9 * (static_cast<double>(stamp) - 0.5 * static_cast<double>(sent + received));
      }
    } else {
      exchange(&stamp, /*send=*/false);
      stamp = now_ns();
      exchange(&stamp, /*send=*/true);
    }
  }
  // Both ends return the estimate (the answering rank learns it from the asking one).
  MPI_Request request;
  if (asks) {
    check_mpi(MPI_Isend(&offset, 1, MPI_DOUBLE, peer, kTag, comms_.collectives, &request), "MPI_Isend");
  } else {
    check_mpi(MPI_Irecv(&offset, 1, MPI_DOUBLE, peer, kTag, comms_.collectives, &request), "MPI_Irecv");
  }
  complete(request, what);
  return asks ? offset : -offset;
}

std::vector<std::string> MpiProcessGroup::all_gather(const std::string& text) {
  std::vector<int> lengths(static_cast<size_t>(size_), 0);
  int length = static_cast<int>(text.size());
  MPI_Request request;
  check_mpi(MPI_Iallgather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, comms_.collectives, &request),
            "MPI_Iallgather");
  complete(request, "all-gather of text lengths over " + std::to_string(size_) + " ranks");
  std::vector<int> offsets(static_cast<size_t>(size_), 0);
  int total = 0;
  for (int r = 0; r < size_; ++r) {
    offsets[static_cast<size_t>(r)] = total;
    total += lengths[static_cast<size_t>(r)];
  }
  std::string all(static_cast<size_t>(total), '\0');
  check_mpi(MPI_Iallgatherv(text.data(), length, MPI_CHAR, all.data(), lengths.data(), offsets.data(),
                            MPI_CHAR, comms_.collectives, &request),
            "MPI_Iallgatherv");
  complete(request, "all-gather of " + std::to_string(total) + " bytes of text over " +
                        std::to_string(size_) + " ranks");
  std::vector<std::string> out;
  for (int r = 0; r < size_; ++r) {
    out.push_back(all.substr(static_cast<size_t>(offsets[static_cast<size_t>(r)]),
                             static_cast<size_t>(lengths[static_cast<size_t>(r)])));
  }
  return out;
}

std::unique_ptr<ProcessGroup> MpiProcessGroup::split(int color) {
  MPI_Comm sub = MPI_COMM_NULL;
  check_mpi(MPI_Comm_split(comms_.collectives, color < 0 ? MPI_UNDEFINED : color, rank_, &sub),
            "MPI_Comm_split");
  if (sub == MPI_COMM_NULL) return nullptr;
  auto group = std::make_unique<MpiProcessGroup>(sub, timeout_seconds_);
  MPI_Comm_free(&sub);
  return group;
}

std::unique_ptr<Transport> MpiProcessGroup::make_transport(std::vector<int> rank_of_stage,
                                                           double recv_timeout_seconds) {
  for (int r : rank_of_stage) {
    BRIGADE_CHECK_VALUE(r >= 0 && r < size_, "make_transport: rank ", r, " outside the group's ", size_,
                        " ranks");
  }
  return std::make_unique<MpiTransport>(comms_.tensors, rank_, std::move(rank_of_stage),
                                        recv_timeout_seconds);
}

bool MpiProcessGroup::nccl_built() const {
#if BRIGADE_WITH_NCCL
  return true;
#else
  return false;
#endif
}

std::unique_ptr<Transport> MpiProcessGroup::make_nccl_transport(std::vector<int> rank_of_stage,
                                                                double recv_timeout_seconds, Device device) {
#if BRIGADE_WITH_NCCL
  return std::make_unique<NcclTransport>(comms_.tensors, std::move(rank_of_stage), recv_timeout_seconds,
                                         device);
#else
  (void)rank_of_stage;
  (void)recv_timeout_seconds;
  (void)device;
  BRIGADE_THROW(Error,
                "this brigade was built without NCCL (it needs CUDA, MPI and NCCL from the CUDA "
                "toolkit at configure time): use --transport mpi");
#endif
}

}  // namespace brigade::pipeline::dist
