// The fused causal attention kernel versions (forward and backward), on each backend (the shape of every
// kernels/<op>_versions.h: kernels/kernel_versions.h). The argument contract is the backend's
// (kernels/backend.h): q, k, v, out, dout, dq, dk, dv [B, H, T, D] with stride 1 on D, lse [B, H, T]
// contiguous float32 (float64 for float64).
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/attention_dropout.h"
#include "kernels/kernel_versions.h"
#include "tensor/tensor.h"

namespace brigade::kernels {

enum class AttentionKernel {
  /// CPU v1 (kernels/cpu/attention.cpp): one (b, h) per task, register-blocked 4-row tiles on 4-lane
  /// vectors (plain x86-64); float64 row by row with libm's exp. v2 improves: 8 lanes.
  CpuBaseline,
  /// CPU v2 (kernels/cpu/attention.cpp): v1's code compiled for AVX2 (8-lane tiles for float32 and bfloat16,
  /// the same bits; float64's row loop compiled for AVX2), on CPUs with AVX2 (others run v1); the default
  /// for float64, and without AVX-512. v3 improves:
  /// 16 lanes, FMA, 8-row tiles, vector row reductions.
  CpuAvx2,
  /// CPU v3 (kernels/cpu/attention_avx512.cpp): 8 query rows x 32 columns of zmm accumulators per step,
  /// fused multiply-adds, vector row max / sum and dS; float32 and bfloat16 on CPUs with AVX-512F (float64
  /// and other CPUs run v1); the CPU default where it runs. Not the same bits as v1/v2 (FMA rounds once):
  /// checked within tolerance.
  CpuAvx512,
  /// CUDA v1 (kernels/cuda/attention.cu): one block per query (or key) row, a row of T scores in shared
  /// memory; every dtype and head dim; the default. v2 improves: K/V tiles shared by 64 queries.
  CudaSimple,
  /// CUDA v2 (kernels/cuda/attention_flash.cu): flash-attention tiles, online softmax over K/V tiles in
  /// shared memory, no T x T matrix, lse saved, the backward recomputes P; float32 and bfloat16 (fp32
  /// math), head dims 64 and 128. v3 improves: the products on the tensor cores.
  CudaFlash,
  /// CUDA v3 (kernels/cuda/attention_flash_tc.cu): v2's tiling with every product on the tensor cores (WMMA
  /// m16n16k16, fp32 accumulate), softmax in fp32; bfloat16, head dims 64 and 128. v4 improves: the next
  /// tile's loads overlap the current tile's products.
  CudaFlashTensorCore,
  /// CUDA v4 (kernels/cuda/attention_flash_tc.cu): v3 with the next streamed tile prefetched by cp.async
  /// into a second shared buffer; the same bits as v3.
  CudaFlashTensorCoreAsync,
};

/// "v1-baseline", "v2-avx2", "v3-avx512-fma" (CPU); "v1-simple", "v2-flash", "v3-flash-tc",
/// "v4-flash-tc-async" (CUDA).
const char* attention_kernel_name(AttentionKernel kernel);

/// DeviceKind::CPU or DeviceKind::CUDA.
DeviceKind attention_kernel_backend(AttentionKernel kernel);

/// Every AttentionKernel, in enum order.
const std::vector<AttentionKernel>& all_attention_kernels();

/// Whether `kernel` runs itself for this dtype and head dim D (CpuAvx2, CpuAvx512: also whether this CPU has
/// AVX2, AVX-512F).
bool attention_kernel_supports(AttentionKernel kernel, DType dtype, int64_t head_dim);

/// What kernels::causal_attention (and its backward) runs on `backend`: CpuAvx512 where it runs (float32,
/// bfloat16 with AVX-512F), else CpuAvx2 where it runs, else CpuBaseline; on CUDA v4 (bfloat16) or v2
/// (float32) where the head dim is 64 or 128, else v1 (the fastest measured on an H200, docs/kernels.md).
AttentionKernel default_attention_kernel(DeviceKind backend, DType dtype, int64_t head_dim);

/// Whether `kernel` implements dropout on the attention weights (kernels/attention_dropout.h): the CPU
/// versions do; the CUDA ones refuse p > 0 (a model on CUDA applies that dropout unfused).
bool attention_kernel_supports_dropout(AttentionKernel kernel);

/// ValueError unless 0 <= dropout.p < 1 (`op` names the caller in the message).
void check_attention_dropout_p(const char* op, const AttentionDropout& dropout);

/// causal_attention_forward / causal_attention_backward of kernels/backend.h (tensors on the version's
/// backend) by one version (v1 of its backend when !attention_kernel_supports(kernel, dtype, D)), with
/// dropout on the weights where `dropout.p` > 0 (ValueError where !attention_kernel_supports_dropout).
#define BRIGADE_ATTENTION_VERSION_FUNCTIONS                                                                \
  void causal_attention_forward_with(AttentionKernel kernel, const Tensor& q, const Tensor& k,             \
                                     const Tensor& v, double scale, const Tensor& out, const Tensor& lse,  \
                                     const AttentionDropout& dropout = {});                                \
  void causal_attention_backward_with(AttentionKernel kernel, const Tensor& dout, const Tensor& q,         \
                                      const Tensor& k, const Tensor& v, const Tensor& out,                 \
                                      const Tensor& lse, double scale, const Tensor& dq, const Tensor& dk, \
                                      const Tensor& dv, const AttentionDropout& dropout = {});
BRIGADE_ATTENTION_VERSION_FUNCTIONS

// The backends' sides of the two above: `kernel` is a version of that backend. Call those instead.
namespace cpu {
BRIGADE_ATTENTION_VERSION_FUNCTIONS  // kernels/cpu/attention.cpp
}  // namespace cpu
namespace cuda {
BRIGADE_ATTENTION_VERSION_FUNCTIONS  // kernels/cuda/attention_flash.cu
}  // namespace cuda

}  // namespace brigade::kernels
