// Row reductions on CUDA: out[r] = sum / max / argmax of x[r, :] for x [R, C] contiguous; and column sums
// (sum_columns, below), the sum over the leading dims without a transposed copy.
//
// Launch shape: one block per row (grid-stride over rows beyond 65535 blocks), row_threads(C) threads
// (a multiple of 32, at most 1024). Each thread folds the columns j = tid, tid + blockDim, ... (coalesced
// across the warp), then block_reduce combines: warp shuffles, one partial per warp in shared memory.
// The combination order depends only on blockDim, so results are deterministic run to run.
//
// Semantics (matching the CPU reference and torch): sums accumulate in double (as the CPU's); max
// propagates NaN; argmax returns the index of the first maximum, and a NaN counts
// as larger than every number (so the first NaN wins, as in torch.argmax).
//
// Napkin math (H200, ~4.3 TB/s): reads R*C elements once, writes R. R*C = 64M float32 = 256 MiB -> ~60 us.
// For small C (< 32) most lanes idle; those shapes are small in absolute terms.
#include <algorithm>

#include "kernels/backend.h"
#include "kernels/cuda/launch.cuh"

namespace brigade::kernels::cuda {
namespace {

/// A candidate for max/argmax: value and column. index < 0 marks "no element yet".
template <typename A>
struct ValueIndex {
  A value;
  long long index;
};

template <typename A>
__device__ ValueIndex<A> shfl_xor(ValueIndex<A> v, int lane_mask) {
  return {cuda::shfl_xor(v.value, lane_mask), cuda::shfl_xor(v.index, lane_mask)};
}

/// Picks the larger value; NaN beats numbers; ties (and two NaNs) go to the smaller index. Commutative,
/// so the butterfly gives every lane the same answer.
struct ArgMaxCombine {
  template <typename A>
  __device__ ValueIndex<A> operator()(ValueIndex<A> a, ValueIndex<A> b) const {
    if (a.index < 0) return b;
    if (b.index < 0) return a;
    bool a_nan = formulas::is_nan(a.value), b_nan = formulas::is_nan(b.value);
    if (a_nan != b_nan) return a_nan ? a : b;
    if (!a_nan && a.value != b.value) return a.value > b.value ? a : b;
    return a.index < b.index ? a : b;
  }
};

/// Sums in double whatever T is: free for a memory-bound kernel, and it keeps long float32 rows (C ~ 1e6)
/// as accurate as the CPU reference, which also sums in double.
template <typename T>
__global__ void __launch_bounds__(kMaxRowThreads)
    sum_rows_kernel(const T* __restrict__ x, T* __restrict__ out, int64_t R, int64_t C) {
  for (int64_t row = blockIdx.x; row < R; row += gridDim.x) {
    const T* xr = x + row * C;
    double partial = 0.0;
    for (int64_t j = threadIdx.x; j < C; j += blockDim.x)
      partial += static_cast<double>(static_cast<acc_t<T>>(xr[j]));
    double total = block_sum(partial);
    if (threadIdx.x == 0) out[row] = static_cast<T>(total);
  }
}

/// Max (want_index false: writes T into out_value) or argmax (writes int64 into out_index) of each row.
template <typename T>
__global__ void __launch_bounds__(kMaxRowThreads)
    max_rows_kernel(const T* __restrict__ x, T* __restrict__ out_value, int64_t* __restrict__ out_index,
                    int64_t R, int64_t C) {
  using A = acc_t<T>;
  const ValueIndex<A> none{A(0), -1};
  for (int64_t row = blockIdx.x; row < R; row += gridDim.x) {
    const T* xr = x + row * C;
    ValueIndex<A> best = none;
    // Columns increase along a thread's sweep, so a thread keeps its first maximum by only replacing on
    // strictly better values (ArgMaxCombine breaks ties by index).
    for (int64_t j = threadIdx.x; j < C; j += blockDim.x) {
      best = ArgMaxCombine{}(best, ValueIndex<A>{static_cast<A>(xr[j]), static_cast<long long>(j)});
    }
    best = block_reduce(best, ArgMaxCombine{}, none);
    if (threadIdx.x == 0) {
      if (out_value != nullptr) out_value[row] = static_cast<T>(best.value);
      if (out_index != nullptr) out_index[row] = best.index;
    }
  }
}

// ---- column sums: out[c] = sum over r of x[r, c], x [R, C] contiguous (a bias gradient) ------------------
//
// Summing over the leading dims needs no transposed copy: a warp reads 32 neighbouring columns of one row
// (coalesced), and a column's rows are spread over many blocks. Two passes, no atomics:
//   1. sum_columns_slab_kernel, grid (ceil(C / 32), S), block (32, 16): block (i, s) sums columns
//      [32 i, 32 i + 32) over slab s of the rows; thread (x, y) takes column 32 i + x and every 16th row of
//      the slab, in four independent double accumulators (four loads in flight), then the 16 y-partials are
//      added in shared memory in order. Writes partials[s, c] (double).
//   2. sum_columns_partials_kernel: one thread per column adds its S partials in order and casts to T.
// S depends on the shape alone (about 1024 blocks, at least 64 rows a slab), so the result is the same on
// every run and every GPU. Sums in double as the row sums do.
// Napkin math (H200, ~4.2 TB/s measured copy): reads R*C elements once; the partials are S*C doubles (at
// GPT-2's fc bias gradient, R 8192, C 3072: 100 MB of float32 and 0.3 MB of partials) -> ~25 us. The general
// path it replaces (a transposed contiguous copy, then row sums) measured 252 us there.
constexpr int kColumnTile = 32, kRowLanes = 16;
constexpr int64_t kTargetBlocks = 1024, kMinSlabRows = 64;

template <typename T>
__global__ void __launch_bounds__(kColumnTile* kRowLanes)
    sum_columns_slab_kernel(const T* __restrict__ x, double* __restrict__ partials, int64_t R, int64_t C,
                            int64_t slab_rows) {
  __shared__ double lane_sums[kRowLanes][kColumnTile];
  const int64_t c = static_cast<int64_t>(blockIdx.x) * kColumnTile + threadIdx.x;
  const int64_t first = static_cast<int64_t>(blockIdx.y) * slab_rows;
  const int64_t end = first + slab_rows < R ? first + slab_rows : R;
  double acc[4] = {0.0, 0.0, 0.0, 0.0};
  if (c < C) {
    int64_t r = first + threadIdx.y;
    for (; r + 3 * kRowLanes < end; r += 4 * kRowLanes) {
#pragma unroll
      for (int u = 0; u < 4; ++u)
        acc[u] += static_cast<double>(static_cast<acc_t<T>>(x[(r + u * kRowLanes) * C + c]));
    }
    for (; r < end; r += kRowLanes) acc[0] += static_cast<double>(static_cast<acc_t<T>>(x[r * C + c]));
  }
  lane_sums[threadIdx.y][threadIdx.x] = (acc[0] + acc[1]) + (acc[2] + acc[3]);
  __syncthreads();
  if (threadIdx.y == 0 && c < C) {
    double total = 0.0;
    for (int y = 0; y < kRowLanes; ++y) total += lane_sums[y][threadIdx.x];
    partials[static_cast<int64_t>(blockIdx.y) * C + c] = total;
  }
}

template <typename T>
__global__ void sum_columns_partials_kernel(const double* __restrict__ partials, T* __restrict__ out,
                                            int64_t C, int64_t slabs) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; c < C; c += stride) {
    double total = 0.0;
    for (int64_t s = 0; s < slabs; ++s) total += partials[s * C + c];
    out[c] = static_cast<T>(total);
  }
}

}  // namespace

void sum_columns(const Tensor& x, const Tensor& out) {
  const int64_t R = x.size(0), C = x.size(1);
  if (C == 0) return;
  cudaStream_t stream = stream_for(x);
  const int64_t tiles = (C + kColumnTile - 1) / kColumnTile;
  const int64_t max_slabs = std::max<int64_t>(1, (R + kMinSlabRows - 1) / kMinSlabRows);
  const int64_t slabs = std::min(max_slabs, std::max<int64_t>(1, (kTargetBlocks + tiles - 1) / tiles));
  const int64_t slab_rows = std::max<int64_t>(1, (R + slabs - 1) / slabs);
  Tensor partials = empty({slabs, C}, TensorOptions(kFloat64).device(x.device()));
  BRIGADE_DISPATCH_FLOATING(x.dtype(), "sum_columns", [&] {
    sum_columns_slab_kernel<scalar_t>
        <<<dim3(static_cast<unsigned>(tiles), static_cast<unsigned>(slabs)), dim3(kColumnTile, kRowLanes), 0,
           stream>>>(x.data<scalar_t>(), partials.data<double>(), R, C, slab_rows);
    BRIGADE_CUDA_CHECK_LAUNCH("sum_columns_slab_kernel");
    sum_columns_partials_kernel<scalar_t>
        <<<grid_for(C, kElementwiseThreads), kElementwiseThreads, 0, stream>>>(
            partials.data<double>(), out.data<scalar_t>(), C, slabs);
    BRIGADE_CUDA_CHECK_LAUNCH("sum_columns_partials_kernel");
  });
}

void reduce_rows(ReduceOp op, const Tensor& x, const Tensor& out) {
  const int64_t R = out.numel();
  if (R == 0) return;
  const int64_t C = x.numel() / R;
  BRIGADE_CHECK_SHAPE(x.numel() == R * C, "reduce_rows: x has ", x.numel(), " elements, not a multiple of ",
                      R, " rows");
  BRIGADE_CHECK_VALUE(op == ReduceOp::Sum || C > 0, "reduce_rows: max/argmax of an empty row");
  cudaStream_t stream = stream_for(x);
  const int threads = row_threads(C);
  BRIGADE_DISPATCH_FLOATING(x.dtype(), "reduce_rows", [&] {
    const scalar_t* xd = x.data<scalar_t>();
    switch (op) {
      case ReduceOp::Sum:
        sum_rows_kernel<scalar_t><<<row_blocks(R), threads, 0, stream>>>(xd, out.data<scalar_t>(), R, C);
        BRIGADE_CUDA_CHECK_LAUNCH("sum_rows_kernel");
        break;
      case ReduceOp::Max:
        max_rows_kernel<scalar_t>
            <<<row_blocks(R), threads, 0, stream>>>(xd, out.data<scalar_t>(), nullptr, R, C);
        BRIGADE_CUDA_CHECK_LAUNCH("max_rows_kernel");
        break;
      case ReduceOp::ArgMax:
        max_rows_kernel<scalar_t>
            <<<row_blocks(R), threads, 0, stream>>>(xd, nullptr, out.data<int64_t>(), R, C);
        BRIGADE_CUDA_CHECK_LAUNCH("max_rows_kernel (argmax)");
        break;
    }
  });
}

}  // namespace brigade::kernels::cuda
