// bf16 GEMM on the tensor cores, version 8: Hopper warpgroup MMA (wgmma.mma_async, sm_90a only) reading
// both operands from 128-byte-swizzled shared memory through descriptors, a 4-stage cp.async pipeline.
//
//   C[b] (M x N, row-major, ldc) = A[b] (M x K, row-major) @ B[b]^T (B stored N x K)   bf16 in/out, fp32 acc
//
// Which layouts: both operands K-major, i.e. trans_a = false and trans_b = true (the GPT's Linear forward,
// x @ W^T), with 16-byte aligned rows (rows_aligned). Every other call (a transposed A, an untransposed B,
// misaligned rows) runs v6 (matmul_wmma_async.cu) instead: wgmma_handles() says which, and the fallback is
// tested. M, N and K tails are predicated (zero-filled loads, guarded stores), batch through grid z.
//
// gemm_wgmma_kernel — what changes from v6/v7:
//  - A 128 x 128 block tile is computed by two warpgroups (256 threads); warpgroup g owns rows 64g..64g+63
//    and issues wgmma.mma_async.m64n128k16 (one instruction: 64 x 128 x 16, 64 fp32 accumulators per
//    thread) four times per 64-wide K stage. The operands are never loaded into registers: the tensor
//    cores read them from shared memory through 64-bit descriptors (kernels/cuda/wgmma_ptx.cuh).
//  - Shared layout per stage (1024-byte aligned), A then B, each 128 rows x 64 bf16 = 16 KB:
//
//        byte 0      1024     2048             15360   16384
//             | atom 0 | atom 1 | ...             | atom 15 |      atom j = rows 8j..8j+7, 8 x 128 B
//        inside atom j, row r (0..7), 16-byte chunk c (8 bf16 of K, c = 0..7) sits at
//             1024 j + 128 r + 16 (c ^ r)                        (128-byte swizzle: no bank conflicts)
//
//    Descriptors (make_smem_desc): start = stage base (+ 8192 for warpgroup 1's A rows) + 32 * (k16 step),
//    LBO = 16 (unused for swizzled K-major), SBO = 1024 (next 8-row atom), swizzle mode 1 (128B).
//  - Pipeline: 4 stages, loads run 2 stages ahead; each K step: wait for its cp.async group, proxy fence,
//    barrier, issue the next loads, wgmma.fence, 4 wgmmas, commit, then wgmma.wait_group 1 (the previous
//    step's wgmmas are done, so the stage the next loads overwrite — two steps old — is free after the
//    next barrier). 4 x 32 KB + 1 KB alignment slack = 129 KB of dynamic shared memory, one block per SM.
//  - Loads are cp.async 16-byte chunks written straight into their swizzled place (TMA is the next step).
//  Launch: grid (ceil(M/128), ceil(N/128), batch), 256 threads.
//
// Napkin math (H200: bf16 dense ~989 TFLOP/s peak, cuBLAS ~790 measured, ~4.3 TB/s HBM, 50 MB L2): a
//   128 x 128 tile does 2 * 128 * 128 * 64 = 2.1 MFLOP per 32 KB stage, 64 FLOP per byte loaded; at 4.3 TB/s
//   that caps an HBM-fed kernel at ~275 TFLOP/s, and L2 reuse across neighbouring blocks (the GPT's GEMMs
//   have K <= 3072, so operands stay in L2) must supply the rest. The wgmma issue rate itself is not the
//   limit (one m64n128k16 = 262 kFLOP per warpgroup). Expect ~350-550 TFLOP/s at 8192^3, between v6 and the
//   790 bar; 128 x 256 tiles, TMA + mbarriers, a producer warpgroup and a persistent grid are what close the
//   gap. Measured on an H200 (scripts/gpu_check.sh, bench/results/gpu-20261204-1513-ebaddd8/): 328 TFLOP/s at
//   8192^3 with B transposed (43 % of cuBLAS), under the expectation; 2.9 ms on GPT-2's logits product, where
//   cuBLAS takes 6.6 ms.
//
// Next (not written yet): TMA loads with mbarriers, a producer warpgroup, 128 x 256 tiles, MN-major
//   descriptors so that the backward's layouts run here too (docs/kernels.md).
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/backend.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/matmul_launchers.cuh"
#include "kernels/cuda/mma_ptx.cuh"
#include "kernels/cuda/wgmma_ptx.cuh"
#include "tensor/bfloat16.h"
#include "tensor/cuda/cuda_check.h"

namespace brigade::kernels::cuda::gemm_detail {
namespace {

constexpr int kThreads = 256;  // two warpgroups
constexpr int kBM = 128, kBN = 128, kBK = 64;
constexpr int kStages = 4, kLookahead = 2;      // see the top: kLookahead <= kStages - 2 with wgmma_wait<1>
constexpr uint32_t kTileBytes = kBM * kBK * 2;  // one operand, one stage (kBN == kBM)
constexpr uint32_t kStageBytes = 2 * kTileBytes;
constexpr size_t kSharedBytes = kStages * kStageBytes + wgmma::kSwizzleAtomBytes;  // + alignment slack
static_assert(kBK * 2 == static_cast<int>(wgmma::kSwizzleRowBytes), "a stage's K extent is one swizzle row");
static_assert(kBN == kBM && kLookahead <= kStages - 2, "tile and pipeline shape");

#if defined(BRIGADE_WGMMA_DEVICE_CODE)
/// Stages rows [r0, r0 + 128) x K columns [k0, k0 + 64) of a K-major operand x (rows x k, leading dim
/// ld) into its swizzled tile, zero-filling outside the matrix.
__device__ __forceinline__ void load_tile(const uint16_t* x, int64_t ld, int64_t rows, int64_t k, int64_t r0,
                                          int64_t k0, unsigned char* tile) {
  constexpr int kChunksPerRow = kBK / 8;
  static_assert(kBM * kChunksPerRow % kThreads == 0, "whole chunks per thread");
#pragma unroll
  for (int t = 0; t < kBM * kChunksPerRow / kThreads; ++t) {
    const int f = static_cast<int>(threadIdx.x) + t * kThreads;
    const int r = f / kChunksPerRow, c = f % kChunksPerRow;
    const int64_t gr = r0 + r, gk = k0 + c * 8;
    const int64_t in_range = gr < rows ? k - gk : 0;
    const int bytes = in_range <= 0 ? 0 : (in_range >= 8 ? 16 : static_cast<int>(in_range) * 2);
    // A zero-byte copy still names a valid, aligned global address: the matrix's first element.
    const uint16_t* src = bytes > 0 ? x + gr * ld + gk : x;
    ptx::cp_async_16(tile + wgmma::swizzle_128b(static_cast<uint32_t>(r) * wgmma::kSwizzleRowBytes + c * 16),
                     src, bytes);
  }
}
#endif

__global__ void __launch_bounds__(kThreads) gemm_wgmma_kernel(GemmArgs args, int64_t batch_offset) {
#if defined(BRIGADE_WGMMA_DEVICE_CODE)
  extern __shared__ unsigned char shared_raw[];
  // The swizzle is a function of address bits, so every tile starts on a 1024-byte boundary.
  const uint32_t raw_address = wgmma::shared_address(shared_raw);
  constexpr uint32_t kAtom = wgmma::kSwizzleAtomBytes;
  unsigned char* shared = shared_raw + (kAtom - raw_address % kAtom) % kAtom;
  const uint32_t shared_base = wgmma::shared_address(shared);

  const int tid = static_cast<int>(threadIdx.x);
  const int group = tid / 128, warp = (tid % 128) / 32, lane = tid % 32;
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * kBM;
  const int64_t col0 = static_cast<int64_t>(blockIdx.y) * kBN;
  const int64_t b = batch_offset + blockIdx.z;
  const auto* a = static_cast<const uint16_t*>(args.a) + b * args.stride_a;   // [M, K]
  const auto* bm = static_cast<const uint16_t*>(args.b) + b * args.stride_b;  // [N, K]
  bfloat16* c = static_cast<bfloat16*>(args.c) + b * args.stride_c;
  const int64_t steps = (args.k + kBK - 1) / kBK;

  auto load_step = [&](int64_t step) {
    if (step < steps) {
      unsigned char* stage = shared + (step % kStages) * kStageBytes;
      load_tile(a, args.lda, args.m, args.k, row0, step * kBK, stage);
      load_tile(bm, args.ldb, args.n, args.k, col0, step * kBK, stage + kTileBytes);
    }
    ptx::cp_async_commit();  // always (possibly empty), so that group j is step j
  };

  float acc[64];
#pragma unroll
  for (int i = 0; i < 64; ++i) acc[i] = 0.0f;

#pragma unroll
  for (int s = 0; s < kLookahead; ++s) load_step(s);
  for (int64_t step = 0; step < steps; ++step) {
    ptx::cp_async_wait<kLookahead - 1>();  // this thread's copies of `step` have landed
    wgmma::fence_proxy_async();            // ... and are visible to the wgmma (async) proxy
    __syncthreads();  // everyone's copies of `step`; every warpgroup's wgmmas of step - 2 are done
    load_step(step + kLookahead);  // into the stage of step - 2

    const uint32_t stage = shared_base + static_cast<uint32_t>(step % kStages) * kStageBytes;
    const uint32_t a_start = stage + static_cast<uint32_t>(group) * (kTileBytes / 2);  // rows 64g..
    const uint32_t b_start = stage + kTileBytes;
    wgmma::fence_accumulators(acc);
    wgmma::wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kBK / 16; ++kk) {
      wgmma::wgmma_m64n128k16_bf16(acc, wgmma::make_smem_desc(a_start + kk * 32, wgmma::kSwizzleAtomBytes),
                                   wgmma::make_smem_desc(b_start + kk * 32, wgmma::kSwizzleAtomBytes));
    }
    wgmma::wgmma_commit();
    wgmma::wgmma_wait<1>();  // step - 1's group is done (its stage is refilled after the next barrier)
    wgmma::fence_accumulators(acc);
  }
  wgmma::wgmma_wait<0>();
  wgmma::fence_accumulators(acc);
  ptx::cp_async_wait<0>();  // the trailing (empty) groups

  // Epilogue straight from the D fragment (see wgmma_m64n128k16_bf16): pairs of columns per row.
  const int64_t frag_row = row0 + group * 64 + warp * 16 + lane / 4;
#pragma unroll
  for (int i = 0; i < 64; ++i) {
    const int64_t gi = frag_row + 8 * ((i / 2) % 2);
    const int64_t gj = col0 + 8 * (i / 4) + 2 * (lane % 4) + i % 2;
    if (gi < args.m && gj < args.n) c[gi * args.ldc + gj] = bfloat16(acc[i]);
  }
#else
  // Built for a device without wgmma: wgmma_available() is false there, so this is never launched. Should a
  // build list both 90 and 90a and the driver pick this body anyway, trap rather than leave C unwritten.
  (void)args;
  (void)batch_offset;
#if defined(__CUDA_ARCH__)
  __trap();
#endif
#endif
}

}  // namespace

bool wgmma_available(int device) {
#if defined(BRIGADE_CUDA_EMULATION) || defined(BRIGADE_CUDA_SM90A)
  int major = 0, minor = 0;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) != cudaSuccess) {
    (void)cudaGetLastError();  // no usable device: report "unavailable", not an error
    return false;
  }
  return major == 9 && minor == 0;
#else
  (void)device;  // this build has no sm_90a code (CMAKE_CUDA_ARCHITECTURES lacks 90a)
  return false;
#endif
}

bool wgmma_handles(const GemmArgs& args) {
  return !args.trans_a && args.trans_b && rows_aligned(args.a, args.lda, args.stride_a, 2, 16) &&
         rows_aligned(args.b, args.ldb, args.stride_b, 2, 16);
}

void launch_gemm_wgmma_bf16(const GemmArgs& args, cudaStream_t stream) {
  if (!wgmma_handles(args)) {
    launch_gemm_wmma_async_bf16(args, stream);
    return;
  }
  const int64_t grid_x = (args.m + kBM - 1) / kBM;
  const int64_t grid_y = (args.n + kBN - 1) / kBN;
  BRIGADE_CHECK_VALUE(grid_x <= INT32_MAX && grid_y <= kMaxGridYZ, "matmul (gemm_wgmma_kernel): [", args.m,
                      ", ", args.n, "] output exceeds the ", kMaxGridYZ * kBN, " columns one launch covers");
  BRIGADE_CUDA_CHECK(cudaFuncSetAttribute(gemm_wgmma_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          static_cast<int>(kSharedBytes)));
  for_each_batch_chunk(args.batch, [&](unsigned grid_z, int64_t offset) {
    dim3 grid(static_cast<unsigned>(grid_x), static_cast<unsigned>(grid_y), grid_z);
    gemm_wgmma_kernel<<<grid, kThreads, kSharedBytes, stream>>>(args, offset);
    BRIGADE_CUDA_CHECK_LAUNCH("gemm_wgmma_kernel");
  });
}

}  // namespace brigade::kernels::cuda::gemm_detail
