// Host emulation of the CUDA pieces brigade's kernels use (for checking index math on a CPU; not a product).
#pragma once
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <thread>
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
struct Ctx {
  dim3 grid, block;
  std::unique_ptr<std::barrier<>> block_barrier;
  std::vector<std::unique_ptr<std::barrier<>>> warp_barriers;
  std::vector<uint64_t> slots;  // one per thread, for shuffles
  std::vector<uint64_t> parity_slots[2];  // two sets of one per thread, for __shfl_sync
  std::vector<unsigned char> dyn_shared;
};
inline Ctx*& ctx() {
  static Ctx* c = nullptr;
  return c;
}
inline thread_local dim3 t_thread, t_block;
inline thread_local int t_linear = 0;
inline thread_local unsigned t_shfl_parity = 0;  // which slot set this thread's next __shfl_sync uses
}  // namespace emu

#define threadIdx (::emu::t_thread)
#define blockIdx (::emu::t_block)
#define blockDim (::emu::ctx()->block)
#define gridDim (::emu::ctx()->grid)

inline void __syncthreads() {
  ::emu::ctx()->block_barrier->arrive_and_wait();
}
inline void __syncwarp(unsigned = 0xffffffffu) {
  ::emu::ctx()->warp_barriers[::emu::t_linear / 32]->arrive_and_wait();
}
template <typename T>
T __shfl_xor_sync(unsigned, T v, int mask) {
  auto* c = ::emu::ctx();
  const int me = ::emu::t_linear, warp = me / 32, lane = me % 32;
  uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof(T));
  c->slots[me] = bits;
  c->warp_barriers[warp]->arrive_and_wait();
  T out;
  uint64_t other = c->slots[warp * 32 + (lane ^ mask)];
  std::memcpy(&out, &other, sizeof(T));
  c->warp_barriers[warp]->arrive_and_wait();
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
  c->warp_barriers[warp]->arrive_and_wait();
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
template <typename K, typename... Args>
void launch(Cfg c, K kernel, Args... args) {
  Ctx context;
  context.grid = c.grid;
  context.block = c.block;
  const int n = static_cast<int>(c.block.x * c.block.y * c.block.z);
  context.block_barrier = std::make_unique<std::barrier<>>(n);
  for (int w = 0; w < (n + 31) / 32; ++w)
    context.warp_barriers.push_back(std::make_unique<std::barrier<>>(std::min(32, n - w * 32)));
  context.slots.assign(n, 0);
  context.parity_slots[0].assign(n, 0);
  context.parity_slots[1].assign(n, 0);
  context.dyn_shared.assign(c.shared + 64, 0xcd);
  ctx() = &context;
  for (unsigned bz = 0; bz < c.grid.z; ++bz)
    for (unsigned by = 0; by < c.grid.y; ++by)
      for (unsigned bx = 0; bx < c.grid.x; ++bx) {
        std::vector<std::thread> threads;
        for (int t = 0; t < n; ++t) {
          threads.emplace_back([&, t] {
            t_linear = t;
            t_thread = dim3(t % c.block.x, (t / c.block.x) % c.block.y, t / (c.block.x * c.block.y));
            t_block = dim3(bx, by, bz);
            kernel(args...);
          });
        }
        for (auto& th : threads) th.join();
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
