// bf16 GEMM on the tensor cores, version 5 (v1-v2 in kernels/cuda/matmul.cu, v3-v4 in matmul_sgemm.cu):
//
//   C[b] (M x N, row-major, ldc) = op(A[b]) (M x K) @ op(B[b]) (K x N)   bfloat16 in and out, fp32 accumulate
//
// v5 gemm_wmma_bf16_kernel — the WMMA API (nvcuda::wmma, 16 x 16 x 16 bf16 fragments, float accumulators):
//   the simplest correct way onto the tensor cores; the compiler lowers each wmma::mma_sync to mma.sync
//   instructions. Launch: grid (ceil(M/128), ceil(N/128), batch), 256 threads = 8 warps (2 along M x 4
//   along N), 27 KB static shared memory. A warp owns a 64 x 32 tile of C = 4 x 2 accumulator fragments.
//   Per K step of 32 the block stages op(A) [128 x 32] and op(B) [32 x 128] in shared memory, both
//   row-major (padded by 8 elements per row: the 16-byte stores stay aligned and the fragment loads'
//   rows fall in different banks), then each warp runs 2 (k16) x 4 x 2 mma_syncs.
//   Staging moves 8 consecutive elements per thread slot: along the contiguous dim of the stored operand.
//   When that dim is the row of the shared tile (A not transposed, B not transposed) a slot is one
//   16-byte load and one 16-byte store; otherwise (transposed operands) it is one 16-byte load scattered
//   into 8 rows. Slots at the matrix edges, or of operands whose rows are not 16-byte aligned
//   (rows_aligned), are 8 guarded scalar loads with zeros outside: any M, N, K, strides and batch.
//   The epilogue goes through shared memory (wmma's accumulator layout is opaque): each warp stores one
//   fragment at a time to its own 16 x 16 float scratch, then its lanes write the in-range elements to C,
//   rounded to bfloat16 (round to nearest even, like the CPU backend): store_wmma_fragments_bf16 in
//   kernels/cuda/wmma_epilogue.cuh, shared with v6.
//
// Napkin math (H200: bf16 dense ~989 TFLOP/s peak, cuBLAS ~790 measured here; ~4.3 TB/s HBM). 8192^3:
//   1.1 TFLOP, ~1.4 ms at cuBLAS's rate. Per K step a block loads 2 x 128 x 32 x 2 B = 16 KB for
//   2 x 128^2 x 32 = 1 MFLOP (64 FLOP/B from L2); each warp issues 16 fragment loads for 16 mma_syncs.
//   With synchronous global->shared staging (no cp.async pipeline), two barriers per K step and the
//   mma.sync path (Hopper's full rate needs wgmma), expect a fraction of cuBLAS: ~25-40%. The steps
//   beyond it (cp.async multi-stage pipeline, ldmatrix + mma.sync, then wgmma + TMA) are listed in
//   docs/kernels.md. Not yet measured.
//
// Next: v6 (kernels/cuda/matmul_wmma_async.cu) keeps the tiles in their stored layout (no transposing
//   scatter) and double-buffers them with cp.async, so the loads overlap the mma_syncs.
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <mma.h>

#include <cstdint>

#include "kernels/backend.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/matmul_launchers.cuh"
#include "kernels/cuda/wmma_epilogue.cuh"
#include "tensor/bfloat16.h"
#include "tensor/cuda/cuda_check.h"

namespace brigade::kernels::cuda::gemm_detail {
namespace {

namespace wmma = nvcuda::wmma;

constexpr int kThreads = 256;
constexpr int kBM = 128, kBN = 128, kBK = 32;
constexpr int kWarpsM = 2, kWarpsN = 4;
constexpr int kWM = kBM / kWarpsM, kWN = kBN / kWarpsN;      // 64 x 32 per warp
constexpr int kFrag = 16;                                    // m16 n16 k16
constexpr int kFragsM = kWM / kFrag, kFragsN = kWN / kFrag;  // 4 x 2
constexpr int kPad = 8;                                      // bf16 elements of padding per shared row
constexpr int kLdA = kBK + kPad, kLdB = kBN + kPad;          // 40 and 136: multiples of 8 (wmma's ldm rule)
static_assert(kWarpsM * kWarpsN * kWarpSize == kThreads, "one warp per warp tile");
// load_matrix_sync needs 32-byte aligned fragment pointers: row offsets that are multiples of 16 rows
// times the row pitch, and column offsets that are multiples of 16 elements, must be multiples of 32 B.
static_assert((kFrag * kLdA * 2) % 32 == 0 && (kFrag * kLdB * 2) % 32 == 0, "fragment pointers aligned");

/// Logical matrix X (rows x cols) read from storage: X(r, c) = x[r * ld + c] (row_contiguous) or
/// x[c * ld + r].
struct Bf16Source {
  const uint16_t* x;  // bfloat16 bits of this batch entry's matrix
  int64_t ld;
  int64_t rows, cols;
  bool row_contiguous;
  bool vec;  // rows_aligned(16 bytes): 8 consecutive in-range elements may be one 16-byte load
};

/// Stages X[r0 .. r0+R) x [c0 .. c0+C) into the row-major shared tile s (pitch LDS), zero outside X.
template <int R, int C, int LDS>
__device__ __forceinline__ void stage_tile(const Bf16Source& src, int64_t r0, int64_t c0, uint16_t* s) {
  constexpr int kSlots = R * C / 8;
  static_assert(kSlots % kThreads == 0 && LDS % 8 == 0, "whole 8-element slots per thread, aligned rows");
#pragma unroll
  for (int t = 0; t < kSlots / kThreads; ++t) {
    const int f = threadIdx.x + t * kThreads;
    // The slot's first element (r, c); its 8 elements run along c (row_contiguous) or along r.
    const int r = src.row_contiguous ? f / (C / 8) : (f % (R / 8)) * 8;
    const int c = src.row_contiguous ? (f % (C / 8)) * 8 : f / (R / 8);
    const int64_t gr = r0 + r, gc = c0 + c;
    alignas(16) uint16_t v[8];
    if (src.row_contiguous) {
      const uint16_t* at = src.x + gr * src.ld + gc;
      const bool row_in = gr < src.rows;
      if (src.vec && row_in && gc + 7 < src.cols) {
        *reinterpret_cast<uint4*>(v) = *reinterpret_cast<const uint4*>(at);
      } else {
#pragma unroll
        for (int q = 0; q < 8; ++q) v[q] = (row_in && gc + q < src.cols) ? at[q] : uint16_t{0};
      }
      *reinterpret_cast<uint4*>(s + r * LDS + c) = *reinterpret_cast<const uint4*>(v);
    } else {
      const uint16_t* at = src.x + gc * src.ld + gr;
      const bool col_in = gc < src.cols;
      if (src.vec && col_in && gr + 7 < src.rows) {
        *reinterpret_cast<uint4*>(v) = *reinterpret_cast<const uint4*>(at);
      } else {
#pragma unroll
        for (int q = 0; q < 8; ++q) v[q] = (col_in && gr + q < src.rows) ? at[q] : uint16_t{0};
      }
#pragma unroll
      for (int q = 0; q < 8; ++q) s[(r + q) * LDS + c] = v[q];
    }
  }
}

__global__ void __launch_bounds__(kThreads)
    gemm_wmma_bf16_kernel(GemmArgs args, int64_t batch_offset, bool vec_a, bool vec_b) {
  __shared__ __align__(128) uint16_t a_tile[kBM * kLdA];
  __shared__ __align__(128) uint16_t b_tile[kBK * kLdB];
  __shared__ __align__(128) float c_scratch[kThreads / kWarpSize][kFrag * kFrag];

  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  const int wm0 = (warp / kWarpsN) * kWM, wn0 = (warp % kWarpsN) * kWN;
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * kBM;
  const int64_t col0 = static_cast<int64_t>(blockIdx.y) * kBN;
  const int64_t b = batch_offset + blockIdx.z;
  const Bf16Source a_src{static_cast<const uint16_t*>(args.a) + b * args.stride_a,
                         args.lda,
                         args.m,
                         args.k,
                         !args.trans_a,
                         vec_a};
  const Bf16Source b_src{static_cast<const uint16_t*>(args.b) + b * args.stride_b,
                         args.ldb,
                         args.k,
                         args.n,
                         !args.trans_b,
                         vec_b};
  bfloat16* c = static_cast<bfloat16*>(args.c) + b * args.stride_c;

  wmma::fragment<wmma::accumulator, kFrag, kFrag, kFrag, float> acc[kFragsM][kFragsN];
#pragma unroll
  for (int i = 0; i < kFragsM; ++i) {
#pragma unroll
    for (int j = 0; j < kFragsN; ++j) wmma::fill_fragment(acc[i][j], 0.0f);
  }

  const auto* a_bf = reinterpret_cast<const __nv_bfloat16*>(a_tile);
  const auto* b_bf = reinterpret_cast<const __nv_bfloat16*>(b_tile);
  for (int64_t k0 = 0; k0 < args.k; k0 += kBK) {
    stage_tile<kBM, kBK, kLdA>(a_src, row0, k0, a_tile);
    stage_tile<kBK, kBN, kLdB>(b_src, k0, col0, b_tile);
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < kBK; kk += kFrag) {
      wmma::fragment<wmma::matrix_a, kFrag, kFrag, kFrag, __nv_bfloat16, wmma::row_major> a_frag[kFragsM];
      wmma::fragment<wmma::matrix_b, kFrag, kFrag, kFrag, __nv_bfloat16, wmma::row_major> b_frag[kFragsN];
#pragma unroll
      for (int i = 0; i < kFragsM; ++i) {
        wmma::load_matrix_sync(a_frag[i], a_bf + (wm0 + i * kFrag) * kLdA + kk, kLdA);
      }
#pragma unroll
      for (int j = 0; j < kFragsN; ++j) {
        wmma::load_matrix_sync(b_frag[j], b_bf + kk * kLdB + wn0 + j * kFrag, kLdB);
      }
#pragma unroll
      for (int i = 0; i < kFragsM; ++i) {
#pragma unroll
        for (int j = 0; j < kFragsN; ++j) wmma::mma_sync(acc[i][j], a_frag[i], b_frag[j], acc[i][j]);
      }
    }
    __syncthreads();  // the tiles are overwritten by the next K step
  }

  store_wmma_fragments_bf16(acc, c_scratch[warp], c, args.ldc, row0 + wm0, col0 + wn0, args.m, args.n, lane);
}

}  // namespace

void launch_gemm_wmma_bf16(const GemmArgs& args, cudaStream_t stream) {
  const int64_t grid_x = (args.m + kBM - 1) / kBM;
  const int64_t grid_y = (args.n + kBN - 1) / kBN;
  BRIGADE_CHECK_VALUE(grid_x <= INT32_MAX && grid_y <= kMaxGridYZ, "matmul (gemm_wmma_bf16_kernel): [",
                      args.m, ", ", args.n, "] output exceeds the ", kMaxGridYZ * kBN,
                      " columns one launch covers");
  const bool vec_a = rows_aligned(args.a, args.lda, args.stride_a, 2, 16);
  const bool vec_b = rows_aligned(args.b, args.ldb, args.stride_b, 2, 16);
  for_each_batch_chunk(args.batch, [&](unsigned grid_z, int64_t offset) {
    dim3 grid(static_cast<unsigned>(grid_x), static_cast<unsigned>(grid_y), grid_z);
    gemm_wmma_bf16_kernel<<<grid, kThreads, 0, stream>>>(args, offset, vec_a, vec_b);
    BRIGADE_CUDA_CHECK_LAUNCH("gemm_wmma_bf16_kernel");
  });
}

}  // namespace brigade::kernels::cuda::gemm_detail
