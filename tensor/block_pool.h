// BlockPool: the bookkeeping half of the CUDA caching allocator, with no CUDA in it, so that the unit tests
// can drive it on a machine without a GPU (tests/tensor/caching_allocator_test.cpp uses a fake source).
//
// Memory comes from a SegmentSource in large "segments" (cudaMalloc on a GPU); the pool carves blocks out of
// them and caches freed blocks instead of returning them:
//   - Sizes: every request is rounded up to a multiple of 512 bytes. Requests of at most 1 MiB ("small") are
//     carved out of 2 MiB segments; larger ones get a segment of their size rounded up to 2 MiB.
//   - Splitting: a free block larger than needed is split and the remainder stays free (small blocks split
//     when at least 512 bytes remain, large ones when more than 1 MiB remains, so that large segments are
//     not shredded into slivers).
//   - Coalescing: on free, a block merges with its free neighbours of the same segment.
//   - One pool per stream: a block belongs to the stream that was current when its segment was allocated
//     and only serves allocations on that stream, so work queued on the stream is ordered before reuse.
//   - Deferred reuse: a block also used on other streams (record_stream) gets, at free time, one event per
//     such stream; it returns to the free lists only once every event has completed. Pending events are
//     polled at the start of each allocation.
//   - Out of memory: when the source cannot provide a segment, the pool releases every cached segment that
//     is entirely free (on every stream) and tries once more.
//
// Not thread-safe: the owner (CachingAllocator) serialises calls with its mutex.
#pragma once

#include <cstddef>
#include <cstdint>
#include <set>
#include <utility>
#include <vector>

namespace brigade::detail {

/// Identifies a stream to the pool (a cudaStream_t cast to an integer; 0 is the default stream).
using StreamId = uintptr_t;

/// Where the pool gets memory and stream-ordering markers from (the CUDA runtime, or a fake in tests).
class SegmentSource {
 public:
  virtual ~SegmentSource() = default;
  /// A new segment of `nbytes`, or nullptr when the device is out of memory (any other failure throws).
  virtual void* allocate_segment(size_t nbytes) = 0;
  /// Returns a segment obtained from allocate_segment (the pool never releases a segment that is in use).
  virtual void free_segment(void* ptr, size_t nbytes) = 0;
  /// Records a marker at the current end of `stream`'s queued work and returns its handle.
  virtual void* record_event(StreamId stream) = 0;
  /// True once the work before the marker has finished.
  virtual bool event_completed(void* event) = 0;
  /// Releases a marker returned by record_event.
  virtual void release_event(void* event) = 0;
};

/// One block of device memory: a whole segment or a piece of one. Allocation::block points at it.
struct Block {
  void* ptr = nullptr;
  size_t size = 0;         ///< bytes in this block (a multiple of 512)
  size_t requested = 0;    ///< bytes the caller asked for (while allocated)
  StreamId stream = 0;     ///< the stream whose pool the block belongs to
  bool small = false;      ///< carved from a 2 MiB small segment
  bool allocated = false;  ///< handed out (or freed but waiting on events)
  Block* prev = nullptr;   ///< neighbours inside the segment (null at the segment's ends)
  Block* next = nullptr;
  std::vector<StreamId> used_on;  ///< other streams recorded with record_stream while allocated
  int pending_events = 0;         ///< events still to complete before the block can be reused
};

class BlockPool {
 public:
  static constexpr size_t kMinBlockSize = 512;              ///< every block is a multiple of this
  static constexpr size_t kSmallSize = size_t{1} << 20;     ///< requests up to this are "small"
  static constexpr size_t kSmallSegment = size_t{2} << 20;  ///< segment size of the small pool
  static constexpr size_t kLargeRound = size_t{2} << 20;    ///< large segments are multiples of this
  /// Requests above this cannot be rounded without overflow; they fail as out of memory.
  static constexpr size_t kMaxRequest = size_t{1} << 62;

  explicit BlockPool(SegmentSource& source);
  /// Returns every segment to the source (blocks still allocated are the owner's bug; they are freed too).
  ~BlockPool();
  BlockPool(const BlockPool&) = delete;
  BlockPool& operator=(const BlockPool&) = delete;

  /// A block of at least `nbytes` (> 0) for use on `stream`, or nullptr when the source is out of memory
  /// even after releasing the cache. Polls pending events first.
  Block* allocate(size_t nbytes, StreamId stream);
  /// Gives a block back: straight to its stream's free list, or (after record_stream on other streams)
  /// once the events recorded now on those streams have completed.
  void free(Block* block);
  /// Marks `block` as used on `stream` as well (no effect for the block's own stream).
  void record_stream(Block* block, StreamId stream);
  /// Moves blocks whose events have all completed to the free lists.
  void process_events();
  /// Polls events, then returns every entirely free segment to the source.
  void empty_cache();

  /// The size a request is rounded to (multiple of 512).
  static size_t round_size(size_t nbytes);
  /// The segment size allocated for a request whose rounded size is `size`.
  static size_t segment_size(size_t size);

  // ---- statistics (block bytes, i.e. after rounding) ----------------------------------------------------
  size_t reserved_bytes() const { return reserved_bytes_; }    ///< sum of live segments
  size_t allocated_bytes() const { return allocated_bytes_; }  ///< blocks handed out or awaiting events
  size_t segment_count() const { return segment_count_; }
  size_t pending_event_count() const { return pending_.size(); }
  size_t free_block_count() const { return small_free_.size() + large_free_.size(); }

 private:
  struct BlockLess {
    bool operator()(const Block* a, const Block* b) const;
  };
  using FreeList = std::set<Block*, BlockLess>;

  FreeList& free_list(bool small) { return small ? small_free_ : large_free_; }
  Block* find_free(size_t size, StreamId stream, bool small);
  Block* new_segment(size_t size, StreamId stream, bool small);
  Block* split(Block* block, size_t size);
  void return_to_free_list(Block* block);
  void release_free_segments();

  SegmentSource& source_;
  FreeList small_free_;
  FreeList large_free_;
  std::vector<std::pair<void*, Block*>> pending_;  // (event, block waiting on it)
  std::set<Block*> segments_;                      // first block of each live segment
  size_t reserved_bytes_ = 0;
  size_t allocated_bytes_ = 0;
  size_t segment_count_ = 0;
};

}  // namespace brigade::detail
