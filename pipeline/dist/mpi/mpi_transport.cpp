// MpiTransport: header + bytes per message, polled receives.
#include "pipeline/dist/mpi/mpi_transport.h"

#include <chrono>
#include <limits>

#include "pipeline/dist/mpi/mpi_calls.h"
#include "tensor/error.h"

namespace brigade::pipeline::dist {
namespace {

constexpr int64_t kMagic = 0x62726967;  // "brig"
constexpr int kMaxDims = 8;
constexpr size_t kHeaderWords = 3 + kMaxDims;  // magic, dtype, ndim, dims

}  // namespace

MpiTransport::MpiTransport(MPI_Comm tensors, int rank, std::vector<int> rank_of_stage,
                           double recv_timeout_seconds)
    : comm_(tensors),
      rank_(rank),
      rank_of_stage_(std::move(rank_of_stage)),
      recv_timeout_seconds_(recv_timeout_seconds) {
  BRIGADE_CHECK_VALUE(recv_timeout_seconds >= 0.0, "MpiTransport: recv_timeout_seconds must be >= 0, found ",
                      recv_timeout_seconds);
  void* value = nullptr;
  int found = 0;
  MPI_Comm_get_attr(comm_, MPI_TAG_UB, &value, &found);
  const int tag_ub = found ? *static_cast<int*>(value) : 32767;
  BRIGADE_CHECK(tag_ub >= (1 << 30), "MpiTransport: this MPI allows tags up to ", tag_ub,
                " only; brigade needs 2^30 (every OpenMPI and MPICH allows 2^31 - 1)");
  progress_ = std::thread([this] { progress_loop(); });
}

void MpiTransport::progress_loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_) {
    if (outgoing_.empty()) {
      sends_posted_.wait(lock, [&] { return stopping_ || !outgoing_.empty(); });
      continue;
    }
    try {
      release_finished_sends();
    } catch (const Error&) {
      return;  // a broken send: the stage's own calls report it
    }
    lock.unlock();
    std::this_thread::sleep_for(std::chrono::microseconds(50));
    lock.lock();
  }
}

MpiTransport::~MpiTransport() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  sends_posted_.notify_all();
  progress_.join();
  // Sends whose receives are posted complete quickly; after a failure nobody may receive them.
  std::lock_guard<std::mutex> lock(mutex_);
  if (MpiWorld::get().failed()) return;
  for (Outgoing& out : outgoing_) MPI_Waitall(2, out.requests, MPI_STATUSES_IGNORE);
}

int MpiTransport::mpi_tag(const TransferTag& tag) {
  BRIGADE_CHECK_VALUE(tag.microbatch >= 0 && tag.microbatch < (1 << 14) && tag.from_chunk >= 0 &&
                          tag.from_chunk < 256 && tag.to_chunk >= 0 && tag.to_chunk < 256,
                      "MpiTransport: ", to_string(tag),
                      " does not fit an MPI tag (microbatch < 16384, chunks < 256)");
  return ((tag.microbatch * 256 + tag.from_chunk) * 256 + tag.to_chunk) * 2 + (tag.gradient ? 1 : 0);
}

int MpiTransport::rank_of(int stage, const TransferTag& tag) const {
  BRIGADE_CHECK_VALUE(stage >= 0 && stage < static_cast<int>(rank_of_stage_.size()),
                      "MpiTransport: ", to_string(tag), " names stage ", stage, ", but the layout has ",
                      rank_of_stage_.size(), " stages");
  return rank_of_stage_[static_cast<size_t>(stage)];
}

void MpiTransport::release_finished_sends() {
  for (auto it = outgoing_.begin(); it != outgoing_.end();) {
    int done = 0;
    check_mpi(MPI_Testall(2, it->requests, &done, MPI_STATUSES_IGNORE), "MPI_Testall (send)");
    it = done ? outgoing_.erase(it) : std::next(it);
  }
}

void MpiTransport::send(const TransferTag& tag, const Tensor& tensor, const Event& ready) {
  BRIGADE_CHECK_VALUE(tensor.defined(), "transport send ", to_string(tag), ": the tensor is undefined");
  BRIGADE_CHECK_VALUE(ready.is_recorded(), "transport send ", to_string(tag),
                      ": the ready event must be recorded before the message is sent");
  BRIGADE_CHECK_VALUE(tensor.dim() <= kMaxDims, "transport send ", to_string(tag), ": ", tensor.dim(),
                      " dims; messages carry at most ", kMaxDims);
  BRIGADE_CHECK_VALUE(tensor.nbytes() <= static_cast<size_t>(std::numeric_limits<int>::max()),
                      "transport send ", to_string(tag), ": ", tensor.nbytes(),
                      " bytes; one message carries at most 2^31 - 1");
  const int dest = rank_of(tag.to_stage, tag);
  const int mtag = mpi_tag(tag);
  if (aborted()) throw TransportAborted(abort_reason());
  Tensor host = tensor;
  if (!host.device().is_cpu()) {
    ready.synchronize();  // the producer's kernels have written it
    host = host.to(Device::cpu());
  }
  if (!host.is_contiguous()) host = host.contiguous();

  std::lock_guard<std::mutex> lock(mutex_);
  release_finished_sends();
  Outgoing& out = outgoing_.emplace_back();
  out.tensor = host;
  out.header.assign(kHeaderWords, 0);
  out.header[0] = kMagic;
  out.header[1] = static_cast<int64_t>(host.dtype());
  out.header[2] = host.dim();
  for (int64_t d = 0; d < host.dim(); ++d) out.header[3 + static_cast<size_t>(d)] = host.size(d);
  check_mpi(MPI_Isend(out.header.data(), static_cast<int>(kHeaderWords), MPI_INT64_T, dest, mtag, comm_,
                      &out.requests[0]),
            "MPI_Isend (header)");
  check_mpi(MPI_Isend(host.data_ptr(), static_cast<int>(host.nbytes()), MPI_BYTE, dest, mtag, comm_,
                      &out.requests[1]),
            "MPI_Isend (tensor)");
  traffic_.count(tag, static_cast<int64_t>(host.nbytes()));
  sends_posted_.notify_one();
}

Message MpiTransport::recv(const TransferTag& tag) {
  const int source = rank_of(tag.from_stage, tag);
  const int mtag = mpi_tag(tag);
  const std::string what = "transport recv " + to_string(tag) + " from rank " + std::to_string(source);
  if (aborted()) throw TransportAborted(abort_reason());

  MPI_Message probe = MPI_MESSAGE_NULL;
  wait_for(
      [&] {
        if (aborted()) throw TransportAborted(abort_reason());
        int found = 0;
        check_mpi(MPI_Improbe(source, mtag, comm_, &found, &probe, MPI_STATUS_IGNORE), "MPI_Improbe");
        return found != 0;
      },
      recv_timeout_seconds_, what);
  std::vector<int64_t> header(kHeaderWords, 0);
  check_mpi(MPI_Mrecv(header.data(), static_cast<int>(kHeaderWords), MPI_INT64_T, &probe, MPI_STATUS_IGNORE),
            "MPI_Mrecv (header)");
  BRIGADE_CHECK(header[0] == kMagic && header[2] >= 0 && header[2] <= kMaxDims, what,
                ": the message header is malformed (magic ", header[0], ", dims ", header[2], ")");
  Shape shape(header.begin() + 3, header.begin() + 3 + header[2]);
  Tensor tensor = empty(shape, TensorOptions().dtype(static_cast<DType>(header[1])).device(Device::cpu()));

  MPI_Request request;
  check_mpi(MPI_Irecv(tensor.data_ptr(), static_cast<int>(tensor.nbytes()), MPI_BYTE, source, mtag, comm_,
                      &request),
            "MPI_Irecv (tensor)");
  wait_for(
      [&] {
        int done = 0;
        check_mpi(MPI_Test(&request, &done, MPI_STATUS_IGNORE), "MPI_Test (recv)");
        return done != 0;
      },
      recv_timeout_seconds_, what + " (its bytes)");
  Event ready;
  ready.record(Device::cpu());
  return Message{tensor, ready};
}

void MpiTransport::abort(const std::string& reason) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!failure_.record(reason)) return;
  }
  MpiWorld::get().announce_failure(reason);
}

bool MpiTransport::aborted() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return failure_.failed();
}

std::string MpiTransport::abort_reason() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return failure_.reason();
}

Traffic MpiTransport::traffic() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return traffic_;
}

void MpiTransport::reset() {
  std::lock_guard<std::mutex> lock(mutex_);
  release_finished_sends();  // sends still in flight stay: their receivers may be a step behind
  traffic_ = Traffic{};
  // An abort is never cleared: a failure ends the job on every rank.
}

}  // namespace brigade::pipeline::dist
