// Cross-entropy fused with log-softmax on CUDA. logits [N, V] contiguous, targets [N] int32/int64.
//
//   lse_n      = m_n + log(sum_j exp(logits[n, j] - m_n))       m_n = max_j logits[n, j]
//   row_loss_n = lse_n - logits[n, target_n]                    (0 where target_n == ignore_index)
//   grad[n, j] = (exp(logits[n, j] - lse_n) - [j == target_n]) / count   (0 rows where ignored)
//
// Launch shapes
//  1. cross_entropy_count_kernel: a single block of 1024 threads sweeps the N targets and reduces the count
//     of non-ignored targets and the first position whose target is outside [0, V) (block_reduce: sum, min;
//     no atomics). The host reads both back (one synchronisation): the count is needed to scale the
//     gradient, and a bad target stops the op before the main kernel runs.
//  2. cross_entropy_kernel: one block per row (grid-stride beyond 65535 rows), row_threads(V) threads. One
//     online pass computes (max, sum) (MaxSum in launch.cuh), a second pass writes the gradient row.
//     Deterministic (fixed reduction order).
//  2'. cross_entropy_vec_kernel (v2, CrossEntropyKernel::CudaVectorRow in kernels/cross_entropy_versions.h;
//  opt-in): the same
//     two passes with 16-byte loads and stores (4 float / 8 bf16 / 2 double per access). A row of odd V
//     starts anywhere, so each row is cut into a scalar head up to its first 16-byte boundary, whole packs,
//     and a scalar tail; the gradient row must share the logits row's alignment (host check, else v1).
//     Blocks of row_threads(V / L) threads, at most 512. Same formulas as v1; sums in another order.
//
// Napkin math (H200, ~4.3 TB/s): the count pass reads N ids (negligible). The main kernel reads logits
// twice and writes grad once: 12 bytes per float32 logit. GPT-2, N = 8192, V = 50304: 412M logits
// -> 4.9 GB -> ~1.15 ms (row_loss only: ~0.4 ms). bfloat16 halves the bytes. A row (201 KB float32) is
// re-read while it is still in L2 (132 rows in flight: 26 MB < 50 MB), so from HBM both versions move about
// 8 bytes per logit (~0.77 ms); v2 issues a quarter of v1's load/store instructions for them. Each logit
// costs two expf (one per pass); at ~4 T exp/s on the SFUs that is ~0.2 ms, under the memory time. Not
// yet measured.
#include <climits>

#include "kernels/backend.h"
#include "kernels/cross_entropy_versions.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/vec128.cuh"
#include "tensor/device_ops.h"

namespace brigade::kernels::cuda {
namespace {

constexpr int kCountThreads = kMaxRowThreads;

/// stats[0] = number of targets != ignore_index; stats[1] = first position with a target outside [0, V)
/// that is not ignore_index, or LLONG_MAX. Launched with exactly one block.
template <typename I>
__global__ void __launch_bounds__(kMaxRowThreads)
    cross_entropy_count_kernel(const I* __restrict__ targets, int64_t N, int64_t V, int64_t ignore_index,
                               long long* __restrict__ stats) {
  long long count = 0, first_bad = LLONG_MAX;
  for (int64_t n = threadIdx.x; n < N; n += blockDim.x) {
    const int64_t t = static_cast<int64_t>(targets[n]);
    if (t == ignore_index) continue;
    ++count;
    if ((t < 0 || t >= V) && n < first_bad) first_bad = n;
  }
  count = block_reduce(count, SumOp{}, 0LL);
  first_bad = block_reduce(first_bad, MinOp{}, LLONG_MAX);
  if (threadIdx.x == 0) {
    stats[0] = count;
    stats[1] = first_bad;
  }
}

/// Runs only when every non-ignored target is in [0, V). grad may be null (loss only).
template <typename T, typename I>
__global__ void __launch_bounds__(kMaxRowThreads)
    cross_entropy_kernel(const T* __restrict__ logits, const I* __restrict__ targets, int64_t ignore_index,
                         acc_t<T>* __restrict__ row_loss, T* __restrict__ grad, int64_t N, int64_t V,
                         acc_t<T> count) {
  using A = acc_t<T>;
  for (int64_t row = blockIdx.x; row < N; row += gridDim.x) {
    const T* xr = logits + row * V;
    const int64_t target = static_cast<int64_t>(targets[row]);
    if (target == ignore_index) {  // the same branch for the whole block: no block_reduce is skipped unevenly
      if (threadIdx.x == 0) row_loss[row] = A(0);
      if (grad != nullptr) {
        for (int64_t j = threadIdx.x; j < V; j += blockDim.x) grad[row * V + j] = T(0.0f);
      }
      continue;
    }
    MaxSum<A> stats = block_max_sum<A>(V, [&](int64_t j) { return static_cast<A>(xr[j]); });
    const A lse = stats.max + formulas::log_of(stats.sum);
    if (threadIdx.x == 0) row_loss[row] = lse - static_cast<A>(xr[target]);
    if (grad != nullptr) {
      T* gr = grad + row * V;
      for (int64_t j = threadIdx.x; j < V; j += blockDim.x) {
        A p = formulas::exp_of(static_cast<A>(xr[j]) - lse);
        gr[j] = static_cast<T>((p - (j == target ? A(1) : A(0))) / count);
      }
    }
  }
}

constexpr int kMaxVecRowThreads = 512;

/// v2: v1's two passes with 16-byte accesses; rows cut into head, packs and tail by their own alignment.
/// grad, when not null, has the logits' alignment modulo 16 bytes (checked by the host).
template <typename T, typename I>
__global__ void __launch_bounds__(kMaxVecRowThreads)
    cross_entropy_vec_kernel(const T* __restrict__ logits, const I* __restrict__ targets,
                             int64_t ignore_index, acc_t<T>* __restrict__ row_loss, T* __restrict__ grad,
                             int64_t N, int64_t V, acc_t<T> count) {
  using A = acc_t<T>;
  constexpr int L = kPack128<T>;
  const int64_t tid = threadIdx.x, threads = blockDim.x;
  for (int64_t row = blockIdx.x; row < N; row += gridDim.x) {
    const T* xr = logits + row * V;
    T* gr = grad != nullptr ? grad + row * V : nullptr;
    const int64_t target = static_cast<int64_t>(targets[row]);
    const int64_t head_raw = head_elements(xr, sizeof(T), 16);
    const int64_t head = head_raw < V ? head_raw : V;
    const int64_t packs = (V - head) / L, tail = head + packs * L;
    if (target == ignore_index) {  // uniform over the block, as in v1
      if (tid == 0) row_loss[row] = A(0);
      if (gr != nullptr) {
        for (int64_t j = tid; j < V; j += threads) gr[j] = T(0.0f);
      }
      continue;
    }
    MaxSum<A> stats = max_sum_empty<A>();
    for (int64_t j = tid; j < head; j += threads) stats = max_sum_add(stats, static_cast<A>(xr[j]));
    for (int64_t p = tid; p < packs; p += threads) {
      const Pack<T, L> x = load_pack<L>(xr + head + p * L);
#pragma unroll
      for (int k = 0; k < L; ++k) stats = max_sum_add(stats, static_cast<A>(x.v[k]));
    }
    for (int64_t j = tail + tid; j < V; j += threads) stats = max_sum_add(stats, static_cast<A>(xr[j]));
    stats = block_reduce(stats, MaxSumMerge{}, max_sum_empty<A>());
    const A lse = stats.max + formulas::log_of(stats.sum);
    if (tid == 0) row_loss[row] = lse - static_cast<A>(xr[target]);
    if (gr == nullptr) continue;
    auto grad_of = [&](int64_t j, T x) {
      const A p = formulas::exp_of(static_cast<A>(x) - lse);
      return static_cast<T>((p - (j == target ? A(1) : A(0))) / count);
    };
    for (int64_t j = tid; j < head; j += threads) gr[j] = grad_of(j, xr[j]);
    for (int64_t p = tid; p < packs; p += threads) {
      const int64_t j0 = head + p * L;
      Pack<T, L> x = load_pack<L>(xr + j0);
#pragma unroll
      for (int k = 0; k < L; ++k) x.v[k] = grad_of(j0 + k, x.v[k]);
      store_pack<L>(gr + j0, x);
    }
    for (int64_t j = tail + tid; j < V; j += threads) gr[j] = grad_of(j, xr[j]);
  }
}
}  // namespace

int64_t cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index,
                      const Tensor& row_loss, const Tensor& grad, int64_t* count) {
  return cuda::cross_entropy_with(default_cross_entropy_kernel(DeviceKind::CUDA), logits, targets,
                                  ignore_index, row_loss, grad, count);
}

int64_t cross_entropy_with(CrossEntropyKernel kernel, const Tensor& logits, const Tensor& targets,
                           int64_t ignore_index, const Tensor& row_loss, const Tensor& grad, int64_t* count) {
  const int64_t N = targets.numel();
  const int64_t V = logits.size(-1);
  *count = 0;
  if (N == 0) return -1;
  cudaStream_t stream = stream_for(logits);

  Tensor stats = empty({2}, TensorOptions(kInt64).device(logits.device()));
  long long* stats_ptr = reinterpret_cast<long long*>(stats.data<int64_t>());
  BRIGADE_DISPATCH_INDEX(targets.dtype(), "cross_entropy", [&] {
    cross_entropy_count_kernel<scalar_t>
        <<<1, kCountThreads, 0, stream>>>(targets.data<scalar_t>(), N, V, ignore_index, stats_ptr);
    BRIGADE_CUDA_CHECK_LAUNCH("cross_entropy_count_kernel");
  });
  int64_t host_stats[2] = {0, 0};
  ::brigade::detail::cuda::copy_bytes(host_stats, Device::cpu(), stats_ptr, logits.device(),
                                      sizeof(host_stats));
  *count = host_stats[0];
  if (host_stats[1] != LLONG_MAX) return host_stats[1];

  BRIGADE_DISPATCH_FLOATING(logits.dtype(), "cross_entropy", [&] {
    using T = scalar_t;
    using A = acc_t<T>;
    T* grad_ptr = grad.defined() ? grad.data<T>() : nullptr;
    A* loss_ptr = row_loss.data<A>();
    BRIGADE_DISPATCH_INDEX(targets.dtype(), "cross_entropy", [&] {
      // v2 needs the gradient rows aligned as the logits rows (both from the allocator: they are).
      const bool vec =
          kernel == CrossEntropyKernel::CudaVectorRow &&
          (grad_ptr == nullptr ||
           (reinterpret_cast<uintptr_t>(grad_ptr) - reinterpret_cast<uintptr_t>(logits.data<T>())) % 16 == 0);
      if (vec) {
        constexpr int L = kPack128<T>;
        const int threads = std::min(row_threads((V + L - 1) / L), kMaxVecRowThreads);
        cross_entropy_vec_kernel<T, scalar_t>
            <<<row_blocks(N), threads, 0, stream>>>(logits.data<T>(), targets.data<scalar_t>(), ignore_index,
                                                    loss_ptr, grad_ptr, N, V, static_cast<A>(*count));
        BRIGADE_CUDA_CHECK_LAUNCH("cross_entropy_vec_kernel");
      } else {
        cross_entropy_kernel<T, scalar_t><<<row_blocks(N), row_threads(V), 0, stream>>>(
            logits.data<T>(), targets.data<scalar_t>(), ignore_index, loss_ptr, grad_ptr, N, V,
            static_cast<A>(*count));
        BRIGADE_CUDA_CHECK_LAUNCH("cross_entropy_kernel");
      }
    });
  });
  return -1;
}

}  // namespace brigade::kernels::cuda
