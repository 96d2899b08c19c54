// kernels::causal_attention on CUDA against the CPU backend (the reference), forward and backward, float32
// and bfloat16, odd T and D, contiguous and head-split (strided) inputs. Skips without a GPU.
//
// Tolerances: float32 rtol 1e-4, atol 1e-5 (both sum the same products in float, in other orders);
// bfloat16: both backends compute in float32 from the same bf16 inputs and round the outputs once, so
// they differ by at most a bf16 rounding step or two: rtol 2e-2, atol 4e-3 (values are O(1)). lse is
// float32 for both dtypes: rtol 1e-5, atol 1e-5.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "kernels/kernels.h"
#include "test_support.h"

namespace brigade {
namespace {

using testing::allclose;

struct Case {
  int64_t B, H, T, D;
  DType dtype;
};

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  const Case& c = info.param;
  return std::string(dtype_name(c.dtype)) + "_B" + std::to_string(c.B) + "_H" + std::to_string(c.H) + "_T" +
         std::to_string(c.T) + "_D" + std::to_string(c.D);
}

Tensor random(const Shape& shape, DType dtype, uint64_t seed) {
  Generator gen(seed);
  return randn(shape, kFloat32, &gen).to(dtype);
}

class CudaCausalAttentionTest : public ::testing::TestWithParam<Case> {};

TEST_P(CudaCausalAttentionTest, MatchesTheCpuBackend) {
  BRIGADE_REQUIRE_CUDA();
  const Case c = GetParam();
  const Shape shape{c.B, c.H, c.T, c.D};
  const Tensor q = random(shape, c.dtype, 1), k = random(shape, c.dtype, 2), v = random(shape, c.dtype, 3);
  const Tensor dout = random(shape, c.dtype, 4);
  const double scale = 1.0 / std::sqrt(static_cast<double>(c.D));
  const double rtol = c.dtype == kBFloat16 ? 2e-2 : 1e-4, atol = c.dtype == kBFloat16 ? 4e-3 : 1e-5;

  kernels::AttentionOutput cpu = kernels::causal_attention(q, k, v, scale);
  kernels::AttentionGrads cpu_g = kernels::causal_attention_backward(dout, q, k, v, cpu.out, cpu.lse, scale);
  const Device gpu = Device::cuda(0);
  const Tensor qg = q.to(gpu), kg = k.to(gpu), vg = v.to(gpu), dg = dout.to(gpu);
  kernels::AttentionOutput cuda = kernels::causal_attention(qg, kg, vg, scale);
  ASSERT_TRUE(cuda.out.device().is_cuda());
  EXPECT_TRUE(allclose(cuda.out.cpu(), cpu.out, rtol, atol)) << "out";
  EXPECT_TRUE(allclose(cuda.lse.cpu(), cpu.lse, 1e-5, 1e-5)) << "lse";
  // Backward from the same forward results (the CPU ones, moved), so that only the backward differs.
  kernels::AttentionGrads cuda_g =
      kernels::causal_attention_backward(dg, qg, kg, vg, cpu.out.to(gpu), cpu.lse.to(gpu), scale);
  EXPECT_TRUE(allclose(cuda_g.dq.cpu(), cpu_g.dq, rtol, atol)) << "dq";
  EXPECT_TRUE(allclose(cuda_g.dk.cpu(), cpu_g.dk, rtol, atol)) << "dk";
  EXPECT_TRUE(allclose(cuda_g.dv.cpu(), cpu_g.dv, rtol, atol)) << "dv";
}

INSTANTIATE_TEST_SUITE_P(Shapes, CudaCausalAttentionTest,
                         ::testing::Values(Case{1, 1, 1, 1, kFloat32}, Case{2, 3, 7, 5, kFloat32},
                                           Case{2, 4, 13, 16, kFloat32}, Case{1, 2, 129, 64, kFloat32},
                                           Case{1, 2, 200, 128, kFloat32}, Case{2, 3, 7, 5, kBFloat16},
                                           Case{1, 2, 129, 64, kBFloat16}, Case{1, 1, 200, 128, kBFloat16}),
                         case_name);

TEST(CudaCausalAttention, StridedHeadViewsMatchTheCpuBackend) {
  BRIGADE_REQUIRE_CUDA();
  const int64_t B = 2, T = 37, H = 3, D = 24;
  const Tensor qkv = random({B, T, 3, H, D}, kFloat32, 5);
  auto split = [&](const Tensor& packed, int64_t i) { return packed.permute({2, 0, 3, 1, 4}).select(0, i); };
  const Tensor qkv_gpu = qkv.to(Device::cuda(0));
  kernels::AttentionOutput cpu = kernels::causal_attention(split(qkv, 0), split(qkv, 1), split(qkv, 2), 0.25);
  kernels::AttentionOutput cuda =
      kernels::causal_attention(split(qkv_gpu, 0), split(qkv_gpu, 1), split(qkv_gpu, 2), 0.25);
  EXPECT_TRUE(allclose(cuda.out.cpu(), cpu.out, 1e-4, 1e-5));
  EXPECT_TRUE(allclose(cuda.lse.cpu(), cpu.lse, 1e-5, 1e-5));
}

}  // namespace
}  // namespace brigade
