// One warp per row: what the v2 row kernels share (softmax v2 kernels/cuda/softmax_warp.cu, layernorm v2
// kernels/cuda/layernorm_warp.cu).
//
// Launch shape: blocks of 4 warps, warp w of block b takes rows b*4 + w, then strides by the grid's warps
// (grid_for(R, 4), at most 16384 blocks). Lane l holds elements l, l + 32, ..., l + 32 (N - 1) of its row
// (N = the smallest of 1, 2, 4, 8, 16, 32 with 32 N >= C, a template parameter, so the values stay in
// registers): each load instruction of a warp covers 32 consecutive elements (coalesced) and a lane has N
// independent loads in flight. Reductions are butterfly shuffles (warp_reduce): no shared memory, no
// __syncthreads, and a fixed order, so results are deterministic. Rows of C <= kMaxWarpRowCols (32 x 32).
#pragma once

#include <cstdint>

#include "kernels/cuda/launch.cuh"

namespace brigade::kernels::cuda::warp_rows {

constexpr int kWarpsPerBlock = 4;
constexpr int kThreads = kWarpsPerBlock * kWarpSize;

/// The warp's rows: calls body(row) for rows warp_id, warp_id + total_warps, ...
template <typename Body>
__device__ __forceinline__ void for_each_warp_row(int64_t R, Body body) {
  const int64_t warps = static_cast<int64_t>(gridDim.x) * kWarpsPerBlock;
  for (int64_t row = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarpSize; row < R;
       row += warps) {
    body(row);
  }
}

/// Calls launch.template operator()<N>() with the smallest N in {1, 2, 4, 8, 16, 32} with 32 N >= C.
template <typename Launch>
void with_lanes(int64_t C, Launch launch) {
  if (C <= 32) {
    launch.template operator()<1>();
  } else if (C <= 64) {
    launch.template operator()<2>();
  } else if (C <= 128) {
    launch.template operator()<4>();
  } else if (C <= 256) {
    launch.template operator()<8>();
  } else if (C <= 512) {
    launch.template operator()<16>();
  } else {
    launch.template operator()<32>();
  }
}

}  // namespace brigade::kernels::cuda::warp_rows
