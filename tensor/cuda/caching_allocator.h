// The CUDA caching allocator: one per device, created on first use. It adapts BlockPool (tensor/block_pool.h:
// size bins, splitting, coalescing, one pool per stream, deferred reuse after record_stream) to cudaMalloc,
// cudaFree and CUDA events, and reports every allocation, free and segment to the memory statistics
// (tensor/memory.h). Allocations are served from the pool of the device's current stream.
//
// Out of memory: pending events are polled, every cached unused segment is released, and cudaMalloc is tried
// once more; if that fails too, OutOfMemoryError names the requested bytes, the device's free and total
// bytes, and the allocator's reserved and in-use bytes. The allocator stays usable afterwards.
//
// Only CUDA-enabled translation units include this header.
#pragma once

#include <cuda_runtime.h>

#include "tensor/allocator.h"

namespace brigade::cuda_detail {

/// The caching allocator of CUDA device `device_index` (thread-safe; throws DeviceError for a device that
/// does not exist). The object lives until the process ends.
Allocator& caching_allocator(int device_index);

/// Marks `allocation` (from a caching allocator) as used on `stream`: when it is freed, its block is not
/// reused until the work queued on `stream` up to the free has finished. No effect for the stream it was
/// allocated on or for a zero-byte allocation.
void record_stream(const Allocation& allocation, cudaStream_t stream);

/// Polls pending frees and returns every cached, unused segment of `device_index` to the driver.
void empty_cache(int device_index);

}  // namespace brigade::cuda_detail
