// Embedding gather (forward) and scatter-add (backward) on CUDA. weight/grad_weight [V, C], ids [N] int32 or
// int64, out/grad_out [N, C]; all contiguous.
//
// Forward: check_ids_kernel (one thread per id) lowers a device int64, initialised to INT64_MAX, with
// atomicMin to the position of every id outside [0, V); the host copies it back (one synchronisation), so
// the first bad position is reported whatever the scheduling. Then one thread per output element (grid-
// stride, 256 threads): out[n, c] = weight[ids[n], c]; rows of bad ids are left unwritten (the caller
// throws).
//
// Backward: one thread per grad_out element: grad_weight[ids[n], c] += grad_out[n, c] with atomicAdd.
//  - float32 / float64: atomicAdd straight into grad_weight.
//  - bfloat16: atomicAdd into a float32 [V, C] scratch (zeroed), then one conversion pass writes
//    grad_weight = bf16(scratch) (grad_weight is zero-filled by the caller, so this equals accumulating).
//    Accumulating in float avoids bf16 rounding at every repeated id; the price is 4*V*C bytes of scratch.
// Determinism: floating-point atomics add in the order the threads arrive, so a row hit by several ids can
// differ in the last bits between runs (float32: relative ~1e-7 per add). Rows hit once are exact.
//
// Napkin math (H200, ~4.3 TB/s): forward reads N*C weights (rows are contiguous: coalesced) and writes N*C:
// GPT-2 tokens N = 8192, C = 768, float32 -> 50 MB -> ~12 us. Backward reads N*C and does N*C atomics; with
// few repeats the atomics run near bandwidth (L2 atomics), heavy repetition of one id serialises on it.
#include <climits>

#include "kernels/backend.h"
#include "kernels/cuda/launch.cuh"
#include "tensor/device_ops.h"

namespace brigade::kernels::cuda {
namespace {

__global__ void init_first_bad_kernel(long long* first_bad) {
  *first_bad = LLONG_MAX;
}

/// Lowers *first_bad to the position of every id outside [0, V); one thread per id.
template <typename I>
__global__ void check_ids_kernel(const I* __restrict__ ids, int64_t N, int64_t V, long long* first_bad) {
  for (int64_t n = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; n < N;
       n += int64_t(gridDim.x) * blockDim.x) {
    const int64_t id = static_cast<int64_t>(ids[n]);
    if (id < 0 || id >= V) atomicMin(first_bad, static_cast<long long>(n));
  }
}

/// out[n, c] = weight[ids[n], c]; rows of out-of-range ids are skipped (check_ids_kernel reports them).
template <typename T, typename I>
__global__ void embedding_forward_kernel(const T* __restrict__ weight, const I* __restrict__ ids,
                                         T* __restrict__ out, int64_t N, int64_t C, int64_t V) {
  const int64_t total = N * C;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t n = i / C, c = i % C;
    const int64_t id = static_cast<int64_t>(ids[n]);
    if (id < 0 || id >= V) continue;
    out[i] = weight[id * C + c];
  }
}

/// grad_weight (or its float32 scratch, Acc) [ids[n], c] += grad_out[n, c]. ids are valid (checked by the
/// caller through embedding_forward's bounds rule).
template <typename T, typename Acc, typename I>
__global__ void embedding_backward_kernel(const T* __restrict__ grad_out, const I* __restrict__ ids,
                                          Acc* __restrict__ grad_weight, int64_t N, int64_t C, int64_t V) {
  const int64_t total = N * C;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t n = i / C, c = i % C;
    const int64_t id = static_cast<int64_t>(ids[n]);
    if (id < 0 || id >= V) continue;  // precondition says never; do not write out of bounds if violated
    atomicAdd(grad_weight + id * C + c, static_cast<Acc>(grad_out[i]));
  }
}

__global__ void float_to_bfloat16_kernel(const float* __restrict__ in, bfloat16* __restrict__ out,
                                         int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    out[i] = bfloat16(in[i]);
  }
}

}  // namespace

int64_t embedding_forward(const Tensor& weight, const Tensor& ids, const Tensor& out) {
  const int64_t N = ids.numel();
  const int64_t V = weight.size(0);
  const int64_t C = weight.size(1);
  if (N == 0) return -1;
  cudaStream_t stream = stream_for(weight);
  Tensor first_bad = empty({1}, TensorOptions(kInt64).device(weight.device()));
  long long* first_bad_ptr = reinterpret_cast<long long*>(first_bad.data<int64_t>());
  init_first_bad_kernel<<<1, 1, 0, stream>>>(first_bad_ptr);
  BRIGADE_CUDA_CHECK_LAUNCH("init_first_bad_kernel");
  BRIGADE_DISPATCH_INDEX(ids.dtype(), "embedding", [&] {
    using I = scalar_t;
    check_ids_kernel<I><<<grid_for(N, kElementwiseThreads), kElementwiseThreads, 0, stream>>>(
        ids.data<I>(), N, V, first_bad_ptr);
    BRIGADE_CUDA_CHECK_LAUNCH("check_ids_kernel");
    if (C == 0) return;
    BRIGADE_DISPATCH_FLOATING(weight.dtype(), "embedding", [&] {
      embedding_forward_kernel<scalar_t, I>
          <<<grid_for(N * C, kElementwiseThreads), kElementwiseThreads, 0, stream>>>(
              weight.data<scalar_t>(), ids.data<I>(), out.data<scalar_t>(), N, C, V);
      BRIGADE_CUDA_CHECK_LAUNCH("embedding_forward_kernel");
    });
  });
  int64_t host_first_bad = 0;
  ::brigade::detail::cuda::copy_bytes(&host_first_bad, Device::cpu(), first_bad_ptr, weight.device(),
                                      sizeof(int64_t));
  return host_first_bad == LLONG_MAX ? -1 : host_first_bad;
}

void embedding_backward(const Tensor& grad_out, const Tensor& ids, const Tensor& grad_weight) {
  const int64_t N = ids.numel();
  const int64_t V = grad_weight.size(0);
  const int64_t C = grad_weight.size(1);
  if (N == 0 || C == 0 || V == 0) return;
  cudaStream_t stream = stream_for(grad_weight);
  const unsigned blocks = grid_for(N * C, kElementwiseThreads);
  BRIGADE_DISPATCH_INDEX(ids.dtype(), "embedding_backward", [&] {
    using I = scalar_t;
    switch (grad_weight.dtype()) {
      case kFloat32:
        embedding_backward_kernel<float, float, I><<<blocks, kElementwiseThreads, 0, stream>>>(
            grad_out.data<float>(), ids.data<I>(), grad_weight.data<float>(), N, C, V);
        BRIGADE_CUDA_CHECK_LAUNCH("embedding_backward_kernel (float32)");
        break;
      case kFloat64:
        embedding_backward_kernel<double, double, I><<<blocks, kElementwiseThreads, 0, stream>>>(
            grad_out.data<double>(), ids.data<I>(), grad_weight.data<double>(), N, C, V);
        BRIGADE_CUDA_CHECK_LAUNCH("embedding_backward_kernel (float64)");
        break;
      case kBFloat16: {
        Tensor scratch = zeros({V, C}, TensorOptions(kFloat32).device(grad_weight.device()));
        embedding_backward_kernel<bfloat16, float, I><<<blocks, kElementwiseThreads, 0, stream>>>(
            grad_out.data<bfloat16>(), ids.data<I>(), scratch.data<float>(), N, C, V);
        BRIGADE_CUDA_CHECK_LAUNCH("embedding_backward_kernel (bfloat16 via float32)");
        float_to_bfloat16_kernel<<<grid_for(V * C, kElementwiseThreads), kElementwiseThreads, 0, stream>>>(
            scratch.data<float>(), grad_weight.data<bfloat16>(), V * C);
        BRIGADE_CUDA_CHECK_LAUNCH("float_to_bfloat16_kernel");
        break;
      }
      default:
        BRIGADE_THROW(DTypeError,
                      "embedding_backward: expected a floating dtype (float32, bfloat16, float64), "
                      "found ",
                      dtype_name(grad_weight.dtype()));
    }
  });
}

}  // namespace brigade::kernels::cuda
