// LayerNorm over the last dim on CUDA, version 1 (LayerNormKernel::CudaBlockPerRow,
// kernels/layernorm_versions.h; the default). x, y, dy, dx are [R, C] contiguous; weight, bias [C] (or
// undefined); mean, rstd [R] in acc_t (float32, float64 for float64 x); dweight, dbias [C] in acc_t (or
// undefined).
//
//   forward:  mean = sum(x) / C, var = sum((x - mean)^2) / C (two passes: no cancellation),
//             rstd = 1 / sqrt(var + eps), y = (x - mean) * rstd * w + b
//   backward: xhat = (x - mean) * rstd, g = dy * w
//             dx = rstd * (g - mean(g) - xhat * mean(g * xhat))
//             dweight = sum_r dy * xhat, dbias = sum_r dy
//
// Launch shapes
//  - layernorm_forward_kernel, layernorm_dx_kernel: one block per row, row_threads(C) threads, block_reduce.
//  - dweight/dbias, deterministically (no float atomics): layernorm_param_partials_kernel runs a
//    (ceil(C/256), P) grid; block (cx, p) sums rows [p*R/P, (p+1)*R/P) for 256 columns (coalesced reads of
//    dy and x rows) into a [P, C] scratch; column_sum_kernel then sums the P partials of each column in
//    order. P = min(R, 128) depends only on R, so the result is bitwise reproducible.
//
// Napkin math (H200, ~4.3 TB/s), float32, R = 8192, C = 768 (6.3M elements):
//   forward reads x 3 times (the last two mostly from L2) and writes y: ~16 B/elt -> 100 MB -> ~25 us.
//   backward reads dy, x twice for dx and once more for the parameter partials: ~28 B/elt -> ~40 us.
//
// Next: v2 (kernels/cuda/layernorm_warp.cu) gives each row of up to 1024 elements to one warp that holds
// it in registers (one read of the row, shuffles only) and sums the parameter gradients in the same sweep.
#include "kernels/backend.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/v1_launchers.h"

namespace brigade::kernels::cuda {
namespace {

constexpr int kParamThreads = 256;
constexpr int64_t kMaxParamPartials = 128;

template <typename T>
__global__ void __launch_bounds__(kMaxRowThreads)
    layernorm_forward_kernel(const T* __restrict__ x, const T* __restrict__ weight,
                             const T* __restrict__ bias, acc_t<T> eps, T* __restrict__ y,
                             acc_t<T>* __restrict__ mean_out, acc_t<T>* __restrict__ rstd_out, int64_t R,
                             int64_t C) {
  using A = acc_t<T>;
  for (int64_t row = blockIdx.x; row < R; row += gridDim.x) {
    const T* xr = x + row * C;
    T* yr = y + row * C;
    A partial = A(0);
    for (int64_t j = threadIdx.x; j < C; j += blockDim.x) partial += static_cast<A>(xr[j]);
    const A mean = block_sum(partial) / static_cast<A>(C);
    partial = A(0);
    for (int64_t j = threadIdx.x; j < C; j += blockDim.x) {
      A d = static_cast<A>(xr[j]) - mean;
      partial += d * d;
    }
    const A var = block_sum(partial) / static_cast<A>(C);
    const A rstd = A(1) / formulas::sqrt_of(var + eps);
    for (int64_t j = threadIdx.x; j < C; j += blockDim.x) {
      A v = (static_cast<A>(xr[j]) - mean) * rstd;
      if (weight != nullptr) v *= static_cast<A>(weight[j]);
      if (bias != nullptr) v += static_cast<A>(bias[j]);
      yr[j] = static_cast<T>(v);
    }
    if (threadIdx.x == 0) {
      mean_out[row] = mean;
      rstd_out[row] = rstd;
    }
  }
}

/// Two sums reduced together: sum(g) and sum(g * xhat).
template <typename A>
struct SumPair {
  A a;
  A b;
};
template <typename A>
__device__ SumPair<A> shfl_xor(SumPair<A> v, int lane_mask) {
  return {cuda::shfl_xor(v.a, lane_mask), cuda::shfl_xor(v.b, lane_mask)};
}
struct SumPairAdd {
  template <typename A>
  __device__ SumPair<A> operator()(SumPair<A> x, SumPair<A> y) const {
    return {x.a + y.a, x.b + y.b};
  }
};

template <typename T>
__global__ void __launch_bounds__(kMaxRowThreads)
    layernorm_dx_kernel(const T* __restrict__ dy, const T* __restrict__ x, const T* __restrict__ weight,
                        const acc_t<T>* __restrict__ mean, const acc_t<T>* __restrict__ rstd,
                        T* __restrict__ dx, int64_t R, int64_t C) {
  using A = acc_t<T>;
  for (int64_t row = blockIdx.x; row < R; row += gridDim.x) {
    const T* dyr = dy + row * C;
    const T* xr = x + row * C;
    T* dxr = dx + row * C;
    const A mu = mean[row], rs = rstd[row];
    SumPair<A> partial{A(0), A(0)};
    for (int64_t j = threadIdx.x; j < C; j += blockDim.x) {
      A g = static_cast<A>(dyr[j]);
      // Unfused (rounded_product): with C == 1, g - mean_g below must be exactly 0.
      if (weight != nullptr) g = formulas::rounded_product(g, static_cast<A>(weight[j]));
      A xhat = (static_cast<A>(xr[j]) - mu) * rs;
      partial.a += g;
      partial.b += g * xhat;
    }
    SumPair<A> total = block_reduce(partial, SumPairAdd{}, SumPair<A>{A(0), A(0)});
    const A mean_g = total.a / static_cast<A>(C);
    const A mean_gx = total.b / static_cast<A>(C);
    for (int64_t j = threadIdx.x; j < C; j += blockDim.x) {
      A g = static_cast<A>(dyr[j]);
      // Unfused (rounded_product): with C == 1, g - mean_g below must be exactly 0.
      if (weight != nullptr) g = formulas::rounded_product(g, static_cast<A>(weight[j]));
      A xhat = (static_cast<A>(xr[j]) - mu) * rs;
      dxr[j] = static_cast<T>(rs * (g - mean_g - xhat * mean_gx));
    }
  }
}

/// Partial column sums over a slab of rows: dweight_partial[p, c] = sum dy*xhat, dbias_partial[p, c] = sum
/// dy. Either output may be null.
template <typename T>
__global__ void layernorm_param_partials_kernel(const T* __restrict__ dy, const T* __restrict__ x,
                                                const acc_t<T>* __restrict__ mean,
                                                const acc_t<T>* __restrict__ rstd,
                                                acc_t<T>* __restrict__ dweight_partial,
                                                acc_t<T>* __restrict__ dbias_partial, int64_t R, int64_t C,
                                                int64_t rows_per_partial) {
  using A = acc_t<T>;
  const int64_t c = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  const int64_t p = blockIdx.y;
  if (c >= C) return;
  const int64_t row_begin = p * rows_per_partial;
  const int64_t row_end = row_begin + rows_per_partial < R ? row_begin + rows_per_partial : R;
  A dw = A(0), db = A(0);
  for (int64_t row = row_begin; row < row_end; ++row) {
    A g = static_cast<A>(dy[row * C + c]);
    dw += g * (static_cast<A>(x[row * C + c]) - mean[row]) * rstd[row];
    db += g;
  }
  if (dweight_partial != nullptr) dweight_partial[p * C + c] = dw;
  if (dbias_partial != nullptr) dbias_partial[p * C + c] = db;
}

/// out[c] = sum over p (in order) of partial[p, c]; one thread per column.
template <typename A>
__global__ void column_sum_kernel(const A* __restrict__ partial, A* __restrict__ out, int64_t P, int64_t C) {
  for (int64_t c = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; c < C;
       c += int64_t(gridDim.x) * blockDim.x) {
    A total = A(0);
    for (int64_t p = 0; p < P; ++p) total += partial[p * C + c];
    out[c] = total;
  }
}

}  // namespace

void layernorm_forward_v1(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps,
                          const Tensor& y, const Tensor& mean, const Tensor& rstd) {
  const int64_t R = mean.numel();
  if (R == 0) return;
  const int64_t C = x.size(-1);
  cudaStream_t stream = stream_for(x);
  BRIGADE_DISPATCH_FLOATING(x.dtype(), "layernorm", [&] {
    using A = acc_t<scalar_t>;
    layernorm_forward_kernel<scalar_t><<<row_blocks(R), row_threads(C), 0, stream>>>(
        x.data<scalar_t>(), data_or_null<scalar_t>(weight), data_or_null<scalar_t>(bias), static_cast<A>(eps),
        y.data<scalar_t>(), mean.data<A>(), rstd.data<A>(), R, C);
    BRIGADE_CUDA_CHECK_LAUNCH("layernorm_forward_kernel");
  });
}

void layernorm_backward_v1(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& mean,
                           const Tensor& rstd, const Tensor& dx, const Tensor& dweight, const Tensor& dbias) {
  const int64_t R = mean.numel();
  const int64_t C = x.size(-1);
  cudaStream_t stream = stream_for(x);
  BRIGADE_DISPATCH_FLOATING(x.dtype(), "layernorm_backward", [&] {
    using A = acc_t<scalar_t>;
    if (R > 0 && C > 0 && dx.defined()) {
      layernorm_dx_kernel<scalar_t><<<row_blocks(R), row_threads(C), 0, stream>>>(
          dy.data<scalar_t>(), x.data<scalar_t>(), data_or_null<scalar_t>(weight), mean.data<A>(),
          rstd.data<A>(), dx.data<scalar_t>(), R, C);
      BRIGADE_CUDA_CHECK_LAUNCH("layernorm_dx_kernel");
    }
    if ((!dweight.defined() && !dbias.defined()) || C == 0) return;
    if (R == 0) {  // no rows: the parameter gradients are zero
      if (dweight.defined()) BRIGADE_CUDA_CHECK(cudaMemsetAsync(dweight.data<A>(), 0, C * sizeof(A), stream));
      if (dbias.defined()) BRIGADE_CUDA_CHECK(cudaMemsetAsync(dbias.data<A>(), 0, C * sizeof(A), stream));
      return;
    }
    const int64_t P = std::min(R, kMaxParamPartials);
    const int64_t rows_per_partial = (R + P - 1) / P;
    const TensorOptions scratch_options = TensorOptions(acc_dtype<scalar_t>()).device(x.device());
    Tensor dweight_partial = dweight.defined() ? empty({P, C}, scratch_options) : Tensor();
    Tensor dbias_partial = dbias.defined() ? empty({P, C}, scratch_options) : Tensor();
    dim3 grid(static_cast<unsigned>((C + kParamThreads - 1) / kParamThreads), static_cast<unsigned>(P));
    layernorm_param_partials_kernel<scalar_t><<<grid, kParamThreads, 0, stream>>>(
        dy.data<scalar_t>(), x.data<scalar_t>(), mean.data<A>(), rstd.data<A>(),
        data_or_null<A>(dweight_partial), data_or_null<A>(dbias_partial), R, C, rows_per_partial);
    BRIGADE_CUDA_CHECK_LAUNCH("layernorm_param_partials_kernel");
    if (dweight.defined()) {
      column_sum_kernel<A><<<grid_for(C, kParamThreads), kParamThreads, 0, stream>>>(
          dweight_partial.data<A>(), dweight.data<A>(), P, C);
      BRIGADE_CUDA_CHECK_LAUNCH("column_sum_kernel (dweight)");
    }
    if (dbias.defined()) {
      column_sum_kernel<A><<<grid_for(C, kParamThreads), kParamThreads, 0, stream>>>(dbias_partial.data<A>(),
                                                                                     dbias.data<A>(), P, C);
      BRIGADE_CUDA_CHECK_LAUNCH("column_sum_kernel (dbias)");
    }
    // The scratch tensors are freed here; the caching allocator hands their blocks only to later work on
    // this same stream, which runs after these kernels.
  });
}

}  // namespace brigade::kernels::cuda
