// Allocator statistics and memory scopes add up.
#include "tensor/memory.h"

#include <gtest/gtest.h>

#include <thread>

#include "tensor/allocator.h"
#include "tensor/tensor.h"

using namespace brigade;

TEST(Memory, CpuStatsAddUp) {
  const Device cpu = Device::cpu();
  MemoryStats before = memory_stats(cpu);
  {
    Tensor a = empty({1000}, kFloat32);    // 4000 bytes
    Tensor b = empty({10, 10}, kFloat64);  // 800 bytes
    MemoryStats during = memory_stats(cpu);
    EXPECT_EQ(during.in_use_bytes - before.in_use_bytes, 4800);
    EXPECT_EQ(during.allocations - before.allocations, 2);
    EXPECT_EQ(during.total_allocations - before.total_allocations, 2);
    EXPECT_GE(during.peak_bytes, during.in_use_bytes);
    EXPECT_GE(during.reserved_bytes, during.in_use_bytes);
    Tensor view = a.view({10, 100});  // a view allocates nothing
    EXPECT_EQ(memory_stats(cpu).in_use_bytes, during.in_use_bytes);
  }
  MemoryStats after = memory_stats(cpu);
  EXPECT_EQ(after.in_use_bytes, before.in_use_bytes);
  EXPECT_EQ(after.allocations, before.allocations);
  reset_peak_memory(cpu);
  EXPECT_EQ(memory_stats(cpu).peak_bytes, memory_stats(cpu).in_use_bytes);
  { Tensor big = empty({1 << 20}, kFloat32); }
  EXPECT_GE(memory_stats(cpu).peak_bytes - memory_stats(cpu).in_use_bytes, 4 << 20);
}

// CPU blocks of 64 KiB and more are cached on free and reused for the same rounded size (4 KiB, or 2 MiB
// from 32 MiB up); the cached bytes stay reserved until empty_cache. Smaller blocks go back to the system.
// (Builds under a sanitizer cache nothing: the reuse is not checked.)
TEST(Memory, CpuCachesLargeBlocksUntilEmptyCache) {
  const Device cpu = Device::cpu();
  empty_cache(cpu);
  const MemoryStats before = memory_stats(cpu);
  [[maybe_unused]] const void* first = nullptr;  // read only where blocks are cached
  {
    Tensor big = empty({10 << 20}, kFloat32);  // 40 MiB
    first = big.data_ptr();
    EXPECT_EQ(memory_stats(cpu).in_use_bytes - before.in_use_bytes, int64_t{40} << 20);
  }
  const MemoryStats freed = memory_stats(cpu);
  EXPECT_EQ(freed.in_use_bytes, before.in_use_bytes);
  EXPECT_GE(freed.reserved_bytes, freed.in_use_bytes);
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
  EXPECT_EQ(freed.reserved_bytes - before.reserved_bytes, int64_t{40} << 20);  // kept, not returned
  {
    Tensor again = empty({(10 << 20) - 100}, kFloat32);  // the same size rounded to 2 MiB: the same block
    EXPECT_EQ(again.data_ptr(), first);
    Tensor other = empty({12 << 20}, kFloat32);  // 48 MiB: a new block
    EXPECT_NE(other.data_ptr(), first);
  }
  const void* medium = nullptr;
  { medium = empty({1 << 18}, kFloat32).data_ptr(); }  // 1 MiB, freed at once: cached
  const MemoryStats medium_freed = memory_stats(cpu);
  EXPECT_EQ(medium_freed.in_use_bytes, before.in_use_bytes);
  {
    Tensor again = empty({(1 << 18) - 500}, kFloat32);  // the same size rounded to 4 KiB: the same block
    EXPECT_EQ(again.data_ptr(), medium);
  }
  { Tensor small = empty({1000}, kFloat32); }  // 4000 bytes: not cached
  EXPECT_EQ(memory_stats(cpu).reserved_bytes, medium_freed.reserved_bytes);
#endif
  empty_cache(cpu);
  EXPECT_EQ(memory_stats(cpu).reserved_bytes, before.reserved_bytes);
  EXPECT_EQ(memory_stats(cpu).in_use_bytes, before.in_use_bytes);
}

TEST(Memory, ScopesAttributeAllocationsEvenWhenFreedElsewhere) {
  const Device cpu = Device::cpu();
  Tensor kept;
  {
    MemoryScope stage("memory-test-stage0");
    Tensor a = empty({256}, kFloat32);  // 1024 bytes, freed at end of scope block
    kept = empty({128}, kFloat32);      // 512 bytes, outlives the scope
    {
      MemoryScope inner("memory-test-stage1");
      Tensor b = empty({64}, kFloat32);  // 256 bytes to the inner scope
      EXPECT_EQ(scope_memory_stats(cpu, "memory-test-stage1").in_use_bytes, 256);
      EXPECT_EQ(MemoryScope::current_id() != 0, true);
    }
    EXPECT_EQ(scope_memory_stats(cpu, "memory-test-stage0").in_use_bytes, 1536);
  }
  MemoryStats s0 = scope_memory_stats(cpu, "memory-test-stage0");
  EXPECT_EQ(s0.in_use_bytes, 512);
  EXPECT_EQ(s0.peak_bytes, 1536);
  EXPECT_EQ(scope_memory_stats(cpu, "memory-test-stage1").in_use_bytes, 0);
  EXPECT_EQ(scope_memory_stats(cpu, "memory-test-stage1").peak_bytes, 256);
  // freed on another thread: still subtracted from the scope that allocated it
  std::thread([t = std::move(kept)]() mutable { t = Tensor(); }).join();
  EXPECT_EQ(scope_memory_stats(cpu, "memory-test-stage0").in_use_bytes, 0);
  reset_scope_peak(cpu, "memory-test-stage0");
  EXPECT_EQ(scope_memory_stats(cpu, "memory-test-stage0").peak_bytes, 0);
  EXPECT_EQ(scope_memory_stats(cpu, "never-used").peak_bytes, 0);
}

TEST(Memory, ScopesAreThreadLocal) {
  const Device cpu = Device::cpu();
  std::thread t1([] {
    MemoryScope s("memory-test-thread-a");
    Tensor x = empty({1000}, kFloat32);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  });
  std::thread t2([] {
    MemoryScope s("memory-test-thread-b");
    Tensor x = empty({10}, kFloat32);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  });
  t1.join();
  t2.join();
  EXPECT_EQ(scope_memory_stats(cpu, "memory-test-thread-a").peak_bytes, 4000);
  EXPECT_EQ(scope_memory_stats(cpu, "memory-test-thread-b").peak_bytes, 40);
}
