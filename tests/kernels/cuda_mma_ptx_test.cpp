// The warp-level helpers of kernels/cuda/mma_ptx.cuh on a GPU: ldmatrix_x4, ldmatrix_x4_trans and
// mma_bf16_16816 through their PTX and through their plain-CUDA reference paths (what the CPU emulator runs),
// both against the fragment layouts as the PTX ISA documents them (expected_* in mma_ptx_probe.h).
// Passing here is what makes the emulator's verdict on the bf16 GEMM v7 count for the hardware.
// Skips without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "kernels/cuda/mma_ptx_probe.h"
#include "tensor/bfloat16.h"
#include "tensor/tensor.h"
#include "tests/test_support.h"

namespace brigade {
namespace {

using kernels::cuda::expected_ldmatrix;
using kernels::cuda::expected_mma;

#if BRIGADE_WITH_CUDA
struct ProbeResult {
  std::vector<uint32_t> ldmatrix, ldmatrix_trans;  // [2 paths][32 lanes][4]
  std::vector<float> mma;                          // [2 paths][32 lanes][4]
};

ProbeResult run_probe(const std::vector<uint16_t>& tile, const std::vector<float>& c) {
  const Device gpu = Device::cuda();
  std::vector<bfloat16> tile_values;
  for (uint16_t bits : tile) tile_values.push_back(bfloat16::from_bits(bits));
  Tensor tile_gpu = from_vector(tile_values, {32, 32}, gpu);
  Tensor c_gpu = from_vector(c, {32, 4}, gpu);
  const TensorOptions ints = TensorOptions(kInt32).device(gpu);
  Tensor ldm = zeros({2, 32, 4}, ints), ldmt = zeros({2, 32, 4}, ints);
  Tensor mma = zeros({2, 32, 4}, TensorOptions(kFloat32).device(gpu));
  kernels::cuda::MmaPtxProbeBuffers buffers;
  buffers.tile = static_cast<const uint16_t*>(tile_gpu.data_ptr());
  buffers.c = c_gpu.data<float>();
  buffers.ldmatrix = static_cast<uint32_t*>(ldm.data_ptr());
  buffers.ldmatrix_trans = static_cast<uint32_t*>(ldmt.data_ptr());
  buffers.mma = mma.data<float>();
  kernels::cuda::run_mma_ptx_probe(buffers);
  auto as_u32 = [](const Tensor& t) {
    std::vector<uint32_t> out;
    for (int32_t v : t.to(Device::cpu()).to_vector<int32_t>()) out.push_back(static_cast<uint32_t>(v));
    return out;
  };
  return {as_u32(ldm), as_u32(ldmt), mma.to(Device::cpu()).to_vector<float>()};
}

TEST(CudaMmaPtx, PtxAndReferenceMatchTheDocumentedLayouts) {
  BRIGADE_REQUIRE_CUDA();
  std::mt19937 rng(11);
  std::normal_distribution<float> nd;
  for (int trial = 0; trial < 3; ++trial) {
    std::vector<uint16_t> tile(32 * 32);
    for (auto& bits : tile) bits = bfloat16(nd(rng)).bits;
    std::vector<float> c(32 * 4);
    for (auto& v : c) v = nd(rng);
    const ProbeResult r = run_probe(tile, c);

    // ldmatrix: bit-exact, both paths, every lane and register.
    for (int path = 0; path < 2; ++path) {
      for (int lane = 0; lane < 32; ++lane) {
        for (int q = 0; q < 4; ++q) {
          const int i = path * 128 + lane * 4 + q;
          EXPECT_EQ(r.ldmatrix[i], expected_ldmatrix(tile, false, lane, q))
              << (path == 0 ? "ptx" : "reference") << " ldmatrix lane " << lane << " reg " << q;
          EXPECT_EQ(r.ldmatrix_trans[i], expected_ldmatrix(tile, true, lane, q))
              << (path == 0 ? "ptx" : "reference") << " ldmatrix.trans lane " << lane << " reg " << q;
        }
      }
    }
    // mma: the probe feeds both paths A = the reference ldmatrix registers, B = registers 0, 1 of the
    // reference ldmatrix.trans. The oracle sums in double; the hardware and the reference in float (the
    // hardware's order is unspecified): |d - ref| <= 1e-5 * (|C| + sum |A B|) + 1e-6, about 16 float ulps
    // of the largest term for 16 products.
    std::vector<uint32_t> a(r.ldmatrix.begin() + 128, r.ldmatrix.end());
    std::vector<uint32_t> b(32 * 2);
    for (int lane = 0; lane < 32; ++lane) {
      b[lane * 2] = r.ldmatrix_trans[128 + lane * 4];
      b[lane * 2 + 1] = r.ldmatrix_trans[128 + lane * 4 + 1];
    }
    const std::vector<float> want = expected_mma(a, b, c);
    // Magnitudes for the bound: the same product with |A|, |B| and |C|.
    auto abs_bits = [](std::vector<uint32_t> regs) {
      for (auto& x : regs) x &= 0x7fff7fffu;
      return regs;
    };
    std::vector<float> abs_c(c);
    for (auto& v : abs_c) v = std::fabs(v);
    const std::vector<float> magnitude = expected_mma(abs_bits(a), abs_bits(b), abs_c);
    for (int path = 0; path < 2; ++path) {
      for (int i = 0; i < 128; ++i) {
        EXPECT_NEAR(r.mma[path * 128 + i], want[i], 1e-5 * magnitude[i] + 1e-6)
            << (path == 0 ? "ptx" : "reference") << " mma lane " << i / 4 << " element " << i % 4;
      }
    }
  }
}
#endif

// Runs without a GPU: the oracle itself on a case worked by hand. Lane 5 is (g 1, t 1); its plain register
// 0 is matrix 0's row 1, columns 2 and 3, i.e. tile[probe_row(1)][probe_col(1) + 2 ..].
TEST(CudaMmaPtx, OracleReadsTheDocumentedLayout) {
  std::vector<uint16_t> tile(32 * 32);
  for (int i = 0; i < 32 * 32; ++i) tile[i] = static_cast<uint16_t>(i);
  const int row = kernels::cuda::probe_row(1), col = kernels::cuda::probe_col(1);
  EXPECT_EQ(expected_ldmatrix(tile, false, 5, 0),
            static_cast<uint32_t>(row * 32 + col + 2) | (static_cast<uint32_t>(row * 32 + col + 3) << 16));
  // .trans: lane 5 gets column g = 1 of rows 2t = 2 and 3 of matrix 0.
  const int r2 = kernels::cuda::probe_row(2), c2 = kernels::cuda::probe_col(2);
  const int r3 = kernels::cuda::probe_row(3), c3 = kernels::cuda::probe_col(3);
  EXPECT_EQ(expected_ldmatrix(tile, true, 5, 0),
            static_cast<uint32_t>(r2 * 32 + c2 + 1) | (static_cast<uint32_t>(r3 * 32 + c3 + 1) << 16));
  // mma with A = identity (a0, a3 hold the diagonal), B[k][n] = k + 1, C = 0: D[m][n] = m + 1.
  std::vector<uint32_t> a(32 * 4, 0), b(32 * 2);
  const uint32_t one = bfloat16(1.0f).bits;
  for (int lane = 0; lane < 32; ++lane) {
    const int g = lane / 4, t = lane % 4;
    // a0 = A[g][2t..2t+1], a3 = A[g+8][2t+8..2t+9]: the diagonal element is where 2t + h == g.
    for (int h = 0; h < 2; ++h) {
      if (2 * t + h == g) {
        a[lane * 4 + 0] |= one << (16 * h);
        a[lane * 4 + 3] |= one << (16 * h);
      }
    }
    b[lane * 2] = bfloat16(2.0f * t + 1).bits | (static_cast<uint32_t>(bfloat16(2.0f * t + 2).bits) << 16);
    b[lane * 2 + 1] =
        bfloat16(2.0f * t + 9).bits | (static_cast<uint32_t>(bfloat16(2.0f * t + 10).bits) << 16);
  }
  const std::vector<float> d = expected_mma(a, b, std::vector<float>(32 * 4, 0.0f));
  for (int lane = 0; lane < 32; ++lane) {
    const int g = lane / 4;
    EXPECT_EQ(d[lane * 4 + 0], g + 1.0f) << lane;
    EXPECT_EQ(d[lane * 4 + 1], g + 1.0f) << lane;
    EXPECT_EQ(d[lane * 4 + 2], g + 9.0f) << lane;
    EXPECT_EQ(d[lane * 4 + 3], g + 9.0f) << lane;
  }
}

}  // namespace
}  // namespace brigade
