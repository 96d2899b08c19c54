// Entry points of the CUDA GEMMs beyond cuda::gemm (kernels/backend.h), for tests and benchmarks that
// want one implementation whatever kernels::matmul_backend() says. Plain C++ (no CUDA headers), but only
// linked in CUDA builds: guard uses with `#if BRIGADE_WITH_CUDA`.
//
// All take the same GemmArgs as cuda::gemm (device pointers, all on one device: the device of args.c is
// made current) and run on that device's current stream.
//
// The versions themselves (names, dtypes, defaults) are registered in kernels/matmul_versions.h; gemm_with
// there routes a CUDA version to gemm_native here.
#pragma once

#include "kernels/backend.h"
#include "kernels/matmul_versions.h"

namespace brigade::kernels::cuda {

/// Whether the current device can run v8 (MatmulKernel::CudaWgmma): the build holds sm_90a code and the
/// device is compute capability 9.0. False when there is no device.
bool current_device_runs_wgmma();

/// Runs one of brigade's CUDA versions. Throws DTypeError when !matmul_kernel_supports(kernel, args.dtype),
/// ValueError for a CPU version, DeviceError for v8 on a device that cannot run it.
void gemm_native(const GemmArgs& args, MatmulKernel kernel);

/// Runs default_matmul_kernel(CUDA, args.dtype): what cuda::gemm runs when matmul_backend() is Native.
void gemm_native(const GemmArgs& args);

/// Runs cublasGemmStridedBatchedEx (kernels/cuda/matmul_cublas.cu): the baseline behind
/// MatmulBackend::Cublas.
void gemm_cublas(const GemmArgs& args);

/// The CUDA device that owns `ptr` (DeviceError for host memory). cuda::gemm's arguments carry no device,
/// so the output pointer says where to launch.
int device_of_pointer(const void* ptr);

}  // namespace brigade::kernels::cuda
