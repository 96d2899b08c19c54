// The CUDA causal-attention versions (kernels/attention_versions.h: v1 simple, v2 flash, v3 flash-tc, v4
// flash-tc-async) beyond their values: the support table (host code, runs without a GPU), and v2-v4 run twice
// for identical bits, v3 and v4 against each other for identical bits (skips without a GPU). Every version's
// values (forward and backward, float32 and bfloat16, head dims 24, 64, 128, T around the 64- and 32-row
// tiles, contiguous and head-split inputs; v3 and v4 run themselves only in bfloat16, float32 falls back to
// v1) are checked by the op table's versions axis (tests/ops/op_cases_attention.h, cuda_op_table_test.cpp)
// against kernels/reference, with the tolerances this file had (there: the tensor-core gradients' 1e-2).
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

/// out, lse, dq, dk, dv of one forward and one backward by `kernel` (the backward from the CPU forward's out
/// and lse), as floats (bf16 -> float is exact).
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
