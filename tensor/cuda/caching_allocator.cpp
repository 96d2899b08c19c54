// CachingAllocator: BlockPool over the CUDA runtime. The pool does the bookkeeping; this file supplies
// segments (cudaMalloc/cudaFree), stream markers (CUDA events, reused through a small cache), the memory
// statistics, the lock, and the out-of-memory message.
#include "tensor/cuda/caching_allocator.h"

#include <array>
#include <atomic>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "tensor/block_pool.h"
#include "tensor/cuda/cuda_check.h"
#include "tensor/device.h"
#include "tensor/memory.h"

namespace brigade::cuda_detail {

namespace {

using detail::Block;
using detail::BlockPool;
using detail::StreamId;

/// Makes `device_index` current for a scope and restores the previous device (frees and event records may
/// come from any thread, whose current device can differ).
class DeviceGuard {
 public:
  explicit DeviceGuard(int device_index) {
    BRIGADE_CUDA_CHECK(cudaGetDevice(&previous_));
    if (previous_ != device_index) BRIGADE_CUDA_CHECK(cudaSetDevice(device_index));
    changed_ = previous_ != device_index;
  }
  ~DeviceGuard() {
    if (changed_) (void)cudaSetDevice(previous_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = 0;
  bool changed_ = false;
};

std::string format_bytes(size_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024.0 && unit < 6) {
    value /= 1024.0;
    ++unit;
  }
  std::ostringstream out;
  out.precision(2);
  out << std::fixed << value << " " << units[unit];
  return out.str();
}

/// Segments and events of one device. Called with the allocator's lock held and its device current.
class CudaSegmentSource final : public detail::SegmentSource {
 public:
  explicit CudaSegmentSource(int device_index) : device_(Device::cuda(device_index)) {}

  void* allocate_segment(size_t nbytes) override {
    void* ptr = nullptr;
    cudaError_t status = cudaMalloc(&ptr, nbytes);
    if (status == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();  // clear it: the pool frees its cache and retries
      return nullptr;
    }
    BRIGADE_CUDA_CHECK(status);
    detail::record_reserved(device_, static_cast<int64_t>(nbytes));
    return ptr;
  }

  void free_segment(void* ptr, size_t nbytes) override {
    BRIGADE_CUDA_CHECK(cudaFree(ptr));  // synchronises the device: no queued work still uses the segment
    detail::record_reserved(device_, -static_cast<int64_t>(nbytes));
  }

  void* record_event(StreamId stream) override {
    cudaEvent_t event = nullptr;
    if (!spare_events_.empty()) {
      event = spare_events_.back();
      spare_events_.pop_back();
    } else {
      BRIGADE_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
    }
    BRIGADE_CUDA_CHECK(cudaEventRecord(event, reinterpret_cast<cudaStream_t>(stream)));
    return event;
  }

  bool event_completed(void* event) override {
    cudaError_t status = cudaEventQuery(static_cast<cudaEvent_t>(event));
    if (status == cudaErrorNotReady) {
      (void)cudaGetLastError();
      return false;
    }
    BRIGADE_CUDA_CHECK(status);
    return true;
  }

  void release_event(void* event) override { spare_events_.push_back(static_cast<cudaEvent_t>(event)); }

 private:
  Device device_;
  std::vector<cudaEvent_t> spare_events_;  // recorded-and-completed events kept for reuse
};

class CachingAllocator final : public Allocator {
 public:
  explicit CachingAllocator(int device_index)
      : device_index_(device_index), source_(device_index), pool_(source_) {}

  Allocation allocate(size_t nbytes) override {
    Allocation allocation;
    allocation.nbytes = nbytes;
    allocation.device = Device::cuda(device_index_);
    allocation.scope_id = MemoryScope::current_id();
    if (nbytes == 0) return allocation;

    const auto stream = reinterpret_cast<StreamId>(current_stream(device_index_));
    {
      std::lock_guard<std::mutex> lock(mutex_);
      DeviceGuard guard(device_index_);
      Block* block = pool_.allocate(nbytes, stream);
      if (block == nullptr) throw_out_of_memory(nbytes);
      allocation.ptr = block->ptr;
      allocation.block = block;
    }
    detail::record_allocation(allocation.device, allocation.scope_id, static_cast<int64_t>(nbytes));
    return allocation;
  }

  void deallocate(const Allocation& allocation) override {
    if (allocation.block == nullptr) return;
    detail::record_free(allocation.device, allocation.scope_id, static_cast<int64_t>(allocation.nbytes));
    std::lock_guard<std::mutex> lock(mutex_);
    auto* block = static_cast<Block*>(allocation.block);
    // Only a block used on other streams needs CUDA here (events); the common free is pure bookkeeping,
    // which also keeps tensors destroyed during process teardown from calling into an unloading runtime.
    if (block->used_on.empty()) {
      pool_.free(block);
      return;
    }
    int current = 0;
    if (cudaGetDevice(&current) == cudaErrorCudartUnloading) {
      (void)cudaGetLastError();
      return;  // the process is exiting: the driver reclaims the memory
    }
    DeviceGuard guard(device_index_);
    pool_.free(block);
  }

  void record_stream(const Allocation& allocation, cudaStream_t stream) {
    if (allocation.block == nullptr) return;
    std::lock_guard<std::mutex> lock(mutex_);
    pool_.record_stream(static_cast<Block*>(allocation.block), reinterpret_cast<StreamId>(stream));
  }

  void empty_cache() {
    std::lock_guard<std::mutex> lock(mutex_);
    DeviceGuard guard(device_index_);
    pool_.empty_cache();
  }

 private:
  // Called with the lock held, after the pool has already released its cache and retried.
  [[noreturn]] void throw_out_of_memory(size_t nbytes) {
    size_t free_bytes = 0, total_bytes = 0;
    std::string device_memory;
    if (cudaMemGetInfo(&free_bytes, &total_bytes) == cudaSuccess) {
      device_memory = detail::concat(free_bytes, " bytes free (", format_bytes(free_bytes), ") of ",
                                     total_bytes, " bytes total (", format_bytes(total_bytes), ")");
    } else {
      (void)cudaGetLastError();
      device_memory = "unknown free and total bytes (cudaMemGetInfo failed)";
    }
    BRIGADE_THROW(OutOfMemoryError, "CUDA out of memory on cuda:", device_index_, ": tried to allocate ",
                  nbytes, " bytes (", format_bytes(nbytes), "); the device has ", device_memory,
                  "; the caching allocator has ", pool_.reserved_bytes(), " bytes reserved and ",
                  pool_.allocated_bytes(), " bytes in use");
  }

  const int device_index_;
  std::mutex mutex_;
  CudaSegmentSource source_;
  BlockPool pool_;
};

constexpr int kMaxDevices = 64;
std::array<std::atomic<CachingAllocator*>, kMaxDevices> g_allocators{};
std::mutex g_create_mutex;

CachingAllocator& allocator_of(int device_index) {
  BRIGADE_CHECK_DEVICE(device_index >= 0 && device_index < kMaxDevices,
                       "CUDA caching allocator: device index must be in [0, ", kMaxDevices, "), found ",
                       device_index);
  CachingAllocator* existing = g_allocators[device_index].load(std::memory_order_acquire);
  if (existing != nullptr) return *existing;
  std::lock_guard<std::mutex> lock(g_create_mutex);
  existing = g_allocators[device_index].load(std::memory_order_acquire);
  if (existing != nullptr) return *existing;
  check_device_exists(Device::cuda(device_index), "CUDA caching allocator");
  // Never destroyed: tensors may be freed during static destruction, after a destroyed allocator.
  auto* created = new CachingAllocator(device_index);
  g_allocators[device_index].store(created, std::memory_order_release);
  return *created;
}

}  // namespace

Allocator& caching_allocator(int device_index) {
  return allocator_of(device_index);
}

void record_stream(const Allocation& allocation, cudaStream_t stream) {
  if (allocation.block == nullptr) return;
  allocator_of(allocation.device.index).record_stream(allocation, stream);
}

void empty_cache(int device_index) {
  // Nothing to release on a device whose allocator was never created.
  if (device_index < 0 || device_index >= kMaxDevices) return;
  CachingAllocator* allocator = g_allocators[device_index].load(std::memory_order_acquire);
  if (allocator != nullptr) allocator->empty_cache();
}

}  // namespace brigade::cuda_detail
