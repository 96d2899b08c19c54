// cuda::gemm: brigade's own CUDA GEMM kernels (v1, v2 here; v3-v8 in their own files), the dispatcher
// gemm_native, and the switch to the cuBLAS baseline.
//
//   C[b] (M x N, row-major, ldc) = op(A[b]) (M x K) @ op(B[b]) (K x N)     (GemmArgs, kernels/backend.h)
//   float32 and bfloat16 accumulate in float (bfloat16 in, float math, bfloat16 out), float64 in double.
//
// Which implementation runs is kernels::matmul_backend(): Native -> default_matmul_kernel(CUDA, dtype) (v4
// Warptiled for float32, v2 Tiled for float64, v7 MmaSync for bfloat16); Cublas -> gemm_cublas
// (kernels/cuda/matmul_cublas.cu). The initial value comes from BRIGADE_MATMUL_BACKEND=native|cublas (see
// kernels/matmul.cpp). gemm_native(args, MatmulKernel) runs any version directly; the versions are registered
// in kernels/matmul_versions.h (all_matmul_kernels(), gemm_with).
//
// The versions (docs/kernels.md, "CUDA kernels", tells the whole story with the figures):
//   v1 Naive       all dtypes  here              one thread per output
//   v2 Tiled       all dtypes  here              shared tiles + 8 x 8 register blocking, scalar loads
//   v3 Vectorized  float32     matmul_sgemm.cu   float4 loads, transposed A tile, float4 shared reads
//   v4 Warptiled   float32     matmul_sgemm.cu   v3 + warp tiles, BK 16, double-buffered shared memory
//   v5 Wmma        bfloat16    matmul_wmma.cu    tensor cores via WMMA, fp32 accumulation
//   v6 WmmaAsync   bfloat16    matmul_wmma_async.cu  v5 + stored-layout tiles, cp.async double buffering
//   v7 MmaSync     bfloat16    matmul_mma.cu     mma.sync m16n8k16 + ldmatrix, 3-stage cp.async pipeline
//   v8 Wgmma       bfloat16    matmul_wgmma.cu   Hopper wgmma, swizzled smem descriptors (sm_90a only)
//
// v1 gemm_naive_kernel — one thread per element of C, the K loop straight from global memory.
//   Launch: block 16 x 16, grid (ceil(N/16), ceil(M/16), batch). Each multiply-add loads two values, so
//   it is load bound (L1/L2 catch most of the reuse): expect ~1-3 TFLOP/s. Kept for teaching and as a
//   second opinion in tests.
//
// v2 gemm_tiled_kernel<BM, BN, BK, TM, TN> — shared-memory tiling with register blocking (the float64
//   default).
//   Launch: 256 threads per block, grid (ceil(M/BM), ceil(N/BN), batch); one block owns a BM x BN tile of
//   C. Per K step of BK, the block stages a BM x BK tile of op(A) and a BK x BN tile of op(B) in shared
//   memory (converted to the accumulation type, zero-filled outside the matrix, read from global memory
//   so that neighbouring threads touch neighbouring addresses whatever the trans flags), then each thread
//   accumulates a TM x TN block of C in registers: per k it reads TM + TN values from shared memory for
//   TM * TN multiply-adds (8 x 8: 4 FMAs per shared load, vs 0.5 for v1 per global load).
//   The thread's rows are ty, ty + 16, ...; its columns tx, tx + 16, ... (strided, not contiguous), so a
//   warp reads 16 consecutive B values and 2 broadcast A values per k without bank conflicts, and its
//   stores of C are 16-wide coalesced runs. The shared tiles are padded by 32 / BK words per row so that
//   the transposing stores of a warp fall in 32 distinct banks.
//   Configs: 128 x 128 x 8 with 8 x 8 per thread for large products; 64 x 64 x 16 with 4 x 4 per thread
//   when 128-tiles would not give every SM a block (an H200 has 132 SMs).
//
// Napkin math (H200: fp32 ~67 TFLOP/s on CUDA cores, ~4.3 TB/s HBM, 50 MB L2). A 4096^3 product is
//   2 * 4096^3 = 137 GFLOP -> ~2.0 ms at the fp32 peak. With 128-tiles each A element is read N/128 = 32
//   times and each B element M/128 = 32 times: 2 * 32 * 4096^2 * 4 B = 4.3 GB of loads, ~1 ms even if all
//   came from HBM, and most hit L2, so v2 is bound by issue (FMA + shared loads), not by memory: expect
//   ~40-60% of peak without vectorised loads or double buffering. bfloat16 runs through the same fp32 FMA
//   path in v1/v2 (the bf16 tensor-core peak, ~989 TFLOP/s, is what v5 and cuBLAS aim at).
//
// Next: v3 (kernels/cuda/matmul_sgemm.cu) improves on v2 with 16-byte loads and shared reads (4x fewer
//   shared load instructions per FMA) and a k-major tile for every layout.
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/backend.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/matmul.h"
#include "kernels/cuda/matmul_launchers.cuh"
#include "tensor/bfloat16.h"
#include "tensor/cuda/cuda_check.h"

namespace brigade::kernels::cuda {
namespace {

using gemm_detail::for_each_batch_chunk;
using gemm_detail::kMaxGridYZ;

/// Element (row, col) of op(X) for X stored with leading dim ld (trans: X is stored as op(X)^T).
template <typename T>
__device__ __forceinline__ const T& op_at(const T* x, int64_t ld, bool trans, int64_t row, int64_t col) {
  return trans ? x[col * ld + row] : x[row * ld + col];
}

// ---- v1: naive -----------------------------------------------------------------------------------------

constexpr int kNaiveTile = 16;

template <typename T>
__global__ void gemm_naive_kernel(GemmArgs args, int64_t batch_offset) {
  using Acc = acc_t<T>;
  const int64_t j = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;  // column of C
  const int64_t i = static_cast<int64_t>(blockIdx.y) * blockDim.y + threadIdx.y;  // row of C
  if (i >= args.m || j >= args.n) return;
  const int64_t b = batch_offset + blockIdx.z;
  const T* a = static_cast<const T*>(args.a) + b * args.stride_a;
  const T* bm = static_cast<const T*>(args.b) + b * args.stride_b;
  T* c = static_cast<T*>(args.c) + b * args.stride_c;
  Acc sum = Acc(0);
  for (int64_t p = 0; p < args.k; ++p) {
    sum += static_cast<Acc>(op_at(a, args.lda, args.trans_a, i, p)) *
           static_cast<Acc>(op_at(bm, args.ldb, args.trans_b, p, j));
  }
  c[i * args.ldc + j] = static_cast<T>(sum);
}

// ---- v2: shared-memory tiles, register blocking ----------------------------------------------------------

template <typename T, int BM, int BN, int BK, int TM, int TN>
__global__ void __launch_bounds__((BM / TM) * (BN / TN))
    gemm_tiled_kernel(GemmArgs args, int64_t batch_offset) {
  using Acc = acc_t<T>;
  constexpr int kThreadsX = BN / TN;  // threads along N
  constexpr int kThreadsY = BM / TM;  // threads along M
  constexpr int kThreads = kThreadsX * kThreadsY;
  constexpr int kPad = 32 / BK;  // see the top: conflict-free transposing stores
  static_assert(BM % TM == 0 && BN % TN == 0 && (BM * BK) % kThreads == 0 && (BK * BN) % kThreads == 0,
                "tile sizes must divide evenly among the threads");

  // op(A) tile stored k-major (a_tile[p][i]) so that the compute loop reads a row of it per k.
  __shared__ Acc a_tile[BK][BM + kPad];
  __shared__ Acc b_tile[BK][BN + kPad];

  const int tid = threadIdx.x;
  const int tx = tid % kThreadsX, ty = tid / kThreadsX;
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * BM;
  const int64_t col0 = static_cast<int64_t>(blockIdx.y) * BN;
  const int64_t b = batch_offset + blockIdx.z;
  const int64_t m = args.m, n = args.n, k = args.k;
  const T* a = static_cast<const T*>(args.a) + b * args.stride_a;
  const T* bm = static_cast<const T*>(args.b) + b * args.stride_b;
  T* c = static_cast<T*>(args.c) + b * args.stride_c;

  Acc acc[TM][TN];
#pragma unroll
  for (int r = 0; r < TM; ++r) {
#pragma unroll
    for (int s = 0; s < TN; ++s) acc[r][s] = Acc(0);
  }

  for (int64_t k0 = 0; k0 < k; k0 += BK) {
    // Stage op(A)[row0.., k0..]: consecutive threads walk the dim that is contiguous in memory.
#pragma unroll
    for (int t = 0; t < BM * BK / kThreads; ++t) {
      const int e = tid + t * kThreads;
      const int i = args.trans_a ? e % BM : e / BK;
      const int p = args.trans_a ? e / BM : e % BK;
      const int64_t gi = row0 + i, gp = k0 + p;
      a_tile[p][i] = (gi < m && gp < k) ? static_cast<Acc>(op_at(a, args.lda, args.trans_a, gi, gp)) : Acc(0);
    }
    // Stage op(B)[k0.., col0..].
#pragma unroll
    for (int t = 0; t < BK * BN / kThreads; ++t) {
      const int e = tid + t * kThreads;
      const int p = args.trans_b ? e % BK : e / BN;
      const int j = args.trans_b ? e / BK : e % BN;
      const int64_t gp = k0 + p, gj = col0 + j;
      b_tile[p][j] =
          (gp < k && gj < n) ? static_cast<Acc>(op_at(bm, args.ldb, args.trans_b, gp, gj)) : Acc(0);
    }
    __syncthreads();

#pragma unroll
    for (int p = 0; p < BK; ++p) {
      Acc a_frag[TM], b_frag[TN];
#pragma unroll
      for (int r = 0; r < TM; ++r) a_frag[r] = a_tile[p][ty + r * kThreadsY];
#pragma unroll
      for (int s = 0; s < TN; ++s) b_frag[s] = b_tile[p][tx + s * kThreadsX];
#pragma unroll
      for (int r = 0; r < TM; ++r) {
#pragma unroll
        for (int s = 0; s < TN; ++s) acc[r][s] += a_frag[r] * b_frag[s];
      }
    }
    __syncthreads();  // the tiles are overwritten by the next K step
  }

#pragma unroll
  for (int r = 0; r < TM; ++r) {
    const int64_t gi = row0 + ty + r * kThreadsY;
    if (gi >= m) continue;
#pragma unroll
    for (int s = 0; s < TN; ++s) {
      const int64_t gj = col0 + tx + s * kThreadsX;
      if (gj < n) c[gi * args.ldc + gj] = static_cast<T>(acc[r][s]);
    }
  }
}

// ---- launchers -------------------------------------------------------------------------------------------

template <typename T>
void launch_naive(const GemmArgs& args, cudaStream_t stream) {
  const int64_t grid_x = (args.n + kNaiveTile - 1) / kNaiveTile;
  const int64_t grid_y = (args.m + kNaiveTile - 1) / kNaiveTile;
  BRIGADE_CHECK_VALUE(grid_y <= kMaxGridYZ, "matmul (naive CUDA kernel): M = ", args.m, " exceeds the ",
                      kMaxGridYZ * kNaiveTile, " rows one launch covers");
  for_each_batch_chunk(args.batch, [&](unsigned grid_z, int64_t offset) {
    dim3 block(kNaiveTile, kNaiveTile);
    dim3 grid(static_cast<unsigned>(grid_x), static_cast<unsigned>(grid_y), grid_z);
    gemm_naive_kernel<T><<<grid, block, 0, stream>>>(args, offset);
    BRIGADE_CUDA_CHECK_LAUNCH("gemm_naive_kernel");
  });
}

template <typename T, int BM, int BN, int BK, int TM, int TN>
void launch_tiled(const GemmArgs& args, cudaStream_t stream) {
  constexpr int kThreads = (BM / TM) * (BN / TN);
  const int64_t grid_x = (args.m + BM - 1) / BM;
  const int64_t grid_y = (args.n + BN - 1) / BN;
  BRIGADE_CHECK_VALUE(grid_x <= INT32_MAX && grid_y <= kMaxGridYZ, "matmul (tiled CUDA kernel): [", args.m,
                      ", ", args.n, "] output exceeds the ", kMaxGridYZ * BN, " columns one launch covers");
  for_each_batch_chunk(args.batch, [&](unsigned grid_z, int64_t offset) {
    dim3 grid(static_cast<unsigned>(grid_x), static_cast<unsigned>(grid_y), grid_z);
    gemm_tiled_kernel<T, BM, BN, BK, TM, TN><<<grid, kThreads, 0, stream>>>(args, offset);
    BRIGADE_CUDA_CHECK_LAUNCH("gemm_tiled_kernel");
  });
}

/// v1 or v2 for element type T.
template <typename T>
void launch_simple(const GemmArgs& args, MatmulKernel kernel, int device, cudaStream_t stream) {
  if (kernel == MatmulKernel::CudaNaive) {
    launch_naive<T>(args, stream);
    return;
  }
  int sm_count = 0;
  BRIGADE_CUDA_CHECK(cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount, device));
  const int64_t big_tiles = ((args.m + 127) / 128) * ((args.n + 127) / 128) * args.batch;
  if (big_tiles >= sm_count) {
    launch_tiled<T, 128, 128, 8, 8, 8>(args, stream);
  } else {
    launch_tiled<T, 64, 64, 16, 4, 4>(args, stream);
  }
}

}  // namespace

bool current_device_runs_wgmma() {
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return gemm_detail::wgmma_available(device);
}

int device_of_pointer(const void* ptr) {
  cudaPointerAttributes attributes{};
  BRIGADE_CUDA_CHECK(cudaPointerGetAttributes(&attributes, ptr));
  BRIGADE_CHECK_DEVICE(attributes.type == cudaMemoryTypeDevice || attributes.type == cudaMemoryTypeManaged,
                       "matmul: the CUDA GEMM was given a pointer that is not CUDA device memory");
  return attributes.device;
}

void gemm_native(const GemmArgs& args, MatmulKernel kernel) {
  BRIGADE_CHECK_VALUE(matmul_kernel_backend(kernel) == DeviceKind::CUDA, "matmul: '",
                      matmul_kernel_name(kernel), "' is a CPU version, not a CUDA kernel");
  // Wgmma's support also depends on the device: a bf16 call on another device is a DeviceError below.
  const bool implements = kernel == MatmulKernel::CudaWgmma ? args.dtype == DType::BFloat16
                                                            : matmul_kernel_supports(kernel, args.dtype);
  BRIGADE_CHECK_DTYPE(implements, "matmul: the CUDA kernel '", matmul_kernel_name(kernel),
                      "' does not implement ", dtype_name(args.dtype),
                      " (see matmul_kernel_supports in kernels/matmul_versions.h)");
  if (args.m <= 0 || args.n <= 0 || args.batch <= 0) return;
  const int device = device_of_pointer(args.c);
  cuda_detail::set_device(device);
  cudaStream_t stream = cuda_detail::current_stream(device);
  // K = 0 (an empty sum, C = 0): v2 writes the zeros; the staged versions need not handle empty operands.
  if (args.k <= 0) kernel = MatmulKernel::CudaTiled;
  switch (kernel) {
    case MatmulKernel::CudaVectorized:
      gemm_detail::launch_sgemm_vectorized(args, stream);
      return;
    case MatmulKernel::CudaWarptiled:
      gemm_detail::launch_sgemm_warptiled(args, stream);
      return;
    case MatmulKernel::CudaWmma:
      gemm_detail::launch_gemm_wmma_bf16(args, stream);
      return;
    case MatmulKernel::CudaWmmaAsync:
      gemm_detail::launch_gemm_wmma_async_bf16(args, stream);
      return;
    case MatmulKernel::CudaMmaSync:
      gemm_detail::launch_gemm_mma_bf16(args, stream);
      return;
    case MatmulKernel::CudaWgmma:
      BRIGADE_CHECK_DEVICE(gemm_detail::wgmma_available(device),
                           "matmul: the CUDA kernel 'v8-wgmma' needs an "
                           "sm_90 device and a build with sm_90a code; device ",
                           device, " cannot run it");
      gemm_detail::launch_gemm_wgmma_bf16(args, stream);
      return;
    case MatmulKernel::CpuBlocked:  // the CPU versions are rejected at the top
    case MatmulKernel::CpuAvx2Fma:
    case MatmulKernel::CpuAvx512:
    case MatmulKernel::CpuAvx512Bf16:
    case MatmulKernel::CudaNaive:
    case MatmulKernel::CudaTiled:
      break;
  }
  switch (args.dtype) {
    case DType::Float32:
      launch_simple<float>(args, kernel, device, stream);
      break;
    case DType::BFloat16:
      launch_simple<bfloat16>(args, kernel, device, stream);
      break;
    case DType::Float64:
      launch_simple<double>(args, kernel, device, stream);
      break;
    default:
      BRIGADE_THROW(DTypeError, "matmul: expected float32, bfloat16 or float64, found ",
                    dtype_name(args.dtype));
  }
}

void gemm_native(const GemmArgs& args) {
  gemm_native(args, default_matmul_kernel(DeviceKind::CUDA, args.dtype));
}

void gemm(const GemmArgs& args) {
  if (matmul_backend() == MatmulBackend::Cublas) {
    gemm_cublas(args);
  } else {
    gemm_native(args);
  }
}

}  // namespace brigade::kernels::cuda
