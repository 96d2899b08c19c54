// Every CUDA row-kernel version (kernels/cuda/row_kernels.h: v1 block per row, v2 warp per row) against the
// CPU backend: softmax and log-softmax forward and backward, layernorm forward and backward with and
// without affine parameters; float32, bfloat16, float64; C around the warp's 32 lanes and the template steps
// of v2 (1, 5, 32, 33, 100, 768, 1024) and past v2's limit (1500: falls back to v1); R = 3 and 257. Rows with
// -inf entries (masked scores) are included. Skips without a GPU, except the host-side table test.
//
// Tolerances (the same math in float, or double for float64, summed in other orders): float32 rtol 1e-5,
// atol 1e-6; float64 1e-12, 1e-14; bfloat16 outputs are rounded once from float by both backends: rtol
// 1e-2, atol 1e-3 (a bf16 step). mean and rstd: float32 statistics for float32 and bfloat16, rtol 1e-5.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "kernels/backend.h"
#include "kernels/kernels.h"
#include "test_support.h"
#if BRIGADE_WITH_CUDA
#include "kernels/cuda/row_kernels.h"
#endif

namespace brigade {
namespace {

#if BRIGADE_WITH_CUDA
using kernels::cuda::all_row_kernels;
using kernels::cuda::row_kernel_name;
using kernels::cuda::row_kernel_supports;
using kernels::cuda::RowKernel;
using testing::allclose;

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

// Host code only: runs without a GPU.
TEST(CudaRowKernels, ListAndSupportTable) {
  ASSERT_EQ(all_row_kernels().size(), 2u);
  EXPECT_EQ(std::string(row_kernel_name(all_row_kernels()[1])), "warp_per_row");
  EXPECT_TRUE(row_kernel_supports(RowKernel::WarpPerRow, 1));
  EXPECT_TRUE(row_kernel_supports(RowKernel::WarpPerRow, 1024));
  EXPECT_FALSE(row_kernel_supports(RowKernel::WarpPerRow, 1025));
  EXPECT_TRUE(row_kernel_supports(RowKernel::BlockPerRow, 50304));
}

TEST(CudaRowKernels, SoftmaxForwardAndBackwardMatchTheCpuBackend) {
  BRIGADE_REQUIRE_CUDA();
  const Device gpu = Device::cuda();
  uint64_t seed = 1;
  for (RowKernel kernel : all_row_kernels()) {
    for (DType dtype : {kFloat32, kBFloat16, kFloat64}) {
      const Tolerance tol = tolerance(dtype);
      for (int64_t C : {1, 5, 32, 33, 100, 768, 1024, 1500}) {
        for (int64_t R : {3, 257}) {
          for (bool log : {false, true}) {
            const std::string what = std::string(row_kernel_name(kernel)) + " " + dtype_name(dtype) + " R" +
                                     std::to_string(R) + " C" + std::to_string(C) + (log ? " log" : "") +
                                     (row_kernel_supports(kernel, C) ? "" : " (falls back to v1)");
            const Tensor x = random_rows(R, C, dtype, seed++, /*masked=*/C > 2);
            const Tensor y_cpu = log ? kernels::log_softmax(x) : kernels::softmax(x);
            Tensor y = empty({R, C}, TensorOptions().dtype(dtype).device(gpu));
            kernels::cuda::softmax_rows_with(kernel, x.to(gpu), y, log);
            EXPECT_TRUE(allclose(y.cpu(), y_cpu, tol.rtol, tol.atol)) << what << " forward";

            const Tensor dy = random_rows(R, C, dtype, seed++, false);
            const Tensor dx_cpu =
                log ? kernels::log_softmax_backward(dy, y_cpu) : kernels::softmax_backward(dy, y_cpu);
            Tensor dx = empty({R, C}, TensorOptions().dtype(dtype).device(gpu));
            kernels::cuda::softmax_backward_rows_with(kernel, dy.to(gpu), y_cpu.to(gpu), dx, log);
            EXPECT_TRUE(allclose(dx.cpu(), dx_cpu, tol.rtol, tol.atol)) << what << " backward";
          }
        }
      }
    }
  }
}

TEST(CudaRowKernels, LayerNormForwardMatchesTheCpuBackend) {
  BRIGADE_REQUIRE_CUDA();
  const Device gpu = Device::cuda();
  uint64_t seed = 100;
  for (RowKernel kernel : all_row_kernels()) {
    for (DType dtype : {kFloat32, kBFloat16, kFloat64}) {
      const Tolerance tol = tolerance(dtype);
      const DType stat_dtype = dtype == kFloat64 ? kFloat64 : kFloat32;
      for (int64_t C : {1, 5, 32, 33, 100, 768, 1024, 1500}) {
        for (int64_t R : {3, 257}) {
          for (bool affine : {false, true}) {
            const std::string what = std::string(row_kernel_name(kernel)) + " " + dtype_name(dtype) + " R" +
                                     std::to_string(R) + " C" + std::to_string(C) + (affine ? " affine" : "");
            const Tensor x = random_rows(R, C, dtype, seed++, false);
            const Tensor w = affine ? random_rows(1, C, dtype, seed++, false).reshape({C}) : Tensor();
            const Tensor b = affine ? random_rows(1, C, dtype, seed++, false).reshape({C}) : Tensor();
            const kernels::LayerNormOutput cpu = kernels::layernorm(x, w, b, 1e-5);
            const TensorOptions on_gpu = TensorOptions().dtype(dtype).device(gpu);
            Tensor y = empty({R, C}, on_gpu);
            Tensor mean = empty({R}, TensorOptions(stat_dtype).device(gpu));
            Tensor rstd = empty({R}, TensorOptions(stat_dtype).device(gpu));
            kernels::cuda::layernorm_forward_with(kernel, x.to(gpu), affine ? w.to(gpu) : Tensor(),
                                                  affine ? b.to(gpu) : Tensor(), 1e-5, y, mean, rstd);
            EXPECT_TRUE(allclose(y.cpu(), cpu.y, tol.rtol, tol.atol)) << what << " y";
            const double stat_rtol = dtype == kFloat64 ? 1e-12 : 1e-5;
            EXPECT_TRUE(allclose(mean.cpu(), cpu.mean, stat_rtol, 1e-6)) << what << " mean";
            EXPECT_TRUE(allclose(rstd.cpu(), cpu.rstd, stat_rtol, 1e-6)) << what << " rstd";
          }
        }
      }
    }
  }
}
// dx against the CPU backend with the tolerances above; dweight and dbias (sums over R rows, in float for
// float32 and bfloat16) with atol 1e-4 for float32 (257 products of O(1) terms, summed in other orders).
TEST(CudaRowKernels, LayerNormBackwardMatchesTheCpuBackend) {
  BRIGADE_REQUIRE_CUDA();
  const Device gpu = Device::cuda();
  uint64_t seed = 300;
  for (RowKernel kernel : all_row_kernels()) {
    for (DType dtype : {kFloat32, kBFloat16, kFloat64}) {
      const Tolerance tol = tolerance(dtype);
      const double param_atol = dtype == kFloat64 ? 1e-12 : (dtype == kBFloat16 ? 1e-2 : 1e-4);
      const DType stat_dtype = dtype == kFloat64 ? kFloat64 : kFloat32;
      for (int64_t C : {1, 5, 32, 33, 100, 768, 1024, 1500}) {
        for (int64_t R : {3, 257}) {
          for (bool affine : {false, true}) {
            const std::string what = std::string(row_kernel_name(kernel)) + " " + dtype_name(dtype) + " R" +
                                     std::to_string(R) + " C" + std::to_string(C) + (affine ? " affine" : "");
            const Tensor x = random_rows(R, C, dtype, seed++, false);
            const Tensor dy = random_rows(R, C, dtype, seed++, false);
            const Tensor w = affine ? random_rows(1, C, dtype, seed++, false).reshape({C}) : Tensor();
            const kernels::LayerNormOutput fwd = kernels::layernorm(x, w, Tensor(), 1e-5);
            const kernels::LayerNormGrads cpu =
                kernels::layernorm_backward(dy, x, w, fwd.mean, fwd.rstd, /*has_bias=*/true);
            Tensor dx = empty({R, C}, TensorOptions().dtype(dtype).device(gpu));
            Tensor dweight = affine ? empty({C}, TensorOptions(stat_dtype).device(gpu)) : Tensor();
            Tensor dbias = empty({C}, TensorOptions(stat_dtype).device(gpu));
            kernels::cuda::layernorm_backward_with(kernel, dy.to(gpu), x.to(gpu),
                                                   affine ? w.to(gpu) : Tensor(), fwd.mean.to(gpu),
                                                   fwd.rstd.to(gpu), dx, dweight, dbias);
            EXPECT_TRUE(allclose(dx.cpu(), cpu.dx, tol.rtol, tol.atol)) << what << " dx";
            EXPECT_TRUE(allclose(dbias.cpu(), cpu.dbias, tol.rtol, param_atol)) << what << " dbias";
            if (affine) {
              EXPECT_TRUE(allclose(dweight.cpu(), cpu.dweight, tol.rtol, param_atol)) << what << " dweight";
            }
          }
        }
      }
    }
  }
}
#else
TEST(CudaRowKernels, NeedsACudaBuild) {
  GTEST_SKIP() << "brigade was built without CUDA: the per-version row kernels do not exist";
}
#endif

}  // namespace
}  // namespace brigade
