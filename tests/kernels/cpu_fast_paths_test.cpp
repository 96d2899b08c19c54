// The CPU backend's fast paths, checked where the op table's small cases do not reach them:
//  - copies through every layout class of tensor/strided_loop.h (contiguous, runs, row/scalar broadcast,
//    tiled 4 x 4 transposes with ragged edges, offsets) against index arithmetic on the source values;
//  - elementwise runs (contiguous, row-vector and scalar broadcast, strided) against a double reference;
//  - the embedding backward's sums in position order, bit for bit, through both of its sorts;
//  - where and masked_fill's vector selects: NaN conditions true, -0 false, in the body and the tail;
//  - float GELU (exp form) and its gradient against the tanh form in double over a dense grid and at
//    special values, and softmax / cross-entropy with -inf logits;
//  - results that do not depend on the thread count at sizes above the threading thresholds (the loops
//    run on 2 threads there even on a 1-core machine), bit for bit;
//  - column sums (a sum over leading dims) against the transposed copy's row sums, bit for bit;
//  - float row sums (four rows at a time where the CPU has AVX-512) against the chunked association, bit
//    for bit;
//  - the global norm's float sum of squares (eight double lanes at a time where the CPU has AVX-512)
//    against the chunked association written out in scalar double, bit for bit, on 1 and 2 threads;
//  - the float AdamW update, v1 (eight lanes at a time where the CPU has AVX-512) against the scalar formula
//    in double, bit for bit, over a length with a tail; v2 (float, 16 lanes, FMAs) within a few float
//    roundings of it, relative to the terms that make each value;
//  - float dropout and the float random fills, their Philox draws 16 at a time where the CPU has AVX-512,
//    against the scalar rules (dropout keeps element i iff philox::uniform(seed, offset, i) >= p; a fill's
//    element i is philox::normal or uniform(seed, offset, i)), bit for bit.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/adamw_versions.h"
#include "kernels/backend.h"
#include "kernels/cpu/dropout_avx512.h"
#include "kernels/cpu/exp_rows_avx512.h"  // avx512_rows_run
#include "kernels/cpu/gemm_packing.h"
#include "kernels/kernels.h"
#include "tensor/device_ops.h"
#include "tensor/philox.h"
#include "tests/test_support.h"

namespace brigade::testing {
namespace {

using kernels::BinaryOp;
using kernels::UnaryOp;

std::vector<double> normal_values(size_t n, uint64_t seed, double scale = 1.0) {
  std::vector<double> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = scale * philox::normal(seed, 0, i);
  return v;
}

Tensor normal_tensor(const Shape& shape, uint64_t seed, DType dtype = kFloat32, double scale = 1.0) {
  return from_vector<double>(normal_values(static_cast<size_t>(shape_numel(shape)), seed, scale), shape)
      .to(dtype);
}

// ---- copies ---------------------------------------------------------------------------------------------

// contiguous() of x.t() for [rows, cols] float (the tiled transpose) equals the transpose done by hand.
TEST(CpuFastPaths, TransposedCopiesMatchIndexArithmetic) {
  for (auto [rows, cols] : std::vector<std::pair<int64_t, int64_t>>{
           {8, 8}, {9, 13}, {32, 32}, {33, 65}, {128, 1024}, {1027, 130}, {5, 300}, {300, 7}}) {
    SCOPED_TRACE(::testing::Message() << rows << " x " << cols);
    std::vector<double> v = normal_values(static_cast<size_t>(rows * cols), 3);
    Tensor x = from_vector<double>(v, {rows, cols}).to(kFloat32);
    std::vector<double> expected(v.size());
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < cols; ++c) {
        expected[static_cast<size_t>(c * rows + r)] =
            static_cast<float>(v[static_cast<size_t>(r * cols + c)]);
      }
    }
    EXPECT_TRUE(allclose(x.t().contiguous(), from_vector<double>(expected, {cols, rows}), 0, 0));
    // float64 and a dtype-converting transpose take the scalar tile loop.
    Tensor xd = from_vector<double>(v, {rows, cols});
    std::vector<double> expected_d(v.size());
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < cols; ++c) {
        expected_d[static_cast<size_t>(c * rows + r)] = v[static_cast<size_t>(r * cols + c)];
      }
    }
    EXPECT_TRUE(allclose(xd.t().contiguous(), from_vector<double>(expected_d, {cols, rows}), 0, 0));
    EXPECT_TRUE(allclose(xd.t().to(kFloat32), from_vector<double>(expected, {cols, rows}), 0, 0));
  }
}

TEST(CpuFastPaths, CopiesOfViewsMatchIndexArithmetic) {
  // [B, T, H, D] -> [B, H, T, D] (runs of D), a narrowed transpose with an offset, an expanded row and a
  // broadcast scalar.
  const int64_t B = 3, T = 5, H = 4, D = 6;
  std::vector<double> v = normal_values(static_cast<size_t>(B * T * H * D), 4);
  Tensor x = from_vector<double>(v, {B, T, H, D}).to(kFloat32);
  std::vector<double> heads;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t t = 0; t < T; ++t)
        for (int64_t d = 0; d < D; ++d) {
          heads.push_back(static_cast<float>(v[static_cast<size_t>(((b * T + t) * H + h) * D + d)]));
        }
  EXPECT_TRUE(allclose(x.permute({0, 2, 1, 3}).contiguous(), from_vector<double>(heads, {B, H, T, D}), 0, 0));

  Tensor m = from_vector<double>(normal_values(40 * 30, 5), {40, 30});
  Tensor view = m.narrow(0, 3, 20).narrow(1, 2, 17).t();  // [17, 20], offset, transposed
  std::vector<double> mv = m.to_vector<double>(), expected;
  for (int64_t c = 2; c < 19; ++c)
    for (int64_t r = 3; r < 23; ++r) expected.push_back(mv[static_cast<size_t>(r * 30 + c)]);
  EXPECT_TRUE(allclose(view.contiguous(), from_vector<double>(expected, {17, 20}), 0, 0));

  Tensor row = from_vector<double>({1.5, -2.0, 3.25}, {3});
  EXPECT_TRUE(allclose(
      row.expand({4, 3}).contiguous(),
      from_vector<double>({1.5, -2.0, 3.25, 1.5, -2.0, 3.25, 1.5, -2.0, 3.25, 1.5, -2.0, 3.25}, {4, 3}), 0,
      0));
  Tensor scalar = full({}, 7.0);
  EXPECT_TRUE(allclose(scalar.expand({2, 3}).contiguous(), full({2, 3}, 7.0), 0, 0));
}

TEST(CpuFastPaths, FillsOfContiguousAndStridedTensors) {
  Tensor x = full({6, 7}, 1.0);
  x.narrow(1, 2, 3).fill_(-0.0);  // strided fill; -0.0 is not memset's all-zero bits
  std::vector<double> v = x.to_vector<double>();
  for (int64_t r = 0; r < 6; ++r) {
    for (int64_t c = 0; c < 7; ++c) {
      const double e = v[static_cast<size_t>(r * 7 + c)];
      if (c >= 2 && c < 5) {
        EXPECT_EQ(e, 0.0);
        EXPECT_TRUE(std::signbit(e));
      } else {
        EXPECT_EQ(e, 1.0);
      }
    }
  }
  Tensor z = full({1000}, 3.0, TensorOptions(kBFloat16));
  z.fill_(0.0);
  EXPECT_TRUE(allclose(z, zeros({1000}), 0, 0));
  Tensor i = full({17}, 5.0, TensorOptions(kInt64));
  i.fill_(-2.0);
  EXPECT_EQ(i.to_vector<int64_t>(), std::vector<int64_t>(17, -2));
}

// ---- elementwise runs -----------------------------------------------------------------------------------

TEST(CpuFastPaths, BinaryBroadcastLayoutsMatchADoubleReference) {
  const int64_t R = 37, C = 129;
  Tensor a = normal_tensor({R, C}, 6);
  std::vector<double> av = a.to_vector<double>();
  struct Layout {
    const char* name;
    Tensor b;
  };
  Tensor col = normal_tensor({R, 1}, 8);
  std::vector<Layout> layouts = {{"row vector", normal_tensor({C}, 7)},
                                 {"column", col},
                                 {"scalar", normal_tensor({}, 9)},
                                 {"transposed", normal_tensor({C, R}, 10).t()},
                                 {"same", normal_tensor({R, C}, 11)}};
  for (const Layout& l : layouts) {
    SCOPED_TRACE(l.name);
    std::vector<double> bv = l.b.expand({R, C}).contiguous().to_vector<double>();
    for (BinaryOp op : {BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul, BinaryOp::Div, BinaryOp::Maximum}) {
      std::vector<double> expected(av.size());
      for (size_t i = 0; i < av.size(); ++i) {
        const float x = static_cast<float>(av[i]), y = static_cast<float>(bv[i]);
        float e = 0;
        switch (op) {
          case BinaryOp::Add:
            e = x + y;
            break;
          case BinaryOp::Sub:
            e = x - y;
            break;
          case BinaryOp::Mul:
            e = x * y;
            break;
          case BinaryOp::Div:
            e = x / y;
            break;
          default:
            e = x > y ? x : y;
        }
        expected[i] = e;
      }
      // Float math in the same order as the reference: bit-exact, whichever run loop took it.
      EXPECT_TRUE(allclose(kernels::binary(op, a, l.b), from_vector<double>(expected, {R, C}), 0, 0))
          << kernels::binary_op_name(op);
      EXPECT_TRUE(allclose(kernels::binary(op, l.b, a),
                           kernels::binary(op, l.b.expand({R, C}).contiguous(), a), 0, 0))
          << kernels::binary_op_name(op) << " (broadcast operand first)";
    }
  }
  // In place into a strided destination (gradient accumulation into a view).
  Tensor dst = normal_tensor({C, R}, 12);
  Tensor expected = kernels::binary(BinaryOp::Add, dst.t().contiguous(), a);
  kernels::add_(dst.t(), a);
  EXPECT_TRUE(allclose(dst.t(), expected, 0, 0));
}

TEST(CpuFastPaths, MaskedFillOfBroadcastMaskAndValue) {
  const int64_t N = 6, T = 9;
  Tensor scores = normal_tensor({N, T, T}, 13);
  Tensor mask = kernels::causal_mask(T);
  Tensor out = kernels::masked_fill(scores, mask, -std::numeric_limits<double>::infinity());
  std::vector<double> s = scores.to_vector<double>(), o = out.to_vector<double>();
  for (int64_t n = 0; n < N; ++n)
    for (int64_t i = 0; i < T; ++i)
      for (int64_t j = 0; j < T; ++j) {
        const size_t k = static_cast<size_t>((n * T + i) * T + j);
        if (j > i) {
          EXPECT_TRUE(std::isinf(o[k]) && o[k] < 0);
        } else {
          EXPECT_EQ(o[k], s[k]);
        }
      }
}

// ---- float GELU, exp-based softmax and cross-entropy -----------------------------------------------------

double gelu_reference(double x) {
  const double u = 0.7978845608028654 * (x + 0.044715 * x * x * x);
  return 0.5 * x * (1.0 + std::tanh(u));
}

double gelu_grad_reference(double x) {
  const double u = 0.7978845608028654 * (x + 0.044715 * x * x * x);
  const double t = std::tanh(u), du = 0.7978845608028654 * (1.0 + 3 * 0.044715 * x * x);
  return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * du;
}

// The op table's float32 tolerance (rtol 1e-5, atol 1e-6) over [-30, 30] in steps of 1/1024, on the
// contiguous (4 lanes) and the strided (one lane) path.
TEST(CpuFastPaths, FloatGeluMatchesTheTanhFormInDouble) {
  std::vector<double> xs;
  for (int i = -30 * 1024; i <= 30 * 1024; ++i) xs.push_back(static_cast<float>(i / 1024.0));
  const int64_t n = static_cast<int64_t>(xs.size());
  std::vector<double> y(xs.size()), dy(xs.size());
  for (size_t i = 0; i < xs.size(); ++i) {
    y[i] = gelu_reference(xs[i]);
    dy[i] = gelu_grad_reference(xs[i]);
  }
  Tensor x = from_vector<double>(xs, {n}).to(kFloat32);
  Tensor ones = full({n}, 1.0);
  EXPECT_TRUE(allclose(kernels::unary(UnaryOp::Gelu, x), from_vector<double>(y, {n}), 1e-5, 1e-6));
  EXPECT_TRUE(allclose(kernels::unary_backward(UnaryOp::Gelu, ones, x, Tensor()),
                       from_vector<double>(dy, {n}), 1e-5, 1e-6));
  // Strided: every other element of a [2n] tensor.
  Tensor wide = zeros({n, 2});
  wide.select(1, 0).copy_(x);
  EXPECT_TRUE(
      allclose(kernels::unary(UnaryOp::Gelu, wide.select(1, 0)), kernels::unary(UnaryOp::Gelu, x), 0, 0));
  EXPECT_TRUE(allclose(kernels::unary_backward(UnaryOp::Gelu, ones, wide.select(1, 0), Tensor()),
                       kernels::unary_backward(UnaryOp::Gelu, ones, x, Tensor()), 0, 0));
}

TEST(CpuFastPaths, FloatGeluAtSpecialValues) {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  Tensor x = from_vector<double>({0.0, 1e30, -1e30, inf, nan, 1e-30, -1e-30}, {7}).to(kFloat32);
  std::vector<double> y = kernels::unary(UnaryOp::Gelu, x).to_vector<double>();
  EXPECT_EQ(y[0], 0.0);
  EXPECT_EQ(y[1], static_cast<double>(static_cast<float>(1e30)));  // gelu(x) = x for large x
  EXPECT_EQ(y[2], 0.0);                                            // and 0 for large negative x
  EXPECT_EQ(y[3], inf);
  EXPECT_TRUE(std::isnan(y[4]));
  EXPECT_NEAR(y[5], 0.5e-30, 1e-36);
  EXPECT_NEAR(y[6], -0.5e-30, 1e-36);
  std::vector<double> g =
      kernels::unary_backward(UnaryOp::Gelu, full({7}, 1.0), x, Tensor()).to_vector<double>();
  EXPECT_EQ(g[0], 0.5);
  EXPECT_EQ(g[1], 1.0);
  EXPECT_EQ(g[2], 0.0);
  EXPECT_EQ(g[3], 1.0);
  EXPECT_TRUE(std::isnan(g[4]));
}

TEST(CpuFastPaths, SoftmaxAndCrossEntropyWithMaskedLogits) {
  const double inf = std::numeric_limits<double>::infinity();
  // Row 0: masked tail; row 1: a wide range (exp underflows); row 2: one -inf in the middle.
  Tensor x = from_vector<double>({1.0, 2.0, 0.5, -inf, -inf,    //
                                  80.0, -80.0, 0.0, 1.0, 79.0,  //
                                  0.3, -0.2, -inf, 0.1, 0.0},
                                 {3, 5})
                 .to(kFloat32);
  std::vector<double> xv = x.to_vector<double>(), expected(15), log_expected(15);
  for (int r = 0; r < 3; ++r) {
    double m = -inf, total = 0;
    for (int j = 0; j < 5; ++j) m = std::max(m, xv[static_cast<size_t>(r * 5 + j)]);
    for (int j = 0; j < 5; ++j) total += std::exp(xv[static_cast<size_t>(r * 5 + j)] - m);
    for (int j = 0; j < 5; ++j) {
      const size_t k = static_cast<size_t>(r * 5 + j);
      expected[k] = std::exp(xv[k] - m) / total;
      log_expected[k] = xv[k] - m - std::log(total);
    }
  }
  Tensor y = kernels::softmax(x);
  EXPECT_TRUE(allclose(y, from_vector<double>(expected, {3, 5}), 1e-5, 1e-6));
  std::vector<double> yv = y.to_vector<double>();
  EXPECT_EQ(yv[3], 0.0);  // masked positions are exactly 0
  EXPECT_EQ(yv[4], 0.0);
  EXPECT_EQ(yv[12], 0.0);
  EXPECT_TRUE(allclose(kernels::log_softmax(x), from_vector<double>(log_expected, {3, 5}), 1e-5, 1e-6));

  Tensor targets = from_vector<int64_t>({1, 4, 0}, {3});
  kernels::CrossEntropyOutput ce = kernels::cross_entropy(x, targets);
  double loss = 0;
  std::vector<double> grad(15);
  for (int r = 0; r < 3; ++r) {
    const int t = r == 0 ? 1 : (r == 1 ? 4 : 0);
    loss -= log_expected[static_cast<size_t>(r * 5 + t)] / 3;
    for (int j = 0; j < 5; ++j) {
      grad[static_cast<size_t>(r * 5 + j)] =
          (expected[static_cast<size_t>(r * 5 + j)] - (j == t ? 1.0 : 0.0)) / 3;
    }
  }
  EXPECT_NEAR(ce.loss.item(), loss, 1e-6);
  EXPECT_TRUE(allclose(ce.grad_logits, from_vector<double>(grad, {3, 5}), 1e-5, 1e-6));
  // The loss is the same bits with and without the gradient.
  EXPECT_EQ(kernels::cross_entropy(x, targets, -100, /*compute_grad=*/false).loss.item(), ce.loss.item());
}

// ---- thread-count independence above the threading thresholds ---------------------------------------

// Runs `f` on 1 and on 2 threads (a team of 2 even on a 1-core machine) and compares every output bit for
// bit.
void expect_same_on_1_and_2_threads(const std::function<std::vector<Tensor>()>& f) {
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  std::vector<Tensor> one = f();
  omp_set_num_threads(2);
  std::vector<Tensor> two = f();
  omp_set_num_threads(threads);
  ASSERT_EQ(one.size(), two.size());
  for (size_t k = 0; k < one.size(); ++k) EXPECT_TRUE(allclose(two[k], one[k], 0, 0)) << "output " << k;
}

TEST(CpuFastPaths, LargeElementwiseAndCopiesDoNotDependOnTheThreadCount) {
  Tensor a = normal_tensor({1100, 1024}, 20), bias = normal_tensor({1024}, 21);
  Tensor g = normal_tensor({1100, 1024}, 22);
  expect_same_on_1_and_2_threads([&] {
    Tensor acc = a.clone();
    kernels::add_(acc, g);
    return std::vector<Tensor>{
        kernels::binary(BinaryOp::Add, a, bias), kernels::binary(BinaryOp::Mul, a, 0.5),
        kernels::unary(UnaryOp::Gelu, a),        kernels::unary_backward(UnaryOp::Gelu, g, a, Tensor()),
        kernels::unary(UnaryOp::Tanh, a),        a.t().contiguous(),
        a.narrow(1, 1, 1000).contiguous(),       acc};
  });
}

TEST(CpuFastPaths, LargeRowKernelsAndReductionsDoNotDependOnTheThreadCount) {
  Tensor x = normal_tensor({2048, 96}, 30), w = normal_tensor({96}, 31), b = normal_tensor({96}, 32);
  Tensor dy = normal_tensor({2048, 96}, 33);
  Tensor logits = normal_tensor({4096, 65}, 34);
  std::vector<int64_t> t(4096);
  for (size_t i = 0; i < t.size(); ++i) t[i] = static_cast<int64_t>((i * 7) % 65);
  t[5] = -100;
  Tensor targets = from_vector<int64_t>(t, {4096});
  Tensor long_rows = normal_tensor({2, 1100003}, 35);  // above kElementwiseGrain: chunks on 2 threads
  expect_same_on_1_and_2_threads([&] {
    kernels::LayerNormOutput ln = kernels::layernorm(x, w, b);
    kernels::LayerNormGrads lg = kernels::layernorm_backward(dy, x, w, ln.mean, ln.rstd, true);
    kernels::CrossEntropyOutput ce = kernels::cross_entropy(logits, targets);
    Tensor sm = kernels::softmax(logits);
    return std::vector<Tensor>{ln.y,
                               ln.mean,
                               ln.rstd,
                               lg.dx,
                               lg.dweight,
                               lg.dbias,
                               ce.loss,
                               ce.grad_logits,
                               sm,
                               kernels::softmax_backward(logits, sm),
                               kernels::log_softmax(logits),
                               kernels::sum(logits, {0}),
                               kernels::sum(long_rows, {1}),
                               from_vector<double>({kernels::global_l2_norm({long_rows, x})}, {})};
  });
}

// global_l2_norm of one float tensor: sqrt of sum x^2 in double, in chunks of 4096 elements added in order,
// each chunk in eight running sums (element i to sum i mod 8 from the chunk's start, a tail shorter than 8
// to sum 0) added pairwise. Lengths: a tail alone, whole groups, one element short of and past a chunk,
// and enough chunks for threads.
TEST(CpuFastPaths, GlobalNormSumsSquaresInTheChunkedOrder) {
  for (int64_t n : {5, 8, 13, 4095, 4096, 4103, 3 * 4096 + 77, 4 * 4096, 9 * 4096 + 5, 200003}) {
    const Tensor x = normal_tensor({n}, 50 + static_cast<uint64_t>(n % 7));
    const std::vector<float> v = x.to_vector<float>();
    double total = 0.0;
    for (int64_t start = 0; start < n; start += 4096) {
      const int64_t end = std::min(n, start + 4096);
      double sums[8] = {};
      int64_t i = start;
      for (; i + 8 <= end; i += 8) {
        for (int l = 0; l < 8; ++l) sums[l] += double(v[size_t(i + l)]) * double(v[size_t(i + l)]);
      }
      for (; i < end; ++i) sums[0] += double(v[size_t(i)]) * double(v[size_t(i)]);
      total += ((sums[0] + sums[1]) + (sums[2] + sums[3])) + ((sums[4] + sums[5]) + (sums[6] + sums[7]));
    }
    for (int threads : {1, 2}) {
      const int saved = omp_get_max_threads();
      omp_set_num_threads(threads);
      const double squares = kernels::cpu::sum_squares(x), norm = kernels::global_l2_norm({x});
      omp_set_num_threads(saved);
      EXPECT_EQ(squares, total) << "n " << n << ", threads " << threads;
      EXPECT_EQ(norm, std::sqrt(total)) << "n " << n << ", threads " << threads;
    }
  }
}

TEST(CpuFastPaths, AdamWAndMatmulDoNotDependOnTheThreadCount) {
  Tensor p0 = normal_tensor({400, 400}, 40), grad = normal_tensor({400, 400}, 41);
  Tensor a = normal_tensor({300, 200}, 42), b = normal_tensor({250, 200}, 43);
  Tensor qa = normal_tensor({64, 13, 32}, 44), qb = normal_tensor({64, 13, 32}, 45);
  expect_same_on_1_and_2_threads([&] {
    Tensor p = p0.clone(), m = zeros({400, 400}), v = zeros({400, 400});
    for (int64_t step = 1; step <= 2; ++step)
      kernels::adamw_update(p, grad, m, v, {1e-3, 0.9, 0.95, 1e-8, 0.1, step});
    return std::vector<Tensor>{p,
                               m,
                               v,
                               kernels::matmul(a, b, false, true),
                               kernels::matmul(b, a, false, true),
                               kernels::matmul(qa, qb, false, true)};
  });
}

// A sum over the leading dims of a contiguous tensor (a bias gradient) runs as column sums in place; it
// must give the bits of the general path (transposed copy, then row sums), here forced by a strided view.
// 4100 rows: a second chunk of kSumChunk and a tail; 70 columns: one partial block of 128; 300: two whole
// blocks and a partial one.
TEST(CpuFastPaths, ColumnSumsEqualTheTransposedRowSumsBitForBit) {
  for (DType dtype : {kFloat32, kBFloat16, kFloat64}) {
    for (int64_t cols : {70, 300}) {
      const Tensor x = normal_tensor({4100, cols}, 60, dtype);
      Tensor strided = normal_tensor({cols, 4100}, 60, dtype).transpose(0, 1);  // not contiguous
      strided.copy_(x);
      const Tensor fast = kernels::sum(x, {0}), general = kernels::sum(strided, {0});
      EXPECT_TRUE(allclose(fast, general, 0.0, 0.0)) << dtype_name(dtype) << " cols " << cols;
      const Tensor x3 = x.view({41, 100, cols});
      EXPECT_TRUE(allclose(kernels::sum(x3, {0, 1}, true).view({cols}), general, 0.0, 0.0))
          << dtype_name(dtype) << " cols " << cols;
    }
  }
}

// Row sums of float rows (AVX-512 where the CPU runs it: four rows' eight running sums at a time) against
// the association written out in double: per chunk of 4096, element j to sum j mod 8, a tail shorter than 8
// to sum 0, the eight added pairwise, the chunks left to right from 0. Every tail length, row counts that
// are not a multiple of four, rows of one and of more than one chunk, zeros of -0.
TEST(CpuFastPaths, FloatRowSumsAreTheChunkedAssociationBitForBit) {
  auto chunked = [](const float* row, int64_t n) {
    double total = 0.0;
    for (int64_t start = 0; start < n; start += 4096) {
      const int64_t end = std::min(n, start + 4096);
      double s[8] = {0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0};
      int64_t i = start;
      for (; i + 8 <= end; i += 8)
        for (int l = 0; l < 8; ++l) s[l] += static_cast<double>(row[i + l]);
      for (; i < end; ++i) s[0] += static_cast<double>(row[i]);
      total += ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
    }
    return static_cast<float>(total);
  };
  std::vector<int64_t> widths;
  for (int64_t c = 1; c <= 17; ++c) widths.push_back(c);
  for (int64_t c : {63, 65, 128, 768, 4096, 4103}) widths.push_back(c);
  // Small whole numbers and, in most rows, +2^60 and -2^60 at random places: a small number added to a
  // partial sum that holds 2^60 is lost (its ulp is 256), so which numbers survive depends on every step
  // of the association, and the float result shows it (the survivors' sum is exact).
  std::mt19937_64 gen(77);
  for (int64_t cols : widths) {
    for (int64_t rows : {1, 3, 6, 70}) {
      std::vector<float> v(static_cast<size_t>(rows * cols));
      for (float& e : v) e = static_cast<float>(static_cast<int>(gen() % 101) - 50);
      for (int64_t r = 0; r < rows && cols > 1; ++r) {
        if (r % 4 == 3) continue;
        v[static_cast<size_t>(r * cols + static_cast<int64_t>(gen() % cols))] = 0x1p60f;
        v[static_cast<size_t>(r * cols + static_cast<int64_t>(gen() % cols))] = -0x1p60f;
      }
      if (cols == 5) std::fill(v.begin(), v.begin() + cols, -0.0f);  // a row of -0 sums to +0
      Tensor x = from_vector<float>(v, {rows, cols});
      std::vector<float> got = kernels::sum(x, {1}).to_vector<float>();
      for (int64_t r = 0; r < rows; ++r) {
        const float want = chunked(v.data() + r * cols, cols);
        EXPECT_EQ(std::bit_cast<uint32_t>(got[static_cast<size_t>(r)]), std::bit_cast<uint32_t>(want))
            << "rows " << rows << " cols " << cols << " row " << r;
      }
    }
  }
}

// The embedding backward sums each id's rows in double in position order, whichever sort grouped them
// (a counting sort for a vocabulary up to 8x the positions, a comparison sort above), and the sums' adds
// are AVX-512 where the CPU has it: bit for bit the position-order loop, with repeated and unused ids.
TEST(CpuFastPaths, EmbeddingBackwardSumsEachIdInPositionOrderBitForBit) {
  const int64_t N = 300, C = 37;
  for (int64_t V : {5, 65, 5000}) {
    std::mt19937_64 gen(static_cast<uint64_t>(V));
    std::vector<int64_t> ids(static_cast<size_t>(N));
    for (int64_t& id : ids)
      id = static_cast<int64_t>(gen() % static_cast<uint64_t>(std::min<int64_t>(V, 40)));
    std::vector<float> g(static_cast<size_t>(N * C));
    for (float& e : g) e = static_cast<float>(static_cast<int>(gen() % 101) - 50);
    for (size_t k = 0; k < g.size(); k += 7) g[k] = (k / 7) % 2 ? 0x1p60f : -0x1p60f;  // order shows
    Tensor grad =
        kernels::embedding_backward(from_vector<float>(g, {N, C}), from_vector<int64_t>(ids, {N}), V);
    std::vector<float> got = grad.to_vector<float>();
    std::vector<double> want(static_cast<size_t>(V * C), 0.0);
    for (int64_t n = 0; n < N; ++n)
      for (int64_t j = 0; j < C; ++j)
        want[static_cast<size_t>(ids[static_cast<size_t>(n)] * C + j)] +=
            static_cast<double>(g[static_cast<size_t>(n * C + j)]);
    for (size_t k = 0; k < want.size(); ++k) {
      ASSERT_EQ(std::bit_cast<uint32_t>(got[k]), std::bit_cast<uint32_t>(static_cast<float>(0.0f + want[k])))
          << "V " << V << " at " << k;
    }
  }
}

// The contiguous runs of where and masked_fill read both sides and then choose (vector selects): a
// condition of NaN is true and one of -0 false, as `!= 0` says, in the vector body and in its tail.
TEST(CpuFastPaths, WhereRunsTreatNanAsTrueAndSignedZeroAsFalse) {
  const int64_t n = 103;  // not a multiple of any vector width
  std::vector<double> c(static_cast<size_t>(n));
  const double kinds[] = {0.0, -0.0, 1.0, std::numeric_limits<double>::quiet_NaN(), -2.5};
  for (size_t i = 0; i < c.size(); ++i) c[i] = kinds[(i * 7 + i / 5) % 5];
  Tensor cond = from_vector<double>(c, {n}).to(kFloat32);
  Tensor a = normal_tensor({n}, 21), b = normal_tensor({n}, 22);
  std::vector<double> av = a.to_vector<double>(), bv = b.to_vector<double>();
  std::vector<double> w = kernels::where(cond, a, b).to_vector<double>();
  std::vector<double> m = kernels::masked_fill(b, cond, 7.5).to_vector<double>();
  for (size_t i = 0; i < c.size(); ++i) {
    const bool take = std::isnan(c[i]) || c[i] != 0.0;
    EXPECT_EQ(w[i], take ? av[i] : bv[i]) << "where at " << i << ", cond " << c[i];
    EXPECT_EQ(m[i], take ? 7.5 : bv[i]) << "masked_fill at " << i << ", cond " << c[i];
  }
}

// Row max and argmax of float rows (AVX-512 where the CPU runs it: the maximum by vectors, then its first
// position) against the rule written out: the first maximum wins, a NaN is the maximum at its first
// position, -0 and +0 are equal (the first of them is returned). Rows of every tail length, a row of the
// logits' length, ties, zeros of both signs, -inf and NaN anywhere.
TEST(CpuFastPaths, RowMaxAndArgmaxAreTheFirstMaximumAndNanWins) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  std::vector<std::vector<float>> rows;
  uint64_t drawn = 0;
  for (int64_t n : {1, 2, 15, 16, 17, 63, 64, 65, 130, 50257}) {
    std::vector<float> r(static_cast<size_t>(n));
    for (auto& v : r) v = std::floor(philox::uniform(61, 0, drawn++) * 40.0f) - 20.0f;  // many ties
    rows.push_back(r);
    std::vector<float> with_nan = r;
    with_nan[static_cast<size_t>(n * 2 / 3)] = nan;
    rows.push_back(with_nan);
  }
  rows.push_back({-0.0f, 0.0f, -1.0f});
  rows.push_back({0.0f, -0.0f});
  rows.push_back({-inf, -inf, -inf});
  rows.push_back({-inf, nan, inf, nan});
  for (const std::vector<float>& r : rows) {
    size_t first = 0;  // the rule
    for (size_t j = 1; j < r.size() && !std::isnan(r[first]); ++j) {
      if (r[j] > r[first] || std::isnan(r[j])) first = j;
    }
    const Tensor x = from_vector(r, {1, static_cast<int64_t>(r.size())});
    const float got = kernels::max(x, {1}).to_vector<float>()[0];
    EXPECT_EQ(std::bit_cast<uint32_t>(r[first]), std::bit_cast<uint32_t>(got))
        << "max of a row of " << r.size();
    EXPECT_EQ(static_cast<int64_t>(first), kernels::argmax(x, 1).to_vector<int64_t>()[0])
        << "argmax of a row of " << r.size();
  }
}

/// p, m and v after one AdamW step in double, rounded to float once per stored value, in the order of
/// kernels/cpu/optim.cpp's scalar loop.
struct AdamWExpected {
  std::vector<float> p, m, v;
};
AdamWExpected adamw_in_double(const Tensor& p, const Tensor& grad, const Tensor& m, const Tensor& v,
                              const kernels::AdamWStep& s) {
  AdamWExpected want{p.to_vector<float>(), m.to_vector<float>(), v.to_vector<float>()};
  const std::vector<float> g = grad.to_vector<float>();
  const double step = static_cast<double>(s.step);
  const double inv_bias1 = 1.0 / (1.0 - std::pow(s.beta1, step)),
               inv_bias2 = 1.0 / (1.0 - std::pow(s.beta2, step));
  for (size_t i = 0; i < g.size(); ++i) {
    const double gi = g[i];
    const double m_new = s.beta1 * double(want.m[i]) + (1.0 - s.beta1) * gi;
    const double v_new = s.beta2 * double(want.v[i]) + (1.0 - s.beta2) * gi * gi;
    want.m[i] = float(m_new);
    want.v[i] = float(v_new);
    const double pi = want.p[i];
    want.p[i] =
        float(pi - s.lr * (m_new * inv_bias1 / (std::sqrt(v_new * inv_bias2) + s.eps) + s.weight_decay * pi));
  }
  return want;
}

/// Inputs of n elements (a second moment is >= 0).
std::vector<Tensor> adamw_inputs(int64_t n) {
  Tensor v = normal_tensor({n}, 53, kFloat32, 0.1);
  return {normal_tensor({n}, 50), normal_tensor({n}, 51), normal_tensor({n}, 52),
          kernels::binary(kernels::BinaryOp::Mul, v, v)};
}

/// The largest |got - want| / scale over the elements, in units of 2^-24 (a float rounding's relative
/// size).
double max_units(const std::vector<float>& got, const std::vector<float>& want,
                 const std::vector<double>& scale) {
  double worst = 0.0;
  for (size_t i = 0; i < got.size(); ++i)
    worst =
        std::max(worst, std::fabs(double(got[i]) - double(want[i])) / (std::ldexp(scale[i], -24) + 1e-300));
  return worst;
}

// v1: the vector path must give exactly the scalar formula's bits (IEEE operations, no fused multiply-add).
TEST(CpuFastPaths, FloatAdamWV1EqualsTheScalarFormulaBitForBit) {
  const int64_t n = 1003;  // 125 vectors of 8 and a tail of 3
  std::vector<Tensor> x = adamw_inputs(n);
  const kernels::AdamWStep s{1e-3, 0.9, 0.95, 1e-8, 0.1, 3};
  const AdamWExpected want = adamw_in_double(x[0], x[1], x[2], x[3], s);
  kernels::adamw_with(kernels::AdamWKernel::CpuLoop, x[0], x[1], x[2], x[3], s);
  EXPECT_EQ(x[0].to_vector<float>(), want.p);
  EXPECT_EQ(x[2].to_vector<float>(), want.m);
  EXPECT_EQ(x[3].to_vector<float>(), want.v);
}

// v2 computes in float with FMAs. Its errors are a few float roundings, relative not to each result (a
// moment whose two terms nearly cancel) but to the terms that made it: m within 3 units of 2^-24 of
// |beta1 m| + |(1 - beta1) g|, v of |beta2 v| + |(1 - beta2) g^2|, and p of |p| + lr (|adaptive|'s bound
// from m's terms + wd |p|) up to 8 units (m's error passes into the adaptive step, then a sqrt, a division
// and two FMAs). Checked at the first step (the bias corrections largest) and two later ones; the measured
// worst are recorded as properties.
TEST(CpuFastPaths, FloatAdamWV2IsWithinAFewRoundingsOfTheFormulaInDouble) {
  if (!kernels::adamw_kernel_supports(kernels::AdamWKernel::CpuAvx512))
    GTEST_SKIP() << "this CPU lacks AVX-512F or FMA: AdamW v2 does not run here";
  const int64_t n = 1003;  // 62 vectors of 16 and a masked tail of 11
  double worst_p = 0, worst_m = 0, worst_v = 0;
  for (int64_t step : {1, 3, 1000}) {
    std::vector<Tensor> x = adamw_inputs(n);
    const kernels::AdamWStep s{1e-3, 0.9, 0.95, 1e-8, 0.1, step};
    const AdamWExpected want = adamw_in_double(x[0], x[1], x[2], x[3], s);
    const std::vector<float> p0 = x[0].to_vector<float>(), g = x[1].to_vector<float>(),
                             m0 = x[2].to_vector<float>(), v0 = x[3].to_vector<float>();
    const double inv_bias1 = 1.0 / (1.0 - std::pow(s.beta1, double(step))),
                 inv_bias2 = 1.0 / (1.0 - std::pow(s.beta2, double(step)));
    std::vector<double> scale_p(p0.size()), scale_m(p0.size()), scale_v(p0.size());
    for (size_t i = 0; i < p0.size(); ++i) {
      scale_m[i] = std::fabs(s.beta1 * m0[i]) + std::fabs((1.0 - s.beta1) * g[i]);
      scale_v[i] = std::fabs(s.beta2 * v0[i]) + (1.0 - s.beta2) * double(g[i]) * g[i];
      const double denominator = std::sqrt(double(want.v[i]) * inv_bias2) + s.eps;
      scale_p[i] = std::fabs(p0[i]) +
                   s.lr * (scale_m[i] * inv_bias1 / denominator + s.weight_decay * std::fabs(p0[i]));
    }
    kernels::adamw_with(kernels::AdamWKernel::CpuAvx512, x[0], x[1], x[2], x[3], s);
    worst_p = std::max(worst_p, max_units(x[0].to_vector<float>(), want.p, scale_p));
    worst_m = std::max(worst_m, max_units(x[2].to_vector<float>(), want.m, scale_m));
    worst_v = std::max(worst_v, max_units(x[3].to_vector<float>(), want.v, scale_v));
  }
  RecordProperty("max_units_p", std::to_string(worst_p));
  RecordProperty("max_units_m", std::to_string(worst_m));
  RecordProperty("max_units_v", std::to_string(worst_v));
  EXPECT_LE(worst_p, 8.0);
  EXPECT_LE(worst_m, 3.0);
  EXPECT_LE(worst_v, 3.0);
}

// Dropout's mask is the scalar rule's, element for element: x_i / (1 - p) where philox::uniform(seed,
// offset, i) >= p, else 0 (the CUDA kernel draws the same). Lengths around the 16 lanes and the 4096-element
// spans the threads take, seeds and offsets with high words, p at 0, where p * 2^24 is a whole number
// (0.25) and just past one, p just under 1, and p on one element's draw and half a step above it.
TEST(CpuFastPaths, FloatDropoutKeepsTheScalarRulesElementsBitForBit) {
  const std::vector<int64_t> lengths = {1, 15, 16, 17, 4095, 4096, 4097, 70001};
  const std::vector<GeneratorState> states = {
      {0, 0}, {1234567, 3}, {0xFEDCBA9876543210ull, (1ull << 32) + 5}};
  const std::vector<double> ps = {0.0, 0.1, 0.25, 0.25 + 1e-12, 0.5, 1.0 - 1.0 / 16777216.0};
  for (int64_t n : lengths) {
    Tensor x = randn({n});
    x.data<float>()[0] = std::numeric_limits<float>::quiet_NaN();  // a dropped NaN gives 0, as the rule says
    for (const GeneratorState& state : states) {
      // p on element 5's own draw, m / 2^24 (kept: u >= p) and half a step above it (dropped): the edges
      // of the rule, which random p almost never meet.
      const double m5 = static_cast<double>(philox::random_bits(state.seed, state.offset, 5).x >> 8);
      std::vector<double> edge_ps = ps;
      edge_ps.push_back(m5 / 16777216.0);
      edge_ps.push_back((m5 + 0.5) / 16777216.0);
      for (double p : edge_ps) {
        const std::vector<float> got = kernels::dropout(x, p, state).to_vector<float>();
        const float scale = static_cast<float>(1.0 / (1.0 - p));
        size_t mismatches = 0;
        for (int64_t i = 0; i < n; ++i) {
          const bool keep =
              static_cast<double>(philox::uniform(state.seed, state.offset, static_cast<uint64_t>(i))) >= p;
          const float want = keep ? x.data<float>()[i] * scale : 0.0f;
          const bool same =
              std::isnan(want) ? std::isnan(got[i]) : std::memcmp(&want, &got[i], sizeof(float)) == 0;
          mismatches += same ? 0 : 1;
        }
        EXPECT_EQ(mismatches, 0u) << "n " << n << ", seed " << state.seed << ", offset " << state.offset
                                  << ", p " << p;
      }
    }
  }
}

// The random fills (randn, rand: detail::fill_random) give element i the scalar draw of index i, bit for
// bit, over lengths around the 16 lanes and the 4096-element spans the threads take, and seeds and
// offsets with high words.
TEST(CpuFastPaths, FloatRandomFillsAreTheScalarDrawsBitForBit) {
  const std::vector<GeneratorState> states = {{0, 0}, {1337, 12}, {0xFEDCBA9876543210ull, (1ull << 32) + 5}};
  for (int64_t n : {1, 15, 16, 17, 4095, 4096, 4097, 70001}) {
    for (const GeneratorState& state : states) {
      for (detail::RandomKind kind : {detail::RandomKind::Normal, detail::RandomKind::Uniform}) {
        Tensor t = empty({n});
        detail::fill_random(t, kind, state);
        const std::vector<float> got = t.to_vector<float>();
        size_t mismatches = 0;
        for (int64_t i = 0; i < n; ++i) {
          const auto index = static_cast<uint64_t>(i);
          const float want = kind == detail::RandomKind::Normal
                                 ? philox::normal(state.seed, state.offset, index)
                                 : philox::uniform(state.seed, state.offset, index);
          mismatches += std::memcmp(&want, &got[static_cast<size_t>(i)], sizeof(float)) == 0 ? 0 : 1;
        }
        EXPECT_EQ(mismatches, 0u) << "n " << n << ", seed " << state.seed << ", offset " << state.offset
                                  << (kind == detail::RandomKind::Normal ? ", normal" : ", uniform");
      }
    }
  }
}

// The 16-lane loop on its own, at element indices that cross 2^32 (the counter's high word takes the
// carry lane by lane), which no tensor here is long enough to reach.
TEST(CpuFastPaths, DropoutLanesCarryTheIndexIntoItsHighWord) {
  if (!kernels::cpu::detail::avx512_rows_run())
    GTEST_SKIP() << "this CPU lacks AVX-512F or FMA: the 16-lane dropout does not run here";
  const int64_t n = 40;
  const int64_t first = (int64_t{1} << 32) - 20;
  std::vector<float> x(n, 1.0f), out(n, -1.0f);
  const uint64_t seed = 0x0123456789ABCDEFull, offset = 7;
  kernels::cpu::detail::dropout_float_avx512(x.data(), out.data(), n, first, 0.5, 2.0f, seed, offset);
  int kept = 0;
  for (int64_t i = 0; i < n; ++i) {
    const bool keep = philox::uniform(seed, offset, static_cast<uint64_t>(first + i)) >= 0.5f;
    EXPECT_EQ(out[i], keep ? 2.0f : 0.0f) << "index " << first + i;
    kept += keep ? 1 : 0;
  }
  EXPECT_GT(kept, 0);
  EXPECT_LT(kept, n);
}

// The GEMMs' per-thread scratch (gemm_packing.h): whatever sizes are asked for, in whatever order, the
// aligned run of `count` elements lies inside the buffer. A buffer sized for the count alone let the
// aligned start push a later, larger request past its end (seen as heap corruption after v1, v2 and v3
// ran one small bf16 product each in one process).
TEST(CpuGemmWorkspace, AlignedRunStaysInsideItsBufferForAnySequenceOfSizes) {
  for (size_t first : {1, 24, 63, 64, 96, 128}) {
    std::vector<float> buffer;
    for (size_t count : {first, first + 1, first + 15, first + 64, 2 * first + 100, size_t{7}}) {
      const float* run = kernels::cpu::detail::aligned_run(buffer, count);
      EXPECT_EQ(reinterpret_cast<uintptr_t>(run) % 64, 0u);
      EXPECT_GE(run, buffer.data());
      EXPECT_LE(run + count, buffer.data() + buffer.size()) << "first " << first << ", count " << count;
    }
  }
}

}  // namespace
}  // namespace brigade::testing
