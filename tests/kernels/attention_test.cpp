// kernels::causal_attention and its backward on the CPU, against a reference built from the unfused ops
// (matmul, masked_fill with the causal mask, softmax, softmax_backward), for float32, float64 and bfloat16
// at odd T and D, strided (head-split) inputs, degenerate shapes, thread-count independence and errors.
//
// Tolerances: the reference runs in the input's dtype (float32 / float64) or, for bfloat16 inputs, in
// float32 on the same (bf16-representable) values. float64: rtol 1e-11, atol 1e-12. float32: rtol 1e-4,
// atol 2e-6 (both sides sum D-long products in float; the fused kernel rescales by 1/l at the end, the
// reference divides each p first). bfloat16: the fused result is rounded once to bf16 (2^-8 relative) and
// compared with the float32 reference: rtol 1e-2, atol 2e-3 (values are O(1)).
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "kernels/kernels.h"
#include "test_support.h"

namespace brigade {
namespace {

using testing::allclose;

struct Reference {
  Tensor out, lse, dq, dk, dv;
};

/// Attention by the unfused ops, in q's dtype (float32 for bfloat16 q). q, k, v, dout [B, H, T, D].
Reference reference(const Tensor& q_in, const Tensor& k_in, const Tensor& v_in, const Tensor& dout_in,
                    double scale) {
  const DType dtype = q_in.dtype() == kBFloat16 ? kFloat32 : q_in.dtype();
  const int64_t B = q_in.size(0), H = q_in.size(1), T = q_in.size(2), D = q_in.size(3);
  auto flat = [&](const Tensor& t) { return t.to(dtype).contiguous().view({B * H, T, D}); };
  const Tensor q = flat(q_in), k = flat(k_in), v = flat(v_in), g = flat(dout_in);
  Tensor scores = kernels::binary(kernels::BinaryOp::Mul, kernels::matmul(q, k, false, true), scale);
  scores = kernels::masked_fill(scores, kernels::causal_mask(T, TensorOptions(dtype)),
                                -std::numeric_limits<double>::infinity());
  const Tensor p = kernels::softmax(scores);
  Reference r;
  r.out = kernels::matmul(p, v).view({B, H, T, D});
  // lse_i = s_i0 - log_softmax_i0 (key 0 is visible to every query).
  Tensor log_p = kernels::log_softmax(scores);
  r.lse = kernels::binary(kernels::BinaryOp::Sub, scores.select(2, 0), log_p.select(2, 0)).view({B, H, T});
  r.dv = kernels::matmul(p, g, true, false).view({B, H, T, D});
  const Tensor dp = kernels::matmul(g, v, false, true);
  const Tensor ds = kernels::softmax_backward(dp, p);
  r.dq = kernels::binary(kernels::BinaryOp::Mul, kernels::matmul(ds, k), scale).view({B, H, T, D});
  r.dk =
      kernels::binary(kernels::BinaryOp::Mul, kernels::matmul(ds, q, true, false), scale).view({B, H, T, D});
  return r;
}

struct Tolerance {
  double rtol, atol;
};

Tolerance tolerance_for(DType dtype) {
  if (dtype == kFloat64) return {1e-11, 1e-12};
  if (dtype == kFloat32) return {1e-4, 2e-6};
  return {1e-2, 2e-3};
}

Tensor random(const Shape& shape, DType dtype, uint64_t seed) {
  Generator gen(seed);
  return randn(shape, kFloat32, &gen).to(dtype);
}

struct Case {
  int64_t B, H, T, D;
  DType dtype;
};

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  const Case& c = info.param;
  return std::string(dtype_name(c.dtype)) + "_B" + std::to_string(c.B) + "_H" + std::to_string(c.H) + "_T" +
         std::to_string(c.T) + "_D" + std::to_string(c.D);
}

class CausalAttentionTest : public ::testing::TestWithParam<Case> {};

TEST_P(CausalAttentionTest, ForwardAndBackwardMatchTheUnfusedOps) {
  const Case c = GetParam();
  const Shape shape{c.B, c.H, c.T, c.D};
  const Tensor q = random(shape, c.dtype, 1), k = random(shape, c.dtype, 2), v = random(shape, c.dtype, 3);
  const Tensor dout = random(shape, c.dtype, 4);
  const double scale = 1.0 / std::sqrt(static_cast<double>(c.D));
  const Reference ref = reference(q, k, v, dout, scale);
  const Tolerance tol = tolerance_for(c.dtype);

  kernels::AttentionOutput fwd = kernels::causal_attention(q, k, v, scale);
  EXPECT_EQ(fwd.out.dtype(), c.dtype);
  EXPECT_EQ(fwd.lse.dtype(), c.dtype == kFloat64 ? kFloat64 : kFloat32);
  EXPECT_EQ(fwd.lse.shape(), (Shape{c.B, c.H, c.T}));
  EXPECT_TRUE(allclose(fwd.out, ref.out, tol.rtol, tol.atol)) << "out";
  // lse is kept in float32 even for bfloat16 inputs: the float32 tolerance applies.
  const Tolerance lse_tol = c.dtype == kFloat64 ? tol : tolerance_for(kFloat32);
  EXPECT_TRUE(allclose(fwd.lse, ref.lse, lse_tol.rtol, lse_tol.atol)) << "lse";

  kernels::AttentionGrads grads = kernels::causal_attention_backward(dout, q, k, v, fwd.out, fwd.lse, scale);
  // bfloat16: out was rounded to bf16 before delta = dout . out; allow twice the forward tolerance.
  const double factor = c.dtype == kBFloat16 ? 2.0 : 1.0;
  EXPECT_TRUE(allclose(grads.dq, ref.dq, factor * tol.rtol, factor * tol.atol)) << "dq";
  EXPECT_TRUE(allclose(grads.dk, ref.dk, factor * tol.rtol, factor * tol.atol)) << "dk";
  EXPECT_TRUE(allclose(grads.dv, ref.dv, factor * tol.rtol, factor * tol.atol)) << "dv";
}

INSTANTIATE_TEST_SUITE_P(Shapes, CausalAttentionTest,
                         ::testing::Values(Case{1, 1, 1, 1, kFloat32}, Case{2, 3, 7, 5, kFloat32},
                                           Case{2, 4, 13, 16, kFloat32}, Case{1, 2, 33, 9, kFloat32},
                                           Case{1, 1, 64, 32, kFloat32}, Case{1, 1, 1, 1, kFloat64},
                                           Case{2, 3, 7, 5, kFloat64}, Case{1, 2, 33, 9, kFloat64},
                                           Case{2, 3, 7, 5, kBFloat16}, Case{1, 2, 33, 9, kBFloat16},
                                           Case{1, 2, 13, 16, kBFloat16}),
                         case_name);

// The head split of a GPT: q, k, v are views of one [B, T, 3, H, D] projection (stride 1 on D only). The
// kernel reads them in place and must give the bits of contiguous copies.
TEST(CausalAttention, StridedHeadViewsGiveTheSameBitsAsContiguousCopies) {
  const int64_t B = 2, T = 11, H = 3, D = 8;
  const Tensor qkv = random({B, T, 3, H, D}, kFloat32, 5);
  const Tensor heads = qkv.permute({2, 0, 3, 1, 4});  // [3, B, H, T, D]
  const Tensor q = heads.select(0, 0), k = heads.select(0, 1), v = heads.select(0, 2);
  ASSERT_FALSE(q.is_contiguous());
  const Tensor dout = random({B, T, H, D}, kFloat32, 6).permute({0, 2, 1, 3});  // strided too
  kernels::AttentionOutput strided = kernels::causal_attention(q, k, v, 0.3);
  kernels::AttentionOutput packed =
      kernels::causal_attention(q.contiguous(), k.contiguous(), v.contiguous(), 0.3);
  EXPECT_TRUE(allclose(strided.out, packed.out, 0.0, 0.0));
  EXPECT_TRUE(allclose(strided.lse, packed.lse, 0.0, 0.0));
  kernels::AttentionGrads gs =
      kernels::causal_attention_backward(dout, q, k, v, strided.out, strided.lse, 0.3);
  kernels::AttentionGrads gp = kernels::causal_attention_backward(
      dout.contiguous(), q.contiguous(), k.contiguous(), v.contiguous(), packed.out, packed.lse, 0.3);
  EXPECT_TRUE(allclose(gs.dq, gp.dq, 0.0, 0.0));
  EXPECT_TRUE(allclose(gs.dk, gp.dk, 0.0, 0.0));
  EXPECT_TRUE(allclose(gs.dv, gp.dv, 0.0, 0.0));
}

// The *_out forms write into the caller's views: here the merged-heads layout of a [B, T, C] tensor and
// the q/k/v parts of one [B, T, 3, H, D] gradient. Same bits as the allocating forms.
TEST(CausalAttention, OutFormsWriteIntoStridedViews) {
  const int64_t B = 2, T = 9, H = 3, D = 4;
  const Tensor q = random({B, H, T, D}, kFloat32, 21), k = random({B, H, T, D}, kFloat32, 22);
  const Tensor v = random({B, H, T, D}, kFloat32, 23), dout = random({B, H, T, D}, kFloat32, 24);
  kernels::AttentionOutput ref = kernels::causal_attention(q, k, v, 0.4);
  kernels::AttentionGrads ref_g = kernels::causal_attention_backward(dout, q, k, v, ref.out, ref.lse, 0.4);

  Tensor merged = zeros({B, T, H * D});
  const Tensor out = merged.view({B, T, H, D}).permute({0, 2, 1, 3});
  Tensor lse = zeros({B, H, T});
  kernels::causal_attention_out(q, k, v, 0.4, out, lse);
  EXPECT_TRUE(allclose(out, ref.out, 0.0, 0.0));
  EXPECT_TRUE(allclose(lse, ref.lse, 0.0, 0.0));

  Tensor packed = zeros({B, T, 3, H, D});
  auto part = [&](int64_t i) { return packed.permute({2, 0, 3, 1, 4}).select(0, i); };
  kernels::causal_attention_backward_out(dout, q, k, v, out, lse, 0.4, part(0), part(1), part(2));
  EXPECT_TRUE(allclose(part(0), ref_g.dq, 0.0, 0.0));
  EXPECT_TRUE(allclose(part(1), ref_g.dk, 0.0, 0.0));
  EXPECT_TRUE(allclose(part(2), ref_g.dv, 0.0, 0.0));

  // Outputs must be writable views with stride 1 on D, and lse contiguous.
  EXPECT_THROW(kernels::causal_attention_out(q, k, v, 0.4, zeros({B, H, D, T}).transpose(2, 3), lse),
               ValueError);
  EXPECT_THROW(kernels::causal_attention_out(q, k, v, 0.4, zeros({1, H, T, D}).expand({B, H, T, D}), lse),
               ValueError);
  EXPECT_THROW(kernels::causal_attention_out(q, k, v, 0.4, out, zeros({B, T, H}).permute({0, 2, 1})),
               ValueError);
  EXPECT_THROW(kernels::causal_attention_out(q, k, v, 0.4, zeros({B, H, T, D}, kFloat64), lse), DTypeError);
}

// A last dim that is not unit-stride is copied by the dispatch: still the reference's result.
TEST(CausalAttention, NonUnitLastStrideIsAccepted) {
  const Tensor base = random({1, 2, 4, 6}, kFloat32, 7);  // q = base transposed: [1, 2, 6, 4], stride 6 on D
  const Tensor q = base.transpose(2, 3), k = random({1, 2, 6, 4}, kFloat32, 8),
               v = random({1, 2, 6, 4}, kFloat32, 9);
  const Reference ref = reference(q, k, v, random({1, 2, 6, 4}, kFloat32, 10), 0.5);
  EXPECT_TRUE(allclose(kernels::causal_attention(q, k, v, 0.5).out, ref.out, 1e-4, 2e-6));
}

// Above the parallel threshold (B H T (T+1) D >= 2^21) the (b, h) tasks spread over threads; each task is
// still summed by one thread in one order, so 1 and 2 threads give the same bits.
TEST(CausalAttention, OneAndTwoThreadsGiveTheSameBits) {
  const Shape shape{4, 4, 64, 32};
  const Tensor q = random(shape, kFloat32, 11), k = random(shape, kFloat32, 12),
               v = random(shape, kFloat32, 13);
  const Tensor dout = random(shape, kFloat32, 14);
  const int threads = omp_get_max_threads();
  auto run = [&](int n) {
    omp_set_num_threads(n);
    kernels::AttentionOutput f = kernels::causal_attention(q, k, v, 0.2);
    kernels::AttentionGrads g = kernels::causal_attention_backward(dout, q, k, v, f.out, f.lse, 0.2);
    return std::vector<Tensor>{f.out, f.lse, g.dq, g.dk, g.dv};
  };
  const std::vector<Tensor> one = run(1), two = run(2);
  omp_set_num_threads(threads);
  for (size_t i = 0; i < one.size(); ++i) EXPECT_TRUE(allclose(two[i], one[i], 0.0, 0.0)) << "output " << i;
}

TEST(CausalAttention, DegenerateShapes) {
  // T == 0: empty results.
  const Tensor empty_q = zeros({2, 3, 0, 4});
  kernels::AttentionOutput e = kernels::causal_attention(empty_q, empty_q, empty_q, 1.0);
  EXPECT_EQ(e.out.shape(), (Shape{2, 3, 0, 4}));
  EXPECT_EQ(e.lse.shape(), (Shape{2, 3, 0}));
  // D == 0: every score is 0, so lse_i = log(i + 1); gradients are empty.
  const Tensor no_features = zeros({1, 2, 3, 0});
  kernels::AttentionOutput z = kernels::causal_attention(no_features, no_features, no_features, 1.0);
  const Tensor expected =
      from_vector<float>({0.0f, std::log(2.0f), std::log(3.0f)}, {1, 1, 3}).expand({1, 2, 3});
  EXPECT_TRUE(allclose(z.lse, expected, 1e-6, 1e-7));
  kernels::AttentionGrads g = kernels::causal_attention_backward(no_features, no_features, no_features,
                                                                 no_features, z.out, z.lse, 1.0);
  EXPECT_EQ(g.dq.shape(), (Shape{1, 2, 3, 0}));
}

TEST(CausalAttention, ErrorsNameWhatWasExpected) {
  const Tensor q = zeros({1, 2, 3, 4});
  EXPECT_THROW(kernels::causal_attention(zeros({2, 3, 4}), zeros({2, 3, 4}), zeros({2, 3, 4}), 1.0),
               ShapeError);
  EXPECT_THROW(kernels::causal_attention(q, zeros({1, 2, 3, 5}), q, 1.0), ShapeError);
  EXPECT_THROW(kernels::causal_attention(q, q, q.to(kFloat64), 1.0), DTypeError);
  EXPECT_THROW(kernels::causal_attention(q.to(kInt64), q.to(kInt64), q.to(kInt64), 1.0), DTypeError);
  EXPECT_THROW(kernels::causal_attention(q, q, q, std::nan("")), ValueError);
  kernels::AttentionOutput f = kernels::causal_attention(q, q, q, 1.0);
  EXPECT_THROW(kernels::causal_attention_backward(q, q, q, q, f.out, zeros({1, 2, 4}), 1.0), ShapeError);
  EXPECT_THROW(kernels::causal_attention_backward(q, q, q, q, f.out, f.lse.to(kFloat64), 1.0), DTypeError);
  try {
    kernels::causal_attention(q, zeros({1, 2, 3, 5}), q, 1.0);
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("[B, H, T, D]"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace brigade
