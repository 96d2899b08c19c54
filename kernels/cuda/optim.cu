// Optimizer math on CUDA: one AdamW step in place, and the sum of squares used by global-norm clipping.
//
// adamw (param/grad T = float32, bfloat16 or float64; m, v in acc_t: float32, float64 for float64):
//   m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2
//   p = p - lr * ((m / bc1) / (sqrt(v / bc2) + eps) + wd * p),   bc1 = 1 - b1^t, bc2 = 1 - b2^t (host,
//   double) Math in acc_t; a bfloat16 param is read, updated in float32 and rounded once when stored. Launch:
//   one thread per element, 256 per block, grid-stride.
// adamw v2 (kernels/adamw_versions.h: AdamWKernel::CudaVector128, the default): the same arithmetic per
// element,
//   moved in packs of L = 16 / sizeof(acc_t) elements: m and v by one 16-byte access each, param and grad by
//   one L * sizeof(T)-byte access (16 for float32/float64, 8 for bfloat16); scalar head and tail
//   (vec128.cuh's GridPacks). Runs when all four tensors share an alignment at the head, else v1.
// sum_squares: sum of x^2 accumulated in double. sum_squares_partials_kernel: up to 1024 blocks of 256,
//   grid-stride, each block writes one double partial (block_reduce); sum_squares_finish_kernel: one block
//   adds the partials. Deterministic (no atomics, fixed order); the host reads one double back.
//
// Napkin math (H200, ~4.3 TB/s): AdamW on float32 reads p, g, m, v and writes p, m, v: 28 bytes/param.
// GPT-2 small, 124M params -> 3.5 GB -> ~0.81 ms at copy rate (bfloat16 params: 24 B/param, 0.69 ms);
// ~12 FLOP/param incl. one sqrt and one division: 1.5 GFLOP, far below the FP32 roof. v1 moves the same
// bytes with 4-byte accesses (7 memory instructions per element; v2 7 per 4 elements). Not yet measured.
// sum_squares reads 4 bytes/elt: 124M -> ~0.12 ms (FP64 adds at ~67 TFLOP/s on H200 are not the bound).
#include "kernels/adamw_versions.h"
#include "kernels/backend.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/vec128.cuh"
#include "tensor/device_ops.h"

namespace brigade::kernels::cuda {
namespace {

constexpr int kSumSquaresThreads = 256;
constexpr int64_t kMaxSumSquaresBlocks = 1024;

template <typename A>
struct AdamWConstants {
  A lr, beta1, beta2, eps, weight_decay;
  A bias_correction1, bias_correction2;  // 1 - beta^step
};

template <typename T>
__global__ void adamw_kernel(T* __restrict__ param, const T* __restrict__ grad, acc_t<T>* __restrict__ m,
                             acc_t<T>* __restrict__ v, int64_t n, AdamWConstants<acc_t<T>> k) {
  using A = acc_t<T>;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const A g = static_cast<A>(grad[i]);
    const A mi = k.beta1 * m[i] + (A(1) - k.beta1) * g;
    const A vi = k.beta2 * v[i] + (A(1) - k.beta2) * g * g;
    m[i] = mi;
    v[i] = vi;
    const A m_hat = mi / k.bias_correction1;
    const A v_hat = vi / k.bias_correction2;
    const A p = static_cast<A>(param[i]);
    param[i] = static_cast<T>(p - k.lr * (m_hat / (formulas::sqrt_of(v_hat) + k.eps) + k.weight_decay * p));
  }
}

/// One element of the AdamW update (v1's arithmetic, shared by v2).
template <typename T>
__device__ __forceinline__ void adamw_element(T& param, T grad, acc_t<T>& m, acc_t<T>& v,
                                              const AdamWConstants<acc_t<T>>& k) {
  using A = acc_t<T>;
  const A g = static_cast<A>(grad);
  const A mi = k.beta1 * m + (A(1) - k.beta1) * g;
  const A vi = k.beta2 * v + (A(1) - k.beta2) * g * g;
  m = mi;
  v = vi;
  const A m_hat = mi / k.bias_correction1;
  const A v_hat = vi / k.bias_correction2;
  const A p = static_cast<A>(param);
  param = static_cast<T>(p - k.lr * (m_hat / (formulas::sqrt_of(v_hat) + k.eps) + k.weight_decay * p));
}

/// v2: packs of L elements (L acc_t values in 16 bytes), scalar head and tail.
template <typename T>
__global__ void adamw_vec_kernel(T* __restrict__ param, const T* __restrict__ grad, acc_t<T>* __restrict__ m,
                                 acc_t<T>* __restrict__ v, GridPacks range, AdamWConstants<acc_t<T>> k) {
  using A = acc_t<T>;
  constexpr int L = kPack128<A>;
  range.run<L>([&](int64_t i) { adamw_element<T>(param[i], grad[i], m[i], v[i], k); },
               [&](int64_t i) {
                 Pack<T, L> p = load_pack<L>(param + i);
                 const Pack<T, L> g = load_pack<L>(grad + i);
                 Pack<A, L> mp = load_pack<L>(m + i), vp = load_pack<L>(v + i);
#pragma unroll
                 for (int j = 0; j < L; ++j) adamw_element<T>(p.v[j], g.v[j], mp.v[j], vp.v[j], k);
                 store_pack<L>(param + i, p);
                 store_pack<L>(m + i, mp);
                 store_pack<L>(v + i, vp);
               });
}

template <typename T>
__global__ void sum_squares_partials_kernel(const T* __restrict__ x, int64_t n,
                                            double* __restrict__ partials) {
  double acc = 0.0;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const double xi = static_cast<double>(static_cast<acc_t<T>>(x[i]));
    acc += xi * xi;
  }
  acc = block_sum(acc);
  if (threadIdx.x == 0) partials[blockIdx.x] = acc;
}

__global__ void sum_squares_finish_kernel(const double* __restrict__ partials, int64_t count,
                                          double* __restrict__ out) {
  double acc = 0.0;
  for (int64_t i = threadIdx.x; i < count; i += blockDim.x) acc += partials[i];
  acc = block_sum(acc);
  if (threadIdx.x == 0) *out = acc;
}

}  // namespace

void adamw_with(AdamWKernel kernel, const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v,
                const AdamWStep& s) {
  const int64_t n = param.numel();
  if (n == 0) return;
  BRIGADE_CHECK_VALUE(s.step >= 1, "adamw: step is 1-based, found ", s.step);
  cudaStream_t stream = stream_for(param);
  BRIGADE_DISPATCH_FLOATING(param.dtype(), "adamw", [&] {
    using A = acc_t<scalar_t>;
    AdamWConstants<A> k{static_cast<A>(s.lr),
                        static_cast<A>(s.beta1),
                        static_cast<A>(s.beta2),
                        static_cast<A>(s.eps),
                        static_cast<A>(s.weight_decay),
                        static_cast<A>(1.0 - std::pow(s.beta1, static_cast<double>(s.step))),
                        static_cast<A>(1.0 - std::pow(s.beta2, static_cast<double>(s.step)))};
    // v2 when element `head` (m's first 16-byte boundary) starts a whole pack in all four tensors.
    constexpr int L = kPack128<A>;
    const int64_t head = head_elements(m.data_ptr(), sizeof(A), 16);
    const int64_t pack_bytes = static_cast<int64_t>(sizeof(scalar_t)) * L;
    const bool vec = kernel == AdamWKernel::CudaVector128 && aligned_at(v.data_ptr(), head, sizeof(A), 16) &&
                     aligned_at(param.data_ptr(), head, sizeof(scalar_t), pack_bytes) &&
                     aligned_at(grad.data_ptr(), head, sizeof(scalar_t), pack_bytes);
    if (vec) {
      adamw_vec_kernel<scalar_t>
          <<<grid_for_packs(n, L, kElementwiseThreads), kElementwiseThreads, 0, stream>>>(
              param.data<scalar_t>(), grad.data<scalar_t>(), m.data<A>(), v.data<A>(), GridPacks{n, head}, k);
      BRIGADE_CUDA_CHECK_LAUNCH("adamw_vec_kernel");
    } else {
      adamw_kernel<scalar_t><<<grid_for(n, kElementwiseThreads), kElementwiseThreads, 0, stream>>>(
          param.data<scalar_t>(), grad.data<scalar_t>(), m.data<A>(), v.data<A>(), n, k);
      BRIGADE_CUDA_CHECK_LAUNCH("adamw_kernel");
    }
  });
}

void adamw(const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v, const AdamWStep& s) {
  cuda::adamw_with(default_adamw_kernel(DeviceKind::CUDA), param, grad, m, v, s);
}

double sum_squares(const Tensor& x) {
  const int64_t n = x.numel();
  if (n == 0) return 0.0;
  cudaStream_t stream = stream_for(x);
  const int64_t blocks = std::min<int64_t>(grid_for(n, kSumSquaresThreads), kMaxSumSquaresBlocks);
  // partials[0, blocks) then the result at [blocks].
  Tensor scratch = empty({blocks + 1}, TensorOptions(kFloat64).device(x.device()));
  double* partials = scratch.data<double>();
  BRIGADE_DISPATCH_FLOATING(x.dtype(), "sum_squares", [&] {
    sum_squares_partials_kernel<scalar_t>
        <<<static_cast<unsigned>(blocks), kSumSquaresThreads, 0, stream>>>(x.data<scalar_t>(), n, partials);
    BRIGADE_CUDA_CHECK_LAUNCH("sum_squares_partials_kernel");
  });
  sum_squares_finish_kernel<<<1, kSumSquaresThreads, 0, stream>>>(partials, blocks, partials + blocks);
  BRIGADE_CUDA_CHECK_LAUNCH("sum_squares_finish_kernel");
  double result = 0.0;
  ::brigade::detail::cuda::copy_bytes(&result, Device::cpu(), partials + blocks, x.device(), sizeof(double));
  return result;
}

}  // namespace brigade::kernels::cuda
