// Wide loads and stores for the v2 memory-bound kernels (elementwise_vec.cu, optim.cu, loss.cu): L values of
// T moved by one 16-, 8-, 4- or 2-byte memory instruction (float4 / 8 x bf16 / 2 x double in 16 bytes).
//
// Why: HBM is read in 32-byte sectors and a warp's 128-bit accesses cover 512 contiguous bytes per
// instruction, a quarter of the load/store instructions of 32-bit ones, so fewer instructions are needed in
// flight to keep the memory system busy (the difference between ~70% and ~90% of copy bandwidth on recent
// GPUs for a streaming kernel).
//
// The address of a wide access must be a multiple of its size. The kernels split a range of n elements into
// a scalar head (the elements before the first aligned one), whole packs, and a scalar tail
// (GridPacks below); operands moved by packs must share the head's alignment (the host checks, and runs the
// scalar v1 kernel otherwise).
#pragma once

#include <cstdint>
#include <cstring>

#include "kernels/cuda/launch.cuh"

namespace brigade::kernels::cuda {

/// The unsigned type of `bytes` bytes, moved by one memory instruction.
template <int bytes>
struct WordOf;
template <>
struct WordOf<16> {
  using type = uint4;
};
template <>
struct WordOf<8> {
  using type = unsigned long long;
};
template <>
struct WordOf<4> {
  using type = unsigned int;
};
template <>
struct WordOf<2> {
  using type = unsigned short;
};

/// L consecutive values of T; sizeof(T) * L is 2, 4, 8 or 16 bytes.
template <typename T, int L>
struct Pack {
  T v[L];
};

/// The number of T in 16 bytes (float 4, bfloat16 8, double 2).
template <typename T>
constexpr int kPack128 = static_cast<int>(16 / sizeof(T));

/// Loads p[0, L) with one instruction; p must be aligned to sizeof(T) * L bytes.
template <int L, typename T>
__device__ __forceinline__ Pack<T, L> load_pack(const T* p) {
  using Word = typename WordOf<static_cast<int>(sizeof(T)) * L>::type;
  const Word bits = *reinterpret_cast<const Word*>(p);
  Pack<T, L> out;
  std::memcpy(&out, &bits, sizeof(Word));
  return out;
}

/// Stores p[0, L) with one instruction; p must be aligned to sizeof(T) * L bytes.
template <int L, typename T>
__device__ __forceinline__ void store_pack(T* p, const Pack<T, L>& pack) {
  using Word = typename WordOf<static_cast<int>(sizeof(T)) * L>::type;
  Word bits;
  std::memcpy(&bits, &pack, sizeof(Word));
  *reinterpret_cast<Word*>(p) = bits;
}

/// Elements of `elem_bytes` bytes before the first address at or after p that is a multiple of
/// `align_bytes` (p itself a multiple of elem_bytes).
__host__ __device__ inline int64_t head_elements(const void* p, int64_t elem_bytes, int64_t align_bytes) {
  const auto address = static_cast<int64_t>(reinterpret_cast<uintptr_t>(p));
  return ((align_bytes - address % align_bytes) % align_bytes) / elem_bytes;
}

/// Whether element `head` of p (elements of elem_bytes bytes) lies on a multiple of align_bytes.
inline bool aligned_at(const void* p, int64_t head, int64_t elem_bytes, int64_t align_bytes) {
  const auto address = static_cast<int64_t>(reinterpret_cast<uintptr_t>(p));
  return (address + head * elem_bytes) % align_bytes == 0;
}

/// How a grid covers n elements with packs of L: elements [0, head) and [tail, n) one per thread (the first
/// threads of the grid; fewer than 2 L of them), packs starting at head, head + L, ... grid-strided.
struct GridPacks {
  int64_t n, head;

  template <int L, typename Scalar, typename Packed>
  __device__ __forceinline__ void run(Scalar scalar, Packed packed) const {
    const int64_t thread = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    const int64_t threads = static_cast<int64_t>(gridDim.x) * blockDim.x;
    const int64_t h = head < n ? head : n;
    const int64_t packs = (n - h) / L;
    const int64_t tail = h + packs * L;
    if (thread < h) scalar(thread);
    if (thread < n - tail) scalar(tail + thread);
    for (int64_t p = thread; p < packs; p += threads) packed(h + p * L);
  }
};

/// Blocks for a GridPacks loop over n elements in packs of L (n > 0).
inline unsigned grid_for_packs(int64_t n, int L, int threads) {
  return grid_for((n + L - 1) / L + 2 * L, threads);
}

}  // namespace brigade::kernels::cuda
