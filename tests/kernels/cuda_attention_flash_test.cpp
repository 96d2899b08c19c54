// Every CUDA causal-attention version (kernels/attention_versions.h: v1 simple, v2 flash, v3 flash-tc,
// v4 flash-tc-async) against the CPU backend (the reference), forward and backward, float32 and bfloat16,
// head dims 64 and 128 (flash's own) and 24 (flash falls back to v1), T around the 64- and 32-row tiles (1,
// 37, 64, 65, 130, 200), contiguous and head-split (strided) inputs. v3 and v4 run themselves only in
// bfloat16 (float32 falls back to v1). Then v2-v4 run twice for identical bits, and v3 and v4 against each
// other for identical bits. Skips without a GPU, except the host-side table test.
//
// Tolerances as in cuda_attention_test.cpp: float32 rtol 1e-4, atol 1e-5 (the same float products summed
// in other orders); bfloat16 rtol 2e-2, atol 4e-3 (both compute in float from the same bf16 inputs and round
// once: a bf16 step or two apart); lse (float32 for both dtypes) rtol 1e-5, atol 1e-5.
// v3's and v4's gradients: atol 1e-2. They round P and dS to bf16 before their tensor-core products
// (relative error up to 2^-9 per term), and dS = P (dP - delta) carries dP = dout.v of size ~sqrt(D) for
// unit inputs: in the CPU emulation (scripts/cuda_emulation/flash_tc_emu.cpp) the gradients reach 1.5x the
// 4e-3 bound and 0.6x this one, while they agree to one bf16 step with a double loop that rounds P and dS
// the same way.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "kernels/attention_versions.h"
#include "kernels/kernels.h"
#include "test_support.h"

namespace brigade {
namespace {

#if BRIGADE_WITH_CUDA
using kernels::attention_kernel_name;
using kernels::attention_kernel_supports;
using kernels::AttentionKernel;
using testing::allclose;

/// The CUDA versions of all_attention_kernels(), v1 first.
std::vector<AttentionKernel> cuda_attention_kernels() {
  std::vector<AttentionKernel> list;
  for (AttentionKernel kernel : kernels::all_attention_kernels()) {
    if (kernels::attention_kernel_backend(kernel) == DeviceKind::CUDA) list.push_back(kernel);
  }
  return list;
}

Tensor random(const Shape& shape, DType dtype, uint64_t seed) {
  Generator gen(seed);
  return randn(shape, kFloat32, &gen).to(dtype);
}

// Host code only: runs without a GPU.
TEST(CudaAttentionKernels, ListAndSupportTable) {
  const std::vector<AttentionKernel> list = cuda_attention_kernels();
  ASSERT_EQ(list.size(), 4u);
  EXPECT_EQ(std::string(attention_kernel_name(list[0])), "v1-simple");
  EXPECT_EQ(std::string(attention_kernel_name(list[1])), "v2-flash");
  EXPECT_EQ(std::string(attention_kernel_name(list[2])), "v3-flash-tc");
  EXPECT_EQ(std::string(attention_kernel_name(list[3])), "v4-flash-tc-async");
  EXPECT_TRUE(attention_kernel_supports(AttentionKernel::CudaFlashTensorCoreAsync, kBFloat16, 128));
  EXPECT_FALSE(attention_kernel_supports(AttentionKernel::CudaFlashTensorCoreAsync, kFloat32, 128));
  EXPECT_TRUE(attention_kernel_supports(AttentionKernel::CudaFlashTensorCore, kBFloat16, 64));
  EXPECT_TRUE(attention_kernel_supports(AttentionKernel::CudaFlashTensorCore, kBFloat16, 128));
  EXPECT_FALSE(attention_kernel_supports(AttentionKernel::CudaFlashTensorCore, kFloat32, 64));
  EXPECT_FALSE(attention_kernel_supports(AttentionKernel::CudaFlashTensorCore, kBFloat16, 24));
  EXPECT_TRUE(attention_kernel_supports(AttentionKernel::CudaFlash, kFloat32, 64));
  EXPECT_TRUE(attention_kernel_supports(AttentionKernel::CudaFlash, kBFloat16, 128));
  EXPECT_FALSE(attention_kernel_supports(AttentionKernel::CudaFlash, kFloat32, 24));
  EXPECT_FALSE(attention_kernel_supports(AttentionKernel::CudaFlash, kFloat64, 64));
  EXPECT_TRUE(attention_kernel_supports(AttentionKernel::CudaSimple, kFloat64, 24));
}

struct Case {
  int64_t B, H, T, D;
};

/// Runs `kernel` forward and backward on the GPU copies of q, k, v, dout and compares with the CPU backend.
void expect_matches_cpu(AttentionKernel kernel, const Tensor& q, const Tensor& k, const Tensor& v,
                        const Tensor& dout, const Tensor& q_gpu, const Tensor& k_gpu, const Tensor& v_gpu,
                        const std::string& what) {
  const DType dtype = q.dtype();
  const int64_t B = q.size(0), H = q.size(1), T = q.size(2), D = q.size(3);
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  const double rtol = dtype == kBFloat16 ? 2e-2 : 1e-4, atol = dtype == kBFloat16 ? 4e-3 : 1e-5;
  const bool tensor_cores = (kernel == AttentionKernel::CudaFlashTensorCore ||
                             kernel == AttentionKernel::CudaFlashTensorCoreAsync) &&
                            attention_kernel_supports(kernel, dtype, D);
  const double grad_atol = tensor_cores ? 1e-2 : atol;
  const Device gpu = q_gpu.device();
  const TensorOptions options = TensorOptions().dtype(dtype).device(gpu);

  kernels::AttentionOutput cpu = kernels::causal_attention(q, k, v, scale);
  kernels::AttentionGrads cpu_g = kernels::causal_attention_backward(dout, q, k, v, cpu.out, cpu.lse, scale);

  Tensor out = empty({B, H, T, D}, options);
  Tensor lse = empty({B, H, T}, TensorOptions(kFloat32).device(gpu));
  kernels::causal_attention_forward_with(kernel, q_gpu, k_gpu, v_gpu, scale, out, lse);
  EXPECT_TRUE(allclose(out.cpu(), cpu.out, rtol, atol)) << what << " out";
  EXPECT_TRUE(allclose(lse.cpu(), cpu.lse, 1e-5, 1e-5)) << what << " lse";

  // Backward from the CPU forward results, so that only the backward differs.
  Tensor dq = empty({B, H, T, D}, options), dk = empty({B, H, T, D}, options),
         dv = empty({B, H, T, D}, options);
  kernels::causal_attention_backward_with(kernel, dout.to(gpu), q_gpu, k_gpu, v_gpu, cpu.out.to(gpu),
                                          cpu.lse.to(gpu), scale, dq, dk, dv);
  EXPECT_TRUE(allclose(dq.cpu(), cpu_g.dq, rtol, grad_atol)) << what << " dq";
  EXPECT_TRUE(allclose(dk.cpu(), cpu_g.dk, rtol, grad_atol)) << what << " dk";
  EXPECT_TRUE(allclose(dv.cpu(), cpu_g.dv, rtol, grad_atol)) << what << " dv";
}

TEST(CudaAttentionKernels, EveryKernelMatchesTheCpuBackend) {
  BRIGADE_REQUIRE_CUDA();
  const Device gpu = Device::cuda(0);
  const Case cases[] = {{1, 1, 1, 64},   {2, 3, 37, 64},   {1, 2, 64, 64}, {1, 2, 65, 128},
                        {1, 2, 130, 64}, {2, 1, 200, 128}, {1, 2, 70, 24}};
  uint64_t seed = 11;
  for (AttentionKernel kernel : cuda_attention_kernels()) {
    for (DType dtype : {kFloat32, kBFloat16}) {
      for (const Case& c : cases) {
        const Shape shape{c.B, c.H, c.T, c.D};
        const Tensor q = random(shape, dtype, seed++), k = random(shape, dtype, seed++);
        const Tensor v = random(shape, dtype, seed++), dout = random(shape, dtype, seed++);
        const std::string what = std::string(attention_kernel_name(kernel)) + " " + dtype_name(dtype) + " B" +
                                 std::to_string(c.B) + " H" + std::to_string(c.H) + " T" +
                                 std::to_string(c.T) + " D" + std::to_string(c.D) +
                                 (attention_kernel_supports(kernel, dtype, c.D) ? "" : " (falls back to v1)");
        expect_matches_cpu(kernel, q, k, v, dout, q.to(gpu), k.to(gpu), v.to(gpu), what);
      }
    }
  }
}

// q, k, v as views of one packed [B, T, 3, H, D] projection (what a fused qkv Linear gives): row strides
// 3 * H * D, head stride D, batch stride T * 3 * H * D. Each kernel in a dtype it runs itself (float32, or
// bfloat16 for v3 and v4), so that gpu_check.sh's racecheck of this test covers every version's shared
// memory.
TEST(CudaAttentionKernels, StridedHeadViewsMatchTheCpuBackend) {
  BRIGADE_REQUIRE_CUDA();
  const int64_t B = 2, T = 77, H = 3;
  for (AttentionKernel kernel : cuda_attention_kernels()) {
    for (int64_t D : {64, 128}) {
      const DType dtype = attention_kernel_supports(kernel, kFloat32, D) ? kFloat32 : kBFloat16;
      const Tensor qkv = random({B, T, 3, H, D}, dtype, 5 + D);
      auto split = [&](const Tensor& packed, int64_t i) {
        return packed.permute({2, 0, 3, 1, 4}).select(0, i);
      };
      const Tensor qkv_gpu = qkv.to(Device::cuda(0));
      const Tensor dout = random({B, H, T, D}, dtype, 6 + D);
      expect_matches_cpu(kernel, split(qkv, 0), split(qkv, 1), split(qkv, 2), dout, split(qkv_gpu, 0),
                         split(qkv_gpu, 1), split(qkv_gpu, 2),
                         std::string(attention_kernel_name(kernel)) + " " + dtype_name(dtype) + " strided D" +
                             std::to_string(D));
    }
  }
}

/// out, lse, dq, dk, dv of one forward and one backward by `kernel` (the backward from the CPU forward's out
/// and lse, as above), as floats (bf16 -> float is exact).
std::vector<std::vector<float>> run_once(AttentionKernel kernel, const Tensor& q, const Tensor& k,
                                         const Tensor& v, const Tensor& dout,
                                         const kernels::AttentionOutput& cpu) {
  const int64_t B = q.size(0), H = q.size(1), T = q.size(2), D = q.size(3);
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  const Device gpu = Device::cuda(0);
  const TensorOptions options = TensorOptions().dtype(q.dtype()).device(gpu);
  Tensor out = empty({B, H, T, D}, options), lse = empty({B, H, T}, TensorOptions(kFloat32).device(gpu));
  Tensor dq = empty({B, H, T, D}, options), dk = empty({B, H, T, D}, options),
         dv = empty({B, H, T, D}, options);
  const Tensor qg = q.to(gpu), kg = k.to(gpu), vg = v.to(gpu);
  kernels::causal_attention_forward_with(kernel, qg, kg, vg, scale, out, lse);
  kernels::causal_attention_backward_with(kernel, dout.to(gpu), qg, kg, vg, cpu.out.to(gpu), cpu.lse.to(gpu),
                                          scale, dq, dk, dv);
  std::vector<std::vector<float>> result;
  for (const Tensor& t : {out, lse, dq, dk, dv}) result.push_back(t.cpu().to_vector<float>());
  return result;
}

// Each output element has one writer that sums in a fixed order (no atomics), so a second run gives the same
// bits. v4 is v3 with its tiles prefetched by cp.async: same products in the same order, so v3 and v4 agree
// bit for bit too (a pipeline race would make them differ). Exact comparisons: no tolerance.
TEST(CudaAttentionKernels, FlashVersionsAreDeterministicAndV3MatchesV4) {
  BRIGADE_REQUIRE_CUDA();
  const char* names[] = {"out", "lse", "dq", "dk", "dv"};
  for (int64_t D : {64, 128}) {
    const Shape shape{2, 2, 200, D};
    const Tensor q = random(shape, kBFloat16, 40 + D), k = random(shape, kBFloat16, 41 + D);
    const Tensor v = random(shape, kBFloat16, 42 + D), dout = random(shape, kBFloat16, 43 + D);
    const kernels::AttentionOutput cpu = kernels::causal_attention(q, k, v, 1.0 / std::sqrt(double(D)));
    std::vector<std::vector<float>> v3;
    for (AttentionKernel kernel : {AttentionKernel::CudaFlash, AttentionKernel::CudaFlashTensorCore,
                                   AttentionKernel::CudaFlashTensorCoreAsync}) {
      const auto first = run_once(kernel, q, k, v, dout, cpu), second = run_once(kernel, q, k, v, dout, cpu);
      for (size_t i = 0; i < first.size(); ++i) {
        EXPECT_EQ(first[i], second[i])
            << attention_kernel_name(kernel) << " D" << D << " " << names[i] << " differs between two runs";
      }
      if (kernel == AttentionKernel::CudaFlashTensorCore) v3 = first;
      if (kernel == AttentionKernel::CudaFlashTensorCoreAsync) {
        for (size_t i = 0; i < first.size(); ++i) {
          EXPECT_EQ(first[i], v3[i]) << "v4-flash-tc-async vs v3-flash-tc D" << D << " " << names[i];
        }
      }
    }
  }
}
#else
TEST(CudaAttentionKernels, NeedsACudaBuild) {
  GTEST_SKIP() << "brigade was built without CUDA: the per-version attention kernels do not exist";
}
#endif

}  // namespace
}  // namespace brigade
