// LayerNorm on CUDA, version 2: one warp per row, the row held in registers (v1, one block per row, is
// kernels/cuda/layernorm.cu; the versions are registered in kernels/layernorm_versions.h). This file also
// holds the version dispatch (cuda::layernorm_forward_with / _backward_with) and the backend entry points,
// which run the default.
//
//   layernorm    mean = sum x / C, var = sum (x - mean)^2 / C, rstd = 1 / sqrt(var + eps),
//                y = (x - mean) rstd w + b   (the same two-pass formulas as v1: no cancellation)
//   ln backward  xhat = (x - mean) rstd, g = dy w, dx = rstd (g - mean(g) - xhat mean(g xhat)),
//                dweight = sum_rows dy xhat, dbias = sum_rows dy
// x, y, dy, dx [R, C] contiguous, C <= 1024; float32, bfloat16 (math in float), float64.
// Launch shape and lane layout: kernels/cuda/warp_rows.cuh (4 warps per block, lane l holds elements
// l, l + 32, ... of its row in registers).
// The backward runs at most 264 blocks (1056 warps, a count that depends on R only): each warp keeps its
// lanes' columns of sum dy * xhat and sum dy over its rows in registers and writes them as one row of a
// [W, C] partials scratch; layernorm_param_sum_kernel (32 columns x 8 slices per block) then adds the W rows
// in a fixed order. No atomics: bitwise reproducible.
//
// What v2 improves over v1 (napkin math, H200 ~4.3 TB/s): the op is pure bandwidth. v1 reads each row 3
// times (the later passes mostly from L2) and spends two or three block-wide barriers per row, which at
// C = 768 costs more than the row's bytes. v2 moves the minimum: float32 reads 4 B and writes 4 B per
// element (8 B/elt; the backward reads 8 and writes 4), so at GPT-2 small shapes (R = 8192, C = 768: 6.3M
// elements, 50 MB) the bound is ~12 us; the target is >= 85% of the measured copy rate. Wider rows stay on
// v1. The last version: nothing later improves on it yet. Measured on an H200 at GPT-2 small (scripts/gpu_check.sh,
// bench/results/gpu-20261204-1513-ebaddd8/): float32 forward 29 us (41 % of the copy rate; v1 73 us), backward
// 85 us (21 %; v1 104 us), short of the 85 % target; the backward's column sums of the partials run only
// ceil(C / 32) = 24 blocks, which the profile of a GPT-2 step shows at ~17 us each.
#include <algorithm>
#include <cstdint>

#include "kernels/backend.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/v1_launchers.h"
#include "kernels/cuda/warp_rows.cuh"
#include "kernels/layernorm_versions.h"

namespace brigade::kernels::cuda {
namespace {

using warp_rows::for_each_warp_row;
using warp_rows::kThreads;
using warp_rows::kWarpsPerBlock;
using warp_rows::with_lanes;

/// Blocks of the layernorm backward: 2 per SM of an H200 (1056 warps), enough rows in flight for HBM, and
/// few enough partial rows ([2, W, C] floats: 6.5 MB at C = 768) for the column sums to be cheap.
constexpr int64_t kMaxParamBlocks = 264;

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
    const A rstd = A(1) / formulas::sqrt_of(var + eps);
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
      g[t] = formulas::rounded_product(d, w[t]);  // unfused, as g - mean_g below needs (C == 1 gives 0)
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

}  // namespace

void layernorm_forward_with(LayerNormKernel kernel, const Tensor& x, const Tensor& weight, const Tensor& bias,
                            double eps, const Tensor& y, const Tensor& mean, const Tensor& rstd) {
  const int64_t C = x.size(-1);
  if (kernel != LayerNormKernel::CudaWarpPerRow || !layernorm_kernel_supports(kernel, C)) {
    layernorm_forward_v1(x, weight, bias, eps, y, mean, rstd);
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

void layernorm_backward_with(LayerNormKernel kernel, const Tensor& dy, const Tensor& x, const Tensor& weight,
                             const Tensor& mean, const Tensor& rstd, const Tensor& dx, const Tensor& dweight,
                             const Tensor& dbias) {
  const int64_t C = x.size(-1);
  const int64_t R = mean.numel();
  // v1 also covers the corner cases: no rows (zero parameter gradients) and no dx wanted.
  if (kernel != LayerNormKernel::CudaWarpPerRow || !layernorm_kernel_supports(kernel, C) || R == 0 ||
      !dx.defined()) {
    layernorm_backward_v1(dy, x, weight, mean, rstd, dx, dweight, dbias);
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

// ---- the backend entry points (kernels/backend.h): the default version ------------------------------------

void layernorm_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps, const Tensor& y,
                       const Tensor& mean, const Tensor& rstd) {
  cuda::layernorm_forward_with(default_layernorm_kernel(DeviceKind::CUDA, x.size(-1)), x, weight, bias, eps,
                               y, mean, rstd);
}

void layernorm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& mean,
                        const Tensor& rstd, const Tensor& dx, const Tensor& dweight, const Tensor& dbias) {
  cuda::layernorm_backward_with(default_layernorm_kernel(DeviceKind::CUDA, x.size(-1)), dy, x, weight, mean,
                                rstd, dx, dweight, dbias);
}

}  // namespace brigade::kernels::cuda
