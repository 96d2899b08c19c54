// Host emulation of the CUDA pieces brigade's kernels use (for checking index math on a CPU; not a product).
#pragma once
#include <sys/mman.h>
#include <ucontext.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <vector>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static
#define __align__(n) __attribute__((aligned(n)))

struct dim3 {
  unsigned x = 1, y = 1, z = 1;
  dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {}
};
struct alignas(16) float4 {
  float x, y, z, w;
};
struct alignas(16) uint4 {
  unsigned x, y, z, w;
};
inline float4 make_float4(float a, float b, float c, float d) {
  return float4{a, b, c, d};
}

typedef void* cudaStream_t;
enum cudaError_t { cudaSuccess = 0, cudaErrorMemoryAllocation = 2 };
inline cudaError_t cudaGetLastError() {
  return cudaSuccess;
}
inline const char* cudaGetErrorString(cudaError_t) {
  return "emu";
}
inline const char* cudaGetErrorName(cudaError_t) {
  return "emu";
}
// The emulated device is an H200: 132 SMs, 227 KB opt-in shared memory, compute capability 9.0.
enum cudaDeviceAttr {
  cudaDevAttrMultiProcessorCount,
  cudaDevAttrMaxSharedMemoryPerBlockOptin,
  cudaDevAttrComputeCapabilityMajor,
  cudaDevAttrComputeCapabilityMinor
};
inline cudaError_t cudaDeviceGetAttribute(int* v, cudaDeviceAttr a, int) {
  switch (a) {
    case cudaDevAttrMultiProcessorCount:
      *v = 132;
      break;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin:
      *v = 232448;
      break;
    case cudaDevAttrComputeCapabilityMajor:
      *v = 9;
      break;
    case cudaDevAttrComputeCapabilityMinor:
      *v = 0;
      break;
  }
  return cudaSuccess;
}
inline cudaError_t cudaGetDevice(int* device) {
  *device = 0;
  return cudaSuccess;
}
enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize };
template <typename F>
cudaError_t cudaFuncSetAttribute(F, cudaFuncAttribute, int) {
  return cudaSuccess;
}
// Static shared memory is not measured here (emulated __shared__ is a host static): report none.
struct cudaFuncAttributes {
  size_t sharedSizeBytes = 0;
};
template <typename F>
cudaError_t cudaFuncGetAttributes(cudaFuncAttributes* attributes, F) {
  *attributes = cudaFuncAttributes{};
  return cudaSuccess;
}

namespace emu {
// Every CUDA thread of a block is a fiber (a ucontext with its own stack) on the launching host thread, run
// by a round-robin scheduler: a fiber runs until it waits at a barrier (__syncthreads, __syncwarp, a
// shuffle) or ends, then the next one runs. Switching fibers is a user-space context switch, where one
// std::thread per CUDA thread paid the kernel's scheduler at every barrier (most of the emulation's time).
// The order is fixed (thread 0, 1, ... between two barriers), so a run is reproducible; a read of another
// thread's write without a barrier in between sees the old value whenever the reader runs first.

/// A barrier among `expected` fibers: the last to arrive starts the next generation and runs on.
struct Barrier {
  int expected = 0, arrived = 0;
  unsigned long generation = 0;
};

struct Fiber {
  ucontext_t context;
  char* stack = nullptr;
  bool done = false;
  unsigned shfl_parity = 0;          // which slot set the thread's next __shfl_sync uses
  const Barrier* waits_at = nullptr;  // for the deadlock message
};

struct Ctx {
  dim3 grid, block;
  Barrier block_barrier;
  std::vector<Barrier> warp_barriers;
  std::vector<uint64_t> slots;  // one per thread, for shuffles
  std::vector<uint64_t> parity_slots[2];  // two sets of one per thread, for __shfl_sync
  std::vector<unsigned char> dyn_shared;
  std::vector<Fiber> fibers;
  ucontext_t scheduler;
  int current = 0;        // the fiber that runs
  bool progress = false;  // whether a fiber arrived at a barrier, passed one or ended in this round
  std::function<void()> body;  // the kernel call, run by every fiber
};
inline Ctx*& ctx() {
  static Ctx* c = nullptr;
  return c;
}
// The running fiber's CUDA coordinates (the scheduler sets them before it switches to a fiber).
inline thread_local dim3 t_thread, t_block;
inline thread_local int t_linear = 0;
inline thread_local unsigned t_shfl_parity = 0;

/// Back to the scheduler, which runs the other fibers and comes back in the next round.
inline void yield() {
  Ctx* c = ctx();
  swapcontext(&c->fibers[static_cast<size_t>(c->current)].context, &c->scheduler);
}
inline void arrive_and_wait(Barrier& b) {
  const unsigned long generation = b.generation;
  ctx()->progress = true;
  if (++b.arrived == b.expected) {
    b.arrived = 0;
    ++b.generation;
    return;
  }
  Ctx* c = ctx();
  c->fibers[static_cast<size_t>(c->current)].waits_at = &b;
  while (b.generation == generation) yield();
  c->fibers[static_cast<size_t>(c->current)].waits_at = nullptr;
}
}  // namespace emu

#define threadIdx (::emu::t_thread)
#define blockIdx (::emu::t_block)
#define blockDim (::emu::ctx()->block)
#define gridDim (::emu::ctx()->grid)

inline void __syncthreads() {
  ::emu::arrive_and_wait(::emu::ctx()->block_barrier);
}
inline void __syncwarp(unsigned = 0xffffffffu) {
  ::emu::arrive_and_wait(::emu::ctx()->warp_barriers[::emu::t_linear / 32]);
}
template <typename T>
T __shfl_xor_sync(unsigned, T v, int mask) {
  auto* c = ::emu::ctx();
  const int me = ::emu::t_linear, warp = me / 32, lane = me % 32;
  uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof(T));
  c->slots[me] = bits;
  ::emu::arrive_and_wait(c->warp_barriers[warp]);
  T out;
  uint64_t other = c->slots[warp * 32 + (lane ^ mask)];
  std::memcpy(&out, &other, sizeof(T));
  ::emu::arrive_and_wait(c->warp_barriers[warp]);
  return out;
}
// __shfl_sync(mask, v, src_lane): lane reads v of lane src_lane (full warps only, as brigade calls it). One
// barrier per call instead of two: the slots alternate between two sets, and the barrier of the next call
// keeps a fast lane from overwriting a set before every lane has read it.
template <typename T>
T __shfl_sync(unsigned, T v, int src_lane) {
  static_assert(sizeof(T) <= sizeof(uint64_t), "emulated shuffles move at most 8 bytes");
  auto* c = ::emu::ctx();
  const int me = ::emu::t_linear, warp = me / 32;
  ::emu::t_shfl_parity ^= 1u;
  std::vector<uint64_t>& slots = c->parity_slots[::emu::t_shfl_parity];
  uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof(T));
  slots[me] = bits;
  ::emu::arrive_and_wait(c->warp_barriers[warp]);
  T out;
  const uint64_t other = slots[warp * 32 + (src_lane & 31)];
  std::memcpy(&out, &other, sizeof(T));
  return out;
}
inline float __expf(float x) {
  return std::exp(x);
}

namespace emu {
struct Cfg {
  dim3 grid, block;
  size_t shared;
};
inline Cfg cfg(dim3 g, dim3 b, size_t s = 0, cudaStream_t = nullptr) {
  return Cfg{g, b, s};
}
inline void* dynamic_shared() {
  return ctx()->dyn_shared.data();
}
constexpr size_t kFiberStack = size_t{1} << 20;

/// What a fiber runs: the kernel for its thread, then back to the scheduler (uc_link) marked done.
inline void fiber_main() {
  Ctx* c = ctx();
  c->body();
  c->fibers[static_cast<size_t>(c->current)].done = true;
  c->progress = true;
}

/// The stack of fiber t: 1 MiB per CUDA thread (the WMMA fragments are held whole, 1 KiB each), reserved,
/// not committed, with 64 KiB of inaccessible pages below each stack (an overflow faults instead of
/// corrupting the neighbouring stack). Kept from launch to launch, grown when a block has more threads, so
/// that a harness of many launches maps, protects and faults in its stacks once.
inline char* fiber_stack(int t, int n) {
  constexpr size_t kSlot = kFiberStack + (size_t{64} << 10);
  static char* region = nullptr;
  static int capacity = 0;
  if (n > capacity) {
    if (region != nullptr) munmap(region, static_cast<size_t>(capacity) * kSlot);
    void* p = mmap(nullptr, static_cast<size_t>(n) * kSlot, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {
      std::fprintf(stderr, "emu: cannot reserve the stacks of %d fibers\n", n);
      std::abort();
    }
    region = static_cast<char*>(p);
    capacity = n;
    for (int i = 0; i < n; ++i) {
      mprotect(region + static_cast<size_t>(i) * kSlot, kSlot - kFiberStack, PROT_NONE);
    }
  }
  return region + static_cast<size_t>(t) * kSlot + (kSlot - kFiberStack);
}

template <typename K, typename... Args>
void launch(Cfg c, K kernel, Args... args) {
  Ctx context;
  context.grid = c.grid;
  context.block = c.block;
  const int n = static_cast<int>(c.block.x * c.block.y * c.block.z);
  context.block_barrier.expected = n;
  for (int w = 0; w < (n + 31) / 32; ++w) context.warp_barriers.push_back(Barrier{std::min(32, n - w * 32)});
  context.slots.assign(n, 0);
  context.parity_slots[0].assign(n, 0);
  context.parity_slots[1].assign(n, 0);
  context.dyn_shared.assign(c.shared + 64, 0xcd);
  context.body = [&] { kernel(args...); };
  context.fibers.resize(static_cast<size_t>(n));
  for (int t = 0; t < n; ++t) context.fibers[static_cast<size_t>(t)].stack = fiber_stack(t, n);
  ctx() = &context;
  for (unsigned bz = 0; bz < c.grid.z; ++bz)
    for (unsigned by = 0; by < c.grid.y; ++by)
      for (unsigned bx = 0; bx < c.grid.x; ++bx) {
        t_block = dim3(bx, by, bz);
        for (Fiber& f : context.fibers) {
          getcontext(&f.context);
          f.context.uc_stack.ss_sp = f.stack;
          f.context.uc_stack.ss_size = kFiberStack;
          f.context.uc_link = &context.scheduler;
          makecontext(&f.context, fiber_main, 0);
          f.done = false;
          f.shfl_parity = 0;
        }
        for (int remaining = n; remaining > 0;) {
          context.progress = false;
          for (int t = 0; t < n; ++t) {
            Fiber& f = context.fibers[static_cast<size_t>(t)];
            if (f.done) continue;
            context.current = t;
            t_linear = t;
            t_thread = dim3(t % c.block.x, (t / c.block.x) % c.block.y, t / (c.block.x * c.block.y));
            t_shfl_parity = f.shfl_parity;
            swapcontext(&context.scheduler, &f.context);
            f.shfl_parity = t_shfl_parity;
            if (f.done) --remaining;
          }
          if (!context.progress) {  // every live thread waits at a barrier that the others never reach
            std::fprintf(stderr, "emu: deadlock in block (%u, %u, %u): %d of %d threads wait at a barrier\n",
                         bx, by, bz, remaining, n);
            for (int t = 0; t < n; ++t) {
              const Barrier* b = context.fibers[static_cast<size_t>(t)].waits_at;
              if (b == nullptr) continue;
              const bool block_wide = b == &context.block_barrier;
              std::fprintf(stderr, "emu:   thread %d waits at %s %ld (%d of %d arrived)\n", t,
                           block_wide ? "__syncthreads" : "the barrier of warp",
                           block_wide ? 0L : static_cast<long>(b - context.warp_barriers.data()), b->arrived,
                           b->expected);
            }
            std::abort();
          }
        }
      }
  ctx() = nullptr;
}
}  // namespace emu
inline unsigned long long __cvta_generic_to_shared(const void*) {
  return 0;
}

// Pointer attributes: every pointer is "device memory of device 0" in the emulation.
enum cudaMemoryType {
  cudaMemoryTypeUnregistered,
  cudaMemoryTypeHost,
  cudaMemoryTypeDevice,
  cudaMemoryTypeManaged
};
struct cudaPointerAttributes {
  cudaMemoryType type;
  int device;
};
inline cudaError_t cudaPointerGetAttributes(cudaPointerAttributes* a, const void*) {
  a->type = cudaMemoryTypeDevice;
  a->device = 0;
  return cudaSuccess;
}

inline cudaError_t cudaMemsetAsync(void* p, int value, size_t bytes, cudaStream_t = nullptr) {
  std::memset(p, value, bytes);
  return cudaSuccess;
}
