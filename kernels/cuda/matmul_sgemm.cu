// fp32 SGEMM, versions 3 and 4 (v1 naive and v2 tiled are in kernels/cuda/matmul.cu):
//
//   C[b] (M x N, row-major, ldc) = op(A[b]) (M x K) @ op(B[b]) (K x N)     (GemmArgs, kernels/backend.h)
//
// Both stage, per K step, a BK x BM tile of op(A) and a BK x BN tile of op(B) in shared memory, both stored
// *k-major* (tile[p][i], i along M or N), whatever the trans flags: the compute loop then reads, per k, a
// contiguous run of the A tile (the thread's rows) and of the B tile (its columns) as float4s.
//
// Loading (shared by v3 and v4: fetch_tile / store_tile). An operand is read in float4 "slots" of four
// elements that are consecutive in memory: along K when the operand is stored K-contiguous (A not
// transposed, B transposed), along M/N otherwise. A K-contiguous slot is scattered into four rows of the
// k-major tile (this is the "transposed A tile" step: the transpose happens once, on the way into shared
// memory, not in the inner loop); an M/N-contiguous slot is stored as one float4. A slot whose four
// elements are inside the matrix, on an operand whose rows are 16-byte aligned (rows_aligned: base
// pointer, leading dim and batch stride), is one 16-byte load; any other slot (matrix edges, K tails,
// misaligned views) is four guarded scalar loads with zeros outside the matrix. So any M, N, K, alignment,
// trans flags and batch strides (0 broadcasts) take the same kernel, and only edge tiles pay for guards.
//
// v3 gemm_vectorized_kernel — 128 x 128 x 8 block tile, 256 threads, 8 x 8 outputs per thread.
//   Launch: grid (ceil(M/128), ceil(N/128), batch), 256 threads, 8.4 KB static shared memory.
//   Thread (ty, tx) in a 16 x 16 grid owns rows {ty*4 + r, 64 + ty*4 + r} and columns {tx*4 + s,
//   64 + tx*4 + s} (r, s < 4): two float4 reads of the A tile and two of the B tile per k feed 64 FMAs
//   (16 FMAs per shared load instruction vs 4 in v2's scalar reads). In a warp, the 16 tx read 16
//   consecutive float4s of the B tile (conflict-free) and the 2 ty broadcast; a padding of 4 floats per
//   tile row puts the scattered K-contiguous stores of a warp in 32 distinct banks. C is written as float4s.
//
// v4 gemm_warptiled_kernel — v3 plus warp tiles, BK = 16 and double buffering.
//   Launch: grid (ceil(M/128), ceil(N/128), batch), 256 threads = 8 warps (2 along M x 4 along N),
//   33.8 KB static shared memory. A warp owns a 64 x 32 sub-tile of C; its lanes form an 8 x 4 grid and
//   lane (lm, ln) owns rows {im*32 + lm*4 + r} and columns {in*16 + ln*4 + s} (im, in < 2; r, s < 4) of the
//   warp tile: 64 accumulators, as in v3, but a warp's shared reads now cover only 64 + 32 floats of a k
//   row (v3's warp reads 2 x 64 + 128), so more of each shared load is reuse in registers, and the
//   per-warp footprint is the shape a tensor-core version uses. The next K step's slots are fetched into
//   registers before the current step's FMAs and stored into the other shared buffer after them, so global
//   latency hides behind compute and there is one __syncthreads per K step instead of two.
//
// Napkin math (H200: fp32 ~67 TFLOP/s on CUDA cores, ~4.3 TB/s HBM, 50 MB L2). 4096^3: 137 GFLOP, ~2.0 ms
//   at peak. With 128 x 128 tiles each operand element is loaded from L2/HBM 4096/128 = 32 times:
//   2 * 32 * 4096^2 * 4 B = 4.3 GB, ~1 ms at HBM speed and mostly L2 hits, so the kernels are bound by
//   FMA issue and shared-memory bandwidth. Per k a thread issues 4 LDS.128 for 64 FFMAs (v3 and v4): the
//   FFMA pipe, not shared memory, is the limit, which is what makes ~80-90% of cuBLAS's fp32 rate (cuBLAS
//   itself reaches ~75-85% of the fp32 peak) reachable. Not yet measured: see docs/kernels.md.
//
// Next: v5 (kernels/cuda/matmul_wmma.cu) moves the products to the tensor cores (bfloat16 in, fp32
//   accumulate): ~15x the fp32 CUDA-core peak.
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/backend.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/matmul_launchers.cuh"
#include "tensor/cuda/cuda_check.h"

namespace brigade::kernels::cuda::gemm_detail {
namespace {

constexpr int kThreads = 256;
constexpr int kTilePad = 4;  // floats of padding per k row of a shared tile (keeps rows 16-byte aligned)

/// One operand as the tile loaders see it: element (p, i) of the k-major view (p along K, i along M for A
/// or N for B) is x[i * ld + p] when k_contiguous, else x[p * ld + i].
struct TileSource {
  const float* x;  // this batch entry's matrix
  int64_t ld;
  int64_t mn_size;  // M for A, N for B
  int64_t k_size;
  bool k_contiguous;
  bool vec;  // rows_aligned(16 bytes): whole in-range slots may be float4 loads
};

/// The (p, i) of the first element of slot f; the slot's other three follow along K (k_contiguous) or
/// along i.
template <int BK, int BMN>
__device__ __forceinline__ void slot_origin(bool k_contiguous, int f, int& p, int& i) {
  if (k_contiguous) {
    i = f / (BK / 4);
    p = (f % (BK / 4)) * 4;
  } else {
    p = f / (BMN / 4);
    i = (f % (BMN / 4)) * 4;
  }
}

/// Loads this thread's slots of the BK x BMN tile at (k0, mn0) into registers, zero outside the matrix.
template <int BK, int BMN>
__device__ __forceinline__ void fetch_tile(const TileSource& src, int64_t k0, int64_t mn0,
                                           float4 (&slots)[BK * BMN / 4 / kThreads]) {
  static_assert((BK * BMN / 4) % kThreads == 0, "the tile must split into whole slots per thread");
#pragma unroll
  for (int t = 0; t < BK * BMN / 4 / kThreads; ++t) {
    int p, i;
    slot_origin<BK, BMN>(src.k_contiguous, threadIdx.x + t * kThreads, p, i);
    const int64_t gp = k0 + p, gi = mn0 + i;
    float v[4];
    if (src.k_contiguous) {
      const bool row_in = gi < src.mn_size;
      const float* at = src.x + gi * src.ld + gp;
      if (src.vec && row_in && gp + 3 < src.k_size) {
        const float4 w = *reinterpret_cast<const float4*>(at);
        v[0] = w.x, v[1] = w.y, v[2] = w.z, v[3] = w.w;
      } else {
#pragma unroll
        for (int q = 0; q < 4; ++q) v[q] = (row_in && gp + q < src.k_size) ? at[q] : 0.0f;
      }
    } else {
      const bool k_in = gp < src.k_size;
      const float* at = src.x + gp * src.ld + gi;
      if (src.vec && k_in && gi + 3 < src.mn_size) {
        const float4 w = *reinterpret_cast<const float4*>(at);
        v[0] = w.x, v[1] = w.y, v[2] = w.z, v[3] = w.w;
      } else {
#pragma unroll
        for (int q = 0; q < 4; ++q) v[q] = (k_in && gi + q < src.mn_size) ? at[q] : 0.0f;
      }
    }
    slots[t] = make_float4(v[0], v[1], v[2], v[3]);
  }
}

/// Stores the slots fetched by fetch_tile into the k-major shared tile (row length LDS floats).
template <int BK, int BMN, int LDS>
__device__ __forceinline__ void store_tile(bool k_contiguous, const float4 (&slots)[BK * BMN / 4 / kThreads],
                                           float* tile) {
  static_assert(LDS % 4 == 0, "shared tile rows must stay 16-byte aligned");
#pragma unroll
  for (int t = 0; t < BK * BMN / 4 / kThreads; ++t) {
    int p, i;
    slot_origin<BK, BMN>(k_contiguous, threadIdx.x + t * kThreads, p, i);
    const float4 w = slots[t];
    if (k_contiguous) {  // four consecutive k of one row i: the transposing scatter
      tile[(p + 0) * LDS + i] = w.x;
      tile[(p + 1) * LDS + i] = w.y;
      tile[(p + 2) * LDS + i] = w.z;
      tile[(p + 3) * LDS + i] = w.w;
    } else {
      *reinterpret_cast<float4*>(tile + p * LDS + i) = w;
    }
  }
}

/// The operands of batch entry `b` as tile sources.
__device__ __forceinline__ TileSource source_a(const GemmArgs& args, int64_t b, bool vec) {
  return {
      static_cast<const float*>(args.a) + b * args.stride_a, args.lda, args.m, args.k, !args.trans_a, vec};
}
__device__ __forceinline__ TileSource source_b(const GemmArgs& args, int64_t b, bool vec) {
  return {static_cast<const float*>(args.b) + b * args.stride_b, args.ldb, args.n, args.k, args.trans_b, vec};
}

/// Writes four consecutive outputs of row gi starting at column gj (float4 when whole and aligned).
__device__ __forceinline__ void store_c4(float* c, const GemmArgs& args, bool vec_c, int64_t gi, int64_t gj,
                                         const float (&v)[4]) {
  if (gi >= args.m) return;
  float* at = c + gi * args.ldc + gj;
  if (vec_c && gj + 3 < args.n) {
    *reinterpret_cast<float4*>(at) = make_float4(v[0], v[1], v[2], v[3]);
  } else {
#pragma unroll
    for (int s = 0; s < 4; ++s) {
      if (gj + s < args.n) at[s] = v[s];
    }
  }
}

// ---- v3: vectorised loads, transposed A tile, float4 shared reads ----------------------------------------

constexpr int kV3BM = 128, kV3BN = 128, kV3BK = 8;

__global__ void __launch_bounds__(kThreads)
    gemm_vectorized_kernel(GemmArgs args, int64_t batch_offset, bool vec_a, bool vec_b, bool vec_c) {
  constexpr int BM = kV3BM, BN = kV3BN, BK = kV3BK;
  constexpr int LDA = BM + kTilePad, LDB = BN + kTilePad;
  static_assert(BM == 16 * 8 && BN == 16 * 8, "a 16 x 16 thread grid with 8 x 8 outputs per thread");
  __shared__ __align__(16) float a_tile[BK * LDA];
  __shared__ __align__(16) float b_tile[BK * LDB];

  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * BM;
  const int64_t col0 = static_cast<int64_t>(blockIdx.y) * BN;
  const int64_t b = batch_offset + blockIdx.z;
  const TileSource a_src = source_a(args, b, vec_a);
  const TileSource b_src = source_b(args, b, vec_b);
  float* c = static_cast<float*>(args.c) + b * args.stride_c;

  float acc[8][8] = {};
  float4 a_slots[BK * BM / 4 / kThreads], b_slots[BK * BN / 4 / kThreads];
  for (int64_t k0 = 0; k0 < args.k; k0 += BK) {
    fetch_tile<BK, BM>(a_src, k0, row0, a_slots);
    fetch_tile<BK, BN>(b_src, k0, col0, b_slots);
    store_tile<BK, BM, LDA>(a_src.k_contiguous, a_slots, a_tile);
    store_tile<BK, BN, LDB>(b_src.k_contiguous, b_slots, b_tile);
    __syncthreads();
#pragma unroll
    for (int p = 0; p < BK; ++p) {
      const float4 a0 = *reinterpret_cast<const float4*>(a_tile + p * LDA + ty * 4);
      const float4 a1 = *reinterpret_cast<const float4*>(a_tile + p * LDA + BM / 2 + ty * 4);
      const float4 b0 = *reinterpret_cast<const float4*>(b_tile + p * LDB + tx * 4);
      const float4 b1 = *reinterpret_cast<const float4*>(b_tile + p * LDB + BN / 2 + tx * 4);
      const float af[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
      const float bf[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
#pragma unroll
      for (int r = 0; r < 8; ++r) {
#pragma unroll
        for (int s = 0; s < 8; ++s) acc[r][s] += af[r] * bf[s];
      }
    }
    __syncthreads();  // the tiles are overwritten by the next K step
  }

#pragma unroll
  for (int r = 0; r < 8; ++r) {
    const int64_t gi = row0 + (r / 4) * (BM / 2) + ty * 4 + r % 4;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float v[4] = {acc[r][h * 4], acc[r][h * 4 + 1], acc[r][h * 4 + 2], acc[r][h * 4 + 3]};
      store_c4(c, args, vec_c, gi, col0 + h * (BN / 2) + tx * 4, v);
    }
  }
}

// ---- v4: warp tiles, BK 16, double-buffered shared memory ----------------------------------------------

constexpr int kV4BM = 128, kV4BN = 128, kV4BK = 16;
constexpr int kV4WarpsM = 2, kV4WarpsN = 4;                            // 8 warps
constexpr int kV4WM = kV4BM / kV4WarpsM, kV4WN = kV4BN / kV4WarpsN;    // 64 x 32 per warp
constexpr int kV4LanesM = 8, kV4LanesN = 4;                            // lanes of a warp: 8 x 4
constexpr int kV4SubM = kV4LanesM * 4, kV4SubN = kV4LanesN * 4;        // 32 x 16 per (im, in) step
constexpr int kV4IterM = kV4WM / kV4SubM, kV4IterN = kV4WN / kV4SubN;  // 2 x 2
static_assert(kV4WarpsM * kV4WarpsN * kWarpSize == kThreads && kV4LanesM * kV4LanesN == kWarpSize,
              "v4's warp and lane grids must cover the block");
static_assert(kV4IterM * 4 == 8 && kV4IterN * 4 == 8, "v4 keeps 8 x 8 accumulators per thread");

__global__ void __launch_bounds__(kThreads)
    gemm_warptiled_kernel(GemmArgs args, int64_t batch_offset, bool vec_a, bool vec_b, bool vec_c) {
  constexpr int BM = kV4BM, BN = kV4BN, BK = kV4BK;
  constexpr int LDA = BM + kTilePad, LDB = BN + kTilePad;
  __shared__ __align__(16) float a_tile[2][BK * LDA];
  __shared__ __align__(16) float b_tile[2][BK * LDB];

  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  const int wm0 = (warp / kV4WarpsN) * kV4WM, wn0 = (warp % kV4WarpsN) * kV4WN;  // warp tile in the block
  const int lm = lane / kV4LanesN, ln = lane % kV4LanesN;
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * BM;
  const int64_t col0 = static_cast<int64_t>(blockIdx.y) * BN;
  const int64_t b = batch_offset + blockIdx.z;
  const TileSource a_src = source_a(args, b, vec_a);
  const TileSource b_src = source_b(args, b, vec_b);
  float* c = static_cast<float*>(args.c) + b * args.stride_c;

  float acc[8][8] = {};  // [im * 4 + r][in * 4 + s]
  float4 a_slots[BK * BM / 4 / kThreads], b_slots[BK * BN / 4 / kThreads];
  fetch_tile<BK, BM>(a_src, 0, row0, a_slots);
  fetch_tile<BK, BN>(b_src, 0, col0, b_slots);
  store_tile<BK, BM, LDA>(a_src.k_contiguous, a_slots, a_tile[0]);
  store_tile<BK, BN, LDB>(b_src.k_contiguous, b_slots, b_tile[0]);
  __syncthreads();

  int buf = 0;
  for (int64_t k0 = 0; k0 < args.k; k0 += BK, buf ^= 1) {
    // Buffer buf holds step k0. Every thread has finished reading buf ^ 1 (step k0 - BK) at the barrier
    // that ended the previous iteration, so it may be refilled while buf is read.
    const bool has_next = k0 + BK < args.k;
    if (has_next) {
      fetch_tile<BK, BM>(a_src, k0 + BK, row0, a_slots);
      fetch_tile<BK, BN>(b_src, k0 + BK, col0, b_slots);
    }
    const float* at = a_tile[buf];
    const float* bt = b_tile[buf];
#pragma unroll
    for (int p = 0; p < BK; ++p) {
      float af[8], bf[8];
#pragma unroll
      for (int im = 0; im < kV4IterM; ++im) {
        const float4 w = *reinterpret_cast<const float4*>(at + p * LDA + wm0 + im * kV4SubM + lm * 4);
        af[im * 4 + 0] = w.x, af[im * 4 + 1] = w.y, af[im * 4 + 2] = w.z, af[im * 4 + 3] = w.w;
      }
#pragma unroll
      for (int in = 0; in < kV4IterN; ++in) {
        const float4 w = *reinterpret_cast<const float4*>(bt + p * LDB + wn0 + in * kV4SubN + ln * 4);
        bf[in * 4 + 0] = w.x, bf[in * 4 + 1] = w.y, bf[in * 4 + 2] = w.z, bf[in * 4 + 3] = w.w;
      }
#pragma unroll
      for (int r = 0; r < 8; ++r) {
#pragma unroll
        for (int s = 0; s < 8; ++s) acc[r][s] += af[r] * bf[s];
      }
    }
    if (has_next) {
      store_tile<BK, BM, LDA>(a_src.k_contiguous, a_slots, a_tile[buf ^ 1]);
      store_tile<BK, BN, LDB>(b_src.k_contiguous, b_slots, b_tile[buf ^ 1]);
    }
    __syncthreads();
  }

#pragma unroll
  for (int r = 0; r < 8; ++r) {
    const int64_t gi = row0 + wm0 + (r / 4) * kV4SubM + lm * 4 + r % 4;
#pragma unroll
    for (int in = 0; in < kV4IterN; ++in) {
      const float v[4] = {acc[r][in * 4], acc[r][in * 4 + 1], acc[r][in * 4 + 2], acc[r][in * 4 + 3]};
      store_c4(c, args, vec_c, gi, col0 + wn0 + in * kV4SubN + ln * 4, v);
    }
  }
}

// ---- launchers -------------------------------------------------------------------------------------------

template <typename Kernel>
void launch_128x128(const GemmArgs& args, cudaStream_t stream, Kernel kernel, const char* name) {
  const int64_t grid_x = (args.m + 127) / 128;
  const int64_t grid_y = (args.n + 127) / 128;
  BRIGADE_CHECK_VALUE(grid_x <= INT32_MAX && grid_y <= kMaxGridYZ, "matmul (", name, "): [", args.m, ", ",
                      args.n, "] output exceeds the ", kMaxGridYZ * 128, " columns one launch covers");
  const bool vec_a = rows_aligned(args.a, args.lda, args.stride_a, 4, 16);
  const bool vec_b = rows_aligned(args.b, args.ldb, args.stride_b, 4, 16);
  const bool vec_c = rows_aligned(args.c, args.ldc, args.stride_c, 4, 16);
  for_each_batch_chunk(args.batch, [&](unsigned grid_z, int64_t offset) {
    dim3 grid(static_cast<unsigned>(grid_x), static_cast<unsigned>(grid_y), grid_z);
    kernel<<<grid, kThreads, 0, stream>>>(args, offset, vec_a, vec_b, vec_c);
    BRIGADE_CUDA_CHECK_LAUNCH(name);
  });
}

}  // namespace

void launch_sgemm_vectorized(const GemmArgs& args, cudaStream_t stream) {
  launch_128x128(args, stream, gemm_vectorized_kernel, "gemm_vectorized_kernel");
}

void launch_sgemm_warptiled(const GemmArgs& args, cudaStream_t stream) {
  launch_128x128(args, stream, gemm_warptiled_kernel, "gemm_warptiled_kernel");
}

}  // namespace brigade::kernels::cuda::gemm_detail
