#include "tensor/allocator.h"

#include <cstdlib>
#include <iterator>
#include <map>
#include <mutex>
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

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitized = true;  // keep every free visible to the sanitizer: no cache
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif
#else
constexpr bool kSanitized = false;
#endif

/// CPU memory from the system, 64-byte aligned (a cache line; the widest SIMD load).
///
/// Blocks of 64 KiB and more are cached. glibc serves a large request with a fresh mmap and gives it back
/// with munmap on free (from 128 KiB up, its threshold rising to at most 32 MiB), and returns the top of its
/// heap to the system once enough of it is free, so the tensors of every training step were page-faulted
/// and zeroed by the kernel again: GPT-2's logits (1024 x 50257 floats, 205 MB) cost about 50 000 page
/// faults each time, and a softmax over them spent more time in the kernel's page zeroing than in its own
/// loop; the baby GPT's step took ~1600 page faults (about 5 % of its time in perf, in the first writes of
/// the GEMM tiles and the GELU). Freed blocks go to a cache keyed by their size rounded to 4 KiB (2 MiB
/// from 32 MiB up) and are handed out again for a request of the same rounded size (training allocates the
/// same shapes every step). Blocks under 32 MiB are kept up to kMaxMediumCachedBytes in all, a block
/// beyond that goes back to glibc; large blocks are always kept.
/// Cached bytes count as reserved, not in use, as in the CUDA caching allocator; empty_cache(Device::cpu())
/// returns them, and so does an allocation that fails. Under AddressSanitizer and ThreadSanitizer nothing
/// is cached.
class CpuAllocator final : public Allocator {
 public:
  static constexpr size_t kAlignment = 64;
  static constexpr size_t kCachedBytes = size_t{64} << 10;  // the smallest block cached
  static constexpr size_t kMediumRounding = size_t{4} << 10;
  static constexpr size_t kLargeBytes = size_t{32} << 20;
  static constexpr size_t kLargeRounding = size_t{2} << 20;
  static constexpr size_t kMaxMediumCachedBytes = size_t{1} << 30;

  Allocation allocate(size_t nbytes) override {
    Allocation a;
    a.nbytes = nbytes;
    a.device = Device::cpu();
    a.scope_id = MemoryScope::current_id();
    if (nbytes == 0) return a;
    const size_t rounded = rounded_size(nbytes);
    a.ptr = take_cached(rounded);
    if (a.ptr == nullptr) {
      a.ptr = std::aligned_alloc(kAlignment, rounded);
      if (a.ptr == nullptr && empty_cache() > 0) a.ptr = std::aligned_alloc(kAlignment, rounded);
      BRIGADE_CHECK_AS(OutOfMemoryError, a.ptr != nullptr, "CPU allocator: out of memory allocating ", nbytes,
                       " bytes (in use: ", memory_stats(Device::cpu()).in_use_bytes, " bytes)");
      detail::record_reserved(a.device, static_cast<int64_t>(rounded));
    }
    detail::record_allocation(a.device, a.scope_id, static_cast<int64_t>(nbytes));
    return a;
  }

  void deallocate(const Allocation& a) override {
    if (a.ptr == nullptr) return;
    detail::record_free(a.device, a.scope_id, static_cast<int64_t>(a.nbytes));
    const size_t rounded = rounded_size(a.nbytes);
    if (rounded >= kCachedBytes && !kSanitized) {
      std::lock_guard<std::mutex> lock(mutex_);
      const bool medium = rounded < kLargeBytes;
      if (!medium || medium_cached_bytes_ + rounded <= kMaxMediumCachedBytes) {
        cached_.emplace(rounded, a.ptr);
        if (medium) medium_cached_bytes_ += rounded;
        return;
      }
    }
    std::free(a.ptr);
    detail::record_reserved(a.device, -static_cast<int64_t>(rounded));
  }

  /// Frees every cached block; returns the bytes freed.
  size_t empty_cache() {
    std::lock_guard<std::mutex> lock(mutex_);
    size_t freed = 0;
    for (const auto& [size, ptr] : cached_) {
      std::free(ptr);
      freed += size;
    }
    cached_.clear();
    medium_cached_bytes_ = 0;
    detail::record_reserved(Device::cpu(), -static_cast<int64_t>(freed));
    return freed;
  }

 private:
  static size_t rounded_size(size_t nbytes) {
    const size_t unit = nbytes >= kLargeBytes    ? kLargeRounding
                        : nbytes >= kCachedBytes ? kMediumRounding
                                                 : kAlignment;
    return (nbytes + unit - 1) / unit * unit;
  }

  void* take_cached(size_t rounded) {
    if (rounded < kCachedBytes) return nullptr;
    std::lock_guard<std::mutex> lock(mutex_);
    // The block of this size freed last (equal keys keep their insertion order): the likeliest still in
    // cache.
    const auto [first, end] = cached_.equal_range(rounded);
    if (first == end) return nullptr;
    const auto it = std::prev(end);
    void* ptr = it->second;
    cached_.erase(it);
    if (rounded < kLargeBytes) medium_cached_bytes_ -= rounded;
    return ptr;
  }

  std::mutex mutex_;
  std::multimap<size_t, void*> cached_;  // rounded size -> block
  size_t medium_cached_bytes_ = 0;       // of the blocks under kLargeBytes
};

CpuAllocator& cpu_allocator() {
  static CpuAllocator* cpu = new CpuAllocator();  // never destroyed: tensors may outlive static teardown
  return *cpu;
}

}  // namespace

Allocator& allocator_for(const Device& device) {
  if (device.is_cpu()) return cpu_allocator();
#if BRIGADE_WITH_CUDA
  check_device_exists(device, "allocate");
  return cuda_detail::caching_allocator(device.index);
#else
  BRIGADE_THROW(DeviceError, "allocate: brigade was built without CUDA; cannot allocate on ", device.str());
#endif
}

void empty_cache(const Device& device) {
  if (device.is_cpu()) {
    cpu_allocator().empty_cache();
    return;
  }
#if BRIGADE_WITH_CUDA
  if (device.is_cuda()) cuda_detail::empty_cache(device.index);
#else
  (void)device;
#endif
}

Storage::Storage(size_t nbytes, const Device& device) : allocation_(allocator_for(device).allocate(nbytes)) {}

Storage::~Storage() {
  allocator_for(allocation_.device).deallocate(allocation_);
}

void record_stream(const Storage& storage, const Stream& stream) {
  if (storage.device().is_cpu()) return;
  BRIGADE_CHECK_DEVICE(storage.device() == stream.device(), "record_stream: storage on ",
                       storage.device().str(), " but stream on ", stream.device().str());
#if BRIGADE_WITH_CUDA
  cuda_detail::record_stream(storage.allocation(), static_cast<cudaStream_t>(stream.native_handle()));
#endif
}

}  // namespace brigade
