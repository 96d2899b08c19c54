// Allocators hand out raw device memory to Storage. One allocator per device kind:
//  - CPU: 64-byte aligned blocks straight from the system (cache-line and AVX-512 aligned).
//  - CUDA: a caching allocator (see tensor/cuda/caching_allocator.h).
#pragma once

#include <cstddef>

#include "tensor/device.h"

namespace brigade {

/// What an allocator returns: the pointer plus what it needs to take the block back.
struct Allocation {
  void* ptr = nullptr;
  size_t nbytes = 0;
  Device device;
  int scope_id = 0;       ///< memory scope the bytes are attributed to
  void* block = nullptr;  ///< allocator-private bookkeeping (the CUDA block); null on CPU
};

class Allocator {
 public:
  virtual ~Allocator() = default;
  /// Returns at least `nbytes` (may be 0) or throws OutOfMemoryError naming requested and free bytes.
  virtual Allocation allocate(size_t nbytes) = 0;
  virtual void deallocate(const Allocation& allocation) = 0;
};

/// The allocator for `device` (throws DeviceError for a CUDA device in a CPU-only build).
Allocator& allocator_for(const Device& device);

/// Releases cached, unused blocks: CUDA blocks back to the driver, the CPU allocator's cached large blocks
/// (32 MiB and more) back to the system.
void empty_cache(const Device& device);

}  // namespace brigade
