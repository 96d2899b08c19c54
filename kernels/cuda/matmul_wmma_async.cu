// bf16 GEMM on the tensor cores, version 6: v5 (kernels/cuda/matmul_wmma.cu) with cp.async double buffering
// and operand tiles kept in their stored layout.
//
//   C[b] (M x N, row-major, ldc) = op(A[b]) (M x K) @ op(B[b]) (K x N)   bfloat16 in and out, fp32 accumulate
//
// gemm_wmma_async_kernel<kTransA, kTransB> — what changes from v5:
//  1. No transposing scatter. Each operand tile is copied into shared memory in the layout it has in global
//     memory (rows of the stored matrix stay rows, padded by 8 elements), and the transposition is left to
//     the fragment loads: a transposed A is read as a col_major matrix_a fragment, a transposed B as a
//     col_major matrix_b fragment (WMMA supports both). So every staging slot is 8 consecutive bf16 (16 B)
//     in global and in shared memory, whatever the trans flags: one instantiation per (trans_a, trans_b).
//  2. cp.async (sm_80+): those 16-byte slots are copied global -> shared by the copy engine without passing
//     through registers (cp.async.cg, bypassing L1), into the other of two shared buffers while the warps
//     run the mma_syncs of the current one: the K loop's global latency hides behind tensor-core work, and
//     there is no register staging. A slot that crosses the matrix's last column copies only its in-range
//     bytes and zero-fills the rest (cp.async's src-size operand); a slot of a row past the matrix copies 0
//     bytes (all zeros). Operands whose rows are not 16-byte aligned (rows_aligned) take guarded scalar loads
//     and plain shared stores instead (correct, slower); the barrier that ends each stage orders both kinds.
//  Launch: grid (ceil(M/128), ceil(N/128), batch), 256 threads = 8 warps (2 x 4), warp tile 64 x 32 = 4 x 2
//  accumulator fragments, BK 32, 2 x 20 KB static shared memory (the epilogue's per-warp 16 x 16 float
//  scratch reuses it after the K loop; the epilogue is v5's, kernels/cuda/wmma_epilogue.cuh).
//
// Napkin math (H200: bf16 dense ~989 TFLOP/s peak, cuBLAS ~790): per K step a block moves 16 KB for 1 MFLOP,
//   as in v5; what v6 removes is the exposed latency (v5 loads, waits, then computes) and the scatter's bank
//   conflicts. Expect roughly 1.5-2x v5, i.e. ~40-55% of cuBLAS at 8192^3. Beyond it: ldmatrix + mma.sync
//   with swizzled tiles and 3-4 stages, then wgmma + TMA (docs/kernels.md). Not yet measured.
//
// Next: v7 (kernels/cuda/matmul_mma.cu) issues mma.sync itself from ldmatrix fragments (a register
//   epilogue, no scratch) with a 3-stage pipeline.
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <mma.h>

#include <cstdint>

#include "kernels/backend.h"
#include "kernels/cuda/gemm_staging.cuh"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/matmul_launchers.cuh"
#include "kernels/cuda/mma_ptx.cuh"
#include "kernels/cuda/wmma_epilogue.cuh"
#include "tensor/bfloat16.h"
#include "tensor/cuda/cuda_check.h"

namespace brigade::kernels::cuda::gemm_detail {
namespace {

namespace wmma = nvcuda::wmma;

constexpr int kThreads = 256;
constexpr int kBM = 128, kBN = 128, kBK = 32;
constexpr int kWarpsN = 4;
constexpr int kWM = 64, kWN = 32;  // warp tile
constexpr int kFrag = 16;
constexpr int kFragsM = kWM / kFrag, kFragsN = kWN / kFrag;  // 4 x 2
constexpr int kPad = 8;                                      // bf16 elements per shared row
// A stored tile is [128][32 + 8] (not transposed) or [32][128 + 8] (transposed): at most 5120 elements;
// likewise B. One buffer holds both.
constexpr int kTileElems = tile_slot_elems<kBM, kBK, kPad>();
static_assert(kThreads / kWarpSize * kFrag * kFrag * 4 <= 2 * 2 * kTileElems * 2, "epilogue scratch fits");

template <bool kTransA, bool kTransB>
__global__ void __launch_bounds__(kThreads)
    gemm_wmma_async_kernel(GemmArgs args, int64_t batch_offset, bool vec_a, bool vec_b) {
  __shared__ __align__(128) uint16_t buffers[2][2 * kTileElems];

  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  const int wm0 = (warp / kWarpsN) * kWM, wn0 = (warp % kWarpsN) * kWN;
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * kBM;
  const int64_t col0 = static_cast<int64_t>(blockIdx.y) * kBN;
  const int64_t b = batch_offset + blockIdx.z;
  const Stored a_src{static_cast<const uint16_t*>(args.a) + b * args.stride_a, args.lda,
                     kTransA ? args.k : args.m, kTransA ? args.m : args.k, vec_a};
  const Stored b_src{static_cast<const uint16_t*>(args.b) + b * args.stride_b, args.ldb,
                     kTransB ? args.n : args.k, kTransB ? args.k : args.n, vec_b};
  bfloat16* c = static_cast<bfloat16*>(args.c) + b * args.stride_c;

  using LayoutA = std::conditional_t<kTransA, wmma::col_major, wmma::row_major>;
  using LayoutB = std::conditional_t<kTransB, wmma::col_major, wmma::row_major>;
  wmma::fragment<wmma::accumulator, kFrag, kFrag, kFrag, float> acc[kFragsM][kFragsN];
#pragma unroll
  for (int i = 0; i < kFragsM; ++i) {
#pragma unroll
    for (int j = 0; j < kFragsN; ++j) wmma::fill_fragment(acc[i][j], 0.0f);
  }

  const int64_t steps = (args.k + kBK - 1) / kBK;
  stage_step<kThreads, kPad, kBM, kBN, kBK, kTransA, kTransB>(a_src, b_src, row0, col0, 0, buffers[0]);
  ptx::cp_async_commit();
  for (int64_t step = 0; step < steps; ++step) {
    // Prefetch step + 1 into the other buffer: every warp finished reading it at the barrier that ended
    // the previous iteration. Always commit (possibly an empty group) so that "all but one" means "step".
    if (step + 1 < steps) {
      stage_step<kThreads, kPad, kBM, kBN, kBK, kTransA, kTransB>(a_src, b_src, row0, col0, (step + 1) * kBK,
                                                                  buffers[(step + 1) & 1]);
    }
    ptx::cp_async_commit();
    ptx::cp_async_wait<1>();  // all but the newest group
    __syncthreads();          // step's copies (async and plain) from every thread are visible

    const auto* a_tile = reinterpret_cast<const __nv_bfloat16*>(buffers[step & 1]);
    const auto* b_tile = a_tile + kTileElems;
#pragma unroll
    for (int kk = 0; kk < kBK; kk += kFrag) {
      wmma::fragment<wmma::matrix_a, kFrag, kFrag, kFrag, __nv_bfloat16, LayoutA> a_frag[kFragsM];
      wmma::fragment<wmma::matrix_b, kFrag, kFrag, kFrag, __nv_bfloat16, LayoutB> b_frag[kFragsN];
#pragma unroll
      for (int i = 0; i < kFragsM; ++i) {
        const int m = wm0 + i * kFrag;
        if (kTransA) {  // stored [k][m]: element (m, k) at k * (BM + pad) + m
          wmma::load_matrix_sync(a_frag[i], a_tile + kk * (kBM + kPad) + m, kBM + kPad);
        } else {
          wmma::load_matrix_sync(a_frag[i], a_tile + m * (kBK + kPad) + kk, kBK + kPad);
        }
      }
#pragma unroll
      for (int j = 0; j < kFragsN; ++j) {
        const int n = wn0 + j * kFrag;
        if (kTransB) {  // stored [n][k]: element (k, n) at n * (BK + pad) + k
          wmma::load_matrix_sync(b_frag[j], b_tile + n * (kBK + kPad) + kk, kBK + kPad);
        } else {
          wmma::load_matrix_sync(b_frag[j], b_tile + kk * (kBN + kPad) + n, kBN + kPad);
        }
      }
#pragma unroll
      for (int i = 0; i < kFragsM; ++i) {
#pragma unroll
        for (int j = 0; j < kFragsN; ++j) wmma::mma_sync(acc[i][j], a_frag[i], b_frag[j], acc[i][j]);
      }
    }
    __syncthreads();  // this buffer is refilled two steps from now
  }

  // Epilogue through a per-warp 16 x 16 float scratch carved from the (now idle) tile buffers. The loop's
  // last barrier ordered every read of them before these writes; the wait covers K = 0, where the loop
  // never ran and the first stage's (zero-filling) copies may still be in flight.
  asm volatile("cp.async.wait_group 0;\n" ::: "memory");
  __syncthreads();
  float* scratch = reinterpret_cast<float*>(&buffers[0][0]) + warp * kFrag * kFrag;
  store_wmma_fragments_bf16(acc, scratch, c, args.ldc, row0 + wm0, col0 + wn0, args.m, args.n, lane);
}

template <bool kTransA, bool kTransB>
void launch(const GemmArgs& args, cudaStream_t stream, bool vec_a, bool vec_b, dim3 grid_xy) {
  for_each_batch_chunk(args.batch, [&](unsigned grid_z, int64_t offset) {
    dim3 grid(grid_xy.x, grid_xy.y, grid_z);
    gemm_wmma_async_kernel<kTransA, kTransB><<<grid, kThreads, 0, stream>>>(args, offset, vec_a, vec_b);
    BRIGADE_CUDA_CHECK_LAUNCH("gemm_wmma_async_kernel");
  });
}

}  // namespace

void launch_gemm_wmma_async_bf16(const GemmArgs& args, cudaStream_t stream) {
  const int64_t grid_x = (args.m + kBM - 1) / kBM;
  const int64_t grid_y = (args.n + kBN - 1) / kBN;
  BRIGADE_CHECK_VALUE(grid_x <= INT32_MAX && grid_y <= kMaxGridYZ, "matmul (gemm_wmma_async_kernel): [",
                      args.m, ", ", args.n, "] output exceeds the ", kMaxGridYZ * kBN,
                      " columns one launch covers");
  const bool vec_a = rows_aligned(args.a, args.lda, args.stride_a, 2, 16);
  const bool vec_b = rows_aligned(args.b, args.ldb, args.stride_b, 2, 16);
  const dim3 grid_xy(static_cast<unsigned>(grid_x), static_cast<unsigned>(grid_y));
  if (args.trans_a) {
    args.trans_b ? launch<true, true>(args, stream, vec_a, vec_b, grid_xy)
                 : launch<true, false>(args, stream, vec_a, vec_b, grid_xy);
  } else {
    args.trans_b ? launch<false, true>(args, stream, vec_a, vec_b, grid_xy)
                 : launch<false, false>(args, stream, vec_a, vec_b, grid_xy);
  }
}

}  // namespace brigade::kernels::cuda::gemm_detail
