// Memory accounting: per-device allocator statistics and thread-local memory scopes.
//
// Every allocator reports each allocation and free here. A MemoryScope tags the allocations made by the
// current thread while it is alive (the pipeline uses the stage id), so that a stage can read its own peak
// even when several stages share one device. The tag travels with the block: a block freed on another
// thread is still subtracted from the scope that allocated it.
#pragma once

#include <cstdint>
#include <string>

#include "tensor/device.h"

namespace brigade {

struct MemoryStats {
  int64_t in_use_bytes = 0;     ///< bytes held by live tensors
  int64_t peak_bytes = 0;       ///< highest in_use_bytes since the last reset_peak
  int64_t reserved_bytes = 0;   ///< bytes taken from the system (>= in_use for the caching allocator)
  int64_t allocations = 0;      ///< live allocations
  int64_t total_allocations = 0;///< allocations made since start (never reset)
};

/// Statistics of one device's allocator.
MemoryStats memory_stats(const Device& device);
/// Sets the device's peak (and every scope's peak on it) to the current in-use figure.
void reset_peak_memory(const Device& device);
/// Statistics of the allocations made under scope `tag` on `device` (reserved is 0 for scopes).
MemoryStats scope_memory_stats(const Device& device, const std::string& tag);
/// Sets one scope's peak to its current in-use figure.
void reset_scope_peak(const Device& device, const std::string& tag);

/// RAII: allocations made by this thread while the scope lives are attributed to `tag`.
/// Scopes nest; the innermost tag wins and the outer one is restored on destruction.
class MemoryScope {
 public:
  explicit MemoryScope(const std::string& tag);
  ~MemoryScope();
  MemoryScope(const MemoryScope&) = delete;
  MemoryScope& operator=(const MemoryScope&) = delete;

  /// The tag id of the innermost scope on this thread (0: no scope).
  static int current_id();

 private:
  int previous_id_;
};

namespace detail {
/// Called by allocators. `scope_id` is MemoryScope::current_id() at allocation time.
void record_allocation(const Device& device, int scope_id, int64_t bytes);
void record_free(const Device& device, int scope_id, int64_t bytes);
void record_reserved(const Device& device, int64_t delta_bytes);
}  // namespace detail

}  // namespace brigade
