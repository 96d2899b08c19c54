// NcclTransport: MPI headers, NCCL bytes; see nccl_transport.h.
#include "pipeline/dist/nccl/nccl_transport.h"

#include <cuda_runtime.h>

#include "pipeline/dist/mpi/mpi_calls.h"
#include "pipeline/dist/mpi/mpi_transport.h"
#include "tensor/error.h"

namespace brigade::pipeline::dist {
namespace {

constexpr int64_t kMagic = 0x6e63636c;  // "nccl"
constexpr int kMaxDims = 8;
constexpr size_t kHeaderWords = 3 + kMaxDims;  // magic, dtype, ndim, dims

void check_nccl(ncclResult_t rc, const char* call) {
  if (rc == ncclSuccess) return;
  BRIGADE_THROW(Error, call, " failed: ", ncclGetErrorString(rc));
}

void check_cuda(cudaError_t rc, const char* call) {
  if (rc == cudaSuccess) return;
  BRIGADE_THROW(DeviceError, call, " failed: ", cudaGetErrorString(rc));
}

cudaStream_t native(const Stream& stream) {
  return static_cast<cudaStream_t>(stream.native_handle());
}

}  // namespace

NcclTransport::NcclTransport(MPI_Comm headers, std::vector<int> rank_of_stage, double recv_timeout_seconds,
                             Device device)
    : headers_(headers),
      rank_of_stage_(std::move(rank_of_stage)),
      recv_timeout_seconds_(recv_timeout_seconds),
      device_(device),
      stream_(Stream::create(device)) {
  BRIGADE_CHECK_DEVICE(device.is_cuda(), "NcclTransport: NCCL carries device tensors; the stage is on ",
                       device.str());
  int size = 0;
  MPI_Comm_rank(headers_, &rank_);
  MPI_Comm_size(headers_, &size);
  ncclUniqueId id;
  if (rank_ == 0) check_nccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
  MPI_Request request;
  check_mpi(MPI_Ibcast(&id, sizeof id, MPI_BYTE, 0, headers_, &request), "MPI_Ibcast (NCCL unique id)");
  wait_for(
      [&] {
        int done = 0;
        check_mpi(MPI_Test(&request, &done, MPI_STATUS_IGNORE), "MPI_Test");
        return done != 0;
      },
      /*timeout_seconds=*/600.0, "the NCCL unique id from rank 0");
  check_cuda(cudaSetDevice(device.index), "cudaSetDevice");
  check_nccl(ncclCommInitRank(&comm_, size, id, rank_), "ncclCommInitRank");
}

NcclTransport::~NcclTransport() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (comm_ == nullptr) return;
  if (failure_.failed()) {
    (void)ncclCommAbort(comm_);
    return;
  }
  stream_.synchronize();
  for (Outgoing& out : outgoing_) MPI_Wait(&out.header_request, MPI_STATUS_IGNORE);
  (void)ncclCommDestroy(comm_);
}

int NcclTransport::rank_of(int stage, const TransferTag& tag) const {
  BRIGADE_CHECK_VALUE(stage >= 0 && stage < static_cast<int>(rank_of_stage_.size()),
                      "NcclTransport: ", to_string(tag), " names stage ", stage, ", but the layout has ",
                      rank_of_stage_.size(), " stages");
  return rank_of_stage_[static_cast<size_t>(stage)];
}

void NcclTransport::release_finished() {
  for (auto it = outgoing_.begin(); it != outgoing_.end();) {
    int header_sent = 0;
    check_mpi(MPI_Test(&it->header_request, &header_sent, MPI_STATUS_IGNORE), "MPI_Test (header)");
    it = header_sent && it->sent.query() ? outgoing_.erase(it) : std::next(it);
  }
}

void NcclTransport::send(const TransferTag& tag, const Tensor& tensor, const Event& ready) {
  BRIGADE_CHECK_VALUE(tensor.defined() && tensor.device() == device_, "transport send ", to_string(tag),
                      ": NcclTransport carries tensors on ", device_.str());
  BRIGADE_CHECK_VALUE(ready.is_recorded(), "transport send ", to_string(tag),
                      ": the ready event must be recorded before the message is sent");
  BRIGADE_CHECK_VALUE(tensor.is_contiguous() && tensor.dim() <= kMaxDims, "transport send ", to_string(tag),
                      ": the tensor must be contiguous with at most ", kMaxDims, " dims");
  if (aborted()) throw TransportAborted(abort_reason());
  const int dest = rank_of(tag.to_stage, tag);
  std::lock_guard<std::mutex> lock(mutex_);
  release_finished();
  Outgoing& out = outgoing_.emplace_back();
  out.tensor = tensor;
  out.header.assign(kHeaderWords, 0);
  out.header[0] = kMagic;
  out.header[1] = static_cast<int64_t>(tensor.dtype());
  out.header[2] = tensor.dim();
  for (int64_t d = 0; d < tensor.dim(); ++d) out.header[3 + static_cast<size_t>(d)] = tensor.size(d);
  check_mpi(MPI_Isend(out.header.data(), static_cast<int>(kHeaderWords), MPI_INT64_T, dest,
                      MpiTransport::mpi_tag(tag), headers_, &out.header_request),
            "MPI_Isend (header)");
  stream_.wait(ready);  // the producer's kernels have written it
  check_nccl(ncclSend(tensor.data_ptr(), tensor.nbytes(), ncclChar, dest, comm_, native(stream_)),
             "ncclSend");
  out.sent.record(stream_);
  traffic_.count(tag, static_cast<int64_t>(tensor.nbytes()));
}

Message NcclTransport::recv(const TransferTag& tag) {
  const int source = rank_of(tag.from_stage, tag);
  const int mtag = MpiTransport::mpi_tag(tag);
  const std::string what = "transport recv " + to_string(tag) + " from rank " + std::to_string(source);
  if (aborted()) throw TransportAborted(abort_reason());
  MPI_Message probe = MPI_MESSAGE_NULL;
  wait_for(
      [&] {
        if (aborted()) throw TransportAborted(abort_reason());
        int found = 0;
        check_mpi(MPI_Improbe(source, mtag, headers_, &found, &probe, MPI_STATUS_IGNORE), "MPI_Improbe");
        return found != 0;
      },
      recv_timeout_seconds_, what);
  std::vector<int64_t> header(kHeaderWords, 0);
  check_mpi(MPI_Mrecv(header.data(), static_cast<int>(kHeaderWords), MPI_INT64_T, &probe, MPI_STATUS_IGNORE),
            "MPI_Mrecv (header)");
  BRIGADE_CHECK(header[0] == kMagic && header[2] >= 0 && header[2] <= kMaxDims, what,
                ": the message header is malformed (magic ", header[0], ", dims ", header[2], ")");
  const Shape shape(header.begin() + 3, header.begin() + 3 + header[2]);
  std::lock_guard<std::mutex> lock(mutex_);
  Tensor tensor;
  {
    StreamGuard on_stream(stream_);  // allocated from the transport stream's pool
    tensor = empty(shape, TensorOptions().dtype(static_cast<DType>(header[1])).device(device_));
  }
  check_nccl(ncclRecv(tensor.data_ptr(), tensor.nbytes(), ncclChar, source, comm_, native(stream_)),
             "ncclRecv");
  Event ready;
  ready.record(stream_);
  return Message{tensor, ready};
}

void NcclTransport::abort(const std::string& reason) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!failure_.record(reason)) return;
    if (comm_ != nullptr) (void)ncclCommAbort(comm_);
    comm_ = nullptr;
  }
  MpiWorld::get().announce_failure(reason);
}

bool NcclTransport::aborted() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return failure_.failed();
}

std::string NcclTransport::abort_reason() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return failure_.reason();
}

Traffic NcclTransport::traffic() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return traffic_;
}

void NcclTransport::reset() {
  std::lock_guard<std::mutex> lock(mutex_);
  release_finished();
  traffic_ = Traffic{};
}

}  // namespace brigade::pipeline::dist
