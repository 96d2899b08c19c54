// bf16 GEMM v8 (MatmulKernel::CudaWgmma, kernels/cuda/matmul_wgmma.cu) beyond what cuda_matmul_test.cpp's
// all-kernel tests already run: when the kernel is offered (an sm_90 device and sm_90a code in the build),
// which arguments its own kernel takes and which go to v6, and the GPT's layer shapes with deep K, batch
// and tails against the double reference (tolerance as tests/kernels/matmul_check.h: bf16 1e-2 of sum_k |a
// b|). The GPU tests skip without a GPU, and on a GPU that is not compute capability 9.0 with the reason.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "kernels/kernels.h"
#include "kernels/matmul_versions.h"
#include "tests/kernels/matmul_check.h"
#include "tests/ops/op_cases_matmul.h"
#include "tests/test_support.h"
#if BRIGADE_WITH_CUDA
#include <cuda_runtime.h>

#include "kernels/cuda/matmul.h"
#include "kernels/cuda/matmul_launchers.cuh"
#endif

namespace brigade {
namespace {

#if BRIGADE_WITH_CUDA
using GemmKernel = kernels::MatmulKernel;

/// Whether the current device is compute capability 9.0 (false without a device).
bool device_is_sm90() {
  int device = 0, major = 0, minor = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return major == 9 && minor == 0;
}

/// Whether this build holds sm_90a code (CMake defines BRIGADE_CUDA_SM90A when the architectures list 90a).
constexpr bool kBuiltForSm90a =
#if defined(BRIGADE_CUDA_SM90A)
    true;
#else
    false;
#endif

// Runs without a GPU: offered exactly on an sm_90 device of a build with sm_90a code, and only in bf16.
TEST(CudaGemmWgmma, OfferedOnlyOnSm90InBf16) {
  EXPECT_FALSE(kernels::matmul_kernel_supports(GemmKernel::CudaWgmma, kFloat32));
  EXPECT_FALSE(kernels::matmul_kernel_supports(GemmKernel::CudaWgmma, kFloat64));
  const bool expected = cuda_available() && device_is_sm90() && kBuiltForSm90a;
  EXPECT_EQ(kernels::matmul_kernel_supports(GemmKernel::CudaWgmma, kBFloat16), expected)
      << "cuda_available " << cuda_available() << ", sm_90 " << device_is_sm90() << ", built for sm_90a "
      << kBuiltForSm90a;
  EXPECT_NE(kernels::default_matmul_kernel(DeviceKind::CUDA, kBFloat16), GemmKernel::CudaWgmma)
      << "the default flips only after a GPU has measured v8";
}

// Runs without a GPU: a dtype v8 never implements is a DTypeError before any CUDA call (m = n = 0).
TEST(CudaGemmWgmma, Float32IsATypedError) {
  kernels::GemmArgs args;
  args.dtype = kFloat32;
  EXPECT_THROW(kernels::cuda::gemm_native(args, GemmKernel::CudaWgmma), DTypeError);
}

// On a GPU that cannot run v8 (not compute capability 9.0, or no sm_90a code): a DeviceError naming why.
TEST(CudaGemmWgmma, OtherDevicesGetADeviceError) {
  BRIGADE_REQUIRE_CUDA();
  if (kernels::matmul_kernel_supports(GemmKernel::CudaWgmma, kBFloat16)) {
    GTEST_SKIP() << "this device runs v8 (LayerShapesMatchReference checks it)";
  }
  const TensorOptions options = TensorOptions().dtype(kBFloat16).device(Device::cuda());
  Tensor a = zeros({1, 8, 8}, options), b = zeros({1, 8, 8}, options), c = zeros({1, 8, 8}, options);
  kernels::GemmArgs args;
  args.a = a.data_ptr(), args.b = b.data_ptr(), args.c = c.data_ptr();
  args.dtype = kBFloat16;
  args.m = args.n = args.k = 8;
  args.lda = args.ldb = args.ldc = 8;
  args.trans_b = true;
  EXPECT_THROW(kernels::cuda::gemm_native(args, GemmKernel::CudaWgmma), DeviceError);
}

// Runs without a GPU (host code): v8's kernel takes A untransposed, B transposed, 16-byte aligned rows.
TEST(CudaGemmWgmma, HandlesOnlyKMajorAlignedOperands) {
  alignas(16) static uint16_t buffer[64];
  kernels::GemmArgs args;
  args.dtype = kBFloat16;
  args.a = buffer, args.b = buffer, args.c = buffer;
  args.m = 3, args.n = 5, args.k = 7;
  args.lda = 8, args.ldb = 16, args.ldc = 5;
  args.stride_a = 24, args.stride_b = 0, args.stride_c = 15;
  args.trans_a = false, args.trans_b = true;
  EXPECT_TRUE(kernels::cuda::gemm_detail::wgmma_handles(args));
  for (const bool ta : {false, true}) {
    for (const bool tb : {false, true}) {
      kernels::GemmArgs flipped = args;
      flipped.trans_a = ta, flipped.trans_b = tb;
      EXPECT_EQ(kernels::cuda::gemm_detail::wgmma_handles(flipped), !ta && tb) << "ta " << ta << " tb " << tb;
    }
  }
  kernels::GemmArgs odd = args;
  odd.lda = 9;  // rows of A 18 bytes apart
  EXPECT_FALSE(kernels::cuda::gemm_detail::wgmma_handles(odd));
  odd = args;
  odd.b = buffer + 1;  // B starts 2 bytes in
  EXPECT_FALSE(kernels::cuda::gemm_detail::wgmma_handles(odd));
  odd = args;
  odd.stride_a = 20;  // batch entries of A 40 bytes apart
  EXPECT_FALSE(kernels::cuda::gemm_detail::wgmma_handles(odd));
}

// On sm_90: the GPT's Linear forward (x [B*T, C] @ W^T, W [out, C]) shapes through v8's own kernel, batch 2
// with B broadcast, including whole 128 x 128 tiles, K tails, K spanning many stages, and M/N tails.
TEST(CudaGemmWgmma, LayerShapesMatchReference) {
  BRIGADE_REQUIRE_CUDA();
  if (!kernels::matmul_kernel_supports(GemmKernel::CudaWgmma, kBFloat16)) {
    // An H100/H200 with a build lacking sm_90a code is a misconfigured GPU check, not a reason to skip.
    if (device_is_sm90() && std::getenv("BRIGADE_REQUIRE_GPU") != nullptr) {
      FAIL() << "BRIGADE_REQUIRE_GPU is set on an sm_90 device, but the build has no sm_90a code "
                "(configure with -DCMAKE_CUDA_ARCHITECTURES=90a)";
    }
    GTEST_SKIP() << "wgmma needs a compute capability 9.0 device and a build with sm_90a code (device sm_90: "
                 << device_is_sm90() << ", built for sm_90a: " << kBuiltForSm90a << ")";
  }
  const Device gpu = Device::cuda();
  const testing::MatmulShape shapes[] = {{128, 128, 64},  {256, 384, 128}, {300, 260, 70},
                                         {512, 768, 768}, {97, 129, 1000}, {1, 200, 8}};
  Generator gen(71);
  for (const auto& s : shapes) {
    Tensor a = testing::random_matrix(2, s.m, s.k, kBFloat16, gen);
    Tensor b_one = testing::random_matrix(1, s.n, s.k, kBFloat16, gen);
    Tensor b = b_one.expand({2, s.n, s.k});
    Tensor a_gpu = a.to(gpu), b_gpu = b_one.to(gpu).expand({2, s.n, s.k});
    Tensor c = empty({2, s.m, s.n}, TensorOptions().dtype(kBFloat16).device(gpu));
    kernels::GemmArgs args;
    args.a = a_gpu.data_ptr(), args.b = b_gpu.data_ptr(), args.c = c.data_ptr();
    args.dtype = kBFloat16;
    args.m = s.m, args.n = s.n, args.k = s.k;
    args.lda = s.k, args.ldb = s.k, args.ldc = s.n;
    args.trans_a = false, args.trans_b = true;
    args.batch = 2;
    args.stride_a = s.m * s.k, args.stride_b = 0, args.stride_c = s.m * s.n;
    EXPECT_EQ(kernels::cuda::gemm_detail::wgmma_handles(args), s.k % 8 == 0) << testing::shape_name(s);
    kernels::cuda::gemm_native(args, GemmKernel::CudaWgmma);
    EXPECT_TRUE(testing::matmul_matches_reference(c, a, b, false, true, testing::matmul_tolerance(kBFloat16)))
        << "wgmma " << testing::shape_name(s);
  }
  // K = 70 with rows padded to 72 elements (144 bytes, 16-byte aligned): v8 runs it itself, and the last
  // 16-byte chunk of each row is partial (12 bytes copied, 4 zero-filled).
  {
    const int64_t m = 100, n = 136, k = 70, ld = 72;
    Tensor a_padded = testing::random_matrix(1, m, ld, kBFloat16, gen);
    Tensor b_padded = testing::random_matrix(1, n, ld, kBFloat16, gen);
    Tensor a_gpu = a_padded.to(gpu), b_gpu = b_padded.to(gpu);
    Tensor c = empty({1, m, n}, TensorOptions().dtype(kBFloat16).device(gpu));
    kernels::GemmArgs args;
    args.a = a_gpu.data_ptr(), args.b = b_gpu.data_ptr(), args.c = c.data_ptr();
    args.dtype = kBFloat16;
    args.m = m, args.n = n, args.k = k;
    args.lda = ld, args.ldb = ld, args.ldc = n;
    args.trans_a = false, args.trans_b = true;
    args.batch = 1;
    args.stride_a = m * ld, args.stride_b = n * ld, args.stride_c = m * n;
    EXPECT_TRUE(kernels::cuda::gemm_detail::wgmma_handles(args)) << "padded rows are 16-byte aligned";
    kernels::cuda::gemm_native(args, GemmKernel::CudaWgmma);
    EXPECT_TRUE(testing::matmul_matches_reference(c, a_padded.narrow(2, 0, k), b_padded.narrow(2, 0, k),
                                                  false, true, testing::matmul_tolerance(kBFloat16)))
        << "wgmma K 70 in rows of 72";
  }
}
#else
TEST(CudaGemmWgmma, NeedsACudaBuild) {
  GTEST_SKIP() << "built without CUDA (BRIGADE_CUDA=OFF): v8 exists only in CUDA builds";
}
#endif

}  // namespace
}  // namespace brigade
