// Every CUDA row-kernel version (kernels/softmax_versions.h, kernels/layernorm_versions.h: v1 block per row,
// v2 warp per row) against the CPU backend: softmax and log-softmax forward and backward, layernorm forward
// and backward with and without affine parameters; float32, bfloat16, float64; C around the warp's 32 lanes
// and the template steps of v2 (1, 5, 32, 33, 100, 768, 1024) and past v2's limit (1500: falls back to v1);
// R = 3 and 257. Rows with -inf entries (masked scores) are included. Skips without a GPU, except the
// host-side table test.
//
// Tolerances (the same math in float, or double for float64, summed in other orders): float32 rtol 1e-5,
// atol 1e-6; float64 1e-12, 1e-14; bfloat16 outputs are rounded once from float by both backends: rtol
// 1e-2, atol 1e-3 (a bf16 step). mean and rstd: float32 statistics for float32 and bfloat16, rtol 1e-5.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "kernels/kernels.h"
#include "kernels/layernorm_versions.h"
#include "kernels/softmax_versions.h"
#include "test_support.h"

namespace brigade {
namespace {

#if BRIGADE_WITH_CUDA
using kernels::LayerNormKernel;
using kernels::SoftmaxKernel;
using testing::allclose;

/// A CUDA row-kernel version: softmax's and layernorm's share their mechanism and numbering (v1 one block per
/// row, v2 one warp per row; kernels/softmax_versions.h, kernels/layernorm_versions.h).
struct RowKernel {
  SoftmaxKernel softmax;
  LayerNormKernel layernorm;
};

const std::vector<RowKernel>& all_row_kernels() {
  static const std::vector<RowKernel> kernels = {
      {SoftmaxKernel::CudaBlockPerRow, LayerNormKernel::CudaBlockPerRow},
      {SoftmaxKernel::CudaWarpPerRow, LayerNormKernel::CudaWarpPerRow}};
  return kernels;
}

const char* row_kernel_name(const RowKernel& kernel) {
  return kernels::softmax_kernel_name(kernel.softmax);
}

bool row_kernel_supports(const RowKernel& kernel, int64_t cols) {
  return kernels::softmax_kernel_supports(kernel.softmax, cols);
}

struct Tolerance {
  double rtol, atol;
};

Tolerance tolerance(DType dtype) {
  if (dtype == kBFloat16) return {1e-2, 1e-3};
  if (dtype == kFloat64) return {1e-12, 1e-14};
  return {1e-5, 1e-6};
}

/// A [R, C] random matrix; with `masked`, every third element of each row is -inf (never the first).
Tensor random_rows(int64_t R, int64_t C, DType dtype, uint64_t seed, bool masked) {
  Generator gen(seed);
  Tensor x = randn({R, C}, kFloat64, &gen);
  if (masked) {
    auto values = x.to_vector<double>();
    for (int64_t i = 0; i < R; ++i) {
      for (int64_t j = 1; j < C; j += 3) values[i * C + j] = -INFINITY;
    }
    x = from_vector(values, {R, C});
  }
  return x.to(dtype);
}

/// One case of the sweep: a version, a dtype, a shape and one on/off variant (log, affine).
struct RowCase {
  RowKernel kernel;
  DType dtype;
  int64_t R, C;
  bool variant;
  std::string what;  // for failure messages
};

/// Calls f(RowCase) for every version x dtype x C x R x variant; `variant_name` labels the variant.
template <typename F>
void for_each_row_case(const std::string& variant_name, F&& f) {
  for (RowKernel kernel : all_row_kernels()) {
    for (DType dtype : {kFloat32, kBFloat16, kFloat64}) {
      for (int64_t C : {1, 5, 32, 33, 100, 768, 1024, 1500}) {
        for (int64_t R : {3, 257}) {
          for (bool variant : {false, true}) {
            const std::string what = std::string(row_kernel_name(kernel)) + " " + dtype_name(dtype) + " R" +
                                     std::to_string(R) + " C" + std::to_string(C) +
                                     (variant ? " " + variant_name : "") +
                                     (row_kernel_supports(kernel, C) ? "" : " (falls back to v1)");
            f(RowCase{kernel, dtype, R, C, variant, what});
          }
        }
      }
    }
  }
}

// Host code only: runs without a GPU.
TEST(CudaRowKernels, ListAndSupportTable) {
  ASSERT_EQ(all_row_kernels().size(), 2u);
  EXPECT_EQ(std::string(row_kernel_name(all_row_kernels()[1])), "v2-warp-per-row");
  EXPECT_EQ(std::string(kernels::layernorm_kernel_name(all_row_kernels()[1].layernorm)), "v2-warp-per-row");
  EXPECT_TRUE(kernels::softmax_kernel_supports(SoftmaxKernel::CudaWarpPerRow, 1));
  EXPECT_TRUE(kernels::softmax_kernel_supports(SoftmaxKernel::CudaWarpPerRow, 1024));
  EXPECT_FALSE(kernels::softmax_kernel_supports(SoftmaxKernel::CudaWarpPerRow, 1025));
  EXPECT_TRUE(kernels::softmax_kernel_supports(SoftmaxKernel::CudaBlockPerRow, 50304));
  EXPECT_TRUE(kernels::layernorm_kernel_supports(LayerNormKernel::CudaWarpPerRow, 1024));
  EXPECT_FALSE(kernels::layernorm_kernel_supports(LayerNormKernel::CudaWarpPerRow, 1025));
  EXPECT_TRUE(kernels::layernorm_kernel_supports(LayerNormKernel::CudaBlockPerRow, 50304));
}

TEST(CudaRowKernels, SoftmaxForwardAndBackwardMatchTheCpuBackend) {
  BRIGADE_REQUIRE_CUDA();
  const Device gpu = Device::cuda();
  uint64_t seed = 1;
  for_each_row_case("log", [&](const RowCase& c) {
    const bool log = c.variant;
    const Tolerance tol = tolerance(c.dtype);
    const Tensor x = random_rows(c.R, c.C, c.dtype, seed++, /*masked=*/c.C > 2);
    const Tensor y_cpu = log ? kernels::log_softmax(x) : kernels::softmax(x);
    Tensor y = empty({c.R, c.C}, TensorOptions().dtype(c.dtype).device(gpu));
    kernels::softmax_rows_with(c.kernel.softmax, x.to(gpu), y, log);
    EXPECT_TRUE(allclose(y.cpu(), y_cpu, tol.rtol, tol.atol)) << c.what << " forward";

    const Tensor dy = random_rows(c.R, c.C, c.dtype, seed++, false);
    const Tensor dx_cpu =
        log ? kernels::log_softmax_backward(dy, y_cpu) : kernels::softmax_backward(dy, y_cpu);
    Tensor dx = empty({c.R, c.C}, TensorOptions().dtype(c.dtype).device(gpu));
    kernels::softmax_backward_rows_with(c.kernel.softmax, dy.to(gpu), y_cpu.to(gpu), dx, log);
    EXPECT_TRUE(allclose(dx.cpu(), dx_cpu, tol.rtol, tol.atol)) << c.what << " backward";
  });
}

TEST(CudaRowKernels, LayerNormForwardMatchesTheCpuBackend) {
  BRIGADE_REQUIRE_CUDA();
  const Device gpu = Device::cuda();
  uint64_t seed = 100;
  for_each_row_case("affine", [&](const RowCase& c) {
    const bool affine = c.variant;
    const Tolerance tol = tolerance(c.dtype);
    const DType stat_dtype = c.dtype == kFloat64 ? kFloat64 : kFloat32;
    const Tensor x = random_rows(c.R, c.C, c.dtype, seed++, false);
    const Tensor w = affine ? random_rows(1, c.C, c.dtype, seed++, false).reshape({c.C}) : Tensor();
    const Tensor b = affine ? random_rows(1, c.C, c.dtype, seed++, false).reshape({c.C}) : Tensor();
    const kernels::LayerNormOutput cpu = kernels::layernorm(x, w, b, 1e-5);
    Tensor y = empty({c.R, c.C}, TensorOptions().dtype(c.dtype).device(gpu));
    Tensor mean = empty({c.R}, TensorOptions(stat_dtype).device(gpu));
    Tensor rstd = empty({c.R}, TensorOptions(stat_dtype).device(gpu));
    kernels::layernorm_forward_with(c.kernel.layernorm, x.to(gpu), affine ? w.to(gpu) : Tensor(),
                                    affine ? b.to(gpu) : Tensor(), 1e-5, y, mean, rstd);
    EXPECT_TRUE(allclose(y.cpu(), cpu.y, tol.rtol, tol.atol)) << c.what << " y";
    const double stat_rtol = c.dtype == kFloat64 ? 1e-12 : 1e-5;
    EXPECT_TRUE(allclose(mean.cpu(), cpu.mean, stat_rtol, 1e-6)) << c.what << " mean";
    EXPECT_TRUE(allclose(rstd.cpu(), cpu.rstd, stat_rtol, 1e-6)) << c.what << " rstd";
  });
}

// dx against the CPU backend with the tolerances above; dweight and dbias (sums over R rows, in float for
// float32 and bfloat16) with atol 1e-4 for float32 (257 products of O(1) terms, summed in other orders).
TEST(CudaRowKernels, LayerNormBackwardMatchesTheCpuBackend) {
  BRIGADE_REQUIRE_CUDA();
  const Device gpu = Device::cuda();
  uint64_t seed = 300;
  for_each_row_case("affine", [&](const RowCase& c) {
    const bool affine = c.variant;
    const Tolerance tol = tolerance(c.dtype);
    const double param_atol = c.dtype == kFloat64 ? 1e-12 : (c.dtype == kBFloat16 ? 1e-2 : 1e-4);
    const DType stat_dtype = c.dtype == kFloat64 ? kFloat64 : kFloat32;
    const Tensor x = random_rows(c.R, c.C, c.dtype, seed++, false);
    const Tensor dy = random_rows(c.R, c.C, c.dtype, seed++, false);
    const Tensor w = affine ? random_rows(1, c.C, c.dtype, seed++, false).reshape({c.C}) : Tensor();
    const kernels::LayerNormOutput fwd = kernels::layernorm(x, w, Tensor(), 1e-5);
    const kernels::LayerNormGrads cpu =
        kernels::layernorm_backward(dy, x, w, fwd.mean, fwd.rstd, /*has_bias=*/true);
    Tensor dx = empty({c.R, c.C}, TensorOptions().dtype(c.dtype).device(gpu));
    Tensor dweight = affine ? empty({c.C}, TensorOptions(stat_dtype).device(gpu)) : Tensor();
    Tensor dbias = empty({c.C}, TensorOptions(stat_dtype).device(gpu));
    kernels::layernorm_backward_with(c.kernel.layernorm, dy.to(gpu), x.to(gpu), affine ? w.to(gpu) : Tensor(),
                                     fwd.mean.to(gpu), fwd.rstd.to(gpu), dx, dweight, dbias);
    EXPECT_TRUE(allclose(dx.cpu(), cpu.dx, tol.rtol, tol.atol)) << c.what << " dx";
    EXPECT_TRUE(allclose(dbias.cpu(), cpu.dbias, tol.rtol, param_atol)) << c.what << " dbias";
    if (affine) {
      EXPECT_TRUE(allclose(dweight.cpu(), cpu.dweight, tol.rtol, param_atol)) << c.what << " dweight";
    }
  });
}

#else
TEST(CudaRowKernels, NeedsACudaBuild) {
  GTEST_SKIP() << "brigade was built without CUDA: the per-version row kernels do not exist";
}
#endif

}  // namespace
}  // namespace brigade
