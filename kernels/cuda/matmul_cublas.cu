// gemm_cublas: the cuBLAS baseline behind MatmulBackend::Cublas (select it with
// kernels::set_matmul_backend or BRIGADE_MATMUL_BACKEND=cublas). Never chosen silently: it exists so that
// tests and benchmarks can hold brigade's own kernels (kernels/cuda/matmul.cu) against it.
//
// One cublasGemmStridedBatchedEx per call, on the current stream of the output's device:
//   float32  CUDA_R_32F  in/out, CUBLAS_COMPUTE_32F (true fp32: no TF32 unless NVIDIA_TF32_OVERRIDE says so)
//   bfloat16 CUDA_R_16BF in/out, CUBLAS_COMPUTE_32F (tensor cores, float accumulation)
//   float64  CUDA_R_64F  in/out, CUBLAS_COMPUTE_64F
// Napkin math: the same 2*M*N*K FLOPs as the native kernel; cuBLAS approaches the H200 peaks (~67 TFLOP/s
// fp32 on CUDA cores, ~989 TFLOP/s bf16 on tensor cores, ~67 TFLOP/s fp64 on tensor cores).
//
// Row-major vs column-major. cuBLAS reads column-major matrices, and a row-major [R, C] matrix with
// leading dim ld is, read column-major, its transpose [C, R] with the same ld. So instead of C = op(A) op(B)
// we ask cuBLAS for C^T = op(B)^T op(A)^T (an N x M column-major result, which is C row-major):
//   cuBLAS "A" = our B with transa = trans_b, cuBLAS "B" = our A with transb = trans_a, m = N, n = M.
//
// Handles: a cublasHandle_t is bound to the device that was current when it was created and is not safe to
// use from two threads at once, so each thread holds one per device. A handle is taken from (and, when its
// thread exits, returned to) a process-wide pool, so threads that come and go (pipeline stages) reuse
// handles instead of creating one each. The pool is deliberately never destroyed: destroying handles
// during static destruction, after the CUDA runtime may have shut down, is a classic crash at exit.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <climits>
#include <cstdint>
#include <mutex>
#include <utility>
#include <vector>

#include "kernels/backend.h"
#include "kernels/cuda/cublas_check.h"
#include "kernels/cuda/matmul.h"
#include "tensor/cuda/cuda_check.h"

namespace brigade::kernels::cuda {
namespace {

struct HandlePool {
  std::mutex mutex;
  std::vector<std::pair<int, cublasHandle_t>> free;  // (device, handle)
};

HandlePool& handle_pool() {
  static HandlePool* pool = new HandlePool;  // leaked on purpose (see the top)
  return *pool;
}

/// This thread's handles; on thread exit they go back to the pool (no cuBLAS call at exit).
struct ThreadHandles {
  std::vector<std::pair<int, cublasHandle_t>> held;
  ~ThreadHandles() {
    HandlePool& pool = handle_pool();
    std::lock_guard<std::mutex> lock(pool.mutex);
    pool.free.insert(pool.free.end(), held.begin(), held.end());
  }
};

/// The calling thread's handle for `device`, which must be the current device.
cublasHandle_t handle_for(int device) {
  thread_local ThreadHandles mine;
  for (const auto& [d, handle] : mine.held) {
    if (d == device) return handle;
  }
  cublasHandle_t handle = nullptr;
  {
    HandlePool& pool = handle_pool();
    std::lock_guard<std::mutex> lock(pool.mutex);
    for (auto it = pool.free.begin(); it != pool.free.end(); ++it) {
      if (it->first == device) {
        handle = it->second;
        pool.free.erase(it);
        break;
      }
    }
  }
  if (handle == nullptr) BRIGADE_CUBLAS_CHECK(cublasCreate(&handle));
  mine.held.emplace_back(device, handle);
  return handle;
}

int checked_int(int64_t value, const char* what) {
  BRIGADE_CHECK_VALUE(value >= 0 && value <= INT_MAX, "matmul (cuBLAS): ", what, " = ", value,
                      " does not fit the 32-bit int cuBLAS takes");
  return static_cast<int>(value);
}

}  // namespace

void gemm_cublas(const GemmArgs& args) {
  if (args.m <= 0 || args.n <= 0 || args.batch <= 0) return;
  const int device = device_of_pointer(args.c);
  cuda_detail::set_device(device);
  cudaStream_t stream = cuda_detail::current_stream(device);

  const size_t element = dtype_size(args.dtype);
  if (args.k == 0) {  // an empty sum; say so explicitly rather than rely on how cuBLAS treats k = 0
    for (int64_t b = 0; b < args.batch; ++b) {
      char* c = static_cast<char*>(args.c) + b * args.stride_c * static_cast<int64_t>(element);
      BRIGADE_CUDA_CHECK(cudaMemset2DAsync(c, args.ldc * element, 0, args.n * element, args.m, stream));
    }
    return;
  }

  cudaDataType_t data_type = CUDA_R_32F;
  cublasComputeType_t compute_type = CUBLAS_COMPUTE_32F;
  const float alpha_f = 1.0f, beta_f = 0.0f;
  const double alpha_d = 1.0, beta_d = 0.0;
  const void* alpha = &alpha_f;
  const void* beta = &beta_f;
  switch (args.dtype) {
    case DType::Float32:
      break;
    case DType::BFloat16:
      data_type = CUDA_R_16BF;
      break;
    case DType::Float64:
      data_type = CUDA_R_64F;
      compute_type = CUBLAS_COMPUTE_64F;
      alpha = &alpha_d;
      beta = &beta_d;
      break;
    default:
      BRIGADE_THROW(DTypeError, "matmul (cuBLAS): expected float32, bfloat16 or float64, found ",
                    dtype_name(args.dtype));
  }

  cublasHandle_t handle = handle_for(device);
  BRIGADE_CUBLAS_CHECK(cublasSetStream(handle, stream));
  // C^T (N x M, column-major) = op(B)^T (N x K) @ op(A)^T (K x M); see the top.
  BRIGADE_CUBLAS_CHECK(cublasGemmStridedBatchedEx(
      handle, args.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, args.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N,
      checked_int(args.n, "N"), checked_int(args.m, "M"), checked_int(args.k, "K"), alpha, args.b, data_type,
      checked_int(args.ldb, "ldb"), args.stride_b, args.a, data_type, checked_int(args.lda, "lda"),
      args.stride_a, beta, args.c, data_type, checked_int(args.ldc, "ldc"), args.stride_c,
      checked_int(args.batch, "batch"), compute_type, CUBLAS_GEMM_DEFAULT));
}

}  // namespace brigade::kernels::cuda
