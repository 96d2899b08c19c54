// Dropout and the causal mask on CUDA.
//
// dropout: out[i] = keep_i ? x[i] * scale : 0 with scale = acc_t(1 / (1 - p)) and
//   keep_i = philox::uniform(seed, offset, i) >= p, i the row-major element index of x. This is the CPU
//   rule to the bit: Philox is a pure function of (seed, offset, i), uniform() builds its float from 24
//   integer bits (exact on both devices), the comparison with p happens in double on both sides (float
//   promoted, as in the C++ CPU loop), so the same GeneratorState gives the same mask on CPU and CUDA; and
//   the kept value is one IEEE multiply by the same rounded scale. Backward and recomputation regenerate
//   the mask. p == 1 drops everything (uniform < 1).
// causal_mask: out[r, c] = 1 if c > r else 0, out [T, T] contiguous, any dtype.
//
// Launch shape: one thread per element, 256 threads per block, grid-stride loop (grid capped).
//
// Napkin math (H200, ~4.3 TB/s; fp32 ~67 TFLOP/s): dropout reads and writes 8 bytes per float32 element
// and runs 10 Philox rounds (~40 integer multiply/xor ops) per element: 64M elements -> 512 MiB -> ~125 us
// of memory time against ~2.6G integer ops (~40 us at the INT32 rate): memory-bound. causal_mask writes
// 4*T^2 bytes: T = 1024 -> 4 MiB -> ~1 us (launch-bound).
#include "kernels/backend.h"
#include "kernels/cuda/launch.cuh"
#include "tensor/philox.h"

namespace brigade::kernels::cuda {
namespace {

template <typename T>
__global__ void dropout_kernel(StridedView<const T> x, StridedView<T> out, int64_t n, double p,
                               acc_t<T> scale, uint64_t seed, uint64_t offset) {
  using A = acc_t<T>;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const bool keep = philox::keeps(seed, offset, static_cast<uint64_t>(i), p);
    out[i] = static_cast<T>(keep ? static_cast<A>(x[i]) * scale : A(0));
  }
}

template <typename T>
__global__ void causal_mask_kernel(T* __restrict__ out, int64_t T_len) {
  const int64_t n = T_len * T_len;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t row = i / T_len, col = i % T_len;
    out[i] = static_cast<T>(col > row ? 1.0f : 0.0f);
  }
}

}  // namespace

void dropout(const Tensor& x, double p, const GeneratorState& state, const Tensor& out) {
  const int64_t n = x.numel();
  if (n == 0) return;
  BRIGADE_CHECK_VALUE(p >= 0.0 && p <= 1.0, "dropout: expected p in [0, 1], found ", p);
  cudaStream_t stream = stream_for(x);
  BRIGADE_DISPATCH_FLOATING(x.dtype(), "dropout", [&] {
    // scale rounded to acc_t once on the host, then one multiply per element: the CPU reference's exact
    // arithmetic, so kept values match it bit for bit too. (p == 1 makes scale inf, but nothing is kept.)
    const auto scale = static_cast<acc_t<scalar_t>>(1.0 / (1.0 - p));
    dropout_kernel<scalar_t><<<grid_for(n, kElementwiseThreads), kElementwiseThreads, 0, stream>>>(
        make_view<const scalar_t>(x, "dropout"), make_view<scalar_t>(out, "dropout"), n, p, scale, state.seed,
        state.offset);
    BRIGADE_CUDA_CHECK_LAUNCH("dropout_kernel");
  });
}

void causal_mask(const Tensor& out) {
  const int64_t T_len = out.size(0);
  if (T_len == 0) return;
  cudaStream_t stream = stream_for(out);
  BRIGADE_DISPATCH_ALL(out.dtype(), "causal_mask", [&] {
    causal_mask_kernel<scalar_t>
        <<<grid_for(T_len * T_len, kElementwiseThreads), kElementwiseThreads, 0, stream>>>(
            out.data<scalar_t>(), T_len);
    BRIGADE_CUDA_CHECK_LAUNCH("causal_mask_kernel");
  });
}

}  // namespace brigade::kernels::cuda
