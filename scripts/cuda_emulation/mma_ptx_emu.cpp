// CPU emulation of the probe of kernels/cuda/mma_ptx_probe.cu: the *reference* paths of ldmatrix_x4,
// ldmatrix_x4_trans and mma_bf16_16816 (kernels/cuda/mma_ptx.cuh, what the emulator runs in place of the
// PTX) against the fragment layouts as the PTX ISA documents them (expected_* in mma_ptx_probe.h).
// ldmatrix bit-exact; mma within 1e-5 of sum |C| + |A B| (float vs the oracle's double). The same
// comparison for the PTX paths runs on a GPU in tests/kernels/cuda_mma_ptx_test.cpp. Built and run by run.sh.
#include <cuda_runtime.h>

#include "stubs.h"
#include "tensor/cuda/cuda_check.h"
#include GEN_FILE
#include <cmath>
#include <cstdio>
#include <random>

#include "tensor/bfloat16.h"

namespace brigade::kernels::cuda {
int device_of_pointer(const void*) {
  return 0;
}
}  // namespace brigade::kernels::cuda

using namespace brigade;
using namespace brigade::kernels::cuda;

int main() {
  std::mt19937 rng(11);
  std::normal_distribution<float> nd;
  int failures = 0;
  for (int trial = 0; trial < 3; ++trial) {
    std::vector<uint16_t> tile(32 * 32);
    for (auto& bits : tile) bits = bfloat16(nd(rng)).bits;
    std::vector<float> c(128);
    for (auto& v : c) v = nd(rng);
    std::vector<uint32_t> ldm(256, 0), ldmt(256, 0);
    std::vector<float> mma(256, 0.0f);
    MmaPtxProbeBuffers buffers;
    buffers.tile = tile.data(), buffers.c = c.data();
    buffers.ldmatrix = ldm.data(), buffers.ldmatrix_trans = ldmt.data(), buffers.mma = mma.data();
    run_mma_ptx_probe(buffers);
    for (int lane = 0; lane < 32; ++lane) {
      for (int q = 0; q < 4; ++q) {
        failures += ldm[128 + lane * 4 + q] != expected_ldmatrix(tile, false, lane, q);
        failures += ldmt[128 + lane * 4 + q] != expected_ldmatrix(tile, true, lane, q);
      }
    }
    std::vector<uint32_t> a(ldm.begin() + 128, ldm.end()), b(64), abs_a(a), abs_b(64);
    for (int lane = 0; lane < 32; ++lane) {
      b[lane * 2] = ldmt[128 + lane * 4], b[lane * 2 + 1] = ldmt[128 + lane * 4 + 1];
    }
    for (auto& x : abs_a) x &= 0x7fff7fffu;
    for (int i = 0; i < 64; ++i) abs_b[i] = b[i] & 0x7fff7fffu;
    std::vector<float> abs_c(c);
    for (auto& v : abs_c) v = std::fabs(v);
    const std::vector<float> want = expected_mma(a, b, c), mag = expected_mma(abs_a, abs_b, abs_c);
    double worst = 0;
    for (int i = 0; i < 128; ++i)
      worst = std::max(worst, std::fabs(mma[128 + i] - want[i]) / (mag[i] + 1e-30));
    if (!(worst <= 1e-5)) {
      ++failures;
      std::printf("  mma reference: worst relative error %.3g FAIL\n", worst);
    }
  }
  std::printf("mma_ptx reference paths vs the documented layouts: %d failures\n", failures);
  return failures != 0;
}
