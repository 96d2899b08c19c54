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
  /// CUDA v1 (kernels/cuda/optim.cu): one element per thread, grid-stride. v2 improves: 16-byte accesses.
  CudaScalar,
  /// CUDA v2 (kernels/cuda/optim.cu): the same arithmetic per element, moved in packs (m and v by 16 bytes,
  /// param and grad by as many elements) with a scalar head and tail; runs when the four tensors share an
  /// alignment, else v1; the CUDA default.
  CudaVector128,
};

/// "v1-loop" (CPU); "v1-scalar", "v2-vector128" (CUDA).
const char* adamw_kernel_name(AdamWKernel kernel);

/// DeviceKind::CPU or DeviceKind::CUDA.
DeviceKind adamw_kernel_backend(AdamWKernel kernel);

/// Every AdamWKernel, in enum order.
const std::vector<AdamWKernel>& all_adamw_kernels();

/// Whether `kernel` runs here: always (a version hands the layouts it does not vectorise to v1).
bool adamw_kernel_supports(AdamWKernel kernel);

/// What kernels::adamw_update runs on `backend`: the CPU loop; CudaVector128.
AdamWKernel default_adamw_kernel(DeviceKind backend);

/// adamw of kernels/backend.h (tensors on the version's backend) by one version.
#define BRIGADE_ADAMW_VERSION_FUNCTIONS                                                         \
  void adamw_with(AdamWKernel kernel, const Tensor& param, const Tensor& grad, const Tensor& m, \
                  const Tensor& v, const AdamWStep& s);
BRIGADE_ADAMW_VERSION_FUNCTIONS

namespace cuda {
/// The CUDA side of adamw_with (kernels/cuda/optim.cu): `kernel` is a CUDA version. Call that instead.
BRIGADE_ADAMW_VERSION_FUNCTIONS
}  // namespace cuda

}  // namespace brigade::kernels
