// Checked CUDA runtime calls: every cudaXxx call goes through BRIGADE_CUDA_CHECK, which throws
// brigade::Error (OutOfMemoryError for cudaErrorMemoryAllocation) naming the call, the error and file:line.
// Only included by CUDA-enabled translation units.
#pragma once

#include <cuda_runtime.h>

#include "tensor/error.h"

#define BRIGADE_CUDA_CHECK(call)                                                                      \
  do {                                                                                                \
    cudaError_t brigade_cuda_status = (call);                                                         \
    if (brigade_cuda_status != cudaSuccess) {                                                         \
      (void)cudaGetLastError(); /* clear the sticky-free error so later calls can proceed */          \
      if (brigade_cuda_status == cudaErrorMemoryAllocation) {                                         \
        BRIGADE_THROW(::brigade::OutOfMemoryError, #call, " failed: ",                               \
                      cudaGetErrorString(brigade_cuda_status));                                       \
      }                                                                                               \
      BRIGADE_THROW(::brigade::Error, #call, " failed: ", cudaGetErrorName(brigade_cuda_status), " (", \
                    cudaGetErrorString(brigade_cuda_status), ")");                                    \
    }                                                                                                 \
  } while (0)

/// Checks the launch that just happened (bad configuration, too many resources).
#define BRIGADE_CUDA_CHECK_LAUNCH(kernel_name)                                                        \
  do {                                                                                                \
    cudaError_t brigade_launch_status = cudaGetLastError();                                           \
    if (brigade_launch_status != cudaSuccess) {                                                       \
      BRIGADE_THROW(::brigade::Error, "launch of ", kernel_name, " failed: ",                        \
                    cudaGetErrorName(brigade_launch_status), " (", cudaGetErrorString(brigade_launch_status), ")"); \
    }                                                                                                 \
  } while (0)

namespace brigade::cuda_detail {
/// The current stream of the current CUDA device for this thread, as a cudaStream_t (see tensor/stream.h).
cudaStream_t current_stream(int device_index);
/// Makes `device_index` the current CUDA device of this thread (checked).
void set_device(int device_index);
}  // namespace brigade::cuda_detail
