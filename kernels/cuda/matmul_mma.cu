// bf16 GEMM on the tensor cores, version 7: mma.sync m16n8k16 fed by ldmatrix, a 3-stage cp.async pipeline.
//
//   C[b] (M x N, row-major, ldc) = op(A[b]) (M x K) @ op(B[b]) (K x N)   bfloat16 in and out, fp32 accumulate
//
// gemm_mma_kernel<kTransA, kTransB> — what changes from v6 (kernels/cuda/matmul_wmma_async.cu):
//  1. The tensor-core instruction itself instead of WMMA: mma.sync.aligned.m16n8k16
//  (kernels/cuda/mma_ptx.cuh)
//     with its operand fragments loaded by ldmatrix.x4 (four 8 x 8 b16 matrices per instruction, 16 bytes
//     per lane). The fragment layouts are fixed and documented (mma_ptx.cuh), so the epilogue writes the
//     accumulators straight from registers to C: no per-warp scratch round trip through shared memory.
//     Transposes are again left to the loads: a [K][M] A tile or a [K][N] B tile is read with ldmatrix
//     .trans, a [M][K] A tile or an [N][K] B tile without. One instantiation per (trans_a, trans_b).
//  2. Three stages instead of two: tiles for steps s + 1 and s + 2 are in flight while step s computes
//     (cp.async.wait_group 1), so one barrier per K step orders both "step s has landed" and "every warp
//     is done with the buffer that step s + 2 refills" (it was read at step s - 1).
//  Staging is v6's: tiles in their stored layout, 8 bf16 (16 B) per cp.async slot, the slot that crosses the
//  last column copies only its in-range bytes and zero-fills, rows past the matrix copy 0 bytes; operands
//  whose rows are not 16-byte aligned (rows_aligned) take guarded scalar loads and plain shared stores.
//
// Shared-memory layout: padding, not an XOR swizzle. Each stored row is padded by 8 bf16 (16 B), so row
//   pitches are 40 elements (80 B) for the [128][32] tiles and 136 (272 B) for the [32][128] ones. An
//   ldmatrix phase reads 8 rows of 16 B at one column; with an 80 B pitch they start at 4-byte words 0, 20,
//   40, ... = banks {0, 20, 8, 28, 16, 4, 24, 12} (+0..3), with 272 B at banks {0, 4, 8, ..., 28}: all 32
//   banks once, conflict-free in both stored layouts, and the cp.async slots stay 16-byte aligned. A swizzle
//   would save the 20% of shared memory the padding costs (60 KB vs 48 KB for 3 stages) but needs a
//   different XOR pattern per stored layout; with 60 KB a block still leaves room for 3 blocks per SM
//   (227 KB), more than the 64 accumulator registers per thread allow anyway (~2 blocks at 256 threads).
//
// Launch: grid (ceil(M/128), ceil(N/128), batch), 256 threads = 8 warps (2 along M x 4 along N), warp tile
//   64 x 32 = 4 x 4 mma tiles of 16 x 8 (64 fp32 accumulators per lane), BK 32 (two k16 steps per stage),
//   3 x 20 KB dynamic shared memory (opted in above the 48 KB default).
//   Per k16 a warp issues 4 ldmatrix.x4 for A (one per 16-row tile), 2 for B (one per 16 columns) and 16
//   mma: 6 shared loads of 512 B for 16 x 4096 FLOP.
//
// Napkin math (H200: bf16 dense ~989 TFLOP/s peak, cuBLAS ~790 measured; 132 SMs). 8192^3 is 1.1 TFLOP:
//   ~1.4 ms at cuBLAS's rate. Arithmetic intensity of a 128 x 128 x 32 step: 2 * 128 * 128 * 32 = 1 MFLOP
//   for 16 KB of operands = 64 FLOP/B from L2/HBM; over the whole product A and B are each re-read
//   8192/128 = 64 times, 2 * 64 * 128 MB = 17 GB, mostly from L2 (50 MB): HBM is not the bound.
//   The bound is issue: mma.sync on Hopper reaches roughly 60-70% of the wgmma peak in the best published
//   kernels, and a 128 x 128 tile with 2 blocks per SM and no warp specialisation sits below that.
//   Expect ~50-65% of cuBLAS at 8192^3 (v6 was estimated 40-55%); wgmma + TMA (v8) is the way past it.
//   Measured on an H200 (scripts/gpu_check.sh, bench/results/gpu-20261204-1513-ebaddd8/): 233 TFLOP/s at 8192^3,
//   30 % of cuBLAS (766), 22-27 % of the measured peak at GPT-2's layer products; short of the expectation.
//   It is still 2.5-3.7x v5, and the bfloat16 default.
//
// Next: v8 (kernels/cuda/matmul_wgmma.cu) uses Hopper's wgmma, which reads both operands from swizzled
//   shared memory through descriptors (no ldmatrix, 64 x 128 x 16 per instruction), 4 stages.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/backend.h"
#include "kernels/cuda/gemm_staging.cuh"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/matmul_launchers.cuh"
#include "kernels/cuda/mma_ptx.cuh"
#include "tensor/bfloat16.h"
#include "tensor/cuda/cuda_check.h"

namespace brigade::kernels::cuda::gemm_detail {
namespace {

constexpr int kThreads = 256;
constexpr int kBM = 128, kBN = 128, kBK = 32;
constexpr int kStages = 3;
constexpr int kWarpsN = 4;         // warps: 2 along M x 4 along N
constexpr int kWM = 64, kWN = 32;  // warp tile
constexpr int kTilesM = kWM / 16;  // 4 mma tiles of 16 rows
constexpr int kTilesN = kWN / 8;   // 4 mma tiles of 8 columns
constexpr int kPad = 8;            // bf16 elements per shared row (16 B; see the top)
constexpr int kTileElems = tile_slot_elems<kBM, kBK, kPad>();  // one operand tile, either stored layout
constexpr int kStageElems = 2 * kTileElems;                    // A then B
constexpr int kSharedBytes = kStages * kStageElems * 2;
static_assert((kThreads / kWarpSize) * kWM * kWN == kBM * kBN, "the warps cover the block tile");

/// The A fragments (rows m0 .. m0 + 15, k kk .. kk + 15) of one mma tile. Lane 8q + r names row r of
/// ldmatrix matrix q; the matrices must come out as a0..a3 = (rows 0-7, k 0-7), (rows 8-15, k 0-7),
/// (rows 0-7, k 8-15), (rows 8-15, k 8-15) (mma_ptx.cuh).
template <bool kTransA>
__device__ __forceinline__ void load_a(uint32_t (&a)[4], const uint16_t* tile, int m0, int kk, int lane) {
  const int q = lane / 8, r = lane % 8;
  if (kTransA) {  // stored [k][m], pitch BM + pad: matrix q is k rows kk + 8(q/2) .., m columns m0 + 8(q%2)
                  // ..
    ptx::ldmatrix_x4_trans(a, tile + (kk + (q / 2) * 8 + r) * (kBM + kPad) + m0 + (q % 2) * 8);
  } else {  // stored [m][k], pitch BK + pad: matrix q is m rows m0 + 8(q%2) .., k columns kk + 8(q/2) ..
    ptx::ldmatrix_x4(a, tile + (m0 + (q % 2) * 8 + r) * (kBK + kPad) + kk + (q / 2) * 8);
  }
}

/// The B fragments of two mma tiles: columns n0 .. n0 + 7 into b_lo, n0 + 8 .. n0 + 15 into b_hi, k kk ..
/// kk + 15. Matrices 0, 1 are b0, b1 (k 0-7, k 8-15) of the first tile, 2, 3 those of the second.
template <bool kTransB>
__device__ __forceinline__ void load_b(uint32_t (&b_lo)[2], uint32_t (&b_hi)[2], const uint16_t* tile, int n0,
                                       int kk, int lane) {
  const int q = lane / 8, r = lane % 8;
  uint32_t x[4];
  if (kTransB) {  // stored [n][k], pitch BK + pad: matrix q is n rows n0 + 8(q/2) .., k columns kk + 8(q%2)
                  // ..
    ptx::ldmatrix_x4(x, tile + (n0 + (q / 2) * 8 + r) * (kBK + kPad) + kk + (q % 2) * 8);
  } else {  // stored [k][n], pitch BN + pad: matrix q is k rows kk + 8(q%2) .., n columns n0 + 8(q/2) ..
    ptx::ldmatrix_x4_trans(x, tile + (kk + (q % 2) * 8 + r) * (kBN + kPad) + n0 + (q / 2) * 8);
  }
  b_lo[0] = x[0], b_lo[1] = x[1], b_hi[0] = x[2], b_hi[1] = x[3];
}

template <bool kTransA, bool kTransB>
__global__ void __launch_bounds__(kThreads)
    gemm_mma_kernel(GemmArgs args, int64_t batch_offset, bool vec_a, bool vec_b, bool vec_c) {
  extern __shared__ uint4 shared_u4[];  // kStages x [A tile | B tile], bf16 bits
  uint16_t* shared = reinterpret_cast<uint16_t*>(shared_u4);

  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  const int wm0 = (warp / kWarpsN) * kWM, wn0 = (warp % kWarpsN) * kWN;
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * kBM;
  const int64_t col0 = static_cast<int64_t>(blockIdx.y) * kBN;
  const int64_t b = batch_offset + blockIdx.z;
  const Stored a_src{static_cast<const uint16_t*>(args.a) + b * args.stride_a, args.lda,
                     kTransA ? args.k : args.m, kTransA ? args.m : args.k, vec_a};
  const Stored b_src{static_cast<const uint16_t*>(args.b) + b * args.stride_b, args.ldb,
                     kTransB ? args.n : args.k, kTransB ? args.k : args.n, vec_b};

  float acc[kTilesM][kTilesN][4];
#pragma unroll
  for (int i = 0; i < kTilesM; ++i) {
#pragma unroll
    for (int j = 0; j < kTilesN; ++j) {
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.0f;
    }
  }

  // Prologue: steps 0 .. kStages - 2 in flight. Every slot of the pipeline commits a group, empty or not,
  // so that "all but kStages - 2 groups done" always means "step `step` has landed".
  const int64_t steps = (args.k + kBK - 1) / kBK;
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < steps) {
      stage_step<kThreads, kPad, kBM, kBN, kBK, kTransA, kTransB>(a_src, b_src, row0, col0, s * kBK,
                                                                  shared + s * kStageElems);
    }
    ptx::cp_async_commit();
  }
  for (int64_t step = 0; step < steps; ++step) {
    ptx::cp_async_wait<kStages - 2>();
    // Step's copies (async and plain) from every thread are visible, and every warp has finished
    // step - 1, whose buffer the prefetch below refills.
    __syncthreads();
    const int64_t next = step + kStages - 1;
    if (next < steps) {
      stage_step<kThreads, kPad, kBM, kBN, kBK, kTransA, kTransB>(a_src, b_src, row0, col0, next * kBK,
                                                                  shared + (next % kStages) * kStageElems);
    }
    ptx::cp_async_commit();

    const uint16_t* a_tile = shared + (step % kStages) * kStageElems;
    const uint16_t* b_tile = a_tile + kTileElems;
#pragma unroll
    for (int kk = 0; kk < kBK; kk += 16) {
      uint32_t a_frag[kTilesM][4];
      uint32_t b_frag[kTilesN][2];
#pragma unroll
      for (int i = 0; i < kTilesM; ++i) load_a<kTransA>(a_frag[i], a_tile, wm0 + i * 16, kk, lane);
#pragma unroll
      for (int j = 0; j < kTilesN; j += 2) {
        load_b<kTransB>(b_frag[j], b_frag[j + 1], b_tile, wn0 + j * 8, kk, lane);
      }
#pragma unroll
      for (int i = 0; i < kTilesM; ++i) {
#pragma unroll
        for (int j = 0; j < kTilesN; ++j) ptx::mma_bf16_16816(acc[i][j], a_frag[i], b_frag[j], acc[i][j]);
      }
    }
  }
  // The groups still open here are empty (every real one was waited for in the loop); drain them anyway so
  // that no copy can outlive the block.
  ptx::cp_async_wait<0>();

  // Epilogue from registers: lane (g, t) of mma tile (i, j) holds C rows g and g + 8, columns 2t, 2t + 1.
  bfloat16* c = static_cast<bfloat16*>(args.c) + b * args.stride_c;
  const int g = lane / 4, t = lane % 4;
#pragma unroll
  for (int i = 0; i < kTilesM; ++i) {
#pragma unroll
    for (int j = 0; j < kTilesN; ++j) {
      const int64_t gj = col0 + wn0 + j * 8 + 2 * t;  // even
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int64_t gi = row0 + wm0 + i * 16 + g + h * 8;
        if (gi >= args.m || gj >= args.n) continue;
        bfloat16* out = c + gi * args.ldc + gj;
        const bfloat16 lo(acc[i][j][2 * h]);
        if (vec_c && gj + 1 < args.n) {  // two neighbours in one 4-byte store
          const bfloat16 hi(acc[i][j][2 * h + 1]);
          *reinterpret_cast<uint32_t*>(out) = ptx::pack_b16(lo.bits, hi.bits);
        } else {
          out[0] = lo;
          if (gj + 1 < args.n) out[1] = bfloat16(acc[i][j][2 * h + 1]);
        }
      }
    }
  }
}

template <bool kTransA, bool kTransB>
void launch(const GemmArgs& args, cudaStream_t stream, bool vec_a, bool vec_b, bool vec_c, dim3 grid_xy) {
  auto* kernel = gemm_mma_kernel<kTransA, kTransB>;
  BRIGADE_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSharedBytes));
  for_each_batch_chunk(args.batch, [&](unsigned grid_z, int64_t offset) {
    dim3 grid(grid_xy.x, grid_xy.y, grid_z);
    gemm_mma_kernel<kTransA, kTransB>
        <<<grid, kThreads, kSharedBytes, stream>>>(args, offset, vec_a, vec_b, vec_c);
    BRIGADE_CUDA_CHECK_LAUNCH("gemm_mma_kernel");
  });
}

}  // namespace

void launch_gemm_mma_bf16(const GemmArgs& args, cudaStream_t stream) {
  const int64_t grid_x = (args.m + kBM - 1) / kBM;
  const int64_t grid_y = (args.n + kBN - 1) / kBN;
  BRIGADE_CHECK_VALUE(grid_x <= INT32_MAX && grid_y <= kMaxGridYZ, "matmul (gemm_mma_kernel): [", args.m,
                      ", ", args.n, "] output exceeds the ", kMaxGridYZ * kBN, " columns one launch covers");
  const bool vec_a = rows_aligned(args.a, args.lda, args.stride_a, 2, 16);
  const bool vec_b = rows_aligned(args.b, args.ldb, args.stride_b, 2, 16);
  const bool vec_c = rows_aligned(args.c, args.ldc, args.stride_c, 2, 4);
  const dim3 grid_xy(static_cast<unsigned>(grid_x), static_cast<unsigned>(grid_y));
  if (args.trans_a) {
    args.trans_b ? launch<true, true>(args, stream, vec_a, vec_b, vec_c, grid_xy)
                 : launch<true, false>(args, stream, vec_a, vec_b, vec_c, grid_xy);
  } else {
    args.trans_b ? launch<false, true>(args, stream, vec_a, vec_b, vec_c, grid_xy)
                 : launch<false, false>(args, stream, vec_a, vec_b, vec_c, grid_xy);
  }
}

}  // namespace brigade::kernels::cuda::gemm_detail
