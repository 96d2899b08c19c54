// The CUDA causal-attention kernels by version, for tests and benchmarks that want one implementation.
// Plain C++ (no CUDA headers), only linked in CUDA builds: guard uses with `#if BRIGADE_WITH_CUDA`.
//
//   v1 Simple  kernels/cuda/attention.cu        one block per query (or key) row, a row of T scores in
//                                               shared memory; every dtype and head dim
//   v2 Flash   kernels/cuda/attention_flash.cu  flash-attention tiles: online softmax over K/V tiles in
//                                               shared memory, no T x T matrix, lse saved; the backward
//                                               recomputes P from q, k and lse. float32 and bfloat16
//                                               (fp32 math), head dims 64 and 128
//   v3 FlashTensorCore  kernels/cuda/attention_flash_tc.cu  v2's tiling with every product on the tensor
//                                               cores (WMMA m16n16k16, fp32 accumulate), softmax in fp32;
//                                               forward and backward; bfloat16 only, head dims 64 and 128
//   v4 FlashTensorCoreAsync  the same file: v3 with the next streamed tile prefetched by cp.async into a
//                                               second shared buffer while the current one is used
//
// kernels::causal_attention (the dispatch layer) runs cuda::causal_attention_forward/backward, which is
// v1. The argument contract is the backend's (kernels/backend.h): q, k, v, out, dout, dq, dk, dv
// [B, H, T, D] with stride 1 on D, lse [B, H, T] contiguous float32 (float64 for float64).
#pragma once

#include <vector>

#include "tensor/tensor.h"

namespace brigade::kernels::cuda {

enum class AttentionKernel {
  Simple,                ///< v1 (kernels/cuda/attention.cu)
  Flash,                 ///< v2 (kernels/cuda/attention_flash.cu)
  FlashTensorCore,       ///< v3 (kernels/cuda/attention_flash_tc.cu); not the default until a GPU measures it
  FlashTensorCoreAsync,  ///< v4: v3 with cp.async double buffering (same file)
};
const char* attention_kernel_name(AttentionKernel kernel);

/// Every AttentionKernel, v1 first.
const std::vector<AttentionKernel>& all_attention_kernels();

/// Whether `kernel` runs itself for this dtype and head dim D; the *_with functions fall back to v1 when
/// it does not (so every (kernel, dtype, D) is valid, and tests compare only the supported ones).
bool attention_kernel_supports(AttentionKernel kernel, DType dtype, int64_t head_dim);

/// causal_attention_forward (kernels/backend.h) by `kernel` (v1 when !attention_kernel_supports).
void causal_attention_forward_with(AttentionKernel kernel, const Tensor& q, const Tensor& k, const Tensor& v,
                                   double scale, const Tensor& out, const Tensor& lse);

/// causal_attention_backward (kernels/backend.h) by `kernel` (v1 when !attention_kernel_supports).
void causal_attention_backward_with(AttentionKernel kernel, const Tensor& dout, const Tensor& q,
                                    const Tensor& k, const Tensor& v, const Tensor& out, const Tensor& lse,
                                    double scale, const Tensor& dq, const Tensor& dk, const Tensor& dv);

}  // namespace brigade::kernels::cuda
