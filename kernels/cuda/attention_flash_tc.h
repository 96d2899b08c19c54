// Causal attention versions 3 and 4 (kernels/cuda/attention_flash_tc.cu): flash attention with the products
// on the tensor cores (WMMA, bf16 in, fp32 accumulate); v4 (`pipelined`) prefetches the next streamed tile
// with cp.async into a second shared buffer. Internal to the CUDA backend: reached through
// causal_attention_forward_with / causal_attention_backward_with (kernels/attention_versions.h) with
// AttentionKernel::CudaFlashTensorCore or CudaFlashTensorCoreAsync, which check attention_kernel_supports
// first.
// Plain C++ (no CUDA headers). The argument contract is the backend's (kernels/backend.h).
#pragma once

#include "tensor/tensor.h"

namespace brigade::kernels::cuda::attention_detail {

/// Forward: out = softmax(scale q k^T + causal mask) v and lse. Requires bfloat16 q, k, v, out [B, H, T, D]
/// with stride 1 on D and D 64 or 128, lse [B, H, T] contiguous float32, T > 0, all on one CUDA device.
void flash_tc_forward(const Tensor& q, const Tensor& k, const Tensor& v, double scale, const Tensor& out,
                      const Tensor& lse, bool pipelined);

/// Backward (dq, dk, dv from dout, the forward's inputs, out and lse); same requirements as the forward.
void flash_tc_backward(const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v,
                       const Tensor& out, const Tensor& lse, double scale, const Tensor& dq, const Tensor& dk,
                       const Tensor& dv, bool pipelined);

}  // namespace brigade::kernels::cuda::attention_detail
