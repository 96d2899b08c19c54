// Shared building blocks of brigade's hand-written CUDA kernels (kernels/cuda/*.cu). Device code only
// for the CUDA translation units; nothing here is part of the public API.
//
//  - stream_for(t): makes t's device current and returns its current stream (every launch goes there).
//  - grid_for(n, threads): blocks for a grid-stride loop over n items, capped (kernels loop over the rest).
//  - row_threads(C): block size for the one-block-per-row kernels (a multiple of 32, at most 1024).
//  - acc_t<T>: the type a kernel computes in (float for float32/bfloat16, double for float64).
//  - math::infinity / quiet_nan in the compute type. The C math functions by type (formulas::exp_of,
//    log_of, sqrt_of, ..., is_nan) are kernels/elementwise_formulas.h's, shared with the CPU backend.
//  - StridedView<T>: element i (row-major) of a strided tensor, with a fast path for contiguous tensors.
//  - warp_reduce / block_reduce: butterfly shuffles within a warp, then one partial per warp in shared
//    memory. The order of combination depends only on blockDim, so results are deterministic run to run.
//    block_reduce must be called by every thread of the block (it synchronises) with blockDim.x a multiple
//    of 32; it returns the block's result to every thread and may be called repeatedly in one kernel.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "kernels/elementwise_formulas.h"
#include "tensor/bfloat16.h"
#include "tensor/cuda/cuda_check.h"
#include "tensor/strided_index.h"
#include "tensor/tensor.h"

namespace brigade::kernels::cuda {

// ---- launch shapes --------------------------------------------------------------------------------------

constexpr int kWarpSize = 32;
constexpr unsigned kFullWarpMask = 0xffffffffu;
/// Threads per block for elementwise (one thread per element) kernels.
constexpr int kElementwiseThreads = 256;
/// Cap on grid size for grid-stride kernels: 132 SMs x 2048 threads is ~270k resident threads on an H200,
/// so 16384 blocks of 256 keep every SM busy; larger tensors loop.
constexpr int64_t kMaxGridBlocks = 16384;
/// Largest block of the one-block-per-row kernels; they are declared __launch_bounds__(kMaxRowThreads) so
/// that the compiler keeps them within 64 registers per thread (a 1024-thread launch can never fail for
/// lack of registers, even in a device-debug build).
constexpr int kMaxRowThreads = 1024;
/// Cap on blocks for one-block-per-row kernels (rows beyond it are handled by a grid-stride loop).
constexpr int64_t kMaxRowBlocks = 65535;

/// Blocks for a grid-stride loop over `n` items with `threads` per block (n > 0).
inline unsigned grid_for(int64_t n, int threads) {
  int64_t blocks = (n + threads - 1) / threads;
  return static_cast<unsigned>(std::clamp<int64_t>(blocks, 1, kMaxGridBlocks));
}

/// Blocks for a one-block-per-row kernel over `rows` rows (rows > 0).
inline unsigned row_blocks(int64_t rows) {
  return static_cast<unsigned>(std::clamp<int64_t>(rows, 1, kMaxRowBlocks));
}

/// Threads for a one-block-per-row kernel with rows of `cols` elements: enough to give each thread a few
/// elements, a multiple of the warp size (block_reduce needs whole warps), at most kMaxRowThreads.
inline int row_threads(int64_t cols) {
  int64_t threads = (cols + kWarpSize - 1) / kWarpSize * kWarpSize;
  return static_cast<int>(std::clamp<int64_t>(threads, kWarpSize, kMaxRowThreads));
}

/// t's data as T, or nullptr for an undefined t (the optional operands: weight, bias, dweight, ...).
template <typename T>
T* data_or_null(const Tensor& t) {
  return t.defined() ? t.data<T>() : nullptr;
}

/// Makes `t`'s device current for this thread and returns that device's current stream.
inline cudaStream_t stream_for(const Tensor& t) {
  BRIGADE_CHECK_DEVICE(t.device().is_cuda(), "CUDA kernel called with a tensor on ", t.device().str());
  int index = t.device().index;
  cuda_detail::set_device(index);
  return cuda_detail::current_stream(index);
}

// ---- compute types and math ---------------------------------------------------------------------------

template <typename T>
struct AccumulateType {
  using type = float;  // float32 and bfloat16
};
template <>
struct AccumulateType<double> {
  using type = double;
};
template <typename T>
using acc_t = typename AccumulateType<T>::type;

/// The DType of acc_t<T> (for scratch buffers).
template <typename T>
constexpr DType acc_dtype() {
  return std::is_same_v<T, double> ? kFloat64 : kFloat32;
}

namespace math {
template <typename A>
__device__ inline A infinity() {
  return static_cast<A>(INFINITY);
}
template <typename A>
__device__ inline A quiet_nan() {
  return static_cast<A>(NAN);
}
}  // namespace math

// ---- strided element access ----------------------------------------------------------------------------

/// Element i (row-major order) of a tensor of any strides. T may be const-qualified for inputs.
template <typename T>
struct StridedView {
  T* data;  // address of element [0, 0, ...]
  StridedIndex index;
  bool contiguous;

  __device__ T& operator[](int64_t i) const { return data[contiguous ? i : index.offset(i)]; }
};

/// The view of `t` as T (T's dtype must match t's; checked by Tensor::data).
template <typename T>
StridedView<T> make_view(const Tensor& t, const char* op) {
  using Plain = std::remove_const_t<T>;
  return StridedView<T>{t.data<Plain>(), make_strided_index(t, op), t.is_contiguous()};
}

// ---- warp and block reductions ------------------------------------------------------------------------

__device__ inline float shfl_xor(float v, int lane_mask) {
  return __shfl_xor_sync(kFullWarpMask, v, lane_mask);
}
__device__ inline double shfl_xor(double v, int lane_mask) {
  return __shfl_xor_sync(kFullWarpMask, v, lane_mask);
}
__device__ inline long long shfl_xor(long long v, int lane_mask) {
  return __shfl_xor_sync(kFullWarpMask, v, lane_mask);
}

struct SumOp {
  template <typename A>
  __device__ A operator()(A a, A b) const {
    return a + b;
  }
};
struct MinOp {
  template <typename A>
  __device__ A operator()(A a, A b) const {
    return b < a ? b : a;
  }
};
/// A NaN b is dropped (a NaN a is kept): a kernel that must propagate NaN carries it another way (the
/// softmax's sum of exp does).
struct MaxOp {
  template <typename A>
  __device__ A operator()(A a, A b) const {
    return b > a ? b : a;
  }
};

/// Combines the values of the 32 lanes of a warp; every lane receives the result.
template <typename V, typename Combine>
__device__ V warp_reduce(V v, Combine combine) {
  for (int lane_mask = kWarpSize / 2; lane_mask > 0; lane_mask /= 2) {
    v = combine(v, shfl_xor(v, lane_mask));
  }
  return v;
}

/// Combines one value per thread over the block; every thread receives the result. `identity` is the
/// neutral element (used for the missing warps). V must be trivially constructible (shared memory).
template <typename V, typename Combine>
__device__ V block_reduce(V v, Combine combine, V identity) {
  __shared__ V warp_partials[32];
  __shared__ V result;
  const int lane = threadIdx.x % kWarpSize;
  const int warp = threadIdx.x / kWarpSize;
  const int num_warps = blockDim.x / kWarpSize;
  v = warp_reduce(v, combine);
  __syncthreads();  // an earlier call's readers of warp_partials/result are done
  if (lane == 0) warp_partials[warp] = v;
  __syncthreads();
  if (warp == 0) {
    V partial = lane < num_warps ? warp_partials[lane] : identity;
    partial = warp_reduce(partial, combine);
    if (lane == 0) result = partial;
  }
  __syncthreads();
  return result;
}

template <typename A>
__device__ A block_sum(A v) {
  return block_reduce(v, SumOp{}, A(0));
}

// ---- online softmax statistics ------------------------------------------------------------------------

/// Running (max, sum of exp(x - max)) of a set of values, merged without a second pass over the data
/// (Milakov & Gimelshein, "Online normalizer calculation for softmax", 2018).
/// Empty set: max = -inf, sum = 0. Values equal to -inf contribute exp(-inf) = 0 and are skipped, which
/// also avoids computing -inf - (-inf). A NaN makes the sum NaN (propagated to every output, like torch).
template <typename A>
struct MaxSum {
  A max;
  A sum;
};

template <typename A>
__device__ MaxSum<A> max_sum_empty() {
  return {-math::infinity<A>(), A(0)};
}

/// Adds one value to the running statistics.
template <typename A>
__device__ MaxSum<A> max_sum_add(MaxSum<A> s, A x) {
  if (x > s.max) {
    s.sum = s.sum * formulas::exp_of(s.max - x) + A(1);
    s.max = x;
  } else if (x != -math::infinity<A>()) {
    s.sum += formulas::exp_of(x - s.max);  // also NaN x: makes the sum NaN
  }
  return s;
}

struct MaxSumMerge {
  template <typename A>
  __device__ MaxSum<A> operator()(MaxSum<A> a, MaxSum<A> b) const {
    if (b.max > a.max) {
      MaxSum<A> t = a;
      a = b;
      b = t;
    }
    if (b.sum == A(0)) return a;  // b is empty (b.sum NaN fails the test and propagates below)
    a.sum += b.sum * formulas::exp_of(b.max - a.max);
    return a;
  }
};

template <typename A>
__device__ MaxSum<A> shfl_xor(MaxSum<A> v, int lane_mask) {
  return {shfl_xor(v.max, lane_mask), shfl_xor(v.sum, lane_mask)};
}

/// The block's MaxSum of one row of C values loaded by load(j).
template <typename A, typename Load>
__device__ MaxSum<A> block_max_sum(int64_t C, Load load) {
  MaxSum<A> s = max_sum_empty<A>();
  for (int64_t j = threadIdx.x; j < C; j += blockDim.x) s = max_sum_add(s, load(j));
  return block_reduce(s, MaxSumMerge{}, max_sum_empty<A>());
}

}  // namespace brigade::kernels::cuda
