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
// That is backward v1 (EmbeddingBackwardKernel::CudaAtomic in kernels/embedding_backward_versions.h).
//
// Backward v2 (Sorted, the default): deterministic, and the CPU backend's sums exactly (bit for bit):
//  1. bucket_count_kernel: counts[id] += 1 per position (integer atomics: the counts do not depend on order).
//  2. bucket_starts_kernel (one block of 1024): starts = exclusive prefix sum of counts, starts[V] = N.
//  3. bucket_scatter_kernel: each position takes a slot of its bucket with an integer atomic on cursor[id]
//     (the set of positions in each bucket is fixed; their order in it is not).
//  4. bucket_rank_kernel: the position n of bucket b goes to order[starts[b] + r], r = the number of the
//     bucket's positions smaller than n (a scan of the bucket). So order[] lists each id's positions in
//     increasing position order, whatever order step 3 wrote them in.
//  5. bucket_sum_kernel: one warp per (id, 32 columns), lane = column: sums grad_out rows order[starts[id]],
//     ... in that order, in double, and adds the sum to grad_weight once (rounded once; the CPU backend does
//     the same adds in the same order, so the results are identical).
// Cost: step 4 does sum over ids of k^2 comparisons for an id with k positions (cached reads of a bucket that
// fits in L1; one id at all 8192 positions: 67M, 8192 serial steps per thread, ~20 us); step 5 reads grad_out
// once (coalesced rows) and writes each touched row once: 2 x N x C x es bytes, plus V x C/32 warps that find
// an empty bucket and stop. Integer scratch: 3 V + 1 + 2 N int32. A very frequent id is the slow case: its
// C/32 warps each walk all of its k rows in order (k dependent adds, loads unrolled 8 deep); one id at all
// 8192 positions of a GPT-2 batch would take a few hundred us (estimate).
//
// Napkin math (H200, ~4.3 TB/s): forward reads N*C weights (rows are contiguous: coalesced) and writes N*C:
// GPT-2 tokens N = 8192, C = 768, float32 -> 50 MB -> ~12 us. Backward reads N*C and does N*C atomics; with
// few repeats the atomics run near bandwidth (L2 atomics), heavy repetition of one id serialises on it.
#include <climits>

#include "kernels/backend.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/embedding_backward_versions.h"
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

// ---- backward v2: deterministic buckets ------------------------------------------------------------------

constexpr int kScanThreads = 1024;

/// counts[ids[n]] += 1 for every position n. Ids outside [0, V) are skipped here and in the two kernels
/// below (the precondition says there are none; as in v1, a violation must not write out of bounds).
template <typename I>
__global__ void bucket_count_kernel(const I* __restrict__ ids, int64_t N, int64_t V,
                                    int* __restrict__ counts) {
  for (int64_t n = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; n < N;
       n += int64_t(gridDim.x) * blockDim.x) {
    const int64_t id = static_cast<int64_t>(ids[n]);
    if (id < 0 || id >= V) continue;
    atomicAdd(counts + id, 1);
  }
}

/// starts[v] = counts[0] + ... + counts[v - 1] for v in [0, V], one block: thread t sums a segment of
/// counts, thread 0 scans the segment sums, each thread writes its segment's starts.
__global__ void __launch_bounds__(kScanThreads)
    bucket_starts_kernel(const int* __restrict__ counts, int64_t V, int* __restrict__ starts) {
  __shared__ int segment_start[kScanThreads];
  const int64_t per = (V + blockDim.x - 1) / blockDim.x;
  const int64_t lo_raw = static_cast<int64_t>(threadIdx.x) * per;
  const int64_t lo = lo_raw < V ? lo_raw : V;
  const int64_t hi = lo + per < V ? lo + per : V;
  int sum = 0;
  for (int64_t j = lo; j < hi; ++j) sum += counts[j];
  segment_start[threadIdx.x] = sum;
  __syncthreads();
  if (threadIdx.x == 0) {
    int running = 0;
    for (unsigned t = 0; t < blockDim.x; ++t) {
      const int c = segment_start[t];
      segment_start[t] = running;
      running += c;
    }
    starts[V] = running;
  }
  __syncthreads();
  int running = segment_start[threadIdx.x];
  for (int64_t j = lo; j < hi; ++j) {
    starts[j] = running;
    running += counts[j];
  }
}

/// unsorted[starts[id] + cursor[id]++] = n for every position n (cursor zero on entry): each bucket gets its
/// positions, in the order the atomics happen to run.
template <typename I>
__global__ void bucket_scatter_kernel(const I* __restrict__ ids, int64_t N, int64_t V,
                                      const int* __restrict__ starts, int* __restrict__ cursor,
                                      int* __restrict__ unsorted) {
  for (int64_t n = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; n < N;
       n += int64_t(gridDim.x) * blockDim.x) {
    const int64_t id = static_cast<int64_t>(ids[n]);
    if (id < 0 || id >= V) continue;
    unsorted[starts[id] + atomicAdd(cursor + id, 1)] = static_cast<int>(n);
  }
}

/// order[starts[b] + r] = n for every position n of bucket b = ids[n], r = the number of positions of the
/// bucket smaller than n: each bucket sorted by position, a pure function of the ids (deterministic).
template <typename I>
__global__ void bucket_rank_kernel(const I* __restrict__ ids, int64_t N, int64_t V,
                                   const int* __restrict__ starts, const int* __restrict__ unsorted,
                                   int* __restrict__ order) {
  for (int64_t n = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; n < N;
       n += int64_t(gridDim.x) * blockDim.x) {
    const int64_t id = static_cast<int64_t>(ids[n]);
    if (id < 0 || id >= V) continue;
    const int begin = starts[id], end = starts[id + 1];
    int rank = 0;
    for (int k = begin; k < end; ++k) rank += unsorted[k] < n ? 1 : 0;
    order[begin + rank] = static_cast<int>(n);
  }
}

/// grad_weight[v, c] += sum over k in [starts[v], starts[v + 1]) of grad_out[order[k], c], summed in double
/// in order. One warp per (v, 32 columns); lane = column.
template <typename T>
__global__ void bucket_sum_kernel(const T* __restrict__ grad_out, const int* __restrict__ starts,
                                  const int* __restrict__ order, T* __restrict__ grad_weight, int64_t V,
                                  int64_t C) {
  const int64_t groups = (C + kWarpSize - 1) / kWarpSize;
  const int64_t tasks = V * groups;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * (blockDim.x / kWarpSize);
  const int lane = static_cast<int>(threadIdx.x % kWarpSize);
  for (int64_t task = blockIdx.x * int64_t(blockDim.x / kWarpSize) + threadIdx.x / kWarpSize; task < tasks;
       task += warps) {
    const int64_t v = task / groups;
    const int64_t c = (task % groups) * kWarpSize + lane;
    const int begin = starts[v], end = starts[v + 1];
    if (begin == end || c >= C) continue;
    double acc = 0.0;
    // Unrolled so that several rows' loads are in flight; the adds stay in position order.
#pragma unroll 8
    for (int k = begin; k < end; ++k)
      acc += static_cast<double>(grad_out[static_cast<int64_t>(order[k]) * C + c]);
    T* dst = grad_weight + v * C + c;
    *dst = static_cast<T>(static_cast<double>(*dst) + acc);
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

namespace {

void embedding_backward_atomic(const Tensor& grad_out, const Tensor& ids, const Tensor& grad_weight) {
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

void embedding_backward_sorted(const Tensor& grad_out, const Tensor& ids, const Tensor& grad_weight) {
  const int64_t N = ids.numel();
  const int64_t V = grad_weight.size(0);
  const int64_t C = grad_weight.size(1);
  if (N == 0 || C == 0 || V == 0) return;
  BRIGADE_CHECK_VALUE(N < INT_MAX && V < INT_MAX,
                      "embedding_backward: the sorted kernel indexes with int32; ",
                      "expected fewer than 2^31 - 1 positions and ids, found N ", N, ", V ", V);
  cudaStream_t stream = stream_for(grad_weight);
  // int32 scratch: counts [V] and cursor [V] (zeroed), starts [V + 1], unsorted [N], order [N].
  Tensor scratch = empty({3 * V + 1 + 2 * N}, TensorOptions(kInt32).device(grad_weight.device()));
  int* counts = scratch.data<int32_t>();
  int* cursor = counts + V;
  int* starts = cursor + V;
  int* unsorted = starts + V + 1;
  int* order = unsorted + N;
  BRIGADE_CUDA_CHECK(cudaMemsetAsync(counts, 0, sizeof(int) * 2 * static_cast<size_t>(V), stream));
  BRIGADE_DISPATCH_INDEX(ids.dtype(), "embedding_backward", [&] {
    using I = scalar_t;
    const unsigned blocks = grid_for(N, kElementwiseThreads);
    bucket_count_kernel<I><<<blocks, kElementwiseThreads, 0, stream>>>(ids.data<I>(), N, V, counts);
    BRIGADE_CUDA_CHECK_LAUNCH("bucket_count_kernel");
    bucket_starts_kernel<<<1, kScanThreads, 0, stream>>>(counts, V, starts);
    BRIGADE_CUDA_CHECK_LAUNCH("bucket_starts_kernel");
    bucket_scatter_kernel<I>
        <<<blocks, kElementwiseThreads, 0, stream>>>(ids.data<I>(), N, V, starts, cursor, unsorted);
    BRIGADE_CUDA_CHECK_LAUNCH("bucket_scatter_kernel");
    bucket_rank_kernel<I>
        <<<blocks, kElementwiseThreads, 0, stream>>>(ids.data<I>(), N, V, starts, unsorted, order);
    BRIGADE_CUDA_CHECK_LAUNCH("bucket_rank_kernel");
  });
  const int64_t warp_tasks = V * ((C + kWarpSize - 1) / kWarpSize);
  BRIGADE_DISPATCH_FLOATING(grad_weight.dtype(), "embedding_backward", [&] {
    bucket_sum_kernel<scalar_t>
        <<<grid_for(warp_tasks * kWarpSize, kElementwiseThreads), kElementwiseThreads, 0, stream>>>(
            grad_out.data<scalar_t>(), starts, order, grad_weight.data<scalar_t>(), V, C);
    BRIGADE_CUDA_CHECK_LAUNCH("bucket_sum_kernel");
  });
}

}  // namespace

void embedding_backward_with(EmbeddingBackwardKernel kernel, const Tensor& grad_out, const Tensor& ids,
                             const Tensor& grad_weight) {
  if (kernel == EmbeddingBackwardKernel::CudaSorted)
    return embedding_backward_sorted(grad_out, ids, grad_weight);
  embedding_backward_atomic(grad_out, ids, grad_weight);
}

void embedding_backward(const Tensor& grad_out, const Tensor& ids, const Tensor& grad_weight) {
  cuda::embedding_backward_with(default_embedding_backward_kernel(DeviceKind::CUDA), grad_out, ids,
                                grad_weight);
}

}  // namespace brigade::kernels::cuda
