// Addressing of [B, H, T, D] attention tensors (stride 1 on D, any strides on B, H, T) shared by the CUDA
// attention kernels: v1 (attention.cu), flash v2 (attention_flash.cu) and flash on tensor cores v3/v4
// (attention_flash_tc.cu). Kernels index a head as bh = b * H + h and take the three outer strides by value.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "tensor/tensor.h"

namespace brigade::kernels::cuda {

/// Row (b, h, t) of a [B, H, T, D] tensor with stride 1 on D, as strides in elements.
struct Heads {
  int64_t sb, sh, st;
};

/// The strides of dimensions B, H and T of the [B, H, T, D] tensor t.
inline Heads heads(const Tensor& t) {
  return Heads{t.stride(0), t.stride(1), t.stride(2)};
}

/// Offset in elements of element (b, h, t, 0) where bh = b * H + h.
__device__ __forceinline__ int64_t row_at(const Heads& a, int64_t bh, int64_t H, int64_t t) {
  return (bh / H) * a.sb + (bh % H) * a.sh + t * a.st;
}

}  // namespace brigade::kernels::cuda
