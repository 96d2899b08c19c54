#include "tensor/allocator.h"

#include <cstdlib>
#include <new>

#include "tensor/error.h"
#include "tensor/memory.h"
#include "tensor/storage.h"
#include "tensor/stream.h"

#if BRIGADE_WITH_CUDA
#include "tensor/cuda/caching_allocator.h"
#endif

namespace brigade {

namespace {

/// CPU memory straight from the system, 64-byte aligned (a cache line; the widest SIMD load).
class CpuAllocator final : public Allocator {
 public:
  static constexpr size_t kAlignment = 64;

  Allocation allocate(size_t nbytes) override {
    Allocation a;
    a.nbytes = nbytes;
    a.device = Device::cpu();
    a.scope_id = MemoryScope::current_id();
    if (nbytes == 0) return a;
    size_t rounded = (nbytes + kAlignment - 1) / kAlignment * kAlignment;
    a.ptr = std::aligned_alloc(kAlignment, rounded);
    BRIGADE_CHECK_AS(OutOfMemoryError, a.ptr != nullptr, "CPU allocator: out of memory allocating ", nbytes,
                     " bytes (in use: ", memory_stats(Device::cpu()).in_use_bytes, " bytes)");
    detail::record_allocation(a.device, a.scope_id, static_cast<int64_t>(nbytes));
    detail::record_reserved(a.device, static_cast<int64_t>(nbytes));
    return a;
  }

  void deallocate(const Allocation& a) override {
    if (a.ptr == nullptr) return;
    std::free(a.ptr);
    detail::record_free(a.device, a.scope_id, static_cast<int64_t>(a.nbytes));
    detail::record_reserved(a.device, -static_cast<int64_t>(a.nbytes));
  }
};

}  // namespace

Allocator& allocator_for(const Device& device) {
  if (device.is_cpu()) {
    static CpuAllocator* cpu = new CpuAllocator();  // never destroyed: tensors may outlive static teardown
    return *cpu;
  }
#if BRIGADE_WITH_CUDA
  check_device_exists(device, "allocate");
  return cuda_detail::caching_allocator(device.index);
#else
  BRIGADE_THROW(DeviceError, "allocate: brigade was built without CUDA; cannot allocate on ", device.str());
#endif
}

void empty_cache(const Device& device) {
#if BRIGADE_WITH_CUDA
  if (device.is_cuda()) cuda_detail::empty_cache(device.index);
#else
  (void)device;
#endif
}

Storage::Storage(size_t nbytes, const Device& device) : allocation_(allocator_for(device).allocate(nbytes)) {}

Storage::~Storage() { allocator_for(allocation_.device).deallocate(allocation_); }

void record_stream(const Storage& storage, const Stream& stream) {
  if (storage.device().is_cpu()) return;
  BRIGADE_CHECK_DEVICE(storage.device() == stream.device(), "record_stream: storage on ", storage.device().str(),
                       " but stream on ", stream.device().str());
#if BRIGADE_WITH_CUDA
  cuda_detail::record_stream(storage.allocation(), static_cast<cudaStream_t>(stream.native_handle()));
#endif
}

}  // namespace brigade
