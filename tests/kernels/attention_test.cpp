// kernels::causal_attention and its backward on the CPU beyond their values: strided (head-split) inputs
// give the bits of contiguous copies, the *_out forms write into strided views, thread-count independence,
// degenerate shapes and errors. Their values (float32, float64 and bfloat16 at odd T and D, head-split and
// non-unit-stride views, T = 0 and D = 0) are checked by the op table (tests/ops/op_cases_attention.h)
// against kernels/reference.
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

Tensor random(const Shape& shape, DType dtype, uint64_t seed) {
  Generator gen(seed);
  return randn(shape, kFloat32, &gen).to(dtype);
}

void check_strided_heads(int64_t B, int64_t T, int64_t H, int64_t D) {
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

// The head split of a GPT: q, k, v are views of one [B, T, 3, H, D] projection (stride 1 on D only). The
// kernel reads them in place and must give the bits of contiguous copies: at odd sizes (every version
// copies them into padded scratch) and at whole vectors of D in whole blocks of T (the AVX-512 version
// reads q, v and the backward's operands where they lie, 3 H D floats a row apart).
TEST(CausalAttention, StridedHeadViewsGiveTheSameBitsAsContiguousCopies) {
  for (const Shape& dims :
       {Shape{2, 11, 3, 8}, Shape{2, 64, 2, 32}, Shape{1, 48, 2, 64}, Shape{1, 144, 1, 64}}) {
    SCOPED_TRACE(shape_str(dims));
    check_strided_heads(dims[0], dims[1], dims[2], dims[3]);
  }
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
  // Outputs over an input's storage are refused (the AVX-512 version reads its inputs in place).
  Tensor qv = zeros({2, 1, 2, 3, 4});
  const Tensor v = qv.select(0, 1);
  try {
    kernels::causal_attention_out(q, q, v, 1.0, qv.select(0, 0), zeros({1, 2, 3}));
    ADD_FAILURE() << "an out over v was accepted";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("out shares storage with v"), std::string::npos) << e.what();
  }
  Tensor g = empty({1, 2, 3, 4});
  EXPECT_THROW(kernels::causal_attention_backward_out(q, q, q, q, f.out, f.lse, 1.0, g, g.clone(), f.out, {}),
               ValueError);
}

}  // namespace
}  // namespace brigade
