// Fused causal attention on CUDA, version 1: the simple, obviously-right kernels (kernels.h:
// causal_attention; AttentionKernel::CudaSimple, kernels/attention_versions.h, the default). The fast
// flash-attention kernels live beside these; v1 stays as the readable baseline.
//
//   q, k, v, out, dout, dq, dk, dv [B, H, T, D] (stride 1 on D, other strides arbitrary), lse [B, H, T]
//   forward   s_ij = scale q_i.k_j (j <= i),  lse_i = log sum_j exp(s_ij),  out_i = sum_j exp(s_ij - lse_i)
//   v_j backward  p_ij = exp(s_ij - lse_i),  delta_i = dout_i.out_i,  ds_ij = p_ij (dout_i.v_j - delta_i)
//             dq_i = scale sum_{j<=i} ds_ij k_j,  dk_j = scale sum_{i>=j} ds_ij q_i,  dv_j = sum_{i>=j} p_ij
//             dout_i
//
// Launch shapes (every kernel: one block per row, grid-stride over rows beyond 65535, kThreads threads;
// dynamic shared memory holds one row of T scores plus one D vector, in acc_t):
//  - attention_forward_kernel: block = query row (b, h, i). Threads split the keys j <= i (each computes a
//    D-long dot product), block_reduce gives the max and the sum, then threads split d for the weighted
//    sum of v. Writes out_i and lse_i.
//  - attention_backward_query_kernel: block = query row i. Recomputes p_i., ds_i. into shared memory, writes
//    dq_i and delta_i (a [B, H, T] scratch for the next kernel).
//  - attention_backward_key_kernel: block = key row j. Recomputes p_ij and ds_ij for the queries i >= j
//    (using lse_i and delta_i), then threads split d for dk_j and dv_j. Each output element has exactly
//    one writer: no atomics, deterministic.
// bfloat16 is read and written as bfloat16, all math in float; T + D acc values of shared memory per block
// (T <= ~12k for float32 within the 48 KiB default).
//
// Napkin math (H200: ~67 TFLOP/s fp32, ~4.3 TB/s): forward is 2 T^2 D B H flops (T(T+1)/2 keys per query, a
// dot product and an axpy each). Every block re-reads its keys and values from L2/HBM: T/2 rows of 2 D
// values per query -> ~T^2 D B H * 4 B of traffic for float32, i.e. ~1 flop per byte: memory/L2 bound at
// ~4 TFLOP/s even if L2 serves it all, ~6% of fp32 peak. GPT-2 small (B 8, H 12, T 1024, D 64): 13 GFLOP
// forward -> ~3 ms at best; backward recomputes the scores twice and does 3 more products: ~4x that.
// Next: v2 (kernels/cuda/attention_flash.cu), tiles of 64 queries sharing each loaded key tile in shared
// memory (64x less K/V traffic), is the fix.
#include "kernels/backend.h"
#include "kernels/cuda/attention_heads.cuh"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/v1_launchers.h"

namespace brigade::kernels::cuda {
namespace {

constexpr int kThreads = 128;
/// Default dynamic shared memory limit per block (no opt-in attribute needed below it).
constexpr int64_t kMaxSharedBytes = 48 * 1024;

struct MaxOp {
  template <typename A>
  __device__ A operator()(A a, A b) const {
    return b > a ? b : a;
  }
};

template <typename T>
__global__ void __launch_bounds__(kThreads)
    attention_forward_kernel(const T* __restrict__ q, Heads qa, const T* __restrict__ k, Heads ka,
                             const T* __restrict__ v, Heads va, T* __restrict__ out, Heads oa,
                             acc_t<T>* __restrict__ lse, int64_t BH, int64_t H, int64_t Tn, int64_t D,
                             acc_t<T> scale) {
  using A = acc_t<T>;
  extern __shared__ unsigned char shared_bytes[];
  A* s = reinterpret_cast<A*>(shared_bytes);  // [Tn] scores of this query row
  A* qi = s + Tn;                             // [D]
  for (int64_t row = blockIdx.x; row < BH * Tn; row += gridDim.x) {
    const int64_t bh = row / Tn, i = row % Tn, n = i + 1;
    const T* qrow = q + row_at(qa, bh, H, i);
    __syncthreads();  // the previous row's readers of s and qi are done
    for (int64_t d = threadIdx.x; d < D; d += blockDim.x) qi[d] = static_cast<A>(qrow[d]);
    __syncthreads();
    A local_max = -math::infinity<A>();
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
      const T* krow = k + row_at(ka, bh, H, j);
      A dot = A(0);
      for (int64_t d = 0; d < D; ++d) dot += qi[d] * static_cast<A>(krow[d]);
      s[j] = dot * scale;
      local_max = s[j] > local_max ? s[j] : local_max;
    }
    const A m = block_reduce(local_max, MaxOp{}, -math::infinity<A>());
    A local_sum = A(0);
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
      s[j] = formulas::exp_of(s[j] - m);
      local_sum += s[j];
    }
    const A l = block_sum(local_sum);  // synchronises: every s[j] is written
    const A inv = A(1) / l;
    T* orow = out + row_at(oa, bh, H, i);
    for (int64_t d = threadIdx.x; d < D; d += blockDim.x) {
      A acc = A(0);
      for (int64_t j = 0; j < n; ++j) acc += s[j] * static_cast<A>(v[row_at(va, bh, H, j) + d]);
      orow[d] = static_cast<T>(acc * inv);
    }
    if (threadIdx.x == 0) lse[row] = m + formulas::log_of(l);
  }
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    attention_backward_query_kernel(const T* __restrict__ dout, Heads ga, const T* __restrict__ q, Heads qa,
                                    const T* __restrict__ k, Heads ka, const T* __restrict__ v, Heads va,
                                    const T* __restrict__ out, Heads oa, const acc_t<T>* __restrict__ lse,
                                    T* __restrict__ dq, Heads dqa, acc_t<T>* __restrict__ delta, int64_t BH,
                                    int64_t H, int64_t Tn, int64_t D, acc_t<T> scale) {
  using A = acc_t<T>;
  extern __shared__ unsigned char shared_bytes[];
  A* ds = reinterpret_cast<A*>(shared_bytes);  // [Tn]
  A* gi = ds + Tn;                             // [D] dout_i
  for (int64_t row = blockIdx.x; row < BH * Tn; row += gridDim.x) {
    const int64_t bh = row / Tn, i = row % Tn, n = i + 1;
    const T* grow = dout + row_at(ga, bh, H, i);
    const T* orow = out + row_at(oa, bh, H, i);
    const T* qrow = q + row_at(qa, bh, H, i);
    __syncthreads();
    A partial = A(0);
    for (int64_t d = threadIdx.x; d < D; d += blockDim.x) {
      gi[d] = static_cast<A>(grow[d]);
      partial += gi[d] * static_cast<A>(orow[d]);
    }
    const A delta_i = block_sum(partial);  // synchronises: gi is complete
    const A lse_i = lse[row];
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
      const T* krow = k + row_at(ka, bh, H, j);
      const T* vrow = v + row_at(va, bh, H, j);
      A score = A(0), dp = A(0);
      for (int64_t d = 0; d < D; ++d) {
        score += static_cast<A>(qrow[d]) * static_cast<A>(krow[d]);
        dp += gi[d] * static_cast<A>(vrow[d]);
      }
      const A p = formulas::exp_of(score * scale - lse_i);
      ds[j] = p * (dp - delta_i);
    }
    __syncthreads();
    T* dqrow = dq + row_at(dqa, bh, H, i);
    for (int64_t d = threadIdx.x; d < D; d += blockDim.x) {
      A acc = A(0);
      for (int64_t j = 0; j < n; ++j) acc += ds[j] * static_cast<A>(k[row_at(ka, bh, H, j) + d]);
      dqrow[d] = static_cast<T>(acc * scale);
    }
    if (threadIdx.x == 0) delta[row] = delta_i;
  }
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    attention_backward_key_kernel(const T* __restrict__ dout, Heads ga, const T* __restrict__ q, Heads qa,
                                  const T* __restrict__ k, Heads ka, const T* __restrict__ v, Heads va,
                                  const acc_t<T>* __restrict__ lse, const acc_t<T>* __restrict__ delta,
                                  T* __restrict__ dk, Heads dka, T* __restrict__ dv, Heads dva, int64_t BH,
                                  int64_t H, int64_t Tn, int64_t D, acc_t<T> scale) {
  using A = acc_t<T>;
  extern __shared__ unsigned char shared_bytes[];
  A* p = reinterpret_cast<A*>(shared_bytes);  // [Tn]: p_ij at index i (i >= j)
  A* ds = p + Tn;                             // [Tn]
  A* kj = ds + Tn;                            // [D]
  A* vj = kj + D;                             // [D]
  for (int64_t row = blockIdx.x; row < BH * Tn; row += gridDim.x) {
    const int64_t bh = row / Tn, j = row % Tn;
    const T* krow = k + row_at(ka, bh, H, j);
    const T* vrow = v + row_at(va, bh, H, j);
    __syncthreads();
    for (int64_t d = threadIdx.x; d < D; d += blockDim.x) {
      kj[d] = static_cast<A>(krow[d]);
      vj[d] = static_cast<A>(vrow[d]);
    }
    __syncthreads();
    const int64_t first = bh * Tn;  // lse and delta of (b, h) start here
    for (int64_t i = j + threadIdx.x; i < Tn; i += blockDim.x) {
      const T* qrow = q + row_at(qa, bh, H, i);
      const T* grow = dout + row_at(ga, bh, H, i);
      A score = A(0), dp = A(0);
      for (int64_t d = 0; d < D; ++d) {
        score += static_cast<A>(qrow[d]) * kj[d];
        dp += static_cast<A>(grow[d]) * vj[d];
      }
      const A pij = formulas::exp_of(score * scale - lse[first + i]);
      p[i] = pij;
      ds[i] = pij * (dp - delta[first + i]);
    }
    __syncthreads();
    T* dkrow = dk + row_at(dka, bh, H, j);
    T* dvrow = dv + row_at(dva, bh, H, j);
    for (int64_t d = threadIdx.x; d < D; d += blockDim.x) {
      A acc_k = A(0), acc_v = A(0);
      for (int64_t i = j; i < Tn; ++i) {
        acc_k += ds[i] * static_cast<A>(q[row_at(qa, bh, H, i) + d]);
        acc_v += p[i] * static_cast<A>(dout[row_at(ga, bh, H, i) + d]);
      }
      dkrow[d] = static_cast<T>(acc_k * scale);
      dvrow[d] = static_cast<T>(acc_v);
    }
  }
}

/// Dynamic shared memory of `kernel` needing `values` acc values; throws ValueError when it and the kernel's
/// static shared memory (block_reduce's partials) pass the default 48 KiB limit, which would otherwise be a
/// launch failure instead of a clear error.
size_t shared_bytes_for(const char* op, const void* kernel, int64_t values, size_t value_size, int64_t Tn,
                        int64_t D) {
  cudaFuncAttributes attributes{};
  BRIGADE_CUDA_CHECK(cudaFuncGetAttributes(&attributes, kernel));
  const int64_t static_bytes = static_cast<int64_t>(attributes.sharedSizeBytes);
  const int64_t bytes = values * static_cast<int64_t>(value_size);
  BRIGADE_CHECK_VALUE(bytes + static_bytes <= kMaxSharedBytes, op,
                      ": the CUDA v1 kernel keeps a row of T scores in shared memory and needs ", bytes,
                      " bytes (plus ", static_bytes, " static) for T = ", Tn, ", D = ", D, "; the limit is ",
                      kMaxSharedBytes);
  return static_cast<size_t>(bytes);
}

}  // namespace

void causal_attention_forward_v1(const Tensor& q, const Tensor& k, const Tensor& v, double scale,
                                 const Tensor& out, const Tensor& lse) {
  const int64_t H = q.size(1), Tn = q.size(2), D = q.size(3), BH = q.size(0) * H;
  cudaStream_t stream = stream_for(q);
  BRIGADE_DISPATCH_FLOATING(q.dtype(), "causal_attention", [&] {
    using A = acc_t<scalar_t>;
    const size_t shared = shared_bytes_for("causal_attention",
                                           reinterpret_cast<const void*>(&attention_forward_kernel<scalar_t>),
                                           Tn + D, sizeof(A), Tn, D);
    attention_forward_kernel<scalar_t><<<row_blocks(BH * Tn), kThreads, shared, stream>>>(
        q.data<scalar_t>(), heads(q), k.data<scalar_t>(), heads(k), v.data<scalar_t>(), heads(v),
        out.data<scalar_t>(), heads(out), lse.data<A>(), BH, H, Tn, D, static_cast<A>(scale));
    BRIGADE_CUDA_CHECK_LAUNCH("attention_forward_kernel");
  });
}

void causal_attention_backward_v1(const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v,
                                  const Tensor& out, const Tensor& lse, double scale, const Tensor& dq,
                                  const Tensor& dk, const Tensor& dv) {
  const int64_t H = q.size(1), Tn = q.size(2), D = q.size(3), BH = q.size(0) * H;
  cudaStream_t stream = stream_for(q);
  BRIGADE_DISPATCH_FLOATING(q.dtype(), "causal_attention_backward", [&] {
    using A = acc_t<scalar_t>;
    Tensor delta = empty({BH * Tn}, TensorOptions(acc_dtype<scalar_t>()).device(q.device()));
    const size_t query_shared = shared_bytes_for(
        "causal_attention_backward",
        reinterpret_cast<const void*>(&attention_backward_query_kernel<scalar_t>), Tn + D, sizeof(A), Tn, D);
    const size_t key_shared = shared_bytes_for(
        "causal_attention_backward", reinterpret_cast<const void*>(&attention_backward_key_kernel<scalar_t>),
        2 * Tn + 2 * D, sizeof(A), Tn, D);
    attention_backward_query_kernel<scalar_t><<<row_blocks(BH * Tn), kThreads, query_shared, stream>>>(
        dout.data<scalar_t>(), heads(dout), q.data<scalar_t>(), heads(q), k.data<scalar_t>(), heads(k),
        v.data<scalar_t>(), heads(v), out.data<scalar_t>(), heads(out), lse.data<A>(), dq.data<scalar_t>(),
        heads(dq), delta.data<A>(), BH, H, Tn, D, static_cast<A>(scale));
    BRIGADE_CUDA_CHECK_LAUNCH("attention_backward_query_kernel");
    attention_backward_key_kernel<scalar_t><<<row_blocks(BH * Tn), kThreads, key_shared, stream>>>(
        dout.data<scalar_t>(), heads(dout), q.data<scalar_t>(), heads(q), k.data<scalar_t>(), heads(k),
        v.data<scalar_t>(), heads(v), lse.data<A>(), delta.data<A>(), dk.data<scalar_t>(), heads(dk),
        dv.data<scalar_t>(), heads(dv), BH, H, Tn, D, static_cast<A>(scale));
    BRIGADE_CUDA_CHECK_LAUNCH("attention_backward_key_kernel");
  });
}

}  // namespace brigade::kernels::cuda
