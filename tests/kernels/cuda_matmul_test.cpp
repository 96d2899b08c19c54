// kernels::matmul on CUDA beyond its values: the CUDA GEMM versions' list and dtype table and their typed
// error (host code, runs without a GPU); K = 0 through each version (an empty sum writes zeros); operands and
// output as padded, misaligned and batch-broadcast views with the padding left untouched; work on the
// current stream; operands on different devices. Every version's and cuBLAS's values (the op table's
// matmul shapes, all four transpose combinations, every dtype a version implements, batches, views, size-0
// dims) are checked by the op table's versions axis (tests/ops/op_cases_matmul.h, cuda_op_table_test.cpp)
// against kernels/reference, with this file's former tolerances (tests/kernels/matmul_check.h). Every test
// that launches a kernel skips where no GPU is present.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "kernels/kernels.h"
#include "kernels/matmul_versions.h"
#include "tensor/stream.h"
#include "tests/kernels/matmul_check.h"
#include "tests/test_support.h"
#if BRIGADE_WITH_CUDA
#include "kernels/cuda/matmul.h"
#endif

namespace brigade {
namespace {

using kernels::matmul;
using kernels::MatmulBackend;
using testing::matmul_matches_reference;
using testing::matmul_tolerance;
using testing::random_matrix;

/// Sets the matmul backend for a scope and restores the previous one.
class BackendScope {
 public:
  explicit BackendScope(MatmulBackend backend) : saved_(kernels::matmul_backend()) {
    kernels::set_matmul_backend(backend);
  }
  ~BackendScope() { kernels::set_matmul_backend(saved_); }
  BackendScope(const BackendScope&) = delete;
  BackendScope& operator=(const BackendScope&) = delete;

 private:
  MatmulBackend saved_;
};

const char* backend_name(MatmulBackend backend) {
  return backend == MatmulBackend::Cublas ? "cublas" : "native";
}

#if BRIGADE_WITH_CUDA
using GemmKernel = kernels::MatmulKernel;
using kernels::matmul_kernel_name;
using kernels::matmul_kernel_supports;

/// The CUDA versions of all_matmul_kernels(), v1 first.
std::vector<GemmKernel> cuda_gemm_kernels() {
  std::vector<GemmKernel> list;
  for (GemmKernel kernel : kernels::all_matmul_kernels()) {
    if (kernels::matmul_kernel_backend(kernel) == DeviceKind::CUDA) list.push_back(kernel);
  }
  return list;
}

/// c = op(a) @ op(b) by one kernel through gemm_native. a, b, c are 3-d CUDA tensors whose last dim has
/// unit stride; their row strides become the leading dims and their batch strides (0 for an expanded
/// batch) the batch strides, so views test the kernels' alignment fallbacks.
void run_kernel(GemmKernel kernel, const Tensor& a, const Tensor& b, const Tensor& c, bool ta, bool tb) {
  kernels::GemmArgs args;
  args.a = a.data_ptr();
  args.b = b.data_ptr();
  args.c = c.data_ptr();
  args.dtype = c.dtype();
  args.m = c.size(1);
  args.n = c.size(2);
  args.k = ta ? a.size(1) : a.size(2);
  args.lda = a.stride(1);
  args.ldb = b.stride(1);
  args.ldc = c.stride(1);
  args.trans_a = ta;
  args.trans_b = tb;
  args.batch = c.size(0);
  args.stride_a = a.stride(0);
  args.stride_b = b.stride(0);
  args.stride_c = c.stride(0);
  kernels::cuda::gemm_native(args, kernel);
}

/// The (kernel, dtype) pairs that gemm_native implements.
std::vector<std::pair<GemmKernel, DType>> supported_pairs() {
  std::vector<std::pair<GemmKernel, DType>> pairs;
  for (GemmKernel kernel : cuda_gemm_kernels()) {
    for (DType dtype : {kFloat32, kBFloat16, kFloat64}) {
      if (matmul_kernel_supports(kernel, dtype)) pairs.emplace_back(kernel, dtype);
    }
  }
  return pairs;
}

// Runs without a GPU: the list, the names and the dtype table are host code.
TEST(CudaGemmKernels, ListNamesAndDtypeTable) {
  const std::vector<GemmKernel> list = cuda_gemm_kernels();
  ASSERT_EQ(list.size(), 8u);
  EXPECT_EQ(list.front(), GemmKernel::CudaNaive);
  std::vector<std::string> names;
  for (GemmKernel kernel : list) names.emplace_back(matmul_kernel_name(kernel));
  EXPECT_EQ(names, (std::vector<std::string>{"v1-naive", "v2-tiled", "v3-vectorized", "v4-warptiled",
                                             "v5-wmma", "v6-wmma-async", "v7-mma-sync", "v8-wgmma"}));
  for (DType dtype : {kFloat32, kBFloat16, kFloat64}) {
    EXPECT_TRUE(matmul_kernel_supports(kernels::default_matmul_kernel(DeviceKind::CUDA, dtype), dtype))
        << dtype_name(dtype);
  }
  EXPECT_TRUE(matmul_kernel_supports(GemmKernel::CudaWarptiled, kFloat32));
  EXPECT_FALSE(matmul_kernel_supports(GemmKernel::CudaWarptiled, kBFloat16));
  EXPECT_FALSE(matmul_kernel_supports(GemmKernel::CudaWmma, kFloat32));
  EXPECT_TRUE(matmul_kernel_supports(GemmKernel::CudaWmmaAsync, kBFloat16));
  EXPECT_TRUE(matmul_kernel_supports(GemmKernel::CudaMmaSync, kBFloat16));
  EXPECT_FALSE(matmul_kernel_supports(GemmKernel::CudaMmaSync, kFloat32));
  EXPECT_EQ(kernels::default_matmul_kernel(DeviceKind::CUDA, kBFloat16), GemmKernel::CudaMmaSync);
  EXPECT_EQ(kernels::default_matmul_kernel(DeviceKind::CUDA, kFloat32), GemmKernel::CudaWarptiled);
  EXPECT_EQ(kernels::default_matmul_kernel(DeviceKind::CUDA, kFloat64), GemmKernel::CudaTiled);
}

// Runs without a GPU: the dtype check comes before any CUDA call.
TEST(CudaGemmKernels, UnsupportedDtypeIsATypedError) {
  kernels::GemmArgs args;  // m = n = 0: nothing would be launched
  args.dtype = kBFloat16;
  EXPECT_THROW(kernels::cuda::gemm_native(args, GemmKernel::CudaVectorized), DTypeError);
  args.dtype = kFloat32;
  EXPECT_THROW(kernels::cuda::gemm_native(args, GemmKernel::CudaWmma), DTypeError);
  args.dtype = kInt32;
  EXPECT_THROW(kernels::cuda::gemm_native(args, GemmKernel::CudaTiled), DTypeError);
}

// K = 0 through gemm_native directly (kernels::matmul never passes it): an empty sum, C = 0 everywhere.
TEST(CudaGemmKernels, EmptyKWritesZeros) {
  BRIGADE_REQUIRE_CUDA();
  const Device gpu = Device::cuda();
  for (const auto& [kernel, dtype] : supported_pairs()) {
    const TensorOptions options = TensorOptions().dtype(dtype).device(gpu);
    Tensor a = empty({2, 70, 0}, options), b = empty({2, 0, 45}, options);
    Tensor c = full({2, 70, 45}, 7.0, options);
    run_kernel(kernel, a, b, c, false, false);
    EXPECT_TRUE(testing::allclose(c, zeros({2, 70, 45}), 0.0, 0.0))
        << matmul_kernel_name(kernel) << " " << dtype_name(dtype);
  }
}

// Operands and output as views into larger buffers: (1) rows padded to a multiple of 8 elements (aligned:
// the vector paths with ld != row length), (2) views starting one element in with odd leading dims
// (misaligned: every load takes the scalar fallback), with B's batch broadcast (stride 0) in both. The
// padding of C around the view must stay untouched.
TEST(CudaGemmKernels, PaddedMisalignedAndBroadcastOperands) {
  BRIGADE_REQUIRE_CUDA();
  const Device gpu = Device::cuda();
  constexpr int64_t kM = 131, kN = 136, kK = 48, kBatch = 2;
  constexpr double kSentinel = 7.0;
  Generator gen(43);
  for (const auto& [kernel, dtype] : supported_pairs()) {
    for (int flags = 0; flags < 4; ++flags) {
      const bool ta = flags & 1, tb = flags & 2;
      for (const int64_t offset : {0, 1}) {
        const int64_t ar = ta ? kK : kM, ac = ta ? kM : kK, br = tb ? kN : kK, bc = tb ? kK : kN;
        // Row pitches: a multiple of 8 elements (16 bytes in bf16, 32 in float32) beyond the row, or odd.
        auto pitch = [&](int64_t cols) { return offset == 0 ? (cols + 15) / 8 * 8 : cols + 3; };
        const int64_t pa = pitch(ac), pb = pitch(bc), pc = pitch(kN);
        Tensor a_store = random_matrix(kBatch, ar + offset, pa, dtype, gen);
        Tensor b_store = random_matrix(1, br + offset, pb, dtype, gen);
        Tensor a = a_store.narrow(1, offset, ar).narrow(2, offset, ac);
        Tensor b = b_store.narrow(1, offset, br).narrow(2, offset, bc).expand({kBatch, br, bc});
        Tensor c_store = full({kBatch, kM + offset, pc}, kSentinel, TensorOptions().dtype(dtype).device(gpu));
        Tensor c = c_store.narrow(1, offset, kM).narrow(2, offset, kN);
        Tensor a_gpu = a_store.to(gpu).narrow(1, offset, ar).narrow(2, offset, ac);
        Tensor b_gpu = b_store.to(gpu).narrow(1, offset, br).narrow(2, offset, bc).expand({kBatch, br, bc});
        ASSERT_EQ(b_gpu.stride(0), 0);
        run_kernel(kernel, a_gpu, b_gpu, c, ta, tb);
        const std::string what = std::string(matmul_kernel_name(kernel)) + " " + dtype_name(dtype) +
                                 " ta=" + std::to_string(ta) + " tb=" + std::to_string(tb) +
                                 " offset=" + std::to_string(offset);
        EXPECT_TRUE(matmul_matches_reference(c, a, b, ta, tb, matmul_tolerance(dtype))) << what;
        // Padding: the columns right of the view, and (offset 1) the first row and column.
        Tensor right = c_store.narrow(2, offset + kN, pc - offset - kN);
        EXPECT_TRUE(testing::allclose(right, full(right.shape(), kSentinel), 0.0, 0.0))
            << what << " right pad";
        if (offset == 1) {
          Tensor top = c_store.narrow(1, 0, 1), left = c_store.narrow(2, 0, 1);
          EXPECT_TRUE(testing::allclose(top, full(top.shape(), kSentinel), 0.0, 0.0)) << what << " top row";
          EXPECT_TRUE(testing::allclose(left, full(left.shape(), kSentinel), 0.0, 0.0))
              << what << " left col";
        }
      }
    }
  }
}
#endif

// Work goes to the current stream: results read after synchronising that stream are right.
TEST(CudaMatmul, RunsOnTheCurrentStream) {
  BRIGADE_REQUIRE_CUDA();
  const Device gpu = Device::cuda();
  Generator gen(41);
  Tensor a = random_matrix(-1, 300, 200, kFloat32, gen), b = random_matrix(-1, 200, 150, kFloat32, gen);
  Tensor ag = a.to(gpu), bg = b.to(gpu);
  Stream side = Stream::create(gpu);
  side.wait(Stream::current(gpu));  // the uploads above happened on the default stream
  for (MatmulBackend backend : {MatmulBackend::Native, MatmulBackend::Cublas}) {
    BackendScope scope(backend);
    Tensor c;
    {
      StreamGuard guard(side);
      c = matmul(ag, bg);
    }
    side.synchronize();
    EXPECT_TRUE(matmul_matches_reference(c, a, b, false, false, 1e-5)) << backend_name(backend);
  }
}

TEST(CudaMatmul, RejectsOperandsOnDifferentDevices) {
  BRIGADE_REQUIRE_CUDA();
  EXPECT_THROW(matmul(zeros({2, 3}), zeros({3, 2}, Device::cuda())), DeviceError);
}

}  // namespace
}  // namespace brigade
