// Storage: one allocation on one device, shared by every tensor that views it.
#pragma once

#include <cstddef>
#include <memory>

#include "tensor/allocator.h"
#include "tensor/device.h"

namespace brigade {

class Stream;

class Storage {
 public:
  /// Allocates `nbytes` on `device` from its allocator (attributed to this thread's memory scope; on CUDA,
  /// from the pool of the device's current stream).
  Storage(size_t nbytes, const Device& device);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return allocation_.ptr; }
  size_t nbytes() const { return allocation_.nbytes; }
  const Device& device() const { return allocation_.device; }
  const Allocation& allocation() const { return allocation_; }

 private:
  Allocation allocation_;
};

/// Tells the CUDA caching allocator that `storage` is used on `stream` (besides the stream it was
/// allocated on): when the storage is freed its block is not reused until the work queued on `stream` up
/// to the free has finished. No-op for CPU storage.
void record_stream(const Storage& storage, const Stream& stream);

}  // namespace brigade
