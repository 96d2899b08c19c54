// CPU emulation of the memory-bound CUDA kernels through their host entry points (the CUDA sides of the
// *_with functions of kernels/elementwise_versions.h, adamw_versions.h, cross_entropy_versions.h and
// embedding_backward_versions.h, on CPU tensors standing in for device ones): elementwise v1 and v2 (unary
// and backward for every op, binary with full, bias-row, scalar-tensor and in-place operands, binary with a
// scalar), AdamW v1 and v2, cross-entropy v1 and v2, embedding backward v1 (atomic) and v2 (sorted), and the
// column sums of kernels/cuda/reduce.cu. The kernel files (elementwise, elementwise_vec, optim, loss,
// embedding, reduce) are transformed and compiled as separate translation units by run.sh, with
// memory_emu_support.h force-included, and linked here.
//
// Checks: sizes around the pack widths (1..300 elements; AdamW up to 1027) at offsets 0-3 elements from a
// 16-byte boundary, inputs and outputs at the same and at different offsets (v2 runs its head/packs/tail
// split, or falls back to v1); float32, bfloat16, float64.
//  - elementwise and AdamW: v2 equals v1 bit for bit (the same arithmetic, only the loads differ), and both
//    match the CPU backend: float32 rtol 1e-5 atol 1e-6 (float GELU on the CPU uses a polynomial exp),
//    bfloat16 rtol 1e-2 atol 1e-3 (one bf16 rounding of a float result), float64 rtol 1e-12 atol 1e-14.
//  - cross-entropy: row losses and gradients against the CPU backend, the same tolerances, with an ignored
//    row, odd V (rows at every alignment), and the loss-only call.
//  - embedding backward v2: bit for bit equal to the CPU backend (both sum in double in position order) and
//    to itself on a second run, with heavy repeats, int32 and int64 ids. v1 against the CPU with tolerances.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/adamw_versions.h"
#include "kernels/backend.h"
#include "kernels/cross_entropy_versions.h"
#include "kernels/elementwise_versions.h"
#include "kernels/embedding_backward_versions.h"
#include "kernels/kernels.h"
#include "tensor/device_ops.h"

namespace brigade::cuda_detail {
cudaStream_t current_stream(int) {
  return nullptr;
}
void set_device(int) {}
}  // namespace brigade::cuda_detail

namespace brigade::detail::cuda {
void copy_bytes(void* dst, const Device&, const void* src, const Device&, size_t nbytes) {
  std::memcpy(dst, src, nbytes);
}
}  // namespace brigade::detail::cuda

using namespace brigade;
using namespace brigade::kernels;
namespace kc = brigade::kernels::cuda;

namespace {

int failures = 0;

struct Tol {
  double rtol, atol;
};
Tol tol_for(DType dt) {
  if (dt == kBFloat16) return {1e-2, 1e-3};
  if (dt == kFloat64) return {1e-12, 1e-14};
  return {1e-5, 1e-6};
}

/// Worst |got - ref| / (atol + rtol |ref|) (equal infinities and NaN in both count as 0).
double worst(const Tensor& got, const Tensor& ref, Tol t) {
  auto g = got.contiguous().to(kFloat64).to_vector<double>();
  auto r = ref.contiguous().to(kFloat64).to_vector<double>();
  double w = 0;
  for (size_t i = 0; i < r.size(); ++i) {
    if ((std::isnan(g[i]) && std::isnan(r[i])) || g[i] == r[i]) continue;
    const double e = std::fabs(g[i] - r[i]) / (t.atol + t.rtol * std::fabs(r[i]));
    if (!(e <= w)) w = std::isnan(e) ? 1e30 : e;
  }
  return w;
}

bool same_bits(const Tensor& a, const Tensor& b) {
  Tensor x = a.contiguous(), y = b.contiguous();
  return x.numel() == y.numel() &&
         std::memcmp(x.data_ptr(), y.data_ptr(), static_cast<size_t>(x.numel()) * dtype_size(x.dtype())) == 0;
}

void expect(bool ok, const std::string& what) {
  if (!ok) {
    ++failures;
    std::printf("  FAIL %s\n", what.c_str());
  }
}

/// n elements of a fresh buffer, starting `offset` elements after a 64-byte boundary (the allocator's).
Tensor at_offset(const Tensor& values, int64_t offset) {
  Tensor buffer = zeros({values.numel() + offset + 8}, TensorOptions(values.dtype()));
  Tensor view = buffer.narrow(0, offset, values.numel()).view(values.shape());
  view.copy_(values);
  return view;
}

Tensor random_values(const Shape& shape, DType dt, uint64_t seed, double scale = 3.0) {
  Generator gen(seed);
  return binary(BinaryOp::Mul, randn(shape, kFloat64, &gen), scale).to(dt);
}

std::string label(const char* what, DType dt, int64_t n, int64_t off_in, int64_t off_out) {
  return std::string(what) + " " + dtype_name(dt) + " n=" + std::to_string(n) + " offsets " +
         std::to_string(off_in) + "/" + std::to_string(off_out);
}

void check_elementwise(DType dt) {
  const Tol tol = tol_for(dt);
  for (int64_t n : {1, 3, 8, 33, 300}) {
    for (auto [oi, oo] : {std::pair<int64_t, int64_t>{0, 0}, {1, 1}, {3, 3}, {2, 0}}) {
      const Tensor x0 = random_values({n}, dt, n * 7 + oi);
      const Tensor g0 = random_values({n}, dt, n * 7 + 100, 1.0);
      for (int o = 0; o <= static_cast<int>(UnaryOp::Abs); ++o) {
        const auto op = static_cast<UnaryOp>(o);
        const bool positive = op == UnaryOp::Log || op == UnaryOp::Sqrt || op == UnaryOp::Rsqrt;
        const Tensor xin = at_offset(positive ? unary(UnaryOp::Abs, x0) : x0, oi);
        Tensor ref = empty({n}, TensorOptions(dt));
        cpu::unary(op, xin, ref);
        Tensor v1 = at_offset(zeros({n}, TensorOptions(dt)), oo),
               v2 = at_offset(zeros({n}, TensorOptions(dt)), oo);
        kc::unary_with(ElementwiseKernel::CudaScalar, op, xin, v1);
        kc::unary_with(ElementwiseKernel::CudaVector128, op, xin, v2);
        const std::string name = label(unary_op_name(op), dt, n, oi, oo);
        expect(same_bits(v1, v2), name + ": v2 differs from v1");
        expect(worst(v2, ref, tol) <= 1, name + ": v2 vs cpu");
        // backward (y from the CPU forward)
        const Tensor gin = at_offset(g0, oi);
        Tensor dref = empty({n}, TensorOptions(dt));
        cpu::unary_backward(op, gin, xin, ref, dref);
        Tensor d1 = at_offset(zeros({n}, TensorOptions(dt)), oo),
               d2 = at_offset(zeros({n}, TensorOptions(dt)), oo);
        const Tensor yin = at_offset(ref, oi);
        kc::unary_backward_with(ElementwiseKernel::CudaScalar, op, gin, xin, yin, d1);
        kc::unary_backward_with(ElementwiseKernel::CudaVector128, op, gin, xin, yin, d2);
        expect(same_bits(d1, d2), name + " backward: v2 differs from v1");
        expect(worst(d2, dref, tol) <= 1, name + " backward: v2 vs cpu");
      }
      // binary: full + full (and in place), scalar
      const Tensor b0 = random_values({n}, dt, n * 7 + 200);
      for (int o = 0; o <= static_cast<int>(BinaryOp::Ge); ++o) {
        const auto op = static_cast<BinaryOp>(o);
        const Tensor a = at_offset(op == BinaryOp::Pow ? unary(UnaryOp::Abs, x0) : x0, oi);
        const Tensor b = at_offset(b0, oi);
        Tensor ref = empty({n}, TensorOptions(dt));
        cpu::binary(op, a, b, ref);
        Tensor v1 = at_offset(zeros({n}, TensorOptions(dt)), oo),
               v2 = at_offset(zeros({n}, TensorOptions(dt)), oo);
        kc::binary_with(ElementwiseKernel::CudaScalar, op, a, b, v1);
        kc::binary_with(ElementwiseKernel::CudaVector128, op, a, b, v2);
        const std::string name = label(binary_op_name(op), dt, n, oi, oo);
        expect(same_bits(v1, v2), name + ": v2 differs from v1");
        expect(worst(v2, ref, tol) <= 1, name + ": v2 vs cpu");
        Tensor s1 = at_offset(zeros({n}, TensorOptions(dt)), oo),
               s2 = at_offset(zeros({n}, TensorOptions(dt)), oo);
        Tensor sref = empty({n}, TensorOptions(dt));
        cpu::binary_scalar(op, a, 0.75, o % 2 == 1, sref);
        kc::binary_scalar_with(ElementwiseKernel::CudaScalar, op, a, 0.75, o % 2 == 1, s1);
        kc::binary_scalar_with(ElementwiseKernel::CudaVector128, op, a, 0.75, o % 2 == 1, s2);
        expect(same_bits(s1, s2), name + " scalar: v2 differs from v1");
        expect(worst(s2, sref, tol) <= 1, name + " scalar: v2 vs cpu");
      }
      // in place: a += b
      {
        Tensor a = at_offset(x0, oi), b = at_offset(b0, oi);
        Tensor ref = empty({n}, TensorOptions(dt));
        cpu::binary(BinaryOp::Add, a, b, ref);
        kc::binary_with(ElementwiseKernel::CudaVector128, BinaryOp::Add, a, b, a);
        expect(same_bits(a, ref), label("add in place", dt, n, oi, oi) + ": v2 vs cpu");
      }
    }
  }
  // bias rows: [R, F] + [F] broadcast (either side), a scalar tensor [1] broadcast, for F around the pack.
  for (int64_t F : {1, 3, 8, 13, 96}) {
    for (int64_t off : {0, 1}) {
      const int64_t R = 5;
      const Tensor a = at_offset(random_values({R, F}, dt, F), off);
      const Tensor bias = at_offset(random_values({F}, dt, F + 1), 1 - off).unsqueeze(0).expand({R, F});
      const Tensor scalar = at_offset(random_values({1}, dt, F + 2), 1).unsqueeze(0).expand({R, F});
      for (const Tensor& b : {bias, scalar}) {
        for (int side = 0; side < 2; ++side) {
          const Tensor& lhs = side == 0 ? a : b;
          const Tensor& rhs = side == 0 ? b : a;
          Tensor ref = empty({R, F}, TensorOptions(dt));
          cpu::binary(BinaryOp::Sub, lhs, rhs, ref);
          Tensor v1 = at_offset(zeros({R, F}, TensorOptions(dt)), off);
          Tensor v2 = at_offset(zeros({R, F}, TensorOptions(dt)), off);
          kc::binary_with(ElementwiseKernel::CudaScalar, BinaryOp::Sub, lhs, rhs, v1);
          kc::binary_with(ElementwiseKernel::CudaVector128, BinaryOp::Sub, lhs, rhs, v2);
          const std::string name =
              label(b.size(1) == F && b.stride(1) == 1 ? "sub bias row" : "sub scalar", dt, R * F, off, off) +
              " side " + std::to_string(side);
          expect(same_bits(v1, v2), name + ": v2 differs from v1");
          expect(worst(v2, ref, tol) <= 1, name + ": v2 vs cpu");
        }
      }
    }
  }
}

void check_adamw(DType dt) {
  const DType moments = dt == kFloat64 ? kFloat64 : kFloat32;
  for (int64_t n : {1, 5, 8, 37, 1027}) {
    for (int64_t off : {0, 1, 3}) {
      for (int64_t moff : {off, int64_t{0}}) {
        AdamWStep s;
        s.lr = 1e-2;
        s.weight_decay = 0.1;
        s.step = 3;
        const Tensor p0 = random_values({n}, dt, n + 1), g0 = random_values({n}, dt, n + 2);
        const Tensor m0 = random_values({n}, moments, n + 3, 0.1);
        const Tensor v0 = unary(UnaryOp::Abs, random_values({n}, moments, n + 4, 0.1));
        Tensor pc = p0.clone(), mc = m0.clone(), vc = v0.clone();
        cpu::adamw(pc, g0, mc, vc, s);
        Tensor p[2], m[2], v[2];
        for (int k = 0; k < 2; ++k) {
          p[k] = at_offset(p0, off);
          m[k] = at_offset(m0, moff);
          v[k] = at_offset(v0, moff);
          kc::adamw_with(k == 0 ? AdamWKernel::CudaScalar : AdamWKernel::CudaVector128, p[k],
                         at_offset(g0, off), m[k], v[k], s);
        }
        const std::string name = label("adamw", dt, n, off, moff);
        expect(same_bits(p[0], p[1]) && same_bits(m[0], m[1]) && same_bits(v[0], v[1]),
               name + ": v2 differs from v1");
        // The CPU's default version computes in double (v1) or in float with FMAs (v2, on AVX-512): the
        // CUDA versions agree with it to float rounding.
        const Tol t = tol_for(dt);
        expect(worst(p[1], pc, t) <= 1 && worst(m[1], mc, tol_for(moments)) <= 1 &&
                   worst(v[1], vc, tol_for(moments)) <= 1,
               name + ": v2 vs cpu");
      }
    }
  }
}

void check_cross_entropy(DType dt) {
  const Tol tol = tol_for(dt);
  const DType loss_dt = dt == kFloat64 ? kFloat64 : kFloat32;
  for (int64_t V : {1, 7, 50, 1003}) {
    const int64_t N = 6;
    const Tensor logits = random_values({N, V}, dt, V);
    std::vector<int64_t> t(N);
    for (int64_t i = 0; i < N; ++i) t[i] = (i * 37 + 5) % V;
    t[2] = -100;  // ignored
    const Tensor targets = from_vector(t, {N});
    Tensor ref_loss = empty({N}, TensorOptions(loss_dt)), ref_grad = empty({N, V}, TensorOptions(dt));
    int64_t ref_count = 0;
    cpu::cross_entropy(logits, targets, -100, ref_loss, ref_grad, &ref_count);
    for (CrossEntropyKernel kernel :
         {CrossEntropyKernel::CudaBlockPerRow, CrossEntropyKernel::CudaVectorRow}) {
      for (bool with_grad : {true, false}) {
        Tensor loss = empty({N}, TensorOptions(loss_dt));
        Tensor grad = with_grad ? empty({N, V}, TensorOptions(dt)) : Tensor();
        int64_t count = 0;
        const int64_t bad = kc::cross_entropy_with(kernel, logits, targets, -100, loss, grad, &count);
        const std::string name = std::string("cross_entropy ") + cross_entropy_kernel_name(kernel) + " " +
                                 dtype_name(dt) + " V=" + std::to_string(V) + (with_grad ? "" : " loss only");
        expect(bad == -1 && count == ref_count, name + ": count / bad target");
        expect(worst(loss, ref_loss, tol) <= 1, name + ": row loss vs cpu");
        if (with_grad) expect(worst(grad, ref_grad, tol) <= 1, name + ": gradient vs cpu");
      }
    }
  }
}

template <typename I>
void check_embedding(DType dt) {
  for (int64_t C : {1, 33, 70}) {
    for (int64_t N : {1, 300}) {
      const int64_t V = 17;
      std::vector<I> ids(static_cast<size_t>(N));
      for (int64_t n = 0; n < N; ++n) ids[n] = static_cast<I>(n % 5 == 0 ? 3 : (n * 7 + n / 3) % V);
      const Tensor id_tensor = from_vector(ids, {N});
      const Tensor grad_out = random_values({N, C}, dt, N + C, 1.0);
      Tensor ref = zeros({V, C}, TensorOptions(dt));
      cpu::embedding_backward(grad_out, id_tensor, ref);
      const std::string name = std::string("embedding_backward ") + dtype_name(dt) + " ids " +
                               dtype_name(id_tensor.dtype()) + " N=" + std::to_string(N) +
                               " C=" + std::to_string(C);
      Tensor sorted[2];
      for (int run = 0; run < 2; ++run) {
        sorted[run] = zeros({V, C}, TensorOptions(dt));
        kc::embedding_backward_with(EmbeddingBackwardKernel::CudaSorted, grad_out, id_tensor, sorted[run]);
      }
      expect(same_bits(sorted[0], ref), name + ": sorted differs from the cpu bits");
      expect(same_bits(sorted[0], sorted[1]), name + ": sorted differs between runs");
      Tensor atomic = zeros({V, C}, TensorOptions(dt));
      kc::embedding_backward_with(EmbeddingBackwardKernel::CudaAtomic, grad_out, id_tensor, atomic);
      Tol t = tol_for(dt);
      if (dt == kFloat32) t = {1e-5, 1e-5};  // float atomics in arrival order
      expect(worst(atomic, ref, t) <= 1, name + ": atomic vs cpu");
    }
  }
}

/// Column sums (kernels/cuda/reduce.cu, sum_columns): against the CPU backend's, and bit for bit against a
/// second run. Shapes: one row, a partial tile of 32 columns, one slab and several (the last one short).
void check_sum_columns(DType dt) {
  for (auto [R, C] : {std::pair<int64_t, int64_t>{1, 1}, {5, 33}, {64, 31}, {1000, 77}, {3000, 40}}) {
    const Tensor x = random_values({R, C}, dt, R * 31 + C, 1.0);
    Tensor ref = empty({C}, TensorOptions(dt));
    cpu::sum_columns(x, ref);
    Tensor got[2];
    for (int run = 0; run < 2; ++run) {
      got[run] = full({C}, 7.0, TensorOptions(dt));  // poisoned: every column must be written
      kc::sum_columns(x, got[run]);
    }
    const std::string name =
        std::string("sum_columns ") + dtype_name(dt) + " " + std::to_string(R) + "x" + std::to_string(C);
    // Both sum in double, in other orders: float32 and bfloat16 results differ by at most one rounding.
    expect(worst(got[0], ref, tol_for(dt)) <= 1, name + ": vs cpu");
    expect(same_bits(got[0], got[1]), name + ": differs between runs");
  }
}

}  // namespace

int main() {
  for (DType dt : {kFloat32, kBFloat16, kFloat64}) {
    check_elementwise(dt);
    check_adamw(dt);
    check_cross_entropy(dt);
    check_embedding<int64_t>(dt);
    check_embedding<int32_t>(dt);
    check_sum_columns(dt);
  }
  std::printf("memory-bound kernels emulation: %d failures\n", failures);
  return failures != 0;
}
