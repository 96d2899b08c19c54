// A probe of the warp-level helpers of kernels/cuda/mma_ptx.cuh: one warp runs ldmatrix_x4,
// ldmatrix_x4_trans and mma_bf16_16816 through the PTX *and* through the plain-CUDA reference path on the
// same inputs, so that a GPU test (tests/kernels/cuda_mma_ptx_test.cpp) can check that the reference path,
// which is what the CPU emulator (scripts/cuda_emulation) runs, reads the fragment layouts as the hardware
// does. The expected_* functions below are the layouts as the PTX ISA documents them, written out on the
// host: the oracle both paths are compared with. Plain C++; run_mma_ptx_probe is linked only in CUDA
// builds (guard calls with `#if BRIGADE_WITH_CUDA`).
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

namespace brigade::kernels::cuda {

/// Device buffers of one probe run (all on one device; the device of `tile` is made current and the probe
/// runs on its current stream).
struct MmaPtxProbeBuffers {
  const uint16_t* tile = nullptr;  // [32][32] bf16 bits, row-major: the shared-memory tile
  const float* c = nullptr;        // [32 lanes][4]: the mma's C fragment
  // Outputs, [path][32 lanes][4] with path 0 = PTX, 1 = reference. Without PTX (the CPU emulation) path
  // 0 is left untouched.
  uint32_t* ldmatrix = nullptr;        // [2][32][4]
  uint32_t* ldmatrix_trans = nullptr;  // [2][32][4]
  float* mma = nullptr;                // [2][32][4]; A = the reference ldmatrix registers,
                                       // B = registers 0, 1 of the reference ldmatrix_trans
};

/// Launches the probe (one block of 32 threads) and returns without synchronising.
void run_mma_ptx_probe(const MmaPtxProbeBuffers& buffers);

/// Lane `lane` of the probe points ldmatrix at tile row probe_row(lane), column probe_col(lane) (a
/// permutation of the rows, and varied columns, so that a lane mix-up cannot go unnoticed).
constexpr int probe_row(int lane) {
  return (lane * 7 + 3) % 32;
}
constexpr int probe_col(int lane) {
  return 8 * ((lane * 3) % 4);
}

// ---- the documented layouts, on the host ----------------------------------------------------------------

/// What ldmatrix(.x4, optionally .trans) returns in register q of `lane` for the probe's addresses:
/// matrix q's row r is the 8 elements at tile[probe_row(8q + r)][probe_col(8q + r) ..]; lane (g, t)
/// receives M[g][2t], M[g][2t+1] (plain) or M[2t][g], M[2t+1][g] (.trans), the first in the low half.
inline uint32_t expected_ldmatrix(const std::vector<uint16_t>& tile, bool trans, int lane, int q) {
  const int g = lane / 4, t = lane % 4;
  auto m = [&](int r, int col) {
    const int l = 8 * q + r;
    return static_cast<uint32_t>(tile[probe_row(l) * 32 + probe_col(l) + col]);
  };
  return trans ? m(2 * t, g) | (m(2 * t + 1, g) << 16) : m(g, 2 * t) | (m(g, 2 * t + 1) << 16);
}

/// bf16 bits -> float.
inline float probe_bf16_to_float(uint32_t bits16) {
  const uint32_t bits = bits16 << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

/// D = A B + C of mma.m16n8k16.row.col.f32.bf16.bf16.f32, with A, B and C read back from the lanes'
/// registers by the documented fragment layout (g = lane / 4, t = lane % 4):
///   a0 = A[g][2t..2t+1], a1 = A[g+8][2t..2t+1], a2 = A[g][2t+8..2t+9], a3 = A[g+8][2t+8..2t+9];
///   b0 = B[2t..2t+1][g], b1 = B[2t+8..2t+9][g];  c0, c1 = C[g][2t, 2t+1], c2, c3 = C[g+8][2t, 2t+1].
/// a: [32][4] registers, b: [32][2], c: [32][4]; returns [32][4] in the layout of c. Sums in double.
inline std::vector<float> expected_mma(const std::vector<uint32_t>& a, const std::vector<uint32_t>& b,
                                       const std::vector<float>& c) {
  float A[16][16], B[16][8], C[16][8];
  for (int lane = 0; lane < 32; ++lane) {
    const int g = lane / 4, t = lane % 4;
    for (int h = 0; h < 2; ++h) {  // low and high half: k (or column) 2t + h
      auto half = [&](uint32_t x) { return probe_bf16_to_float(h == 0 ? x & 0xffffu : x >> 16); };
      A[g][2 * t + h] = half(a[lane * 4 + 0]);
      A[g + 8][2 * t + h] = half(a[lane * 4 + 1]);
      A[g][2 * t + 8 + h] = half(a[lane * 4 + 2]);
      A[g + 8][2 * t + 8 + h] = half(a[lane * 4 + 3]);
      B[2 * t + h][g] = half(b[lane * 2 + 0]);
      B[2 * t + 8 + h][g] = half(b[lane * 2 + 1]);
      C[g][2 * t + h] = c[lane * 4 + h];
      C[g + 8][2 * t + h] = c[lane * 4 + 2 + h];
    }
  }
  std::vector<float> d(32 * 4);
  for (int lane = 0; lane < 32; ++lane) {
    const int g = lane / 4, t = lane % 4;
    for (int e = 0; e < 4; ++e) {
      const int row = g + (e / 2) * 8, col = 2 * t + e % 2;
      double sum = C[row][col];
      for (int k = 0; k < 16; ++k) sum += static_cast<double>(A[row][k]) * B[k][col];
      d[lane * 4 + e] = static_cast<float>(sum);
    }
  }
  return d;
}

}  // namespace brigade::kernels::cuda
