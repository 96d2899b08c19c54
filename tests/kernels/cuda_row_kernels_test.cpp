// The CUDA row-kernel versions' support table (kernels/softmax_versions.h, kernels/layernorm_versions.h: v1
// block per row, v2 warp per row, which holds rows of up to kMaxWarpRowCols in registers). Host code only:
// runs without a GPU. Every version's values (softmax and log-softmax forward and backward, layernorm
// forward and backward with and without affine parameters; float32, bfloat16, float64; C around the warp's
// 32 lanes and v2's register steps, and past v2's limit; R 3 and 257; rows with -inf entries) are checked by
// the op table's versions axis (tests/ops/op_cases_rows.h, cuda_op_table_test.cpp) against kernels/reference.
#include <gtest/gtest.h>

#include <string>

#include "kernels/layernorm_versions.h"
#include "kernels/softmax_versions.h"

namespace brigade {
namespace {

#if BRIGADE_WITH_CUDA
using kernels::LayerNormKernel;
using kernels::SoftmaxKernel;

TEST(CudaRowKernels, ListAndSupportTable) {
  EXPECT_EQ(std::string(kernels::softmax_kernel_name(SoftmaxKernel::CudaWarpPerRow)), "v2-warp-per-row");
  EXPECT_EQ(std::string(kernels::layernorm_kernel_name(LayerNormKernel::CudaWarpPerRow)), "v2-warp-per-row");
  EXPECT_TRUE(kernels::softmax_kernel_supports(SoftmaxKernel::CudaWarpPerRow, 1));
  EXPECT_TRUE(kernels::softmax_kernel_supports(SoftmaxKernel::CudaWarpPerRow, 1024));
  EXPECT_FALSE(kernels::softmax_kernel_supports(SoftmaxKernel::CudaWarpPerRow, 1025));
  EXPECT_TRUE(kernels::softmax_kernel_supports(SoftmaxKernel::CudaBlockPerRow, 50304));
  EXPECT_TRUE(kernels::layernorm_kernel_supports(LayerNormKernel::CudaWarpPerRow, 1024));
  EXPECT_FALSE(kernels::layernorm_kernel_supports(LayerNormKernel::CudaWarpPerRow, 1025));
  EXPECT_TRUE(kernels::layernorm_kernel_supports(LayerNormKernel::CudaBlockPerRow, 50304));
}
#else
TEST(CudaRowKernels, NeedsACudaBuild) {
  GTEST_SKIP() << "brigade was built without CUDA: the per-version row kernels do not exist";
}
#endif

}  // namespace
}  // namespace brigade
