// The probe of kernels/cuda/mma_ptx_probe.h: one warp runs each helper of mma_ptx.cuh through the PTX and
// through the reference path on the same inputs, and writes every lane's registers out.
//
// Launch: one block of 32 threads (one warp), 2.5 KB of static shared memory (the [32][32] bf16 tile at a
// pitch of 40 elements, 80 B: 16-byte aligned rows as ldmatrix requires). A correctness probe, not a kernel
// to time: ~4 KB in and out, a few hundred instructions.
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/matmul.h"
#include "kernels/cuda/mma_ptx.cuh"
#include "kernels/cuda/mma_ptx_probe.h"
#include "tensor/cuda/cuda_check.h"

namespace brigade::kernels::cuda {
namespace {

constexpr int kProbePitch = 40;  // bf16 elements per shared row

__global__ void mma_ptx_probe_kernel(MmaPtxProbeBuffers buffers) {
  __shared__ __align__(16) uint16_t tile[32 * kProbePitch];
  const int lane = static_cast<int>(threadIdx.x);
  for (int e = lane; e < 32 * 32; e += 32) tile[(e / 32) * kProbePitch + e % 32] = buffers.tile[e];
  __syncwarp();
  const uint16_t* row = tile + probe_row(lane) * kProbePitch + probe_col(lane);

  uint32_t plain[4], trans[4];
  ptx::ldmatrix_x4_reference(plain, row);
  ptx::ldmatrix_x4_trans_reference(trans, row);
  const uint32_t b[2] = {trans[0], trans[1]};
  float c[4], d[4];
  for (int e = 0; e < 4; ++e) c[e] = buffers.c[lane * 4 + e];
  ptx::mma_bf16_16816_reference(d, plain, b, c);
  for (int e = 0; e < 4; ++e) {
    buffers.ldmatrix[128 + lane * 4 + e] = plain[e];
    buffers.ldmatrix_trans[128 + lane * 4 + e] = trans[e];
    buffers.mma[128 + lane * 4 + e] = d[e];
  }
#if !defined(BRIGADE_CUDA_EMULATION)
  uint32_t plain_ptx[4], trans_ptx[4];
  float d_ptx[4];
  ptx::ldmatrix_x4_ptx(plain_ptx, row);
  ptx::ldmatrix_x4_trans_ptx(trans_ptx, row);
  ptx::mma_bf16_16816_ptx(d_ptx, plain, b, c);  // the same inputs as the reference mma
  for (int e = 0; e < 4; ++e) {
    buffers.ldmatrix[lane * 4 + e] = plain_ptx[e];
    buffers.ldmatrix_trans[lane * 4 + e] = trans_ptx[e];
    buffers.mma[lane * 4 + e] = d_ptx[e];
  }
#endif
}

}  // namespace

void run_mma_ptx_probe(const MmaPtxProbeBuffers& buffers) {
  const int device = device_of_pointer(buffers.tile);
  cuda_detail::set_device(device);
  cudaStream_t stream = cuda_detail::current_stream(device);
  mma_ptx_probe_kernel<<<1, 32, 0, stream>>>(buffers);
  BRIGADE_CUDA_CHECK_LAUNCH("mma_ptx_probe_kernel");
}

}  // namespace brigade::kernels::cuda
