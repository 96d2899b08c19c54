// Addressing of [B, H, T, D] attention tensors (stride 1 on D, any strides on B, H, T) shared by the CUDA
// attention kernels: v1 (attention.cu), flash v2 (attention_flash.cu) and flash on tensor cores v3/v4
// (attention_flash_tc.cu). Kernels index a head as bh = b * H + h and take the three outer strides by value.
// Also the flash backward's preprocess, delta_i = dout_i . out_i, which v2, v3 and v4 share.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/launch.cuh"
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

// In an unnamed namespace, as the kernels of the files that include it are: each translation unit keeps
// its own instantiations.
namespace {

/// Warps per block of attention_flash_delta_kernel's launches.
constexpr int kDeltaWarpsPerBlock = 8;

/// delta[bh * T + t] = dout_t . out_t in fp32 (T is float or bfloat16), one warp per row, grid-stride over
/// the rows = B * H * T rows: the flash backward's preprocess (delta_i enters ds_ij = p_ij (dp_ij -
/// delta_i)).
template <typename T>
__global__ void attention_flash_delta_kernel(const T* __restrict__ dout, Heads ga, const T* __restrict__ out,
                                             Heads oa, float* __restrict__ delta, int64_t H, int64_t T_len,
                                             int64_t rows, int D) {
  const int lane = threadIdx.x % kWarpSize;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * (blockDim.x / kWarpSize);
  for (int64_t row = static_cast<int64_t>(blockIdx.x) * (blockDim.x / kWarpSize) + threadIdx.x / kWarpSize;
       row < rows; row += warps) {
    const int64_t bh = row / T_len, t = row % T_len;
    const T* g = dout + row_at(ga, bh, H, t);
    const T* o = out + row_at(oa, bh, H, t);
    float sum = 0.0f;
    for (int d = lane; d < D; d += kWarpSize) sum += static_cast<float>(g[d]) * static_cast<float>(o[d]);
    sum = warp_reduce(sum, SumOp{});
    if (lane == 0) delta[row] = sum;
  }
}

/// Blocks of kDeltaWarpsPerBlock warps for attention_flash_delta_kernel over `rows` rows.
inline unsigned delta_blocks(int64_t rows) {
  return static_cast<unsigned>(
      std::min<int64_t>((rows + kDeltaWarpsPerBlock - 1) / kDeltaWarpsPerBlock, kMaxGridBlocks));
}

}  // namespace

}  // namespace brigade::kernels::cuda
