// Fused causal attention on CUDA, versions 3 and 4: flash attention with every product on the tensor cores
// (v1 kernels/cuda/attention.cu, v2 kernels/cuda/attention_flash.cu; kernels/attention_versions.h registers
// them). v4 is v3 with the streamed tiles double-buffered by cp.async (the template flag kAsync; see "v4"
// below).
//
//   q, k, v, out, dout, dq, dk, dv [B, H, T, D] bfloat16 (stride 1 on D, other strides arbitrary),
//   lse [B, H, T] float32; D = 64 or 128 (a template parameter). Same math and lse contract as v2:
//   forward   s_ij = scale q_i.k_j (j <= i),  lse_i = log sum_j exp(s_ij),
//             out_i = sum_j exp(s_ij - lse_i) v_j
//   backward  p_ij = exp(s_ij - lse_i),  delta_i = dout_i.out_i,  ds_ij = p_ij (dout_i.v_j - delta_i)
//             dq_i = scale sum_j ds_ij k_j,  dk_j = scale sum_i ds_ij q_i,  dv_j = sum_i p_ij dout_i
//
// What changes from v2: the seven products (QK^T, PV; K Q^T, V dO^T, P^T dO, dS^T Q; Q K^T, dO V^T, dS K)
// are WMMA m16n16k16 bf16 mma_syncs with fp32 accumulators instead of FFMAs. The softmax stays fp32. WMMA's
// register layout of a fragment is unspecified, so a fragment is never indexed: S (and dP) go to a per-warp
// fp32 scratch in shared memory (store_matrix_sync), lanes do the softmax there, write P (or dS) as bf16
// to a per-warp shared tile, and that tile is loaded back as a matrix_a fragment. P and dS are rounded to
// bf16 before their products (as FlashAttention does); the row sums l use the unrounded fp32 p.
//
// Every kernel: 128 threads = 4 warps, a block owns 64 rows of one (b, h), warp w owns rows 16w .. 16w+15;
// the other operand streams through shared memory in tiles of 64 rows (bf16, rows padded by 8 elements:
// 16-byte aligned rows, fragment pointers 32-byte aligned, bank-spread loads).
// For the pointwise steps lane l of a warp owns row l/2 of the warp's 16 and half (l%2) of the columns.
//
// attention_flash_tc_forward_kernel<D, kAsync>: block = 64 queries. Q stays in shared memory; loop over
//   key tiles j0 = 0, 64, ... up to the block's diagonal (tiles above it are skipped):
//     stage K, V | S = Q K^T (4 fragments of 16 x 16 per warp) -> scratch | online softmax per row
//     (running max m and sum l in the row's two lanes, merged with one shuffle), P -> bf16 tile |
//     PV (D/16 fragments) -> scratch | lane: o = o * exp(m_old - m_new) + PV (o[D/2] in registers).
//   At the end out = o / l and lse = m + log l. The rescale needs per-row access, hence O in registers
//   rather than in accumulator fragments.
// attention_flash_delta_kernel<bfloat16> (kernels/cuda/attention_heads.cuh, shared with v2): delta_i =
//   dout_i . out_i, one warp per row.
// attention_flash_tc_dkdv_kernel<D, kAsync>: block = 64 keys (K, V staged once); loop over query tiles
//   from the diagonal to T: stage Q, dO, lse, delta | S^T = K Q^T, dP^T = V dO^T -> scratch |
//   P^T, dS^T -> bf16 tiles | dV += P^T dO, dK += dS^T Q, in accumulator fragments across the loop.
//   dK *= scale.
// attention_flash_tc_dq_kernel<D, kAsync>: block = 64 queries (Q, dO staged once, lse and delta in the
//   lanes' registers); loop over key tiles up to the diagonal: stage K, V | S = Q K^T, dP = dO V^T |
//   dS -> bf16 | dQ += dS K in fragments. dQ *= scale.
//   Determinism: every output element is accumulated by one warp in a fixed order (two backward kernels,
//   not one with atomic dQ), so repeated runs give identical bits.
// Bounds: rows past T are staged as zeros, masked (p = 0) and never written. Key tiles start at 0 and
//   query tiles at multiples of 64, so every query row's first tile holds an unmasked key (its own
//   diagonal, or key 0): m is finite from the first tile on, exp(m_old - m_new) needs only the -inf case.
// v3 stages each tile synchronously: barrier, every thread loads its 16-byte slots and stores them, barrier,
//   compute; the loads' latency is exposed once per tile. v4 (kAsync) issues tile t+1's slots as cp.async
//   into a second buffer before computing on tile t (cp_async_wait<1> + barrier make tile t visible; a
//   barrier after the compute frees its buffer for tile t+2). Same math, same bits as v3.
// Shared memory (dynamic, opted in; *_shared_bytes), D 64 / D 128: v3 forward 53 / 93 KiB, dK/dV 88.5 /
//   152.5, dQ 79 / 143; v4 forward 71 / 127, dK/dV 107 / 187, dQ 97 / 177 (an H200 allows 227 KiB per
//   block, 228 per SM: v4 at D 128 fits one block per SM). Every sub-buffer starts at a multiple of 128
//   bytes of the dynamic shared base (WMMA wants 32-byte aligned fragment pointers).
//
// Napkin math (H200: bf16 dense ~989 TFLOP/s peak, fp32 CUDA cores ~67, HBM ~4.3 TB/s measured copy).
//   Forward FLOPs per head 4 T^2 D / 2 (QK^T and PV, halved by the mask). GPT-2 small (B 8, H 12, T 1024,
//   D 64): 12.9 GFLOP -> 13 us at the bf16 peak; v2 on CUDA cores cannot beat 0.19 ms (the fp32 peak),
//   ~0.4-0.6 ms at its expected 30-50%. HBM bytes: q, k, v, out once = 4 x 96 x 1024 x 64 x 2 B = 50 MB ->
//   12 us; K/V are re-read from L2 once per query tile (T/128 = 8 times on average: 200 MB of L2 traffic).
//   Intensity 258 FLOP/B over HBM, above the bf16 ridge (~206): compute bound, so the tensor cores are the
//   lever. Expectation for v3: WMMA lowers to mma.sync (Hopper's full rate needs wgmma), the staging is
//   synchronous, S and dP round-trip through shared memory, and each tile has two block barriers: ~10-25%
//   of the bf16 peak (100-250 TFLOP/s), i.e. 5-10x v2. v4 hides the tile loads behind the products, but at
//   D 128 fits one block per SM instead of two (shared memory), which hides latency across blocks; which
//   wins is for a GPU to say. FlashAttention-2 reaches ~35% of an H100, FlashAttention-3 (wgmma, TMA, warp
//   specialisation) ~75%. The backward executes 7 products of the forward's size (S^T, dP^T, dV, dK; S,
//   dP, dQ) against the forward's 2, of which 5 are needed: S and dP are computed in both kernels to keep
//   dQ free of atomics. Measured on an H200 at GPT-2's shape, bf16 (scripts/gpu_check.sh,
//   bench/results/gpu-20261204-1513-ebaddd8/): D 64 forward 0.40 ms for v3 and v4, backward 1.34 ms (v3) and
//   1.13 ms (v4), about 4 % of the bf16 peak, under the 10-25 % expected; at D 128 v3's forward wins (0.55 vs
//   0.62 ms) and v4's backward (1.49 vs 1.93 ms). v4 is the bfloat16 default.
//
// Next (not written yet): mma.sync fed by ldmatrix (kernels/cuda/mma_ptx.cuh) keeps S in registers with a
//   known layout and drops the scratch round trip; then wgmma, TMA and warp specialisation
//   (FlashAttention-3), docs/kernels.md.
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <mma.h>

#include <algorithm>
#include <cstdint>

#include "kernels/cuda/attention_flash_tc.h"
#include "kernels/cuda/attention_heads.cuh"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/mma_ptx.cuh"
#include "tensor/bfloat16.h"
#include "tensor/cuda/cuda_check.h"

namespace brigade::kernels::cuda::attention_detail {
namespace {

namespace wmma = nvcuda::wmma;

constexpr int kThreads = 128, kWarps = 4;
constexpr int kTile = 64;        // rows a block owns, rows per streamed tile
constexpr int kFrag = 16;        // m16 n16 k16
constexpr int kLdP = kTile + 8;  // pitch of the bf16 P / dS tiles (elements)
static_assert(kWarps * kFrag == kTile && kWarps * kWarpSize == kThreads, "one warp per 16 rows");

/// Pitch (bf16 elements) of a staged [64][D] operand tile, and (floats) of a warp's fp32 scratch, which
/// holds either a 16 x 64 score tile or a 16 x D product.
template <int D>
constexpr int ld_tile() {
  return D + 8;
}
template <int D>
constexpr int ld_scratch() {
  return std::max(D, kTile) + 4;
}

using FragA = wmma::fragment<wmma::matrix_a, kFrag, kFrag, kFrag, __nv_bfloat16, wmma::row_major>;
using FragBRow = wmma::fragment<wmma::matrix_b, kFrag, kFrag, kFrag, __nv_bfloat16, wmma::row_major>;
using FragBCol = wmma::fragment<wmma::matrix_b, kFrag, kFrag, kFrag, __nv_bfloat16, wmma::col_major>;
using FragC = wmma::fragment<wmma::accumulator, kFrag, kFrag, kFrag, float>;

// Heads, heads and row_at: kernels/cuda/attention_heads.cuh. Named here too so that code using this
// namespace (the emulator harness) sees Heads.
using cuda::Heads;

__device__ __forceinline__ const __nv_bfloat16* as_bf(const uint16_t* p) {
  return reinterpret_cast<const __nv_bfloat16*>(p);
}

template <int N>
__device__ __forceinline__ void zero(FragC (&acc)[N]) {
#pragma unroll
  for (int n = 0; n < N; ++n) wmma::fill_fragment(acc[n], 0.0f);
}

/// Stages rows [t0, t0 + 64) of one head (zeros past T) into dst[row][ld_tile<D>()] as bf16 bits. A slot is
/// 8 consecutive elements of a row: one 16-byte load when `vec` (rows 16-byte aligned), else 8 scalars.
/// kAsync: a `vec` slot is a cp.async (zero-filled past T) that lands by the caller's cp_async_wait and
/// __syncthreads; the scalar slots are stored at once either way.
template <int D, bool kAsync>
__device__ __forceinline__ void stage_tile(const uint16_t* x, const Heads& a, int64_t bh, int64_t H,
                                           int64_t T_len, int64_t t0, bool vec, uint16_t* dst) {
  constexpr int kSlotsPerRow = D / 8;
  for (int f = threadIdx.x; f < kTile * kSlotsPerRow; f += blockDim.x) {
    const int row = f / kSlotsPerRow, col = (f % kSlotsPerRow) * 8;
    const int64_t t = t0 + row;
    if (kAsync && vec) {
      const bool in = t < T_len;  // a row past T reads nothing (src_bytes 0) from a valid address
      ptx::cp_async_16(dst + row * ld_tile<D>() + col, in ? x + row_at(a, bh, H, t) + col : x, in ? 16 : 0);
      continue;
    }
    alignas(16) uint16_t v[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    if (t < T_len) {
      const uint16_t* src = x + row_at(a, bh, H, t) + col;
      if (vec) {
        *reinterpret_cast<uint4*>(v) = *reinterpret_cast<const uint4*>(src);
      } else {
#pragma unroll
        for (int e = 0; e < 8; ++e) v[e] = src[e];
      }
    }
    *reinterpret_cast<uint4*>(dst + row * ld_tile<D>() + col) = *reinterpret_cast<const uint4*>(v);
  }
}

/// acc[n] += A (16 x 16 KSTEPS, row-major at a) . B^T, B stored as rows: B^T(kk, col) = b[col * ldb + kk],
/// columns 16 n .. 16 n + 15 (a product over D against a tile of rows: Q K^T, V dO^T, ...).
template <int KSTEPS, int N>
__device__ __forceinline__ void mma_a_bt(FragC (&acc)[N], const uint16_t* a, int lda, const uint16_t* b,
                                         int ldb) {
#pragma unroll
  for (int kk = 0; kk < KSTEPS; ++kk) {
    FragA fa;
    wmma::load_matrix_sync(fa, as_bf(a) + kk * kFrag, lda);
#pragma unroll
    for (int n = 0; n < N; ++n) {
      FragBCol fb;
      wmma::load_matrix_sync(fb, as_bf(b) + n * kFrag * ldb + kk * kFrag, ldb);
      wmma::mma_sync(acc[n], fa, fb, acc[n]);
    }
  }
}

/// acc[n] += A (16 x 16 KSTEPS, row-major at a) . B, B row-major [16 KSTEPS][16 N] at b (a weighted sum
/// of a tile's rows: P V, P^T dO, dS K, ...).
template <int KSTEPS, int N>
__device__ __forceinline__ void mma_a_b(FragC (&acc)[N], const uint16_t* a, int lda, const uint16_t* b,
                                        int ldb) {
#pragma unroll
  for (int kk = 0; kk < KSTEPS; ++kk) {
    FragA fa;
    wmma::load_matrix_sync(fa, as_bf(a) + kk * kFrag, lda);
#pragma unroll
    for (int n = 0; n < N; ++n) {
      FragBRow fb;
      wmma::load_matrix_sync(fb, as_bf(b) + kk * kFrag * ldb + n * kFrag, ldb);
      wmma::mma_sync(acc[n], fa, fb, acc[n]);
    }
  }
}

/// Stores a warp's 16 x 16 N accumulators to its scratch (row-major, pitch ld) and waits for the warp.
template <int N>
__device__ __forceinline__ void store_scratch(const FragC (&acc)[N], float* scratch, int ld) {
#pragma unroll
  for (int n = 0; n < N; ++n) wmma::store_matrix_sync(scratch + n * kFrag, acc[n], ld, wmma::mem_row_major);
  __syncwarp();
}

/// Writes a warp's 16 x D accumulators (rows r0 .. r0 + 15 of the head, those < T) times `mul` to a
/// [B, H, T, D] bfloat16 output, through the warp's scratch; lanes sweep consecutive columns (coalesced).
template <int D>
__device__ __forceinline__ void write_warp_rows(const FragC (&acc)[D / kFrag], float* scratch, bfloat16* out,
                                                const Heads& a, int64_t bh, int64_t H, int64_t T_len,
                                                int64_t r0, float mul) {
  store_scratch(acc, scratch, ld_scratch<D>());
  const int lane = threadIdx.x % kWarpSize;
  for (int e = lane; e < kFrag * D; e += kWarpSize) {
    const int r = e / D, c = e % D;
    if (r0 + r < T_len) out[row_at(a, bh, H, r0 + r) + c] = bfloat16(scratch[r * ld_scratch<D>() + c] * mul);
  }
  __syncwarp();
}

// ---- forward ---------------------------------------------------------------------------------------------

/// Tile buffers per streamed operand: two when the next tile is prefetched with cp.async.
template <bool kAsync>
constexpr int buffers() {
  return kAsync ? 2 : 1;
}

/// Key and value tiles streamed past a block's queries (forward and dQ): the tile of key rows j0 .. j0 + 63
/// into ks and vs, visible to every thread on return (ends with a barrier, after which what the kernel
/// staged before the loop is visible too). kAsync: two buffers, this tile in buffer `buf`; tile 0 was
/// committed before the loop (stage_first_key_value), and with `prefetch` (a next tile exists) the next one
/// is staged into buffer buf ^ 1 and committed before waiting for this tile's group. Otherwise one buffer
/// (buf 0), restaged once its previous readers are done.
template <int D, bool kAsync>
__device__ __forceinline__ void stage_key_value(const uint16_t* k, const Heads& ka, const uint16_t* v,
                                                const Heads& va, int64_t bh, int64_t H, int64_t T_len,
                                                bool vec, int64_t j0, int buf, bool prefetch, uint16_t* ks,
                                                uint16_t* vs) {
  constexpr int LD = ld_tile<D>();
  if (kAsync) {
    if (prefetch) {  // prefetch the next tile into the other buffer, then wait for this one
      stage_tile<D, true>(k, ka, bh, H, T_len, j0 + kTile, vec, ks + (buf ^ 1) * kTile * LD);
      stage_tile<D, true>(v, va, bh, H, T_len, j0 + kTile, vec, vs + (buf ^ 1) * kTile * LD);
      ptx::cp_async_commit();
      ptx::cp_async_wait<1>();
    } else {
      ptx::cp_async_wait<0>();
    }
  } else {
    __syncthreads();  // the previous tile's readers of ks and vs are done (and the queries' tiles are staged)
    stage_tile<D, false>(k, ka, bh, H, T_len, j0, vec, ks);
    stage_tile<D, false>(v, va, bh, H, T_len, j0, vec, vs);
  }
  __syncthreads();  // this tile has landed for every thread
}

/// kAsync: key and value tile 0 into buffer 0, committed as one group with whatever the kernel staged before.
template <int D>
__device__ __forceinline__ void stage_first_key_value(const uint16_t* k, const Heads& ka, const uint16_t* v,
                                                      const Heads& va, int64_t bh, int64_t H, int64_t T_len,
                                                      bool vec, uint16_t* ks, uint16_t* vs) {
  stage_tile<D, true>(k, ka, bh, H, T_len, 0, vec, ks);
  stage_tile<D, true>(v, va, bh, H, T_len, 0, vec, vs);
  ptx::cp_async_commit();
}

template <int D, bool kAsync>
constexpr size_t forward_shared_bytes() {
  return kWarps * kFrag * ld_scratch<D>() * 4 + (1 + 2 * buffers<kAsync>()) * kTile * ld_tile<D>() * 2 +
         kTile * kLdP * 2;
}

template <int D, bool kAsync>
__global__ void __launch_bounds__(kThreads)
    attention_flash_tc_forward_kernel(const uint16_t* __restrict__ q, Heads qa,
                                      const uint16_t* __restrict__ k, Heads ka,
                                      const uint16_t* __restrict__ v, Heads va, bool vec,
                                      bfloat16* __restrict__ out, Heads oa, float* __restrict__ lse,
                                      int64_t H, int64_t T_len, float scale) {
  constexpr int LD = ld_tile<D>(), LS = ld_scratch<D>();
  constexpr int kHalf = D / 2;  // output columns per lane
  extern __shared__ float4 shared_f4[];
  float* scratch = reinterpret_cast<float*>(shared_f4);              // [4 warps][16][LS]
  uint16_t* qs = reinterpret_cast<uint16_t*>(scratch + kTile * LS);  // [64][LD] the block's queries
  uint16_t* ks = qs + kTile * LD;                                    // [buffers][64][LD] key tiles
  uint16_t* vs = ks + buffers<kAsync>() * kTile * LD;                // [buffers][64][LD] value tiles
  uint16_t* ps = vs + buffers<kAsync>() * kTile * LD;                // [4 warps][16][kLdP] P as bf16

  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  const int row = lane / 2, half = lane % 2;  // pointwise: this lane's row of the warp's 16, column half
  const int64_t bh = blockIdx.y;
  const int64_t i0 = static_cast<int64_t>(blockIdx.x) * kTile;
  const int64_t i = i0 + warp * kFrag + row;  // this lane's query
  float* sw = scratch + warp * kFrag * LS;
  uint16_t* pw = ps + warp * kFrag * kLdP;
  const uint16_t* qw = qs + warp * kFrag * LD;
  stage_tile<D, kAsync>(q, qa, bh, H, T_len, i0, vec, qs);

  float o[kHalf];
#pragma unroll
  for (int c = 0; c < kHalf; ++c) o[c] = 0.0f;
  float m = -INFINITY, l = 0.0f;

  const int64_t tiles = std::min(i0 + kTile - 1, T_len - 1) / kTile + 1;  // key tiles up to the diagonal
  if (kAsync) {  // the first group: Q (above) and key tile 0
    stage_first_key_value<D>(k, ka, v, va, bh, H, T_len, vec, ks, vs);
  }
  for (int64_t tile = 0; tile < tiles; ++tile) {
    const int64_t j0 = tile * kTile;
    const int buf = kAsync ? static_cast<int>(tile % 2) : 0;
    const uint16_t* kb = ks + buf * kTile * LD;
    const uint16_t* vb = vs + buf * kTile * LD;
    stage_key_value<D, kAsync>(k, ka, v, va, bh, H, T_len, vec, j0, buf, tile + 1 < tiles, ks, vs);

    FragC s[kTile / kFrag];
    zero(s);
    mma_a_bt<D / kFrag>(s, qw, LD, kb, LD);
    store_scratch(s, sw, LS);

    // Online softmax of row `row`, columns half * 32 .. half * 32 + 31 of the tile.
    const float* srow = sw + row * LS + half * (kTile / 2);
    float tile_max = -INFINITY;
#pragma unroll 8
    for (int c = 0; c < kTile / 2; ++c) {
      const int64_t j = j0 + half * (kTile / 2) + c;
      if (j <= i && j < T_len) tile_max = fmaxf(tile_max, srow[c] * scale);
    }
    tile_max = fmaxf(tile_max, __shfl_xor_sync(kFullWarpMask, tile_max, 1));
    const float m_new = fmaxf(m, tile_max);  // finite: see "Bounds" at the top
    const float alpha = m == -INFINITY ? 0.0f : expf(m - m_new);
    float row_sum = 0.0f;
    uint16_t* prow = pw + row * kLdP + half * (kTile / 2);
#pragma unroll 8
    for (int c = 0; c < kTile / 2; ++c) {
      const int64_t j = j0 + half * (kTile / 2) + c;
      const float p = (j <= i && j < T_len) ? expf(srow[c] * scale - m_new) : 0.0f;
      row_sum += p;
      prow[c] = bfloat16(p).bits;
    }
    row_sum += __shfl_xor_sync(kFullWarpMask, row_sum, 1);
    l = l * alpha + row_sum;
    m = m_new;
    __syncwarp();  // P is complete, and every lane has read S before the PV product overwrites the scratch

    FragC pv[D / kFrag];
    zero(pv);
    mma_a_b<kTile / kFrag>(pv, pw, kLdP, vb, LD);
    store_scratch(pv, sw, LS);
    const float* pvrow = sw + row * LS + half * kHalf;
#pragma unroll
    for (int c = 0; c < kHalf; ++c) o[c] = o[c] * alpha + pvrow[c];
    __syncwarp();                 // the scratch is rewritten by the next tile's S
    if (kAsync) __syncthreads();  // every warp is done with `buf` before the next iteration refills it
  }

  if (i < T_len) {
    const float inv_l = 1.0f / l;
    bfloat16* orow = out + row_at(oa, bh, H, i) + half * kHalf;
#pragma unroll
    for (int c = 0; c < kHalf; ++c) orow[c] = bfloat16(o[c] * inv_l);
    if (half == 0) lse[bh * T_len + i] = m + logf(l);
  }
}

// ---- backward --------------------------------------------------------------------------------------------

template <int D, bool kAsync>
constexpr size_t dkdv_shared_bytes() {
  return 2 * kWarps * kFrag * ld_scratch<D>() * 4 + (2 + 2 * buffers<kAsync>()) * kTile * ld_tile<D>() * 2 +
         2 * kTile * kLdP * 2 + 2 * buffers<kAsync>() * kTile * 4;
}

template <int D, bool kAsync>
__global__ void __launch_bounds__(kThreads)
    attention_flash_tc_dkdv_kernel(const uint16_t* __restrict__ dout, Heads ga,
                                   const uint16_t* __restrict__ q, Heads qa, const uint16_t* __restrict__ k,
                                   Heads ka, const uint16_t* __restrict__ v, Heads va, bool vec,
                                   const float* __restrict__ lse, const float* __restrict__ delta,
                                   bfloat16* __restrict__ dk, Heads dka, bfloat16* __restrict__ dv, Heads dva,
                                   int64_t H, int64_t T_len, float scale) {
  constexpr int LD = ld_tile<D>(), LS = ld_scratch<D>();
  extern __shared__ float4 shared_f4[];
  float* s_scratch = reinterpret_cast<float*>(shared_f4);               // [4][16][LS] S^T, then outputs
  float* dp_scratch = s_scratch + kTile * LS;                           // [4][16][LS] dP^T
  uint16_t* ks = reinterpret_cast<uint16_t*>(dp_scratch + kTile * LS);  // [64][LD] the block's keys
  uint16_t* vs = ks + kTile * LD;                                       // [64][LD] their values
  uint16_t* qs = vs + kTile * LD;                                       // [buffers][64][LD] query tiles
  uint16_t* gs = qs + buffers<kAsync>() * kTile * LD;                   // [buffers][64][LD] dO tiles
  uint16_t* ps = gs + buffers<kAsync>() * kTile * LD;                   // [4][16][kLdP] P^T (key x query)
  uint16_t* dss = ps + kTile * kLdP;                                    // [4][16][kLdP] dS^T
  float* lse_s = reinterpret_cast<float*>(dss + kTile * kLdP);          // [buffers][64]
  float* delta_s = lse_s + buffers<kAsync>() * kTile;                   // [buffers][64]

  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  const int row = lane / 2, half = lane % 2;
  const int64_t bh = blockIdx.y;
  const int64_t j0 = static_cast<int64_t>(blockIdx.x) * kTile;
  const int64_t j = j0 + warp * kFrag + row;  // this lane's key
  float* sw = s_scratch + warp * kFrag * LS;
  float* dpw = dp_scratch + warp * kFrag * LS;
  uint16_t* pw = ps + warp * kFrag * kLdP;
  uint16_t* dsw = dss + warp * kFrag * kLdP;
  stage_tile<D, kAsync>(k, ka, bh, H, T_len, j0, vec, ks);
  stage_tile<D, kAsync>(v, va, bh, H, T_len, j0, vec, vs);
  // Query tile i0 (and its lse, delta) into buffer b.
  auto stage_queries = [&](int64_t i0, int b) {
    stage_tile<D, kAsync>(q, qa, bh, H, T_len, i0, vec, qs + b * kTile * LD);
    stage_tile<D, kAsync>(dout, ga, bh, H, T_len, i0, vec, gs + b * kTile * LD);
    for (int e = threadIdx.x; e < kTile; e += blockDim.x) {
      lse_s[b * kTile + e] = i0 + e < T_len ? lse[bh * T_len + i0 + e] : 0.0f;
      delta_s[b * kTile + e] = i0 + e < T_len ? delta[bh * T_len + i0 + e] : 0.0f;
    }
  };

  FragC dk_acc[D / kFrag], dv_acc[D / kFrag];
  zero(dk_acc);
  zero(dv_acc);
  const int64_t tiles = (T_len - j0 + kTile - 1) / kTile;  // queries i >= j0: the first tile is the diagonal
  if (kAsync) {                                            // the first group: K, V (above) and query tile 0
    stage_queries(j0, 0);
    ptx::cp_async_commit();
  }
  for (int64_t tile = 0; tile < tiles; ++tile) {
    const int64_t i0 = j0 + tile * kTile;
    const int buf = kAsync ? static_cast<int>(tile % 2) : 0;
    if (kAsync) {
      if (tile + 1 < tiles) {  // prefetch the next query tile into the other buffer, then wait for this one
        stage_queries(i0 + kTile, buf ^ 1);
        ptx::cp_async_commit();
        ptx::cp_async_wait<1>();
      } else {
        ptx::cp_async_wait<0>();
      }
    } else {
      __syncthreads();  // the previous tile's readers are done (and ks, vs are staged)
      stage_queries(i0, 0);
    }
    __syncthreads();  // this tile has landed for every thread
    const uint16_t* qb = qs + buf * kTile * LD;
    const uint16_t* gb = gs + buf * kTile * LD;
    const float* lse_b = lse_s + buf * kTile;
    const float* delta_b = delta_s + buf * kTile;

    FragC st[kTile / kFrag], dpt[kTile / kFrag];
    zero(st);
    zero(dpt);
    mma_a_bt<D / kFrag>(st, ks + warp * kFrag * LD, LD, qb, LD);   // S^T[j][i] = k_j . q_i
    mma_a_bt<D / kFrag>(dpt, vs + warp * kFrag * LD, LD, gb, LD);  // dP^T[j][i] = v_j . dout_i
    store_scratch(st, sw, LS);
    store_scratch(dpt, dpw, LS);
#pragma unroll 8
    for (int c = 0; c < kTile / 2; ++c) {
      const int col = half * (kTile / 2) + c;
      const int64_t i = i0 + col;
      const bool live = j <= i && i < T_len && j < T_len;
      const float p = live ? expf(sw[row * LS + col] * scale - lse_b[col]) : 0.0f;
      pw[row * kLdP + col] = bfloat16(p).bits;
      dsw[row * kLdP + col] = bfloat16(p * (dpw[row * LS + col] - delta_b[col])).bits;
    }
    __syncwarp();
    mma_a_b<kTile / kFrag>(dv_acc, pw, kLdP, gb, LD);   // dV += P^T dO
    mma_a_b<kTile / kFrag>(dk_acc, dsw, kLdP, qb, LD);  // dK += dS^T Q
    if (kAsync) __syncthreads();  // every warp is done with `buf` before the next iteration refills it
  }

  write_warp_rows<D>(dv_acc, sw, dv, dva, bh, H, T_len, j0 + warp * kFrag, 1.0f);
  write_warp_rows<D>(dk_acc, sw, dk, dka, bh, H, T_len, j0 + warp * kFrag, scale);
}

template <int D, bool kAsync>
constexpr size_t dq_shared_bytes() {
  return 2 * kWarps * kFrag * ld_scratch<D>() * 4 + (2 + 2 * buffers<kAsync>()) * kTile * ld_tile<D>() * 2 +
         kTile * kLdP * 2;
}

template <int D, bool kAsync>
__global__ void __launch_bounds__(kThreads)
    attention_flash_tc_dq_kernel(const uint16_t* __restrict__ dout, Heads ga, const uint16_t* __restrict__ q,
                                 Heads qa, const uint16_t* __restrict__ k, Heads ka,
                                 const uint16_t* __restrict__ v, Heads va, bool vec,
                                 const float* __restrict__ lse, const float* __restrict__ delta,
                                 bfloat16* __restrict__ dq, Heads dqa, int64_t H, int64_t T_len,
                                 float scale) {
  constexpr int LD = ld_tile<D>(), LS = ld_scratch<D>();
  extern __shared__ float4 shared_f4[];
  float* s_scratch = reinterpret_cast<float*>(shared_f4);               // [4][16][LS] S, then dQ
  float* dp_scratch = s_scratch + kTile * LS;                           // [4][16][LS] dP
  uint16_t* qs = reinterpret_cast<uint16_t*>(dp_scratch + kTile * LS);  // [64][LD] the block's queries
  uint16_t* gs = qs + kTile * LD;                                       // [64][LD] their dO
  uint16_t* ks = gs + kTile * LD;                                       // [buffers][64][LD] key tiles
  uint16_t* vs = ks + buffers<kAsync>() * kTile * LD;                   // [buffers][64][LD] value tiles
  uint16_t* dss = vs + buffers<kAsync>() * kTile * LD;                  // [4][16][kLdP] dS (query x key)

  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  const int row = lane / 2, half = lane % 2;
  const int64_t bh = blockIdx.y;
  const int64_t i0 = static_cast<int64_t>(blockIdx.x) * kTile;
  const int64_t i = i0 + warp * kFrag + row;  // this lane's query
  float* sw = s_scratch + warp * kFrag * LS;
  float* dpw = dp_scratch + warp * kFrag * LS;
  uint16_t* dsw = dss + warp * kFrag * kLdP;
  stage_tile<D, kAsync>(q, qa, bh, H, T_len, i0, vec, qs);
  stage_tile<D, kAsync>(dout, ga, bh, H, T_len, i0, vec, gs);
  const float lse_i = i < T_len ? lse[bh * T_len + i] : 0.0f;
  const float delta_i = i < T_len ? delta[bh * T_len + i] : 0.0f;

  FragC dq_acc[D / kFrag];
  zero(dq_acc);
  const int64_t tiles = std::min(i0 + kTile - 1, T_len - 1) / kTile + 1;  // key tiles up to the diagonal
  if (kAsync) {  // the first group: Q, dO (above) and key tile 0
    stage_first_key_value<D>(k, ka, v, va, bh, H, T_len, vec, ks, vs);
  }
  for (int64_t tile = 0; tile < tiles; ++tile) {
    const int64_t j0 = tile * kTile;
    const int buf = kAsync ? static_cast<int>(tile % 2) : 0;
    const uint16_t* kb = ks + buf * kTile * LD;
    const uint16_t* vb = vs + buf * kTile * LD;
    stage_key_value<D, kAsync>(k, ka, v, va, bh, H, T_len, vec, j0, buf, tile + 1 < tiles, ks, vs);

    FragC s[kTile / kFrag], dp[kTile / kFrag];
    zero(s);
    zero(dp);
    mma_a_bt<D / kFrag>(s, qs + warp * kFrag * LD, LD, kb, LD);   // S[i][j] = q_i . k_j
    mma_a_bt<D / kFrag>(dp, gs + warp * kFrag * LD, LD, vb, LD);  // dP[i][j] = dout_i . v_j
    store_scratch(s, sw, LS);
    store_scratch(dp, dpw, LS);
#pragma unroll 8
    for (int c = 0; c < kTile / 2; ++c) {
      const int col = half * (kTile / 2) + c;
      const int64_t j = j0 + col;
      const bool live = j <= i && i < T_len && j < T_len;
      const float p = live ? expf(sw[row * LS + col] * scale - lse_i) : 0.0f;
      dsw[row * kLdP + col] = bfloat16(p * (dpw[row * LS + col] - delta_i)).bits;
    }
    __syncwarp();
    mma_a_b<kTile / kFrag>(dq_acc, dsw, kLdP, kb, LD);  // dQ += dS K
    if (kAsync) __syncthreads();  // every warp is done with `buf` before the next iteration refills it
  }
  write_warp_rows<D>(dq_acc, sw, dq, dqa, bh, H, T_len, i0 + warp * kFrag, scale);
}

// ---- launchers -------------------------------------------------------------------------------------------

/// Opts `kernel` in to `bytes` of dynamic shared memory and checks the device allows that much.
template <typename Kernel>
void allow_shared(Kernel kernel, size_t bytes, int device, const char* name) {
  int max_optin = 0;
  BRIGADE_CUDA_CHECK(cudaDeviceGetAttribute(&max_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  BRIGADE_CHECK_VALUE(static_cast<int64_t>(bytes) <= max_optin, name, ": needs ", bytes,
                      " bytes of shared memory per block; this device allows ", max_optin);
  BRIGADE_CUDA_CHECK(
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
}

/// Grid (tiles of 64 rows, B * H); B * H must fit grid y.
dim3 tile_grid(int64_t T_len, int64_t BH, const char* name) {
  BRIGADE_CHECK_VALUE(BH <= 65535, name, ": B * H = ", BH, " exceeds the 65535 heads one launch covers");
  return dim3(static_cast<unsigned>((T_len + kTile - 1) / kTile), static_cast<unsigned>(BH));
}

/// Whether every row of `t` starts on a 16-byte boundary (8 bf16), so stage_tile may use 16-byte loads.
bool rows_16b_aligned(const Tensor& t) {
  return reinterpret_cast<uintptr_t>(t.data_ptr()) % 16 == 0 && t.stride(0) % 8 == 0 &&
         t.stride(1) % 8 == 0 && t.stride(2) % 8 == 0;
}

const uint16_t* bits(const Tensor& t) {
  return reinterpret_cast<const uint16_t*>(t.data<bfloat16>());
}

template <int D, bool kAsync>
void forward(const Tensor& q, const Tensor& k, const Tensor& v, double scale, const Tensor& out,
             const Tensor& lse, cudaStream_t stream) {
  const char* name = kAsync ? "causal_attention (flash_tc_async)" : "causal_attention (flash_tc)";
  const int64_t H = q.size(1), T_len = q.size(2), BH = q.size(0) * H;
  const bool vec = rows_16b_aligned(q) && rows_16b_aligned(k) && rows_16b_aligned(v);
  const size_t bytes = forward_shared_bytes<D, kAsync>();
  auto kernel = attention_flash_tc_forward_kernel<D, kAsync>;
  allow_shared(kernel, bytes, q.device().index, name);
  kernel<<<tile_grid(T_len, BH, name), kThreads, bytes, stream>>>(
      bits(q), heads(q), bits(k), heads(k), bits(v), heads(v), vec, out.data<bfloat16>(), heads(out),
      lse.data<float>(), H, T_len, static_cast<float>(scale));
  BRIGADE_CUDA_CHECK_LAUNCH("attention_flash_tc_forward_kernel");
}

template <int D, bool kAsync>
void backward(const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
              const Tensor& lse, double scale, const Tensor& dq, const Tensor& dk, const Tensor& dv,
              cudaStream_t stream) {
  const char* name =
      kAsync ? "causal_attention_backward (flash_tc_async)" : "causal_attention_backward (flash_tc)";
  const int64_t H = q.size(1), T_len = q.size(2), BH = q.size(0) * H;
  const int device = q.device().index;
  const bool vec =
      rows_16b_aligned(dout) && rows_16b_aligned(q) && rows_16b_aligned(k) && rows_16b_aligned(v);
  Tensor delta = empty({BH * T_len}, TensorOptions(kFloat32).device(q.device()));
  attention_flash_delta_kernel<bfloat16>
      <<<delta_blocks(BH * T_len), kDeltaWarpsPerBlock * kWarpSize, 0, stream>>>(
          dout.data<bfloat16>(), heads(dout), out.data<bfloat16>(), heads(out), delta.data<float>(), H, T_len,
          BH * T_len, D);
  BRIGADE_CUDA_CHECK_LAUNCH("attention_flash_delta_kernel");
  const float s = static_cast<float>(scale);
  {
    const size_t bytes = dkdv_shared_bytes<D, kAsync>();
    auto kernel = attention_flash_tc_dkdv_kernel<D, kAsync>;
    allow_shared(kernel, bytes, device, name);
    kernel<<<tile_grid(T_len, BH, name), kThreads, bytes, stream>>>(
        bits(dout), heads(dout), bits(q), heads(q), bits(k), heads(k), bits(v), heads(v), vec,
        lse.data<float>(), delta.data<float>(), dk.data<bfloat16>(), heads(dk), dv.data<bfloat16>(),
        heads(dv), H, T_len, s);
    BRIGADE_CUDA_CHECK_LAUNCH("attention_flash_tc_dkdv_kernel");
  }
  {
    const size_t bytes = dq_shared_bytes<D, kAsync>();
    auto kernel = attention_flash_tc_dq_kernel<D, kAsync>;
    allow_shared(kernel, bytes, device, name);
    kernel<<<tile_grid(T_len, BH, name), kThreads, bytes, stream>>>(
        bits(dout), heads(dout), bits(q), heads(q), bits(k), heads(k), bits(v), heads(v), vec,
        lse.data<float>(), delta.data<float>(), dq.data<bfloat16>(), heads(dq), H, T_len, s);
    BRIGADE_CUDA_CHECK_LAUNCH("attention_flash_tc_dq_kernel");
  }
}

}  // namespace

void flash_tc_forward(const Tensor& q, const Tensor& k, const Tensor& v, double scale, const Tensor& out,
                      const Tensor& lse, bool pipelined) {
  BRIGADE_CHECK_DTYPE(q.dtype() == kBFloat16, "causal_attention (flash_tc): expected bfloat16, got ",
                      dtype_name(q.dtype()));
  BRIGADE_CHECK_VALUE(q.size(3) == 64 || q.size(3) == 128,
                      "causal_attention (flash_tc): expected head dim 64 or 128, got ", q.size(3));
  cudaStream_t stream = stream_for(q);
  if (q.size(3) == 64) {
    pipelined ? forward<64, true>(q, k, v, scale, out, lse, stream)
              : forward<64, false>(q, k, v, scale, out, lse, stream);
  } else {
    pipelined ? forward<128, true>(q, k, v, scale, out, lse, stream)
              : forward<128, false>(q, k, v, scale, out, lse, stream);
  }
}

void flash_tc_backward(const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v,
                       const Tensor& out, const Tensor& lse, double scale, const Tensor& dq, const Tensor& dk,
                       const Tensor& dv, bool pipelined) {
  BRIGADE_CHECK_DTYPE(q.dtype() == kBFloat16, "causal_attention_backward (flash_tc): expected bfloat16, got ",
                      dtype_name(q.dtype()));
  BRIGADE_CHECK_VALUE(q.size(3) == 64 || q.size(3) == 128,
                      "causal_attention_backward (flash_tc): expected head dim 64 or 128, got ", q.size(3));
  cudaStream_t stream = stream_for(q);
  if (q.size(3) == 64) {
    pipelined ? backward<64, true>(dout, q, k, v, out, lse, scale, dq, dk, dv, stream)
              : backward<64, false>(dout, q, k, v, out, lse, scale, dq, dk, dv, stream);
  } else {
    pipelined ? backward<128, true>(dout, q, k, v, out, lse, scale, dq, dk, dv, stream)
              : backward<128, false>(dout, q, k, v, out, lse, scale, dq, dk, dv, stream);
  }
}

}  // namespace brigade::kernels::cuda::attention_detail
