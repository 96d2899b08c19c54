// Entry points of the CUDA GEMMs beyond cuda::gemm (kernels/backend.h), for tests and benchmarks that
// want one implementation whatever kernels::matmul_backend() says. Plain C++ (no CUDA headers), but only
// linked in CUDA builds: guard uses with `#if BRIGADE_WITH_CUDA`.
//
// All take the same GemmArgs as cuda::gemm (device pointers, all on one device: the device of args.c is
// made current) and run on that device's current stream.
//
// The kernel versions (numbered as in docs/kernels.md, "CUDA kernels"): each later one keeps the earlier
// ones for teaching and as second opinions in tests. Iterate over all_gemm_kernels() and skip the
// (kernel, dtype) pairs for which gemm_kernel_supports() is false.
#pragma once

#include <vector>

#include "kernels/backend.h"

namespace brigade::kernels::cuda {

/// brigade's hand-written kernels (kernels/cuda/matmul*.cu).
enum class GemmKernel {
  Naive,  ///< v1: one thread per output element, straight from global memory (for teaching); all dtypes
  Tiled,  ///< v2: shared-memory tiles, register-blocked (scalar loads); all dtypes; the fp32/fp64 default
  Vectorized,  ///< v3: float4 loads, op(A) tile transposed in shared memory, float4 shared reads; float32
  Warptiled,   ///< v4: v3 + warp tiles, BK 16, double-buffered shared memory; float32
  Wmma,        ///< v5: tensor cores through the WMMA API (bf16 in, fp32 accumulate); bfloat16; its default
  WmmaAsync,   ///< v6: v5 with tiles in their stored layout, cp.async double buffering; bfloat16
  MmaSync,     ///< v7: mma.sync m16n8k16 fed by ldmatrix, 3-stage cp.async pipeline; bfloat16
  Wgmma,       ///< v8: Hopper wgmma from 128B-swizzled shared memory, 4-stage cp.async; bfloat16, sm_90a
               ///< only (A untransposed, B transposed, aligned rows; other layouts run v6)
};
const char* gemm_kernel_name(GemmKernel kernel);

/// Every GemmKernel, in version order (v1 first): what tests and benchmarks iterate over.
const std::vector<GemmKernel>& all_gemm_kernels();

/// Whether `kernel` implements `dtype` (gemm_native throws DTypeError for the other pairs). For Wgmma also
/// whether the current device can run it (compute capability 9.0, a build with sm_90a code).
bool gemm_kernel_supports(GemmKernel kernel, DType dtype);

/// The kernel cuda::gemm runs for `dtype` when matmul_backend() is Native: Wmma for bfloat16, Tiled for
/// float32 and float64 (the faster fp32 versions stay opt-in until they have been measured on a GPU).
GemmKernel default_gemm_kernel(DType dtype);

/// Runs one of brigade's kernels. Throws DTypeError when !gemm_kernel_supports(kernel, args.dtype).
void gemm_native(const GemmArgs& args, GemmKernel kernel);

/// Runs default_gemm_kernel(args.dtype): what cuda::gemm runs when matmul_backend() is Native.
void gemm_native(const GemmArgs& args);

/// Runs cublasGemmStridedBatchedEx (kernels/cuda/matmul_cublas.cu): the baseline behind
/// MatmulBackend::Cublas.
void gemm_cublas(const GemmArgs& args);

/// The CUDA device that owns `ptr` (DeviceError for host memory). cuda::gemm's arguments carry no device,
/// so the output pointer says where to launch.
int device_of_pointer(const void* ptr);

}  // namespace brigade::kernels::cuda
