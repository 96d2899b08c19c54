// Dropout on the weights inside the fused causal attention (kernels/attention_dropout.h): every CPU version,
// forward and backward, against softmax followed by dropout written with the unfused float64 ops (the same
// generator state, so the same mask); its finite-difference gradcheck; p = 0 leaving the op as it was; and
// the errors.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "autograd/attention.h"
#include "autograd/gradcheck.h"
#include "autograd/ops.h"
#include "kernels/attention_versions.h"
#include "kernels/kernels.h"
#include "test_support.h"

namespace brigade {
namespace {

using kernels::AttentionDropout;
using kernels::AttentionKernel;
using testing::allclose;

Tensor random(const Shape& shape, uint64_t seed) {
  Generator gen(seed);
  return randn(shape, kFloat64, &gen);
}

// A state with bits in both words of the seed and the offset, as a long run's generator has.
constexpr GeneratorState kState{0x9e3779b97f4a7c15ull, (uint64_t{3} << 32) + 17};

struct Reference {
  Tensor out, dq, dk, dv;
};

// out = dropout(softmax(scale q k^T, causal)) v in float64 by the unfused differentiable ops, the dropout
// drawing `state` (one draw, as the fused op takes); the gradients by autograd for the incoming dout.
Reference unfused(const Tensor& q0, const Tensor& k0, const Tensor& v0, const Tensor& dout, double scale,
                  double p, const GeneratorState& state) {
  const int64_t B = q0.size(0), H = q0.size(1), T = q0.size(2), D = q0.size(3);
  Tensor q = q0.detach().clone().set_requires_grad(), k = k0.detach().clone().set_requires_grad();
  Tensor v = v0.detach().clone().set_requires_grad();
  auto flat = [&](const Tensor& t) { return t.reshape({B * H, T, D}); };
  Tensor scores = matmul(flat(q), flat(k), false, true) * scale;
  scores = masked_fill(scores, kernels::causal_mask(T, TensorOptions(kFloat64)),
                       -std::numeric_limits<double>::infinity());
  Generator masks;
  masks.set_state(state);
  Tensor weights = dropout(softmax(scores), p, /*training=*/true, &masks);
  Tensor out = matmul(weights, flat(v)).reshape({B, H, T, D});
  sum(out * dout).backward();
  return {out.detach(), q.grad(), k.grad(), v.grad()};
}

struct Shape4 {
  int64_t B, H, T, D;
};

// Odd sizes (padding rows and columns), a row longer than one 16-lane vector of keys, the baby GPT's head
// (T 64, D 32), a T past 64, and long T with GPT-2's head (v3's 12-row blocks: T 144 reads q and k where
// they lie, T 300 copies them).
const std::vector<Shape4> kShapes = {{2, 3, 13, 5},  {1, 2, 37, 20},  {2, 2, 64, 32},
                                     {1, 1, 70, 16}, {1, 1, 144, 64}, {1, 1, 300, 64}};

void check_version(AttentionKernel kernel, DType dtype, double rtol, double atol) {
  for (const Shape4& s : kShapes) {
    for (double p : {0.2, 0.5}) {
      SCOPED_TRACE(std::string(kernels::attention_kernel_name(kernel)) + " " + dtype_name(dtype) +
                   " T=" + std::to_string(s.T) + " D=" + std::to_string(s.D) + " p=" + std::to_string(p));
      const Shape shape{s.B, s.H, s.T, s.D};
      const Tensor q = random(shape, 1), k = random(shape, 2), v = random(shape, 3), dout = random(shape, 4);
      const double scale = 1.0 / std::sqrt(static_cast<double>(s.D));
      const AttentionDropout dropout{p, kState};
      const Tensor qd = q.to(dtype), kd = k.to(dtype), vd = v.to(dtype), gd = dout.to(dtype);
      // The reference on the inputs as the kernel sees them (rounded to its dtype).
      const Reference ref =
          unfused(qd.to(kFloat64), kd.to(kFloat64), vd.to(kFloat64), gd.to(kFloat64), scale, p, kState);
      Tensor out = empty(shape, TensorOptions(dtype));
      Tensor lse = empty({s.B, s.H, s.T}, TensorOptions(dtype == kFloat64 ? kFloat64 : kFloat32));
      kernels::causal_attention_forward_with(kernel, qd, kd, vd, scale, out, lse, dropout);
      EXPECT_TRUE(allclose(out, ref.out, rtol, atol)) << "out";

      Tensor dq = empty(shape, TensorOptions(dtype)), dk = empty(shape, TensorOptions(dtype));
      Tensor dv = empty(shape, TensorOptions(dtype));
      kernels::causal_attention_backward_with(kernel, gd, qd, kd, vd, out, lse, scale, dq, dk, dv, dropout);
      EXPECT_TRUE(allclose(dq, ref.dq, rtol, atol)) << "dq";
      EXPECT_TRUE(allclose(dk, ref.dk, rtol, atol)) << "dk";
      EXPECT_TRUE(allclose(dv, ref.dv, rtol, atol)) << "dv";
    }
  }
}

// Each CPU version against the unfused float64 ops. Tolerances: float64 ~1e-11 (the same sums in another
// order); float32 1e-4 relative + 1e-5 absolute on O(1) values (products of 20-300 terms in float, the
// exp to ~2 ulp); bfloat16 (inputs rounded to 8 bits, float math, outputs rounded once) 3e-2 relative +
// 3e-2 absolute; a wrong mask moves entries by O(0.1) or more.
TEST(AttentionDropout, EveryCpuVersionDropsTheWeightsThatSoftmaxThenDropoutDrops) {
  for (AttentionKernel kernel : kernels::all_attention_kernels()) {
    if (kernels::attention_kernel_backend(kernel) != DeviceKind::CPU) continue;
    for (DType dtype : {kFloat32, kFloat64, kBFloat16}) {
      if (!kernels::attention_kernel_supports(kernel, dtype, 16)) continue;
      if (dtype == kFloat64) {
        check_version(kernel, dtype, 1e-10, 1e-11);
      } else if (dtype == kBFloat16) {
        check_version(kernel, dtype, 3e-2, 3e-2);
      } else {
        check_version(kernel, dtype, 1e-4, 1e-5);
      }
    }
  }
}

// The mask matters (dropout moves the output far beyond the tolerance above), and p = 0 is the op without
// dropout, bit for bit.
TEST(AttentionDropout, TheMaskMovesTheOutputAndPZeroIsThePlainOp) {
  const Shape shape{2, 2, 24, 8};
  const Tensor q = random(shape, 5).to(kFloat32), k = random(shape, 6).to(kFloat32);
  const Tensor v = random(shape, 7).to(kFloat32);
  const kernels::AttentionOutput plain = kernels::causal_attention(q, k, v, 0.35);
  const kernels::AttentionOutput zero = kernels::causal_attention(q, k, v, 0.35, {0.0, kState});
  const kernels::AttentionOutput dropped = kernels::causal_attention(q, k, v, 0.35, {0.3, kState});
  EXPECT_TRUE(allclose(zero.out, plain.out, 0.0, 0.0));
  EXPECT_TRUE(allclose(dropped.lse, plain.lse, 0.0, 0.0));  // lse is the undropped softmax's
  EXPECT_FALSE(allclose(dropped.out, plain.out, 0.0, 0.1));
  // Another state, another mask; the same state, the same bits.
  const kernels::AttentionOutput again = kernels::causal_attention(q, k, v, 0.35, {0.3, kState});
  const kernels::AttentionOutput other = kernels::causal_attention(q, k, v, 0.35, {0.3, {kState.seed, 18}});
  EXPECT_TRUE(allclose(again.out, dropped.out, 0.0, 0.0));
  EXPECT_FALSE(allclose(other.out, dropped.out, 0.0, 0.1));
}

// The differentiable op with a fixed state is a fixed function of q, k, v: its gradients by finite
// differences, and the packed self-attention gives the head split's bits with the same mask.
TEST(AttentionDropout, GradcheckAndThePackedFormAgree) {
  const Shape shape{1, 2, 6, 3};
  const std::vector<Tensor> inputs{random(shape, 8).set_requires_grad(), random(shape, 9).set_requires_grad(),
                                   random(shape, 10).set_requires_grad()};
  const AttentionDropout dropout{0.3, kState};
  const autograd::GradcheckResult r = autograd::gradcheck(
      [&](const std::vector<Tensor>& in) {
        return brigade::causal_attention(in[0], in[1], in[2], 0.6, dropout);
      },
      inputs);
  EXPECT_TRUE(r.ok) << r.message;
  EXPECT_GT(r.checked, 0);

  // Odd sizes (copied into scratch) and whole vectors (v3 reads the strided heads where they lie).
  for (const Shape& dims : {Shape{2, 9, 3, 4}, Shape{1, 64, 2, 32}}) {
    const int64_t B = dims[0], T = dims[1], H = dims[2], D = dims[3];
    Generator gen(12);
    const Tensor base = randn({B, T, 3 * H * D}, kFloat32, &gen);
    const Tensor heads = base.view({B, T, 3, H, D}).permute({2, 0, 3, 1, 4});
    const Tensor packed = causal_self_attention(base, H, 0.5, dropout);
    const Tensor split =
        brigade::causal_attention(heads.select(0, 0), heads.select(0, 1), heads.select(0, 2), 0.5, dropout)
            .permute({0, 2, 1, 3})
            .reshape({B, T, H * D});
    EXPECT_TRUE(allclose(packed, split, 0.0, 0.0)) << shape_str(dims);
    const Tensor copies =
        brigade::causal_attention(heads.select(0, 0).contiguous(), heads.select(0, 1).contiguous(),
                                  heads.select(0, 2).contiguous(), 0.5, dropout)
            .permute({0, 2, 1, 3})
            .reshape({B, T, H * D});
    EXPECT_TRUE(allclose(packed, copies, 0.0, 0.0)) << shape_str(dims);
  }
}

TEST(AttentionDropout, OutOfRangePAndVersionsWithoutDropoutAreRefused) {
  const Tensor q = random({1, 1, 4, 2}, 11).to(kFloat32);
  for (double p : {-0.1, 1.0, 1.5, std::nan("")}) {
    const std::string message = testing::message_of<ValueError>([&] {
      kernels::causal_attention(q, q, q, 1.0, {p, kState});
    });
    EXPECT_NE(message.find("dropout p must lie in [0, 1)"), std::string::npos) << message;
  }
  for (AttentionKernel kernel : kernels::all_attention_kernels()) {
    EXPECT_EQ(kernels::attention_kernel_supports_dropout(kernel),
              kernels::attention_kernel_backend(kernel) == DeviceKind::CPU)
        << kernels::attention_kernel_name(kernel);
  }
}

}  // namespace
}  // namespace brigade
