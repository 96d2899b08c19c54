// The AdamW update's kernel versions, on each backend (the shape of every kernels/<op>_versions.h:
// kernels/kernel_versions.h).
#pragma once

#include <vector>

#include "kernels/kernel_versions.h"
#include "kernels/kernels.h"

namespace brigade::kernels {

enum class AdamWKernel {
  /// CPU v1 (kernels/cpu/optim.cpp): one OpenMP loop, the update in double, stored back to the parameter's
  /// and the moments' dtypes.
  CpuLoop,
  /// CPU v2 (kernels/cpu/optim.cpp), on a CPU with AVX-512F and FMA: float32 parameters with float32
  /// moments updated in float, 16 lanes a vector, FMAs, one vsqrtps and one vdivps a vector where v1
  /// widens to double (vsqrtpd and vdivpd on 8 lanes bind it, in cache and from DRAM). Its own bits,
  /// within a few float roundings of the terms that make each value; other dtypes run v1. The CPU default
  /// where it runs.
  CpuAvx512,
  /// CUDA v1 (kernels/cuda/optim.cu): one element per thread, grid-stride. v2 improves: 16-byte accesses.
  CudaScalar,
  /// CUDA v2 (kernels/cuda/optim.cu): the same arithmetic per element, moved in packs (m and v by 16 bytes,
  /// param and grad by as many elements) with a scalar head and tail; runs when the four tensors share an
  /// alignment, else v1; the CUDA default.
  CudaVector128,
};

/// "v1-loop", "v2-avx512" (CPU); "v1-scalar", "v2-vector128" (CUDA).
const char* adamw_kernel_name(AdamWKernel kernel);

/// DeviceKind::CPU or DeviceKind::CUDA.
DeviceKind adamw_kernel_backend(AdamWKernel kernel);

/// Every AdamWKernel, in enum order.
const std::vector<AdamWKernel>& all_adamw_kernels();

/// Whether `kernel` runs here: CpuAvx512 where the CPU has AVX-512F and FMA; the others always (a version
/// hands the dtypes and layouts it does not vectorise to v1).
bool adamw_kernel_supports(AdamWKernel kernel);

/// What kernels::adamw_update and adamw_update_all run on `backend`: CpuAvx512 where it runs, else the CPU
/// loop; CudaVector128.
AdamWKernel default_adamw_kernel(DeviceKind backend);

/// adamw of kernels/backend.h (tensors on the version's backend) by one version.
#define BRIGADE_ADAMW_VERSION_FUNCTIONS                                                         \
  void adamw_with(AdamWKernel kernel, const Tensor& param, const Tensor& grad, const Tensor& m, \
                  const Tensor& v, const AdamWStep& s);
BRIGADE_ADAMW_VERSION_FUNCTIONS

namespace cpu {
/// The CPU side of adamw_with (kernels/cpu/optim.cpp): `kernel` is a CPU version. Call that instead.
BRIGADE_ADAMW_VERSION_FUNCTIONS
}  // namespace cpu

namespace cuda {
/// The CUDA side of adamw_with (kernels/cuda/optim.cu): `kernel` is a CUDA version. Call that instead.
BRIGADE_ADAMW_VERSION_FUNCTIONS
}  // namespace cuda

}  // namespace brigade::kernels
