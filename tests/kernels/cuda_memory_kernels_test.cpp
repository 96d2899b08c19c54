// Every CUDA version of the memory-bound kernels (kernels/elementwise_versions.h, adamw_versions.h,
// cross_entropy_versions.h, embedding_backward_versions.h) against the CPU backend:
// elementwise v1/v2 (unary and backward for every op, binary full/bias-row/scalar-tensor/in place, binary
// with a scalar), AdamW v1/v2, cross-entropy v1/v2, embedding backward v1 (atomic) and v2 (sorted). Sizes
// around the 16-byte packs and GPT-2 widths (768, 3072, V 50257), operands at 0-3 elements past a 16-byte
// boundary (v2's head/packs/tail split and its fallback to v1). Skips without a GPU, except the host-side
// list test.
//
// Tolerances. Against the CPU backend: float32 rtol 1e-5 atol 1e-6 (libdevice vs libm, FMA contraction, and
// the CPU's polynomial exp in float GELU), bfloat16 rtol 1e-2 atol 1e-3 (one bf16 rounding of a float
// result), float64 rtol 1e-12 atol 1e-14. v1 against v2 (the same arithmetic per element; only the memory
// instructions differ): float32 rtol 1e-6 atol 1e-7 and float64 1e-14 (not asserted bitwise in case nvcc
// contracts the two kernels' code differently), bfloat16 one bf16 step (8e-3). AdamW's CPU runs in double:
// float32 parameters rtol 1e-5 atol 1e-6. Embedding backward v2 is asserted bit for bit: equal to the CPU
// backend (both sum in double in position order and round once) and to itself on a second run.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "kernels/adamw_versions.h"
#include "kernels/backend.h"
#include "kernels/cross_entropy_versions.h"
#include "kernels/elementwise_versions.h"
#include "kernels/embedding_backward_versions.h"
#include "kernels/kernels.h"
#include "test_support.h"

namespace brigade {
namespace {

#if BRIGADE_WITH_CUDA
namespace kc = kernels;
using kernels::AdamWKernel;
using kernels::BinaryOp;
using kernels::CrossEntropyKernel;
using kernels::ElementwiseKernel;
using kernels::UnaryOp;
using testing::allclose;

// The CUDA versions of each registry, v1 first.
const std::vector<ElementwiseKernel>& cuda_elementwise_kernels() {
  static const std::vector<ElementwiseKernel> list = {ElementwiseKernel::CudaScalar,
                                                      ElementwiseKernel::CudaVector128};
  return list;
}
const std::vector<AdamWKernel>& cuda_adamw_kernels() {
  static const std::vector<AdamWKernel> list = {AdamWKernel::CudaScalar, AdamWKernel::CudaVector128};
  return list;
}
const std::vector<CrossEntropyKernel>& cuda_cross_entropy_kernels() {
  static const std::vector<CrossEntropyKernel> list = {CrossEntropyKernel::CudaBlockPerRow,
                                                       CrossEntropyKernel::CudaVectorRow};
  return list;
}

struct Tolerance {
  double rtol, atol;
};

Tolerance cpu_tolerance(DType dtype) {
  if (dtype == kBFloat16) return {1e-2, 1e-3};
  if (dtype == kFloat64) return {1e-12, 1e-14};
  return {1e-5, 1e-6};
}

Tolerance version_tolerance(DType dtype) {
  if (dtype == kBFloat16) return {8e-3, 1e-6};
  if (dtype == kFloat64) return {1e-14, 1e-300};
  return {1e-6, 1e-7};
}

Tensor random_values(const Shape& shape, DType dtype, uint64_t seed, double scale = 3.0) {
  Generator gen(seed);
  return kernels::binary(BinaryOp::Mul, randn(shape, kFloat64, &gen), scale).to(dtype);
}

/// `values` copied to the GPU, starting `offset` elements past the start of a fresh (aligned) allocation.
Tensor on_gpu_at(const Tensor& values, int64_t offset) {
  Tensor buffer = zeros({values.numel() + offset + 8}, TensorOptions(values.dtype()).device(Device::cuda()));
  Tensor view = buffer.narrow(0, offset, values.numel()).view(values.shape());
  view.copy_(values.to(Device::cuda()));
  return view;
}

Tensor gpu_zeros_at(const Shape& shape, DType dtype, int64_t offset) {
  return on_gpu_at(zeros(shape, TensorOptions(dtype)), offset);
}

bool same_bits(const Tensor& a, const Tensor& b) {
  const Tensor x = a.cpu().contiguous(), y = b.cpu().contiguous();
  return x.numel() == y.numel() &&
         std::memcmp(x.data_ptr(), y.data_ptr(), static_cast<size_t>(x.numel()) * dtype_size(x.dtype())) == 0;
}

const std::vector<DType>& float_dtypes() {
  static const std::vector<DType> dtypes = {kFloat32, kBFloat16, kFloat64};
  return dtypes;
}

struct Offsets {
  int64_t in, out;
};
const std::vector<Offsets>& offsets() {
  static const std::vector<Offsets> list = {{0, 0}, {1, 1}, {3, 3}, {2, 0}};
  return list;
}
#endif

// Host code only: runs without a GPU.
TEST(CudaMemoryKernels, ListsAndNames) {
#if BRIGADE_WITH_CUDA
  for (ElementwiseKernel kernel : cuda_elementwise_kernels()) {
    EXPECT_EQ(kc::elementwise_kernel_backend(kernel), DeviceKind::CUDA);
  }
  EXPECT_EQ(std::string(kc::elementwise_kernel_name(kc::ElementwiseKernel::CudaVector128)), "v2-vector128");
  EXPECT_EQ(std::string(kc::adamw_kernel_name(kc::AdamWKernel::CudaVector128)), "v2-vector128");
  EXPECT_EQ(std::string(kc::cross_entropy_kernel_name(kc::CrossEntropyKernel::CudaVectorRow)),
            "v2-vector-row");
  EXPECT_EQ(std::string(kc::embedding_backward_kernel_name(kc::EmbeddingBackwardKernel::CudaSorted)),
            "v2-sorted");
  EXPECT_EQ(kc::embedding_backward_kernel_backend(kc::EmbeddingBackwardKernel::CudaAtomic), DeviceKind::CUDA);
#else
  GTEST_SKIP() << "brigade was built without CUDA: the per-version memory-bound kernels do not exist";
#endif
}

#if BRIGADE_WITH_CUDA

TEST(CudaMemoryKernels, UnaryAndBackwardEveryVersionMatchesTheCpu) {
  BRIGADE_REQUIRE_CUDA();
  for (DType dtype : float_dtypes()) {
    const Tolerance cpu_tol = cpu_tolerance(dtype), v_tol = version_tolerance(dtype);
    for (int64_t n : {1, 3, 33, 1027, 20011}) {
      for (const Offsets& off : offsets()) {
        const Tensor x0 = random_values({n}, dtype, static_cast<uint64_t>(n + off.in));
        const Tensor g = random_values({n}, dtype, static_cast<uint64_t>(n + 7), 1.0);
        for (int o = 0; o <= static_cast<int>(UnaryOp::Abs); ++o) {
          const auto op = static_cast<UnaryOp>(o);
          const bool positive = op == UnaryOp::Log || op == UnaryOp::Sqrt || op == UnaryOp::Rsqrt;
          const Tensor x = positive ? kernels::unary(UnaryOp::Abs, x0) : x0;
          const Tensor y_cpu = kernels::unary(op, x);
          const Tensor dx_cpu = kernels::unary_backward(op, g, x, y_cpu);
          const std::string what = std::string(kernels::unary_op_name(op)) + " " + dtype_name(dtype) + " n " +
                                   std::to_string(n) + " offsets " + std::to_string(off.in) + "/" +
                                   std::to_string(off.out);
          Tensor outs[2], grads[2];
          for (ElementwiseKernel kernel : cuda_elementwise_kernels()) {
            const int k = kernel == ElementwiseKernel::CudaScalar ? 0 : 1;
            outs[k] = gpu_zeros_at({n}, dtype, off.out);
            grads[k] = gpu_zeros_at({n}, dtype, off.out);
            kc::unary_with(kernel, op, on_gpu_at(x, off.in), outs[k]);
            kc::unary_backward_with(kernel, op, on_gpu_at(g, off.in), on_gpu_at(x, off.in),
                                    on_gpu_at(y_cpu, off.in), grads[k]);
            EXPECT_TRUE(allclose(outs[k].cpu(), y_cpu, cpu_tol.rtol, cpu_tol.atol))
                << what << " " << kc::elementwise_kernel_name(kernel);
            EXPECT_TRUE(allclose(grads[k].cpu(), dx_cpu, cpu_tol.rtol, cpu_tol.atol))
                << what << " backward " << kc::elementwise_kernel_name(kernel);
          }
          EXPECT_TRUE(allclose(outs[1].cpu(), outs[0].cpu(), v_tol.rtol, v_tol.atol)) << what << " v2 vs v1";
          EXPECT_TRUE(allclose(grads[1].cpu(), grads[0].cpu(), v_tol.rtol, v_tol.atol))
              << what << " backward v2 vs v1";
        }
      }
    }
  }
}

TEST(CudaMemoryKernels, BinaryFullBiasScalarAndInPlaceMatchTheCpu) {
  BRIGADE_REQUIRE_CUDA();
  for (DType dtype : float_dtypes()) {
    const Tolerance tol = cpu_tolerance(dtype);
    // Full operands at every offset pair, every op, and the scalar form.
    for (int64_t n : {1, 7, 1027, 20011}) {
      for (const Offsets& off : offsets()) {
        const Tensor a = random_values({n}, dtype, static_cast<uint64_t>(n)),
                     b = random_values({n}, dtype, static_cast<uint64_t>(n + 1));
        for (int o = 0; o <= static_cast<int>(BinaryOp::Ge); ++o) {
          const auto op = static_cast<BinaryOp>(o);
          const Tensor lhs = op == BinaryOp::Pow ? kernels::unary(UnaryOp::Abs, a) : a;
          const Tensor ref = kernels::binary(op, lhs, b), ref_scalar = kernels::binary(op, lhs, 0.75);
          for (ElementwiseKernel kernel : cuda_elementwise_kernels()) {
            const std::string what = std::string(kernels::binary_op_name(op)) + " " + dtype_name(dtype) +
                                     " n " + std::to_string(n) + " offsets " + std::to_string(off.in) + "/" +
                                     std::to_string(off.out) + " " + kc::elementwise_kernel_name(kernel);
            Tensor out = gpu_zeros_at({n}, dtype, off.out);
            kc::binary_with(kernel, op, on_gpu_at(lhs, off.in), on_gpu_at(b, off.in), out);
            EXPECT_TRUE(allclose(out.cpu(), ref, tol.rtol, tol.atol)) << what;
            Tensor out_scalar = gpu_zeros_at({n}, dtype, off.out);
            kc::binary_scalar_with(kernel, op, on_gpu_at(lhs, off.in), 0.75, false, out_scalar);
            EXPECT_TRUE(allclose(out_scalar.cpu(), ref_scalar, tol.rtol, tol.atol)) << what << " scalar";
          }
        }
        // In place: a += b (out is a's memory).
        for (ElementwiseKernel kernel : cuda_elementwise_kernels()) {
          Tensor acc = on_gpu_at(a, off.in);
          kc::binary_with(kernel, BinaryOp::Add, acc, on_gpu_at(b, off.in), acc);
          EXPECT_TRUE(allclose(acc.cpu(), kernels::binary(BinaryOp::Add, a, b), tol.rtol, tol.atol))
              << "add in place " << dtype_name(dtype) << " n " << n << " "
              << kc::elementwise_kernel_name(kernel);
        }
      }
    }
    // Bias rows [R, F] + [F] and a scalar tensor broadcast, on either side; F up to GPT-2's 3072.
    for (int64_t F : {1, 3, 13, 768, 3072}) {
      const int64_t R = 9;
      const Tensor a = random_values({R, F}, dtype, static_cast<uint64_t>(F));
      const Tensor bias = random_values({F}, dtype, static_cast<uint64_t>(F + 1));
      const Tensor scalar = random_values({1}, dtype, static_cast<uint64_t>(F + 2));
      for (const Tensor& small : {bias, scalar}) {
        const Tensor small_gpu = on_gpu_at(small, 1).unsqueeze(0).expand({R, F});
        const Tensor small_cpu = small.unsqueeze(0).expand({R, F});
        for (ElementwiseKernel kernel : cuda_elementwise_kernels()) {
          const std::string what = std::string(small.numel() == 1 ? "scalar tensor" : "bias") + " " +
                                   dtype_name(dtype) + " F " + std::to_string(F) + " " +
                                   kc::elementwise_kernel_name(kernel);
          Tensor out = gpu_zeros_at({R, F}, dtype, 0);
          kc::binary_with(kernel, BinaryOp::Add, on_gpu_at(a, 0), small_gpu, out);
          EXPECT_TRUE(allclose(out.cpu(), kernels::binary(BinaryOp::Add, a, small_cpu), tol.rtol, tol.atol))
              << what;
          Tensor out2 = gpu_zeros_at({R, F}, dtype, 0);
          kc::binary_with(kernel, BinaryOp::Sub, small_gpu, on_gpu_at(a, 0), out2);
          EXPECT_TRUE(allclose(out2.cpu(), kernels::binary(BinaryOp::Sub, small_cpu, a), tol.rtol, tol.atol))
              << what << " (broadcast on the left)";
        }
      }
    }
  }
}

TEST(CudaMemoryKernels, AdamWEveryVersionMatchesTheCpu) {
  BRIGADE_REQUIRE_CUDA();
  for (DType dtype : float_dtypes()) {
    const DType moments = dtype == kFloat64 ? kFloat64 : kFloat32;
    const Tolerance tol = cpu_tolerance(dtype), mtol = cpu_tolerance(moments);
    for (int64_t n : {1, 5, 1027, 20011}) {
      for (int64_t off : {0, 1, 3}) {
        for (int64_t moment_off : {off, int64_t{0}}) {
          kernels::AdamWStep s;
          s.lr = 1e-2;
          s.weight_decay = 0.1;
          s.step = 3;
          const Tensor p0 = random_values({n}, dtype, static_cast<uint64_t>(n)),
                       g = random_values({n}, dtype, static_cast<uint64_t>(n + 1));
          const Tensor m0 = random_values({n}, moments, static_cast<uint64_t>(n + 2), 0.1);
          const Tensor v0 =
              kernels::unary(UnaryOp::Abs, random_values({n}, moments, static_cast<uint64_t>(n + 3), 0.1));
          Tensor p_cpu = p0.clone(), m_cpu = m0.clone(), v_cpu = v0.clone();
          kernels::adamw_update(p_cpu, g, m_cpu, v_cpu, s);
          for (AdamWKernel kernel : cuda_adamw_kernels()) {
            Tensor p = on_gpu_at(p0, off), m = on_gpu_at(m0, moment_off), v = on_gpu_at(v0, moment_off);
            kc::adamw_with(kernel, p, on_gpu_at(g, off), m, v, s);
            const std::string what = std::string(dtype_name(dtype)) + " n " + std::to_string(n) +
                                     " offsets " + std::to_string(off) + "/" + std::to_string(moment_off) +
                                     " " + kc::adamw_kernel_name(kernel);
            EXPECT_TRUE(allclose(p.cpu(), p_cpu, tol.rtol, tol.atol)) << what << " param";
            EXPECT_TRUE(allclose(m.cpu(), m_cpu, mtol.rtol, mtol.atol)) << what << " m";
            EXPECT_TRUE(allclose(v.cpu(), v_cpu, mtol.rtol, mtol.atol)) << what << " v";
          }
        }
      }
    }
  }
}

TEST(CudaMemoryKernels, CrossEntropyEveryVersionMatchesTheCpu) {
  BRIGADE_REQUIRE_CUDA();
  for (DType dtype : float_dtypes()) {
    const Tolerance tol = cpu_tolerance(dtype);
    const DType loss_dtype = dtype == kFloat64 ? kFloat64 : kFloat32;
    for (int64_t V : {1, 7, 1003, 50257}) {
      const int64_t N = 5;
      const Tensor logits = random_values({N, V}, dtype, static_cast<uint64_t>(V));
      std::vector<int64_t> t(static_cast<size_t>(N));
      for (int64_t i = 0; i < N; ++i) t[static_cast<size_t>(i)] = (i * 7919 + 3) % V;
      t[1] = -100;  // ignored
      const Tensor targets = from_vector(t, {N});
      Tensor loss_cpu = empty({N}, TensorOptions(loss_dtype)), grad_cpu = empty({N, V}, TensorOptions(dtype));
      int64_t count_cpu = 0;
      kernels::cpu::cross_entropy(logits, targets, -100, loss_cpu, grad_cpu, &count_cpu);
      for (CrossEntropyKernel kernel : cuda_cross_entropy_kernels()) {
        for (bool with_grad : {true, false}) {
          const std::string what = std::string(kc::cross_entropy_kernel_name(kernel)) + " " +
                                   dtype_name(dtype) + " V " + std::to_string(V) +
                                   (with_grad ? "" : " loss only");
          Tensor loss = empty({N}, TensorOptions(loss_dtype).device(Device::cuda()));
          Tensor grad = with_grad ? empty({N, V}, TensorOptions(dtype).device(Device::cuda())) : Tensor();
          int64_t count = 0;
          EXPECT_EQ(kc::cross_entropy_with(kernel, logits.to(Device::cuda()), targets.to(Device::cuda()),
                                           -100, loss, grad, &count),
                    -1)
              << what;
          EXPECT_EQ(count, count_cpu) << what;
          EXPECT_TRUE(allclose(loss.cpu(), loss_cpu, tol.rtol, tol.atol)) << what << " loss";
          if (with_grad) {
            EXPECT_TRUE(allclose(grad.cpu(), grad_cpu, tol.rtol, tol.atol)) << what << " grad";
          }
        }
      }
    }
  }
}

TEST(CudaMemoryKernels, EmbeddingBackwardSortedIsTheCpuBitForBitOnEveryRun) {
  BRIGADE_REQUIRE_CUDA();
  for (DType dtype : float_dtypes()) {
    for (DType id_dtype : {kInt64, kInt32}) {
      for (int64_t V : {50, 50257}) {
        for (int64_t C : {33, 768}) {
          const int64_t N = 4096;
          // Heavy repeats: every fourth position is id 3, the others spread over min(V, 300) ids.
          std::vector<int64_t> ids(static_cast<size_t>(N));
          for (int64_t n = 0; n < N; ++n)
            ids[static_cast<size_t>(n)] = n % 4 == 0 ? 3 : (n * 7 + n / 5) % std::min<int64_t>(V, 300);
          const Tensor id_tensor = from_vector(ids, {N}).to(id_dtype);
          const Tensor grad_out = random_values({N, C}, dtype, static_cast<uint64_t>(V + C), 1.0);
          const Tensor ref = kernels::embedding_backward(grad_out, id_tensor, V);
          const std::string what = std::string(dtype_name(dtype)) + " ids " + dtype_name(id_dtype) + " V " +
                                   std::to_string(V) + " C " + std::to_string(C);
          Tensor runs[2];
          for (int run = 0; run < 2; ++run) {
            runs[run] = zeros({V, C}, TensorOptions(dtype).device(Device::cuda()));
            kc::embedding_backward_with(kc::EmbeddingBackwardKernel::CudaSorted, grad_out.to(Device::cuda()),
                                        id_tensor.to(Device::cuda()), runs[run]);
          }
          EXPECT_TRUE(same_bits(runs[0], ref)) << what << ": sorted differs from the CPU bits";
          EXPECT_TRUE(same_bits(runs[0], runs[1])) << what << ": sorted differs between runs";
          Tensor atomic = zeros({V, C}, TensorOptions(dtype).device(Device::cuda()));
          kc::embedding_backward_with(kc::EmbeddingBackwardKernel::CudaAtomic, grad_out.to(Device::cuda()),
                                      id_tensor.to(Device::cuda()), atomic);
          const Tolerance tol = dtype == kFloat32 ? Tolerance{1e-5, 1e-4} : cpu_tolerance(dtype);
          EXPECT_TRUE(allclose(atomic.cpu(), ref, tol.rtol, tol.atol)) << what << " atomic";
        }
      }
    }
  }
}

TEST(CudaMemoryKernels, DefaultEmbeddingBackwardIsDeterministic) {
  BRIGADE_REQUIRE_CUDA();
  const int64_t N = 8192, V = 1000, C = 64;
  std::vector<int64_t> ids(static_cast<size_t>(N));
  for (int64_t n = 0; n < N; ++n) ids[static_cast<size_t>(n)] = (n * n) % 17;  // 17 ids, hundreds of repeats
  const Tensor id_tensor = from_vector(ids, {N}).to(Device::cuda());
  const Tensor grad_out = random_values({N, C}, kFloat32, 5, 1.0).to(Device::cuda());
  const Tensor first = kernels::embedding_backward(grad_out, id_tensor, V);
  for (int run = 0; run < 3; ++run) {
    EXPECT_TRUE(same_bits(kernels::embedding_backward(grad_out, id_tensor, V), first)) << "run " << run;
  }
  EXPECT_TRUE(same_bits(first, kernels::embedding_backward(grad_out.cpu(), id_tensor.cpu(), V)));
}

#endif

}  // namespace
}  // namespace brigade
