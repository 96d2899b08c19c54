// Row kernels, version 2: one warp per row, the row held in registers (v1, one block per row, is
// kernels/cuda/softmax.cu and layernorm.cu; kernels/cuda/row_kernels.h selects between them).
//
//   softmax      m = max_j x_j, s = sum_j exp(x_j - m), y_j = exp(x_j - m) / s (log: x_j - m - log s)
//   backward     dx_j = y_j (dy_j - sum_k dy_k y_k)   (log: dx_j = dy_j - exp(y_j) sum_k dy_k)
//   layernorm    mean = sum x / C, var = sum (x - mean)^2 / C, rstd = 1 / sqrt(var + eps),
//                y = (x - mean) rstd w + b   (the same two-pass formulas as v1: no cancellation)
//   ln backward  xhat = (x - mean) rstd, g = dy w, dx = rstd (g - mean(g) - xhat mean(g xhat)),
//                dweight = sum_rows dy xhat, dbias = sum_rows dy
// x, y, dy, dx [R, C] contiguous, C <= 1024; float32, bfloat16 (math in float), float64.
//
// Launch shape: blocks of 4 warps, warp w of block b takes rows b*4 + w, then strides by the grid's warps
// (grid_for(R, 4), at most 16384 blocks). Lane l holds elements l, l + 32, ..., l + 32 (N - 1) of its row
// (N = the smallest of 1, 2, 4, 8, 16, 32 with 32 N >= C, a template parameter, so the values stay in
// registers): each load instruction of a warp covers 32 consecutive elements (coalesced) and a lane has N
// independent loads in flight. Reductions are butterfly shuffles (warp_reduce): no shared memory, no
// __syncthreads, and a fixed order, so results are deterministic.
// The layernorm backward runs at most 264 blocks (1056 warps, a count that depends on R only): each warp
// keeps its lanes' columns of sum dy * xhat and sum dy over its rows in registers and writes them as one
// row of a [W, C] partials scratch; layernorm_param_sum_kernel (32 columns x 8 slices per block) then adds
// the W rows in a fixed order. No atomics: bitwise reproducible.
//
// Why (napkin math, H200 ~4.3 TB/s): these ops are pure bandwidth. v1 reads each row 2-3 times (the later
// passes mostly from L1/L2) and spends two or three block-wide barriers per row, which at C = 768-1024
// (layernorm, attention rows) costs more than the row's bytes. v2 moves the minimum: float32 softmax and
// layernorm read 4 B and write 4 B per element (8 B/elt; the backwards read 8 and write 4), so at GPT-2
// small shapes (layernorm R = 8192, C = 768: 6.3M elements, 50 MB) the bound is ~12 us, and the attention
// softmax (R = 8*12*1024, C = 1024: 100M elements, 0.8 GB) ~190 us; the target is >= 85% of the measured
// copy rate. Rows wider than 1024 (the 50257-wide logits) stay on v1. Not yet measured.
#include <cstdint>
#include <vector>

#include "kernels/backend.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/row_kernels.h"

namespace brigade::kernels::cuda {
namespace {

constexpr int kWarpsPerBlock = 4;
constexpr int kThreads = kWarpsPerBlock * kWarpSize;
/// Blocks of the layernorm backward: 2 per SM of an H200 (1056 warps), enough rows in flight for HBM, and
/// few enough partial rows ([2, W, C] floats: 6.5 MB at C = 768) for the column sums to be cheap.
constexpr int64_t kMaxParamBlocks = 264;

struct MaxOp {
  template <typename A>
  __device__ A operator()(A a, A b) const {
    return b > a ? b : a;  // a NaN b is dropped here; the sum below carries it to every output
  }
};

/// The warp's rows: calls body(row) for rows warp_id, warp_id + total_warps, ...
template <typename Body>
__device__ __forceinline__ void for_each_warp_row(int64_t R, Body body) {
  const int64_t warps = static_cast<int64_t>(gridDim.x) * kWarpsPerBlock;
  for (int64_t row = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarpSize; row < R;
       row += warps) {
    body(row);
  }
}

template <typename T, int N>
__global__ void __launch_bounds__(kThreads)
    softmax_warp_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t R, int C, bool log) {
  using A = acc_t<T>;
  const int lane = threadIdx.x % kWarpSize;
  for_each_warp_row(R, [&](int64_t row) {
    const T* xr = x + row * C;
    T* yr = y + row * C;
    A v[N];
    A m = -math::infinity<A>();
#pragma unroll
    for (int t = 0; t < N; ++t) {
      const int j = lane + t * kWarpSize;
      v[t] = j < C ? static_cast<A>(xr[j]) : -math::infinity<A>();
      m = v[t] > m ? v[t] : m;
    }
    m = warp_reduce(m, MaxOp{});
    A s = A(0);
#pragma unroll
    for (int t = 0; t < N; ++t) {
      if (lane + t * kWarpSize < C) s += math::exp(v[t] - m);
    }
    s = warp_reduce(s, SumOp{});
    const A log_s = math::log(s);
#pragma unroll
    for (int t = 0; t < N; ++t) {
      const int j = lane + t * kWarpSize;
      if (j < C) yr[j] = static_cast<T>(log ? v[t] - m - log_s : math::exp(v[t] - m) / s);
    }
  });
}

template <typename T, int N>
__global__ void __launch_bounds__(kThreads)
    softmax_backward_warp_kernel(const T* __restrict__ dy, const T* __restrict__ y, T* __restrict__ dx,
                                 int64_t R, int C, bool log) {
  using A = acc_t<T>;
  const int lane = threadIdx.x % kWarpSize;
  for_each_warp_row(R, [&](int64_t row) {
    const T* dyr = dy + row * C;
    const T* yr = y + row * C;
    T* dxr = dx + row * C;
    A g[N], yv[N];
    A partial = A(0);
#pragma unroll
    for (int t = 0; t < N; ++t) {
      const int j = lane + t * kWarpSize;
      g[t] = j < C ? static_cast<A>(dyr[j]) : A(0);
      yv[t] = j < C ? static_cast<A>(yr[j]) : A(0);
      partial += log ? g[t] : g[t] * yv[t];
    }
    const A total = warp_reduce(partial, SumOp{});
#pragma unroll
    for (int t = 0; t < N; ++t) {
      const int j = lane + t * kWarpSize;
      if (j < C) dxr[j] = static_cast<T>(log ? g[t] - math::exp(yv[t]) * total : yv[t] * (g[t] - total));
    }
  });
}

template <typename T, int N>
__global__ void __launch_bounds__(kThreads)
    layernorm_forward_warp_kernel(const T* __restrict__ x, const T* __restrict__ weight,
                                  const T* __restrict__ bias, acc_t<T> eps, T* __restrict__ y,
                                  acc_t<T>* __restrict__ mean_out, acc_t<T>* __restrict__ rstd_out, int64_t R,
                                  int C) {
  using A = acc_t<T>;
  const int lane = threadIdx.x % kWarpSize;
  for_each_warp_row(R, [&](int64_t row) {
    const T* xr = x + row * C;
    T* yr = y + row * C;
    A v[N];
    A partial = A(0);
#pragma unroll
    for (int t = 0; t < N; ++t) {
      const int j = lane + t * kWarpSize;
      v[t] = j < C ? static_cast<A>(xr[j]) : A(0);
      partial += v[t];
    }
    const A mean = warp_reduce(partial, SumOp{}) / static_cast<A>(C);
    partial = A(0);
#pragma unroll
    for (int t = 0; t < N; ++t) {
      const A d = lane + t * kWarpSize < C ? v[t] - mean : A(0);
      partial += d * d;
    }
    const A var = warp_reduce(partial, SumOp{}) / static_cast<A>(C);
    const A rstd = A(1) / math::sqrt(var + eps);
#pragma unroll
    for (int t = 0; t < N; ++t) {
      const int j = lane + t * kWarpSize;
      if (j >= C) continue;
      A out = (v[t] - mean) * rstd;
      if (weight != nullptr) out *= static_cast<A>(weight[j]);
      if (bias != nullptr) out += static_cast<A>(bias[j]);
      yr[j] = static_cast<T>(out);
    }
    if (lane == 0) {
      mean_out[row] = mean;
      rstd_out[row] = rstd;
    }
  });
}

/// dx per row (warp per row), and per-warp partial sums of dy * xhat and dy over the warp's rows for the
/// parameter gradients (written to dw_partials / db_partials [W, C] when not null; W = the grid's warps).
template <typename T, int N>
__global__ void __launch_bounds__(kThreads)
    layernorm_backward_warp_kernel(const T* __restrict__ dy, const T* __restrict__ x,
                                   const T* __restrict__ weight, const acc_t<T>* __restrict__ mean,
                                   const acc_t<T>* __restrict__ rstd, T* __restrict__ dx,
                                   acc_t<T>* __restrict__ dw_partials, acc_t<T>* __restrict__ db_partials,
                                   int64_t R, int C) {
  using A = acc_t<T>;
  const int lane = threadIdx.x % kWarpSize;
  A w[N], dw[N], db[N];
#pragma unroll
  for (int t = 0; t < N; ++t) {
    const int j = lane + t * kWarpSize;
    w[t] = (weight != nullptr && j < C) ? static_cast<A>(weight[j]) : A(1);
    dw[t] = A(0);
    db[t] = A(0);
  }
  for_each_warp_row(R, [&](int64_t row) {
    const T* dyr = dy + row * C;
    const T* xr = x + row * C;
    T* dxr = dx + row * C;
    const A mu = mean[row], rs = rstd[row];
    A g[N], xhat[N];
    A sum_g = A(0), sum_gx = A(0);
#pragma unroll
    for (int t = 0; t < N; ++t) {
      const int j = lane + t * kWarpSize;
      const A d = j < C ? static_cast<A>(dyr[j]) : A(0);
      xhat[t] = j < C ? (static_cast<A>(xr[j]) - mu) * rs : A(0);
      g[t] = d * w[t];
      sum_g += g[t];
      sum_gx += g[t] * xhat[t];
      dw[t] += d * xhat[t];
      db[t] += d;
    }
    const A mean_g = warp_reduce(sum_g, SumOp{}) / static_cast<A>(C);
    const A mean_gx = warp_reduce(sum_gx, SumOp{}) / static_cast<A>(C);
#pragma unroll
    for (int t = 0; t < N; ++t) {
      const int j = lane + t * kWarpSize;
      if (j < C) dxr[j] = static_cast<T>(rs * (g[t] - mean_g - xhat[t] * mean_gx));
    }
  });
  const int64_t warp = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarpSize;
#pragma unroll
  for (int t = 0; t < N; ++t) {
    const int j = lane + t * kWarpSize;
    if (j >= C) continue;
    if (dw_partials != nullptr) dw_partials[warp * C + j] = dw[t];
    if (db_partials != nullptr) db_partials[warp * C + j] = db[t];
  }
}

/// out[j] = sum over the W partial rows of column j. Block: 32 columns x 8 slices; slice s adds rows s,
/// s + 8, ... (8 independent load streams per column, so the W loads are not one serial chain), then
/// slice 0 adds the 8 slice sums in order. The order depends only on W: deterministic.
constexpr int kSumColumns = 32, kSumSlices = 8;

template <typename A>
__global__ void __launch_bounds__(kSumColumns* kSumSlices)
    layernorm_param_sum_kernel(const A* __restrict__ partials, A* __restrict__ out, int64_t W, int C) {
  __shared__ A slice_sums[kSumSlices][kSumColumns];
  const int64_t j = static_cast<int64_t>(blockIdx.x) * kSumColumns + threadIdx.x;
  A sum = A(0);
  if (j < C) {
#pragma unroll 4
    for (int64_t w = threadIdx.y; w < W; w += kSumSlices) sum += partials[w * C + j];
  }
  slice_sums[threadIdx.y][threadIdx.x] = sum;
  __syncthreads();
  if (threadIdx.y == 0 && j < C) {
    A total = A(0);
#pragma unroll
    for (int s = 0; s < kSumSlices; ++s) total += slice_sums[s][threadIdx.x];
    out[j] = total;
  }
}

/// Calls launch.template operator()<N>() with the smallest N in {1, 2, 4, 8, 16, 32} with 32 N >= C.
template <typename Launch>
void with_lanes(int64_t C, Launch launch) {
  if (C <= 32) {
    launch.template operator()<1>();
  } else if (C <= 64) {
    launch.template operator()<2>();
  } else if (C <= 128) {
    launch.template operator()<4>();
  } else if (C <= 256) {
    launch.template operator()<8>();
  } else if (C <= 512) {
    launch.template operator()<16>();
  } else {
    launch.template operator()<32>();
  }
}

template <typename T>
const T* data_or_null(const Tensor& t) {
  return t.defined() ? t.data<T>() : nullptr;
}

}  // namespace

const char* row_kernel_name(RowKernel kernel) {
  return kernel == RowKernel::WarpPerRow ? "warp_per_row" : "block_per_row";
}

const std::vector<RowKernel>& all_row_kernels() {
  static const std::vector<RowKernel> kernels = {RowKernel::BlockPerRow, RowKernel::WarpPerRow};
  return kernels;
}

bool row_kernel_supports(RowKernel kernel, int64_t cols) {
  return kernel == RowKernel::BlockPerRow || (cols >= 1 && cols <= kMaxWarpRowCols);
}

void softmax_rows_with(RowKernel kernel, const Tensor& x, const Tensor& out, bool log) {
  const int64_t C = x.dim() == 0 ? 1 : x.size(-1);
  if (kernel == RowKernel::BlockPerRow || !row_kernel_supports(kernel, C)) {
    softmax_rows(x, out, log);
    return;
  }
  if (x.numel() == 0) return;
  const int64_t R = x.numel() / C;
  cudaStream_t stream = stream_for(x);
  BRIGADE_DISPATCH_FLOATING(x.dtype(), log ? "log_softmax" : "softmax", [&] {
    with_lanes(C, [&]<int N>() {
      softmax_warp_kernel<scalar_t, N><<<grid_for(R, kWarpsPerBlock), kThreads, 0, stream>>>(
          x.data<scalar_t>(), out.data<scalar_t>(), R, static_cast<int>(C), log);
      BRIGADE_CUDA_CHECK_LAUNCH("softmax_warp_kernel");
    });
  });
}

void softmax_backward_rows_with(RowKernel kernel, const Tensor& dy, const Tensor& y, const Tensor& dx,
                                bool log) {
  const int64_t C = y.dim() == 0 ? 1 : y.size(-1);
  if (kernel == RowKernel::BlockPerRow || !row_kernel_supports(kernel, C)) {
    softmax_backward_rows(dy, y, dx, log);
    return;
  }
  if (y.numel() == 0) return;
  const int64_t R = y.numel() / C;
  cudaStream_t stream = stream_for(y);
  BRIGADE_DISPATCH_FLOATING(y.dtype(), log ? "log_softmax_backward" : "softmax_backward", [&] {
    with_lanes(C, [&]<int N>() {
      softmax_backward_warp_kernel<scalar_t, N><<<grid_for(R, kWarpsPerBlock), kThreads, 0, stream>>>(
          dy.data<scalar_t>(), y.data<scalar_t>(), dx.data<scalar_t>(), R, static_cast<int>(C), log);
      BRIGADE_CUDA_CHECK_LAUNCH("softmax_backward_warp_kernel");
    });
  });
}

void layernorm_forward_with(RowKernel kernel, const Tensor& x, const Tensor& weight, const Tensor& bias,
                            double eps, const Tensor& y, const Tensor& mean, const Tensor& rstd) {
  const int64_t C = x.size(-1);
  if (kernel == RowKernel::BlockPerRow || !row_kernel_supports(kernel, C)) {
    layernorm_forward(x, weight, bias, eps, y, mean, rstd);
    return;
  }
  const int64_t R = mean.numel();
  if (R == 0) return;
  cudaStream_t stream = stream_for(x);
  BRIGADE_DISPATCH_FLOATING(x.dtype(), "layernorm", [&] {
    using A = acc_t<scalar_t>;
    with_lanes(C, [&]<int N>() {
      layernorm_forward_warp_kernel<scalar_t, N><<<grid_for(R, kWarpsPerBlock), kThreads, 0, stream>>>(
          x.data<scalar_t>(), data_or_null<scalar_t>(weight), data_or_null<scalar_t>(bias),
          static_cast<A>(eps), y.data<scalar_t>(), mean.data<A>(), rstd.data<A>(), R, static_cast<int>(C));
      BRIGADE_CUDA_CHECK_LAUNCH("layernorm_forward_warp_kernel");
    });
  });
}

void layernorm_backward_with(RowKernel kernel, const Tensor& dy, const Tensor& x, const Tensor& weight,
                             const Tensor& mean, const Tensor& rstd, const Tensor& dx, const Tensor& dweight,
                             const Tensor& dbias) {
  const int64_t C = x.size(-1);
  const int64_t R = mean.numel();
  // v1 also covers the corner cases: no rows (zero parameter gradients) and no dx wanted.
  if (kernel == RowKernel::BlockPerRow || !row_kernel_supports(kernel, C) || R == 0 || !dx.defined()) {
    layernorm_backward(dy, x, weight, mean, rstd, dx, dweight, dbias);
    return;
  }
  cudaStream_t stream = stream_for(x);
  // The warp count depends on R alone, so the partials, and their sums, are the same run to run.
  const int64_t blocks = std::min<int64_t>((R + kWarpsPerBlock - 1) / kWarpsPerBlock, kMaxParamBlocks);
  const int64_t W = blocks * kWarpsPerBlock;
  BRIGADE_DISPATCH_FLOATING(x.dtype(), "layernorm_backward", [&] {
    using A = acc_t<scalar_t>;
    const bool params = dweight.defined() || dbias.defined();
    Tensor partials =
        params ? empty({2, W, C}, TensorOptions(acc_dtype<scalar_t>()).device(x.device())) : Tensor();
    A* dw_partials = dweight.defined() ? partials.data<A>() : nullptr;
    A* db_partials = dbias.defined() ? partials.data<A>() + W * C : nullptr;
    with_lanes(C, [&]<int N>() {
      layernorm_backward_warp_kernel<scalar_t, N><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
          dy.data<scalar_t>(), x.data<scalar_t>(), data_or_null<scalar_t>(weight), mean.data<A>(),
          rstd.data<A>(), dx.data<scalar_t>(), dw_partials, db_partials, R, static_cast<int>(C));
      BRIGADE_CUDA_CHECK_LAUNCH("layernorm_backward_warp_kernel");
    });
    const unsigned sum_blocks = static_cast<unsigned>((C + kSumColumns - 1) / kSumColumns);
    const dim3 sum_threads(kSumColumns, kSumSlices);
    if (dw_partials != nullptr) {
      layernorm_param_sum_kernel<A>
          <<<sum_blocks, sum_threads, 0, stream>>>(dw_partials, dweight.data<A>(), W, static_cast<int>(C));
      BRIGADE_CUDA_CHECK_LAUNCH("layernorm_param_sum_kernel");
    }
    if (db_partials != nullptr) {
      layernorm_param_sum_kernel<A>
          <<<sum_blocks, sum_threads, 0, stream>>>(db_partials, dbias.data<A>(), W, static_cast<int>(C));
      BRIGADE_CUDA_CHECK_LAUNCH("layernorm_param_sum_kernel");
    }
  });
}

}  // namespace brigade::kernels::cuda
