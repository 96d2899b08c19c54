// The CUDA caching allocator's bookkeeping (BlockPool) driven on the CPU through a fake segment source:
// rounding, splitting, coalescing, per-stream pools, deferred reuse after record_stream, and the
// out-of-memory retry that releases cached segments. Addresses are fake (never dereferenced).
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <vector>

#include "tensor/block_pool.h"

namespace brigade::detail {
namespace {

constexpr size_t kKiB = 1024;
constexpr size_t kMiB = 1024 * 1024;

/// Hands out fake, non-overlapping addresses up to `capacity` bytes, and events that complete only when the
/// test says so (as if the stream's work were still running).
class FakeSource final : public SegmentSource {
 public:
  explicit FakeSource(size_t capacity = 1024 * kMiB) : capacity_(capacity) {}

  void* allocate_segment(size_t nbytes) override {
    ++malloc_calls;
    if (used_ + nbytes > capacity_) return nullptr;
    used_ += nbytes;
    void* ptr = reinterpret_cast<void*>(next_address_);
    next_address_ += nbytes + 64 * kMiB;  // a gap, so no two segments look adjacent
    live_[ptr] = nbytes;
    return ptr;
  }
  void free_segment(void* ptr, size_t nbytes) override {
    ++free_calls;
    EXPECT_EQ(live_.at(ptr), nbytes) << "segment returned with a different size";
    live_.erase(ptr);
    used_ -= nbytes;
  }
  void* record_event(StreamId stream) override {
    events_.push_back({stream, false, false});
    return reinterpret_cast<void*>(events_.size());  // 1-based handle
  }
  bool event_completed(void* event) override { return get(event).done; }
  void release_event(void* event) override {
    EXPECT_FALSE(get(event).released) << "event released twice";
    get(event).released = true;
  }

  /// Completes every event recorded on `stream` so far (the stream "caught up").
  void finish_stream(StreamId stream) {
    for (auto& e : events_) {
      if (e.stream == stream) e.done = true;
    }
  }
  size_t events_recorded() const { return events_.size(); }
  size_t events_released() const {
    size_t n = 0;
    for (const auto& e : events_) n += e.released ? 1 : 0;
    return n;
  }
  size_t used() const { return used_; }
  size_t live_segments() const { return live_.size(); }

  int malloc_calls = 0;
  int free_calls = 0;

 private:
  struct FakeEvent {
    StreamId stream;
    bool done;
    bool released;
  };
  FakeEvent& get(void* event) { return events_.at(reinterpret_cast<uintptr_t>(event) - 1); }

  size_t capacity_;
  size_t used_ = 0;
  uintptr_t next_address_ = uintptr_t{1} << 40;
  std::map<void*, size_t> live_;
  std::vector<FakeEvent> events_;
};

char* at(void* p) {
  return static_cast<char*>(p);
}

constexpr StreamId kStreamA = 0;      // the default stream
constexpr StreamId kStreamB = 0xB00;  // any other value stands for another stream
constexpr StreamId kStreamC = 0xC00;

TEST(BlockPool, RoundsSizesAndPicksSegmentSizes) {
  EXPECT_EQ(BlockPool::round_size(1), 512u);
  EXPECT_EQ(BlockPool::round_size(512), 512u);
  EXPECT_EQ(BlockPool::round_size(513), 1024u);
  EXPECT_EQ(BlockPool::round_size(kMiB + 1), kMiB + 512);
  EXPECT_EQ(BlockPool::segment_size(512), 2 * kMiB);         // small requests share 2 MiB segments
  EXPECT_EQ(BlockPool::segment_size(kMiB), 2 * kMiB);        // 1 MiB is still small
  EXPECT_EQ(BlockPool::segment_size(kMiB + 512), 2 * kMiB);  // large: rounded up to 2 MiB
  EXPECT_EQ(BlockPool::segment_size(5 * kMiB), 6 * kMiB);
  EXPECT_EQ(BlockPool::segment_size(6 * kMiB), 6 * kMiB);  // exact multiples stay exact
}

TEST(BlockPool, SmallRequestsAreCarvedFromOneSegment) {
  FakeSource source;
  BlockPool pool(source);
  Block* a = pool.allocate(100, kStreamA);
  Block* b = pool.allocate(1000, kStreamA);
  Block* c = pool.allocate(4 * kKiB, kStreamA);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(source.malloc_calls, 1);
  EXPECT_EQ(pool.reserved_bytes(), 2 * kMiB);
  // Consecutive pieces of the segment, each rounded to 512 B.
  EXPECT_EQ(a->size, 512u);
  EXPECT_EQ(b->size, 1024u);
  EXPECT_EQ(at(b->ptr), at(a->ptr) + 512);
  EXPECT_EQ(at(c->ptr), at(b->ptr) + 1024);
  EXPECT_EQ(a->requested, 100u);
  EXPECT_EQ(pool.allocated_bytes(), 512u + 1024u + 4 * kKiB);
  pool.free(a);
  pool.free(b);
  pool.free(c);
  EXPECT_EQ(pool.allocated_bytes(), 0u);
  EXPECT_EQ(pool.reserved_bytes(), 2 * kMiB);  // cached, not returned
  EXPECT_EQ(source.free_calls, 0);
}

TEST(BlockPool, FreedBlockIsReusedForTheSameSize) {
  FakeSource source;
  BlockPool pool(source);
  Block* a = pool.allocate(3 * kMiB, kStreamA);
  void* ptr = a->ptr;
  pool.free(a);
  Block* again = pool.allocate(3 * kMiB, kStreamA);
  EXPECT_EQ(again->ptr, ptr);
  EXPECT_EQ(source.malloc_calls, 1);
  pool.free(again);
}

TEST(BlockPool, CoalescesNeighboursOnFreeInAnyOrder) {
  FakeSource source;
  BlockPool pool(source);
  Block* a = pool.allocate(512, kStreamA);
  Block* b = pool.allocate(512, kStreamA);
  Block* c = pool.allocate(512, kStreamA);
  void* base = a->ptr;
  // a, b, c and the remainder of the segment: 4 blocks, one free.
  EXPECT_EQ(pool.free_block_count(), 1u);
  pool.free(a);  // no free neighbour on the left, b allocated on the right
  EXPECT_EQ(pool.free_block_count(), 2u);
  pool.free(c);  // merges with the remainder
  EXPECT_EQ(pool.free_block_count(), 2u);
  pool.free(b);  // merges with both sides: the whole segment is one free block again
  EXPECT_EQ(pool.free_block_count(), 1u);
  // Proof: a 1 MiB request fits at the segment's base only if everything merged.
  Block* big = pool.allocate(kMiB, kStreamA);
  EXPECT_EQ(big->ptr, base);
  EXPECT_EQ(source.malloc_calls, 1);
  pool.free(big);
  pool.empty_cache();  // only an entirely free (fully coalesced) segment can be released
  EXPECT_EQ(source.free_calls, 1);
  EXPECT_EQ(pool.reserved_bytes(), 0u);
}

TEST(BlockPool, SplitsLargeBlocksOnlyWhenTheRemainderIsWorthKeeping) {
  FakeSource source;
  BlockPool pool(source);
  Block* big = pool.allocate(64 * kMiB, kStreamA);
  void* base = big->ptr;
  pool.free(big);
  // 10 MiB out of the cached 64 MiB block: split, the 54 MiB rest stays free and serves the next request.
  Block* first = pool.allocate(10 * kMiB, kStreamA);
  Block* second = pool.allocate(20 * kMiB, kStreamA);
  EXPECT_EQ(first->ptr, base);
  EXPECT_EQ(first->size, 10 * kMiB);
  EXPECT_EQ(at(second->ptr), at(base) + 10 * kMiB);
  EXPECT_EQ(source.malloc_calls, 1);
  pool.free(first);
  pool.free(second);

  // A large block with less than 1 MiB to spare is handed out whole.
  BlockPool pool2(source);
  Block* whole = pool2.allocate(4 * kMiB, kStreamA);
  pool2.free(whole);
  Block* almost = pool2.allocate(4 * kMiB - 512 * kKiB, kStreamA);
  EXPECT_EQ(almost->size, 4 * kMiB);
  EXPECT_EQ(pool2.free_block_count(), 0u);
  pool2.free(almost);
}

TEST(BlockPool, SmallAndLargeRequestsUseSeparatePools) {
  FakeSource source;
  BlockPool pool(source);
  Block* large = pool.allocate(8 * kMiB, kStreamA);
  pool.free(large);
  Block* small = pool.allocate(512, kStreamA);  // must not shred the cached large block
  EXPECT_EQ(source.malloc_calls, 2);
  EXPECT_EQ(pool.reserved_bytes(), 8 * kMiB + 2 * kMiB);
  pool.free(small);
}

TEST(BlockPool, BlocksAreReusedOnlyOnTheirOwnStream) {
  FakeSource source;
  BlockPool pool(source);
  Block* a = pool.allocate(4 * kMiB, kStreamA);
  void* a_ptr = a->ptr;
  pool.free(a);
  Block* b = pool.allocate(4 * kMiB, kStreamB);
  EXPECT_NE(b->ptr, a_ptr) << "a block cached for stream A was handed to stream B";
  EXPECT_EQ(b->stream, kStreamB);
  EXPECT_EQ(source.malloc_calls, 2);
  Block* a2 = pool.allocate(4 * kMiB, kStreamA);
  EXPECT_EQ(a2->ptr, a_ptr);
  pool.free(b);
  pool.free(a2);
  // Small blocks too.
  Block* s = pool.allocate(512, kStreamB);
  Block* t = pool.allocate(512, kStreamC);
  EXPECT_NE(s->stream, t->stream);
  EXPECT_EQ(source.malloc_calls, 4);  // one small segment per stream
  pool.free(s);
  pool.free(t);
}

TEST(BlockPool, RecordStreamDefersReuseUntilEveryEventCompletes) {
  FakeSource source;
  BlockPool pool(source);
  Block* a = pool.allocate(4 * kMiB, kStreamA);
  void* a_ptr = a->ptr;
  pool.record_stream(a, kStreamA);  // its own stream: nothing to wait for
  pool.record_stream(a, kStreamB);
  pool.record_stream(a, kStreamB);  // recorded once per stream
  pool.record_stream(a, kStreamC);
  pool.free(a);
  EXPECT_EQ(source.events_recorded(), 2u);
  EXPECT_EQ(pool.pending_event_count(), 2u);
  EXPECT_EQ(pool.allocated_bytes(), 4 * kMiB);  // still held while B and C may use it

  Block* while_pending = pool.allocate(4 * kMiB, kStreamA);
  EXPECT_NE(while_pending->ptr, a_ptr);
  pool.free(while_pending);

  source.finish_stream(kStreamB);
  Block* after_b = pool.allocate(4 * kMiB, kStreamA);  // C is still running
  EXPECT_NE(after_b->ptr, a_ptr);
  EXPECT_EQ(pool.pending_event_count(), 1u);
  pool.free(after_b);

  source.finish_stream(kStreamC);
  pool.process_events();
  EXPECT_EQ(pool.pending_event_count(), 0u);
  EXPECT_EQ(source.events_released(), 2u);
  EXPECT_EQ(pool.allocated_bytes(), 0u);
  // Both cached 4 MiB blocks of stream A are free now; best fit takes the lowest address, which is a's.
  Block* reused = pool.allocate(4 * kMiB, kStreamA);
  EXPECT_EQ(reused->ptr, a_ptr);
  pool.free(reused);
}

TEST(BlockPool, RecordStreamIsForgottenWhenTheBlockIsReused) {
  FakeSource source;
  BlockPool pool(source);
  Block* a = pool.allocate(512, kStreamA);
  pool.record_stream(a, kStreamB);
  pool.free(a);
  source.finish_stream(kStreamB);
  Block* again = pool.allocate(512, kStreamA);
  pool.free(again);  // the new owner never used stream B: no event this time
  EXPECT_EQ(source.events_recorded(), 1u);
}

TEST(BlockPool, PendingBlocksDoNotCoalesceUntilReleased) {
  FakeSource source;
  BlockPool pool(source);
  Block* a = pool.allocate(512, kStreamA);
  Block* b = pool.allocate(512, kStreamA);
  void* base = a->ptr;
  pool.record_stream(b, kStreamB);
  pool.free(b);  // pending
  pool.free(a);  // free, but its right neighbour is pending
  Block* c = pool.allocate(1024, kStreamA);
  EXPECT_NE(c->ptr, base) << "a 1 KiB block spanning the pending block was handed out";
  pool.free(c);
  source.finish_stream(kStreamB);
  pool.process_events();
  Block* d = pool.allocate(kMiB, kStreamA);  // everything merged back into one block at the base
  EXPECT_EQ(d->ptr, base);
  pool.free(d);
}

TEST(BlockPool, EmptyCacheReleasesOnlyEntirelyFreeSegments) {
  FakeSource source;
  BlockPool pool(source);
  Block* kept = pool.allocate(512, kStreamA);  // pins its small segment
  Block* gone = pool.allocate(6 * kMiB, kStreamA);
  Block* pending = pool.allocate(8 * kMiB, kStreamA);
  pool.record_stream(pending, kStreamB);
  pool.free(gone);
  pool.free(pending);
  EXPECT_EQ(pool.reserved_bytes(), 2 * kMiB + 6 * kMiB + 8 * kMiB);
  pool.empty_cache();
  EXPECT_EQ(pool.reserved_bytes(), 2 * kMiB + 8 * kMiB);  // the pending segment waits for stream B
  source.finish_stream(kStreamB);
  pool.empty_cache();
  EXPECT_EQ(pool.reserved_bytes(), 2 * kMiB);
  EXPECT_EQ(pool.segment_count(), 1u);
  pool.free(kept);
  pool.empty_cache();
  EXPECT_EQ(pool.reserved_bytes(), 0u);
  EXPECT_EQ(source.live_segments(), 0u);
}

TEST(BlockPool, OutOfMemoryReleasesTheCacheAndRetriesOnce) {
  FakeSource source(16 * kMiB);
  BlockPool pool(source);
  // Cache 12 MiB on stream B, then ask for 10 MiB on stream A: only fits after B's cache is released.
  Block* b = pool.allocate(12 * kMiB, kStreamB);
  pool.free(b);
  Block* a = pool.allocate(10 * kMiB, kStreamA);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(source.free_calls, 1);
  EXPECT_EQ(pool.reserved_bytes(), 10 * kMiB);

  // Beyond capacity even with an empty cache: nullptr, and the pool still works afterwards.
  EXPECT_EQ(pool.allocate(100 * kMiB, kStreamA), nullptr);
  EXPECT_EQ(pool.allocate(BlockPool::kMaxRequest + 1, kStreamA), nullptr);
  Block* small = pool.allocate(512, kStreamA);
  ASSERT_NE(small, nullptr);
  EXPECT_EQ(pool.allocated_bytes(), 10 * kMiB + 512);
  pool.free(small);
  pool.free(a);
}

TEST(BlockPool, OutOfMemoryProcessesCompletedEventsFirst) {
  FakeSource source(8 * kMiB);
  BlockPool pool(source);
  Block* a = pool.allocate(8 * kMiB, kStreamA);
  void* a_ptr = a->ptr;
  pool.record_stream(a, kStreamB);
  pool.free(a);
  EXPECT_EQ(pool.allocate(8 * kMiB, kStreamA), nullptr);  // B still uses it: nothing to free
  source.finish_stream(kStreamB);
  Block* again = pool.allocate(8 * kMiB, kStreamA);
  ASSERT_NE(again, nullptr);
  EXPECT_EQ(again->ptr, a_ptr);
  pool.free(again);
}

TEST(BlockPool, DestructorReturnsEverySegment) {
  FakeSource source;
  {
    BlockPool pool(source);
    pool.allocate(512, kStreamA);  // even blocks still allocated
    Block* b = pool.allocate(4 * kMiB, kStreamB);
    pool.record_stream(b, kStreamA);
    pool.free(b);  // and pending ones
  }
  EXPECT_EQ(source.live_segments(), 0u);
  EXPECT_EQ(source.used(), 0u);
  EXPECT_EQ(source.events_released(), source.events_recorded());
}

}  // namespace
}  // namespace brigade::detail
