// Fused causal attention on CUDA, version 2: flash-attention tiles (v1, one row per block, is
// kernels/cuda/attention.cu; v3 and v4 are kernels/cuda/attention_flash_tc.cu; the versions are registered in
// kernels/attention_versions.h). This file also holds the version dispatch (cuda::causal_attention_*_with)
// and the backend entry points, which run the default.
//
//   q, k, v, out, dout, dq, dk, dv [B, H, T, D] (stride 1 on D, other strides arbitrary), lse [B, H, T]
//   forward   s_ij = scale q_i.k_j (j <= i),  lse_i = log sum_j exp(s_ij),
//             out_i = sum_j exp(s_ij - lse_i) v_j
//   backward  p_ij = exp(s_ij - lse_i),  delta_i = dout_i.out_i,  ds_ij = p_ij (dout_i.v_j - delta_i)
//             dq_i = scale sum_j ds_ij k_j,  dk_j = scale sum_i ds_ij q_i,  dv_j = sum_i p_ij dout_i
// float32 and bfloat16 (read as bf16, math in fp32, rounded once on the way out), D = 64 or 128 (a template
// parameter: the per-thread output columns are then compile-time). Other dtypes and D go to v1.
//
// Building block: every product below is "a thread's 4 x (4 * NH) outputs += sum over a K index of
// X[k][4 rows] * Y[k][4 * NH columns]", with X and Y k-major tiles in shared memory read as float4s
// (outer_accumulate) — the same register blocking as the v3/v4 SGEMM (kernels/cuda/matmul_sgemm.cu), on
// CUDA cores. Tiles loaded "transposed" (Xt[d][row]) feed the dot products over D; tiles loaded as they
// are stored ([row][d]) feed the weighted sums over rows. All math is fp32; no tensor cores yet.
//
// attention_flash_forward_kernel<T, D>: block = 64 queries of one (b, h); 256 threads as a 16 x 16 grid;
//   thread (ty, tx) owns queries ty*4 + r and, per key tile, scores for keys tx*4 + c (r, c < 4), and
//   output columns tx*4 + 64*h (h < D/64). Loop over key tiles of 64 up to the diagonal: stage K^T and V,
//   S = Q K^T * scale (masked j > i), online softmax (the 16 threads of a query row are 16 lanes of one
//   warp: shuffles give the tile's row max and sum; every one keeps the running max m and sum l of its
//   rows), P^T to shared memory, O = O * exp(m_old - m_new) + P V. At the end O / l and lse = m + log l.
//   Dynamic shared memory: Q^T [D][68], K^T [D][68], V [64][D], P^T [64][68] floats: 67 KiB (D 64),
//   117 KiB (D 128); opted in with cudaFuncAttributeMaxDynamicSharedMemorySize (an H200 allows 227 KiB).
// attention_flash_delta_kernel<T> (kernels/cuda/attention_heads.cuh, shared with v3/v4): delta_i =
//   dout_i . out_i, one warp per row (the backward's preprocess).
// attention_flash_dkdv_kernel<T, D>: block = 64 keys of one (b, h); 128 threads as 16 (keys) x 8 (queries).
//   K^T and V^T stay in shared memory; loop over query tiles of 32 from the diagonal on: stage Q^T, dO^T
//   (for the dot products) and Q, dO (for the sums), lse and delta; S^T = K Q^T * scale, P^T = exp(S^T -
//   lse) masked, dP^T = V dO^T, dS^T = P^T (dP^T - delta); dV += P^T dO, dK += dS^T Q; dK *= scale.
//   Shared: 2 x [D][68] + 2 x [D][36] + 2 x [32][D+4] + 2 x [32][68] floats: 86 KiB (D 64), 154 KiB (D 128).
// attention_flash_dq_kernel<T, D>: block = 64 queries; 128 threads as 16 (queries) x 8 (keys); Q^T, dO^T
//   stay; loop over key tiles of 32 up to the diagonal: stage K^T, V^T, K; recompute P and dS as above
//   and dQ += dS K; dQ *= scale. Shared: 2 x [D][68] + 2 x [D][36] + [32][D+4] + [32][68] floats: 69 KiB
//   (D 64), 129 KiB (D 128).
//   Two backward kernels instead of one with atomic dQ: each output element has one writer
//   (deterministic), at the price of computing P and dP twice.
// Bounds: rows past T are loaded as zeros and masked (p = 0); outputs are written only for rows < T.
//   A query tile always contains an unmasked key (its diagonal), so no row sees only -inf.
//
// Napkin math (H200: fp32 ~67 TFLOP/s on CUDA cores; bf16 tensor cores ~989). GPT-2 small (B 8, H 12,
//   T 1024, D 64): causal forward 2 * 2 * T^2/2 * D * B*H = 12.9 GFLOP (QK^T and PV) -> ~0.19 ms at the
//   fp32 peak; K/V traffic per block is (T/2) * 2 * D * 4 B, once per 64 queries instead of once per query as
//   in v1 (64x less L2 traffic), so the kernel is FFMA bound: expect ~30-50% of the fp32 peak (the softmax
//   and the transposing stores cost issue slots). The backward does 2.5x the forward's FLOPs (S, dP, dV,
//   dK in one kernel, S, dP, dQ in the other: 7 products of T^2/2 x D vs 2). Not yet measured.
//
// Next: v3 (kernels/cuda/attention_flash_tc.cu) runs every product on the bf16 tensor cores (WMMA): the
//   step towards FlashAttention-3's level (mma.sync, then wgmma), docs/kernels.md.
#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "kernels/attention_versions.h"
#include "kernels/backend.h"
#include "kernels/cuda/attention_flash_tc.h"
#include "kernels/cuda/attention_heads.cuh"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/v1_launchers.h"
#include "tensor/cuda/cuda_check.h"

namespace brigade::kernels::cuda {
namespace {

constexpr int kPad = 4;  // floats per shared row beyond the tile: rows stay 16-byte aligned

template <typename T>
__device__ __forceinline__ float to_float(T x) {
  return static_cast<float>(x);
}

/// Stages rows [t0, t0 + ROWS) of one head (zeros past T) into shared memory as floats: transposed
/// (dst[d * ld + row], for dot products over d) or as stored (dst[row * ld + d], for sums over rows).
/// Consecutive threads read consecutive d of a row (coalesced).
template <typename T, int ROWS, int D, bool kTransposed>
__device__ __forceinline__ void stage_rows(const T* x, const Heads& a, int64_t bh, int64_t H, int64_t T_len,
                                           int64_t t0, float* dst, int ld) {
  for (int e = threadIdx.x; e < ROWS * D; e += blockDim.x) {
    const int row = e / D, d = e % D;
    const int64_t t = t0 + row;
    const float value = t < T_len ? to_float(x[row_at(a, bh, H, t) + d]) : 0.0f;
    if (kTransposed) {
      dst[d * ld + row] = value;
    } else {
      dst[row * ld + d] = value;
    }
  }
}

/// acc[r][h * 4 + c] += sum_{k < KLEN} X[k][x0 + r] * Y[k][y0 + h * ystep + c]   (r, c < 4, h < NH)
template <int KLEN, int NH>
__device__ __forceinline__ void outer_accumulate(float (&acc)[4][4 * NH], const float* X, int ldx, int x0,
                                                 const float* Y, int ldy, int y0, int ystep) {
#pragma unroll 4
  for (int k = 0; k < KLEN; ++k) {
    const float4 a = *reinterpret_cast<const float4*>(X + k * ldx + x0);
    const float av[4] = {a.x, a.y, a.z, a.w};
#pragma unroll
    for (int h = 0; h < NH; ++h) {
      const float4 b = *reinterpret_cast<const float4*>(Y + k * ldy + y0 + h * ystep);
      const float bv[4] = {b.x, b.y, b.z, b.w};
#pragma unroll
      for (int r = 0; r < 4; ++r) {
#pragma unroll
        for (int c = 0; c < 4; ++c) acc[r][h * 4 + c] += av[r] * bv[c];
      }
    }
  }
}

/// Stores the thread's 4 x 4 tile v[r][c] (rows x0 + r, columns y0 + c) transposed: dst[(y0 + c) * ld +
/// x0 + r], one float4 per column (the layout outer_accumulate reads as X).
__device__ __forceinline__ void store_transposed(const float (&v)[4][4], float* dst, int ld, int x0, int y0) {
#pragma unroll
  for (int c = 0; c < 4; ++c) {
    *reinterpret_cast<float4*>(dst + (y0 + c) * ld + x0) = make_float4(v[0][c], v[1][c], v[2][c], v[3][c]);
  }
}

/// Writes a thread's 4 rows x (4 * NH) columns (rows t0 + r < T) of a [B, H, T, D] output, times `mul`.
template <typename T, int NH>
__device__ __forceinline__ void write_rows(T* out, const Heads& a, int64_t bh, int64_t H, int64_t T_len,
                                           int64_t t0, int col0, int col_step, const float (&acc)[4][4 * NH],
                                           const float (&mul)[4]) {
#pragma unroll
  for (int r = 0; r < 4; ++r) {
    if (t0 + r >= T_len) continue;
    T* row = out + row_at(a, bh, H, t0 + r);
#pragma unroll
    for (int h = 0; h < NH; ++h) {
#pragma unroll
      for (int c = 0; c < 4; ++c) row[col0 + h * col_step + c] = static_cast<T>(acc[r][h * 4 + c] * mul[r]);
    }
  }
}

// ---- forward ---------------------------------------------------------------------------------------------

constexpr int kFwdRows = 64, kFwdKeys = 64, kFwdThreads = 256;
constexpr int kFwdLd = 64 + kPad;  // pitch of Q^T, K^T, P^T

template <int D>
constexpr int forward_shared_floats() {
  return D * kFwdLd * 2 + kFwdKeys * D + kFwdKeys * kFwdLd;
}

template <typename T, int D>
__global__ void __launch_bounds__(kFwdThreads)
    attention_flash_forward_kernel(const T* __restrict__ q, Heads qa, const T* __restrict__ k, Heads ka,
                                   const T* __restrict__ v, Heads va, T* __restrict__ out, Heads oa,
                                   float* __restrict__ lse, int64_t H, int64_t T_len, float scale) {
  constexpr int NH = D / 64;  // output column groups of 64 per thread
  extern __shared__ float4 shared_f4[];
  float* qt = reinterpret_cast<float*>(shared_f4);  // [D][kFwdLd]
  float* kt = qt + D * kFwdLd;                      // [D][kFwdLd]
  float* vs = kt + D * kFwdLd;                      // [kFwdKeys][D]
  float* pt = vs + kFwdKeys * D;                    // [kFwdKeys][kFwdLd]

  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  const int64_t bh = blockIdx.y;
  const int64_t i0 = static_cast<int64_t>(blockIdx.x) * kFwdRows;
  stage_rows<T, kFwdRows, D, true>(q, qa, bh, H, T_len, i0, qt, kFwdLd);

  float o[4][4 * NH] = {};
  float m[4], l[4];
#pragma unroll
  for (int r = 0; r < 4; ++r) m[r] = -INFINITY, l[r] = 0.0f;

  const int64_t last_key = (i0 + kFwdRows - 1 < T_len - 1) ? i0 + kFwdRows - 1 : T_len - 1;
  for (int64_t j0 = 0; j0 <= last_key; j0 += kFwdKeys) {
    __syncthreads();  // the previous tile's readers of kt, vs, pt are done (and qt is staged)
    stage_rows<T, kFwdKeys, D, true>(k, ka, bh, H, T_len, j0, kt, kFwdLd);
    stage_rows<T, kFwdKeys, D, false>(v, va, bh, H, T_len, j0, vs, D);
    __syncthreads();

    float s[4][4] = {};
    outer_accumulate<D, 1>(s, qt, kFwdLd, ty * 4, kt, kFwdLd, tx * 4, 0);
    float p[4][4];
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      const int64_t i = i0 + ty * 4 + r;
      float tile_max = -INFINITY;
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        const int64_t j = j0 + tx * 4 + c;
        s[r][c] = (j <= i && j < T_len) ? s[r][c] * scale : -INFINITY;
        tile_max = fmaxf(tile_max, s[r][c]);
      }
      // The 16 threads of these rows are lanes 0-15 or 16-31 of one warp: xor masks < 16 stay inside.
#pragma unroll
      for (int mask = 8; mask > 0; mask /= 2) {
        tile_max = fmaxf(tile_max, __shfl_xor_sync(kFullWarpMask, tile_max, mask));
      }
      const float m_new = fmaxf(m[r], tile_max);  // finite: the diagonal key is unmasked (see the top)
      float row_sum = 0.0f;
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        p[r][c] = s[r][c] == -INFINITY ? 0.0f : expf(s[r][c] - m_new);
        row_sum += p[r][c];
      }
#pragma unroll
      for (int mask = 8; mask > 0; mask /= 2) row_sum += __shfl_xor_sync(kFullWarpMask, row_sum, mask);
      const float alpha = m[r] == -INFINITY ? 0.0f : expf(m[r] - m_new);
      l[r] = l[r] * alpha + row_sum;
      m[r] = m_new;
#pragma unroll
      for (int c = 0; c < 4 * NH; ++c) o[r][c] *= alpha;
    }
    store_transposed(p, pt, kFwdLd, ty * 4, tx * 4);
    __syncthreads();
    outer_accumulate<kFwdKeys, NH>(o, pt, kFwdLd, ty * 4, vs, D, tx * 4, 64);
  }

  float inv_l[4];
#pragma unroll
  for (int r = 0; r < 4; ++r) inv_l[r] = 1.0f / l[r];
  write_rows<T, NH>(out, oa, bh, H, T_len, i0 + ty * 4, tx * 4, 64, o, inv_l);
  if (tx == 0) {
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      const int64_t i = i0 + ty * 4 + r;
      if (i < T_len) lse[bh * T_len + i] = m[r] + logf(l[r]);
    }
  }
}

// ---- backward --------------------------------------------------------------------------------------------

constexpr int kBwdThreads = 128;               // 16 x 8
constexpr int kBwdOuter = 64, kBwdInner = 32;  // rows a block owns, rows per streamed tile
constexpr int kBwdLdOuter = kBwdOuter + kPad;  // 68
constexpr int kBwdLdInner = kBwdInner + kPad;  // 36

template <int D>
constexpr int dkdv_shared_floats() {
  return 2 * D * kBwdLdOuter + 2 * D * kBwdLdInner + 2 * kBwdInner * (D + kPad) +
         2 * kBwdInner * kBwdLdOuter + 2 * kBwdInner;
}

template <typename T, int D>
__global__ void __launch_bounds__(kBwdThreads)
    attention_flash_dkdv_kernel(const T* __restrict__ dout, Heads ga, const T* __restrict__ q, Heads qa,
                                const T* __restrict__ k, Heads ka, const T* __restrict__ v, Heads va,
                                const float* __restrict__ lse, const float* __restrict__ delta,
                                T* __restrict__ dk, Heads dka, T* __restrict__ dv, Heads dva, int64_t H,
                                int64_t T_len, float scale) {
  constexpr int NH = D / 32;  // output column groups of 32 per thread (8 threads x 4 columns)
  constexpr int LdN = D + kPad;
  extern __shared__ float4 shared_f4[];
  float* kt = reinterpret_cast<float*>(shared_f4);  // [D][68]  K^T of the block's keys
  float* vt = kt + D * kBwdLdOuter;                 // [D][68]  V^T
  float* qt = vt + D * kBwdLdOuter;                 // [D][36]  Q^T of the query tile
  float* gt = qt + D * kBwdLdInner;                 // [D][36]  dO^T
  float* qn = gt + D * kBwdLdInner;                 // [32][D+4] Q
  float* gn = qn + kBwdInner * LdN;                 // [32][D+4] dO
  float* pt = gn + kBwdInner * LdN;                 // [32 queries][68 keys] P (read as X: k = query)
  float* st = pt + kBwdInner * kBwdLdOuter;         // [32][68] dS
  float* lse_s = st + kBwdInner * kBwdLdOuter;      // [32]
  float* delta_s = lse_s + kBwdInner;               // [32]

  const int tx = threadIdx.x % 8, ty = threadIdx.x / 8;  // ty: keys ty*4 + r; tx: queries tx*4 + c
  const int64_t bh = blockIdx.y;
  const int64_t j0 = static_cast<int64_t>(blockIdx.x) * kBwdOuter;
  stage_rows<T, kBwdOuter, D, true>(k, ka, bh, H, T_len, j0, kt, kBwdLdOuter);
  stage_rows<T, kBwdOuter, D, true>(v, va, bh, H, T_len, j0, vt, kBwdLdOuter);

  float dk_acc[4][4 * NH] = {}, dv_acc[4][4 * NH] = {};
  for (int64_t i0 = j0; i0 < T_len; i0 += kBwdInner) {  // queries i >= j0: the first tile is the diagonal
    __syncthreads();  // the previous tile's readers are done (and K^T, V^T are staged)
    stage_rows<T, kBwdInner, D, true>(q, qa, bh, H, T_len, i0, qt, kBwdLdInner);
    stage_rows<T, kBwdInner, D, true>(dout, ga, bh, H, T_len, i0, gt, kBwdLdInner);
    stage_rows<T, kBwdInner, D, false>(q, qa, bh, H, T_len, i0, qn, LdN);
    stage_rows<T, kBwdInner, D, false>(dout, ga, bh, H, T_len, i0, gn, LdN);
    for (int e = threadIdx.x; e < kBwdInner; e += blockDim.x) {
      const int64_t i = i0 + e;
      lse_s[e] = i < T_len ? lse[bh * T_len + i] : 0.0f;
      delta_s[e] = i < T_len ? delta[bh * T_len + i] : 0.0f;
    }
    __syncthreads();

    float s[4][4] = {}, dp[4][4] = {};
    outer_accumulate<D, 1>(s, kt, kBwdLdOuter, ty * 4, qt, kBwdLdInner, tx * 4, 0);   // k_j . q_i
    outer_accumulate<D, 1>(dp, vt, kBwdLdOuter, ty * 4, gt, kBwdLdInner, tx * 4, 0);  // v_j . dout_i
    float p[4][4], ds[4][4];
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      const int64_t j = j0 + ty * 4 + r;
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        const int64_t i = i0 + tx * 4 + c;
        const bool live = j <= i && i < T_len && j < T_len;
        p[r][c] = live ? expf(s[r][c] * scale - lse_s[tx * 4 + c]) : 0.0f;
        ds[r][c] = p[r][c] * (dp[r][c] - delta_s[tx * 4 + c]);
      }
    }
    // Stored [query][key]: X for the sums over queries below (k index = query, rows = keys).
    store_transposed(p, pt, kBwdLdOuter, ty * 4, tx * 4);
    store_transposed(ds, st, kBwdLdOuter, ty * 4, tx * 4);
    __syncthreads();
    outer_accumulate<kBwdInner, NH>(dv_acc, pt, kBwdLdOuter, ty * 4, gn, LdN, tx * 4, 32);
    outer_accumulate<kBwdInner, NH>(dk_acc, st, kBwdLdOuter, ty * 4, qn, LdN, tx * 4, 32);
  }

  const float ones[4] = {1.0f, 1.0f, 1.0f, 1.0f}, scales[4] = {scale, scale, scale, scale};
  write_rows<T, NH>(dv, dva, bh, H, T_len, j0 + ty * 4, tx * 4, 32, dv_acc, ones);
  write_rows<T, NH>(dk, dka, bh, H, T_len, j0 + ty * 4, tx * 4, 32, dk_acc, scales);
}

template <int D>
constexpr int dq_shared_floats() {
  return 2 * D * kBwdLdOuter + 2 * D * kBwdLdInner + kBwdInner * (D + kPad) + kBwdInner * kBwdLdOuter;
}

template <typename T, int D>
__global__ void __launch_bounds__(kBwdThreads)
    attention_flash_dq_kernel(const T* __restrict__ dout, Heads ga, const T* __restrict__ q, Heads qa,
                              const T* __restrict__ k, Heads ka, const T* __restrict__ v, Heads va,
                              const float* __restrict__ lse, const float* __restrict__ delta,
                              T* __restrict__ dq, Heads dqa, int64_t H, int64_t T_len, float scale) {
  constexpr int NH = D / 32;
  constexpr int LdN = D + kPad;
  extern __shared__ float4 shared_f4[];
  float* qt = reinterpret_cast<float*>(shared_f4);  // [D][68]  Q^T of the block's queries
  float* gt = qt + D * kBwdLdOuter;                 // [D][68]  dO^T
  float* kt = gt + D * kBwdLdOuter;                 // [D][36]  K^T of the key tile
  float* vt = kt + D * kBwdLdInner;                 // [D][36]  V^T
  float* kn = vt + D * kBwdLdInner;                 // [32][D+4] K
  float* st = kn + kBwdInner * LdN;                 // [32 keys][68 queries] dS

  const int tx = threadIdx.x % 8, ty = threadIdx.x / 8;  // ty: queries ty*4 + r; tx: keys tx*4 + c
  const int64_t bh = blockIdx.y;
  const int64_t i0 = static_cast<int64_t>(blockIdx.x) * kBwdOuter;
  stage_rows<T, kBwdOuter, D, true>(q, qa, bh, H, T_len, i0, qt, kBwdLdOuter);
  stage_rows<T, kBwdOuter, D, true>(dout, ga, bh, H, T_len, i0, gt, kBwdLdOuter);
  float lse_r[4], delta_r[4];
#pragma unroll
  for (int r = 0; r < 4; ++r) {
    const int64_t i = i0 + ty * 4 + r;
    lse_r[r] = i < T_len ? lse[bh * T_len + i] : 0.0f;
    delta_r[r] = i < T_len ? delta[bh * T_len + i] : 0.0f;
  }

  float dq_acc[4][4 * NH] = {};
  const int64_t last_key = (i0 + kBwdOuter - 1 < T_len - 1) ? i0 + kBwdOuter - 1 : T_len - 1;
  for (int64_t j0 = 0; j0 <= last_key; j0 += kBwdInner) {
    __syncthreads();
    stage_rows<T, kBwdInner, D, true>(k, ka, bh, H, T_len, j0, kt, kBwdLdInner);
    stage_rows<T, kBwdInner, D, true>(v, va, bh, H, T_len, j0, vt, kBwdLdInner);
    stage_rows<T, kBwdInner, D, false>(k, ka, bh, H, T_len, j0, kn, LdN);
    __syncthreads();

    float s[4][4] = {}, dp[4][4] = {};
    outer_accumulate<D, 1>(s, qt, kBwdLdOuter, ty * 4, kt, kBwdLdInner, tx * 4, 0);   // q_i . k_j
    outer_accumulate<D, 1>(dp, gt, kBwdLdOuter, ty * 4, vt, kBwdLdInner, tx * 4, 0);  // dout_i . v_j
    float ds[4][4];
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      const int64_t i = i0 + ty * 4 + r;
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        const int64_t j = j0 + tx * 4 + c;
        const bool live = j <= i && i < T_len && j < T_len;
        const float p = live ? expf(s[r][c] * scale - lse_r[r]) : 0.0f;
        ds[r][c] = p * (dp[r][c] - delta_r[r]);
      }
    }
    store_transposed(ds, st, kBwdLdOuter, ty * 4, tx * 4);  // [key][query]
    __syncthreads();
    outer_accumulate<kBwdInner, NH>(dq_acc, st, kBwdLdOuter, ty * 4, kn, LdN, tx * 4, 32);
  }
  const float scales[4] = {scale, scale, scale, scale};
  write_rows<T, NH>(dq, dqa, bh, H, T_len, i0 + ty * 4, tx * 4, 32, dq_acc, scales);
}

// ---- launchers -------------------------------------------------------------------------------------------

/// Opts `kernel` in to `bytes` of dynamic shared memory (above the default 48 KB) and checks the device
/// has that much.
template <typename Kernel>
void allow_shared(Kernel kernel, size_t bytes, int device, const char* name) {
  int max_optin = 0;
  BRIGADE_CUDA_CHECK(cudaDeviceGetAttribute(&max_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  BRIGADE_CHECK_VALUE(static_cast<int64_t>(bytes) <= max_optin, name, ": needs ", bytes,
                      " bytes of shared memory per block; this device allows ", max_optin);
  BRIGADE_CUDA_CHECK(
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
}

/// Grid (tiles of `tile` rows, B * H); B * H must fit grid y.
dim3 tile_grid(int64_t T_len, int tile, int64_t BH, const char* name) {
  BRIGADE_CHECK_VALUE(BH <= 65535, name, ": B * H = ", BH, " exceeds the 65535 heads one launch covers");
  return dim3(static_cast<unsigned>((T_len + tile - 1) / tile), static_cast<unsigned>(BH));
}

template <typename T, int D>
void forward_flash(const Tensor& q, const Tensor& k, const Tensor& v, double scale, const Tensor& out,
                   const Tensor& lse, cudaStream_t stream) {
  const int64_t H = q.size(1), T_len = q.size(2), BH = q.size(0) * H;
  const size_t bytes = forward_shared_floats<D>() * sizeof(float);
  auto kernel = attention_flash_forward_kernel<T, D>;
  allow_shared(kernel, bytes, q.device().index, "causal_attention (flash)");
  kernel<<<tile_grid(T_len, kFwdRows, BH, "causal_attention (flash)"), kFwdThreads, bytes, stream>>>(
      q.data<T>(), heads(q), k.data<T>(), heads(k), v.data<T>(), heads(v), out.data<T>(), heads(out),
      lse.data<float>(), H, T_len, static_cast<float>(scale));
  BRIGADE_CUDA_CHECK_LAUNCH("attention_flash_forward_kernel");
}

template <typename T, int D>
void backward_flash(const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                    const Tensor& lse, double scale, const Tensor& dq, const Tensor& dk, const Tensor& dv,
                    cudaStream_t stream) {
  const int64_t H = q.size(1), T_len = q.size(2), BH = q.size(0) * H;
  const int device = q.device().index;
  const char* name = "causal_attention_backward (flash)";
  Tensor delta = empty({BH * T_len}, TensorOptions(kFloat32).device(q.device()));
  attention_flash_delta_kernel<T><<<delta_blocks(BH * T_len), kDeltaWarpsPerBlock * kWarpSize, 0, stream>>>(
      dout.data<T>(), heads(dout), out.data<T>(), heads(out), delta.data<float>(), H, T_len, BH * T_len, D);
  BRIGADE_CUDA_CHECK_LAUNCH("attention_flash_delta_kernel");
  const float s = static_cast<float>(scale);
  {
    const size_t bytes = dkdv_shared_floats<D>() * sizeof(float);
    auto kernel = attention_flash_dkdv_kernel<T, D>;
    allow_shared(kernel, bytes, device, name);
    kernel<<<tile_grid(T_len, kBwdOuter, BH, name), kBwdThreads, bytes, stream>>>(
        dout.data<T>(), heads(dout), q.data<T>(), heads(q), k.data<T>(), heads(k), v.data<T>(), heads(v),
        lse.data<float>(), delta.data<float>(), dk.data<T>(), heads(dk), dv.data<T>(), heads(dv), H, T_len,
        s);
    BRIGADE_CUDA_CHECK_LAUNCH("attention_flash_dkdv_kernel");
  }
  {
    const size_t bytes = dq_shared_floats<D>() * sizeof(float);
    auto kernel = attention_flash_dq_kernel<T, D>;
    allow_shared(kernel, bytes, device, name);
    kernel<<<tile_grid(T_len, kBwdOuter, BH, name), kBwdThreads, bytes, stream>>>(
        dout.data<T>(), heads(dout), q.data<T>(), heads(q), k.data<T>(), heads(k), v.data<T>(), heads(v),
        lse.data<float>(), delta.data<float>(), dq.data<T>(), heads(dq), H, T_len, s);
    BRIGADE_CUDA_CHECK_LAUNCH("attention_flash_dq_kernel");
  }
}

/// Calls fn.template operator()<T, D>() for the (dtype, D) flash supports.
template <typename Fn>
void dispatch_flash(DType dtype, int64_t D, Fn fn) {
  const bool bf16 = dtype == kBFloat16;
  if (D == 64) {
    bf16 ? fn.template operator()<bfloat16, 64>() : fn.template operator()<float, 64>();
  } else {
    bf16 ? fn.template operator()<bfloat16, 128>() : fn.template operator()<float, 128>();
  }
}

/// Whether `kernel` is one of the flash versions (v2-v4) and runs these inputs itself (else v1 runs them).
bool runs_flash(AttentionKernel kernel, const Tensor& q) {
  const bool flash = kernel == AttentionKernel::CudaFlash || kernel == AttentionKernel::CudaFlashTensorCore ||
                     kernel == AttentionKernel::CudaFlashTensorCoreAsync;
  return flash && attention_kernel_supports(kernel, q.dtype(), q.size(3));
}

}  // namespace

void causal_attention_forward_with(AttentionKernel kernel, const Tensor& q, const Tensor& k, const Tensor& v,
                                   double scale, const Tensor& out, const Tensor& lse,
                                   const AttentionDropout& dropout) {
  BRIGADE_CHECK_VALUE(dropout.p == 0.0, "causal_attention: the CUDA versions have no dropout on the weights");
  if (!runs_flash(kernel, q)) {
    causal_attention_forward_v1(q, k, v, scale, out, lse);
    return;
  }
  if (q.numel() == 0) return;
  if (kernel == AttentionKernel::CudaFlashTensorCore || kernel == AttentionKernel::CudaFlashTensorCoreAsync) {
    attention_detail::flash_tc_forward(q, k, v, scale, out, lse,
                                       kernel == AttentionKernel::CudaFlashTensorCoreAsync);
    return;
  }
  cudaStream_t stream = stream_for(q);
  dispatch_flash(q.dtype(), q.size(3),
                 [&]<typename T, int D>() { forward_flash<T, D>(q, k, v, scale, out, lse, stream); });
}

void causal_attention_backward_with(AttentionKernel kernel, const Tensor& dout, const Tensor& q,
                                    const Tensor& k, const Tensor& v, const Tensor& out, const Tensor& lse,
                                    double scale, const Tensor& dq, const Tensor& dk, const Tensor& dv,
                                    const AttentionDropout& dropout) {
  BRIGADE_CHECK_VALUE(dropout.p == 0.0,
                      "causal_attention_backward: the CUDA versions have no dropout on the weights");
  if (!runs_flash(kernel, q)) {
    causal_attention_backward_v1(dout, q, k, v, out, lse, scale, dq, dk, dv);
    return;
  }
  if (q.numel() == 0) return;
  if (kernel == AttentionKernel::CudaFlashTensorCore || kernel == AttentionKernel::CudaFlashTensorCoreAsync) {
    attention_detail::flash_tc_backward(dout, q, k, v, out, lse, scale, dq, dk, dv,
                                        kernel == AttentionKernel::CudaFlashTensorCoreAsync);
    return;
  }
  cudaStream_t stream = stream_for(q);
  dispatch_flash(q.dtype(), q.size(3), [&]<typename T, int D>() {
    backward_flash<T, D>(dout, q, k, v, out, lse, scale, dq, dk, dv, stream);
  });
}

// ---- the backend entry points (kernels/backend.h): the default version ------------------------------------

void causal_attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, double scale,
                              const Tensor& out, const Tensor& lse) {
  cuda::causal_attention_forward_with(default_attention_kernel(DeviceKind::CUDA, q.dtype(), q.size(3)), q, k,
                                      v, scale, out, lse);
}

void causal_attention_backward(const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v,
                               const Tensor& out, const Tensor& lse, double scale, const Tensor& dq,
                               const Tensor& dk, const Tensor& dv) {
  cuda::causal_attention_backward_with(default_attention_kernel(DeviceKind::CUDA, q.dtype(), q.size(3)), dout,
                                       q, k, v, out, lse, scale, dq, dk, dv);
}

}  // namespace brigade::kernels::cuda
