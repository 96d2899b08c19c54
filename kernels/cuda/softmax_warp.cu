// Softmax on CUDA, version 2: one warp per row, the row held in registers (v1, one block per row, is
// kernels/cuda/softmax.cu; the versions are registered in kernels/softmax_versions.h). This file also holds
// the version dispatch (cuda::softmax_rows_with) and the backend entry points, which run the default.
//
//   softmax      m = max_j x_j, s = sum_j exp(x_j - m), y_j = exp(x_j - m) / s (log: x_j - m - log s)
//   backward     dx_j = y_j (dy_j - sum_k dy_k y_k)   (log: dx_j = dy_j - exp(y_j) sum_k dy_k)
// x, y, dy, dx [R, C] contiguous, C <= 1024; float32, bfloat16 (math in float), float64.
// Launch shape and lane layout: kernels/cuda/warp_rows.cuh (4 warps per block, lane l holds elements
// l, l + 32, ... of its row in registers).
//
// What v2 improves over v1 (napkin math, H200 ~4.3 TB/s): the op is pure bandwidth. v1 reads each row 2-3
// times (the later passes mostly from L1/L2) and spends two or three block-wide barriers per row, which at
// C = 768-1024 (the attention rows) costs more than the row's bytes. v2 moves the minimum: float32 reads
// 4 B and writes 4 B per element (8 B/elt; the backward reads 8 and writes 4), so the attention softmax
// of GPT-2 small (R = 8*12*1024, C = 1024: 100M elements, 0.8 GB) is bound at ~190 us; the target is >= 85%
// of the measured copy rate. Rows wider than 1024 (the 50257-wide logits) stay on v1. The last version:
// nothing later improves on it yet. Measured on an H200 (scripts/gpu_check.sh,
// bench/results/gpu-20261204-1513-ebaddd8/): at that shape, float32, forward 314 us (60 % of the copy rate;
// v1 1160 us), backward 284 us (100 %; v1 687 us).
#include <cstdint>
#include <vector>

#include "kernels/backend.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/v1_launchers.h"
#include "kernels/cuda/warp_rows.cuh"
#include "kernels/softmax_versions.h"

namespace brigade::kernels::cuda {
namespace {

using warp_rows::for_each_warp_row;
using warp_rows::kThreads;
using warp_rows::kWarpsPerBlock;
using warp_rows::with_lanes;

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
    m = warp_reduce(m, MaxOp{});  // a NaN is dropped here; the sum below carries it to every output
    A s = A(0);
#pragma unroll
    for (int t = 0; t < N; ++t) {
      if (lane + t * kWarpSize < C) s += formulas::exp_of(v[t] - m);
    }
    s = warp_reduce(s, SumOp{});
    const A log_s = formulas::log_of(s);
#pragma unroll
    for (int t = 0; t < N; ++t) {
      const int j = lane + t * kWarpSize;
      if (j < C) yr[j] = static_cast<T>(log ? v[t] - m - log_s : formulas::exp_of(v[t] - m) / s);
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
      if (j < C)
        dxr[j] = static_cast<T>(log ? g[t] - formulas::exp_of(yv[t]) * total : yv[t] * (g[t] - total));
    }
  });
}

/// The row width of x (a 0-d x is one row of one element).
int64_t row_width(const Tensor& x) {
  return x.dim() == 0 ? 1 : x.size(-1);
}

}  // namespace

void softmax_rows_with(SoftmaxKernel kernel, const Tensor& x, const Tensor& out, bool log) {
  const int64_t C = row_width(x);
  if (kernel != SoftmaxKernel::CudaWarpPerRow || !softmax_kernel_supports(kernel, C)) {
    softmax_rows_v1(x, out, log);
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

void softmax_backward_rows_with(SoftmaxKernel kernel, const Tensor& dy, const Tensor& y, const Tensor& dx,
                                bool log) {
  const int64_t C = row_width(y);
  if (kernel != SoftmaxKernel::CudaWarpPerRow || !softmax_kernel_supports(kernel, C)) {
    softmax_backward_rows_v1(dy, y, dx, log);
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

// ---- the backend entry points (kernels/backend.h): the default version ------------------------------------

void softmax_rows(const Tensor& x, const Tensor& out, bool log) {
  cuda::softmax_rows_with(default_softmax_kernel(DeviceKind::CUDA, row_width(x)), x, out, log);
}

void softmax_backward_rows(const Tensor& dy, const Tensor& y, const Tensor& dx, bool log) {
  cuda::softmax_backward_rows_with(default_softmax_kernel(DeviceKind::CUDA, row_width(y)), dy, y, dx, log);
}

}  // namespace brigade::kernels::cuda
