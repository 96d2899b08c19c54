// Entry points of the CUDA GEMMs beyond cuda::gemm (kernels/backend.h), for tests and benchmarks that
// want one implementation whatever kernels::matmul_backend() says. Plain C++ (no CUDA headers), but only
// linked in CUDA builds: guard uses with `#if BRIGADE_WITH_CUDA`.
//
// All take the same GemmArgs as cuda::gemm (device pointers, all on one device: the device of args.c is
// made current) and run on that device's current stream.
#pragma once

#include "kernels/backend.h"

namespace brigade::kernels::cuda {

/// brigade's hand-written kernels (kernels/cuda/matmul.cu).
enum class GemmKernel {
  Naive,  ///< v1: one thread per output element, straight from global memory (for teaching)
  Tiled,  ///< v2: shared-memory tiles, register-blocked (the default for MatmulBackend::Native)
};
const char* gemm_kernel_name(GemmKernel kernel);

/// Runs one of brigade's kernels (what cuda::gemm runs when matmul_backend() is Native, with Tiled).
void gemm_native(const GemmArgs& args, GemmKernel kernel = GemmKernel::Tiled);

/// Runs cublasGemmStridedBatchedEx (kernels/cuda/matmul_cublas.cu): the baseline behind
/// MatmulBackend::Cublas.
void gemm_cublas(const GemmArgs& args);

/// The CUDA device that owns `ptr` (DeviceError for host memory). cuda::gemm's arguments carry no device,
/// so the output pointer says where to launch.
int device_of_pointer(const void* ptr);

}  // namespace brigade::kernels::cuda
