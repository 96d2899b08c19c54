// Softmax / log-softmax over the last dim on CUDA, version 1, and their backward (SoftmaxKernel::
// CudaBlockPerRow, kernels/softmax_versions.h; the default). x, y, dy, dx are [R, C] contiguous.
//
//   forward:  m, s = max_j x_j, sum_j exp(x_j - m)   (one online pass, see MaxSum in launch.cuh)
//             y_j = exp(x_j - m) / s                  (softmax)
//             y_j = x_j - m - log(s)                  (log-softmax)
//   backward: dx_j = y_j * (dy_j - sum_k dy_k y_k)    (softmax)
//             dx_j = dy_j - exp(y_j) * sum_k dy_k     (log-softmax)
//
// Launch shape: one block per row (grid-stride over rows beyond 65535), row_threads(C) threads (<= 1024).
// Pass 1 reduces the row statistics with block_reduce, pass 2 writes the row; both sweep the row with
// stride blockDim, so warps read contiguous, coalesced segments. Deterministic (fixed reduction order).
//
// Napkin math (H200, ~4.3 TB/s): forward reads x twice and writes y once: 12 bytes per float32 element.
// GPT-2 logits, R = 8*1024, C = 50304: 412M elements -> 4.9 GB -> ~1.15 ms (the second read of a row often
// hits L2: 200 KB per row). Backward reads dy, y twice and writes dx: 20 bytes/element -> ~1.9 ms.
//
// Next: v2 (kernels/cuda/softmax_warp.cu) gives each row of up to 1024 elements to one warp that holds it
// in registers: one read of the row, shuffles instead of block barriers.
#include "kernels/backend.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/v1_launchers.h"

namespace brigade::kernels::cuda {
namespace {

template <typename T>
__global__ void __launch_bounds__(kMaxRowThreads)
    softmax_rows_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t R, int64_t C, bool log) {
  using A = acc_t<T>;
  for (int64_t row = blockIdx.x; row < R; row += gridDim.x) {
    const T* xr = x + row * C;
    T* yr = y + row * C;
    MaxSum<A> stats = block_max_sum<A>(C, [&](int64_t j) { return static_cast<A>(xr[j]); });
    const A log_sum = formulas::log_of(stats.sum);
    for (int64_t j = threadIdx.x; j < C; j += blockDim.x) {
      A shifted = static_cast<A>(xr[j]) - stats.max;
      yr[j] = static_cast<T>(log ? shifted - log_sum : formulas::exp_of(shifted) / stats.sum);
    }
  }
}

template <typename T>
__global__ void __launch_bounds__(kMaxRowThreads)
    softmax_backward_rows_kernel(const T* __restrict__ dy, const T* __restrict__ y, T* __restrict__ dx,
                                 int64_t R, int64_t C, bool log) {
  using A = acc_t<T>;
  for (int64_t row = blockIdx.x; row < R; row += gridDim.x) {
    const T* dyr = dy + row * C;
    const T* yr = y + row * C;
    T* dxr = dx + row * C;
    // softmax: sum dy*y; log-softmax: sum dy.
    A partial = A(0);
    for (int64_t j = threadIdx.x; j < C; j += blockDim.x) {
      A g = static_cast<A>(dyr[j]);
      partial += log ? g : g * static_cast<A>(yr[j]);
    }
    const A total = block_sum(partial);
    for (int64_t j = threadIdx.x; j < C; j += blockDim.x) {
      A g = static_cast<A>(dyr[j]), yj = static_cast<A>(yr[j]);
      dxr[j] = static_cast<T>(log ? g - formulas::exp_of(yj) * total : yj * (g - total));
    }
  }
}

}  // namespace

void softmax_rows_v1(const Tensor& x, const Tensor& out, bool log) {
  const int64_t C = x.dim() == 0 ? 1 : x.size(-1);
  if (x.numel() == 0 || C == 0) return;
  const int64_t R = x.numel() / C;
  cudaStream_t stream = stream_for(x);
  BRIGADE_DISPATCH_FLOATING(x.dtype(), log ? "log_softmax" : "softmax", [&] {
    softmax_rows_kernel<scalar_t>
        <<<row_blocks(R), row_threads(C), 0, stream>>>(x.data<scalar_t>(), out.data<scalar_t>(), R, C, log);
    BRIGADE_CUDA_CHECK_LAUNCH("softmax_rows_kernel");
  });
}

void softmax_backward_rows_v1(const Tensor& dy, const Tensor& y, const Tensor& dx, bool log) {
  const int64_t C = y.dim() == 0 ? 1 : y.size(-1);
  if (y.numel() == 0 || C == 0) return;
  const int64_t R = y.numel() / C;
  cudaStream_t stream = stream_for(y);
  BRIGADE_DISPATCH_FLOATING(y.dtype(), log ? "log_softmax_backward" : "softmax_backward", [&] {
    softmax_backward_rows_kernel<scalar_t><<<row_blocks(R), row_threads(C), 0, stream>>>(
        dy.data<scalar_t>(), y.data<scalar_t>(), dx.data<scalar_t>(), R, C, log);
    BRIGADE_CUDA_CHECK_LAUNCH("softmax_backward_rows_kernel");
  });
}

}  // namespace brigade::kernels::cuda
