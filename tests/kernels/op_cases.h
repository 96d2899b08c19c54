// The table of raw-op cases (in the spirit of ggml's test-backend-ops): one list that every backend runs.
//   op_table_test.cpp       every case on the CPU against a plain loop reference in double
//   cuda_op_table_test.cpp  every case on CUDA against the same case on the CPU
// Cases cover every op of kernels.h but matmul (see matmul_cases.h), every floating dtype, broadcasting,
// size-0 and size-1 dims, 0-d tensors, non-contiguous views, and a few sizes large enough to take the
// OpenMP / chunked paths of the CPU backend. What a case is: op_case.h.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "tests/kernels/op_case.h"

namespace brigade::testing {

inline std::vector<OpCase> build_op_cases() {
  using kernels::BinaryOp;
  using kernels::UnaryOp;
  OpTableBuilder t;
  const std::vector<DType> floating = {kFloat32, kBFloat16, kFloat64};
  const std::vector<UnaryOp> unary_ops = {UnaryOp::Neg,   UnaryOp::Exp,  UnaryOp::Log,     UnaryOp::Sqrt,
                                          UnaryOp::Rsqrt, UnaryOp::Tanh, UnaryOp::Sigmoid, UnaryOp::Relu,
                                          UnaryOp::Gelu,  UnaryOp::Abs};
  auto unary_values = [](UnaryOp op) {
    return op == UnaryOp::Log || op == UnaryOp::Sqrt || op == UnaryOp::Rsqrt ? Values::Positive
                                                                             : Values::Normal;
  };

  // ---- unary and unary_backward
  for (UnaryOp op : unary_ops) {
    const Values v = unary_values(op);
    for (DType d : floating) {
      OpCase c = make_case(Op::Unary, d, {in({4, 7}, v)});
      c.unary_op = op;
      t.add(c);
      OpCase b = make_case(Op::UnaryBackward, d, {in({3, 5}, v), in({3, 5})});
      b.unary_op = op;
      t.add(b);
    }
    OpCase c = make_case(Op::Unary, kFloat32, {transposed({7, 4}, 0, 1, v)});
    c.unary_op = op;
    t.add(c);
    OpCase b =
        make_case(Op::UnaryBackward, kFloat32, {transposed({5, 3}, 0, 1, v), expanded({1, 5}, {3, 5})});
    b.unary_op = op;
    t.add(b);
  }
  {
    OpCase c = make_case(Op::Unary, kFloat32, {in({0, 3})});
    c.unary_op = UnaryOp::Exp;
    t.add(c);
    c = make_case(Op::Unary, kFloat32, {in({})});
    c.unary_op = UnaryOp::Tanh;
    t.add(c);
    c = make_case(Op::Unary, kFloat32, {in({300, 128})});  // OpenMP path
    c.unary_op = UnaryOp::Gelu;
    t.add(c);
    c = make_case(Op::Unary, kBFloat16, {narrowed({4, 9, 5}, 1, 2, 6)});
    c.unary_op = UnaryOp::Sigmoid;
    t.add(c);
  }

  // ---- binary (tensor-tensor)
  const std::vector<BinaryOp> binary_ops = {BinaryOp::Add,     BinaryOp::Sub, BinaryOp::Mul, BinaryOp::Div,
                                            BinaryOp::Maximum, BinaryOp::Pow, BinaryOp::Eq,  BinaryOp::Ne,
                                            BinaryOp::Lt,      BinaryOp::Le,  BinaryOp::Gt,  BinaryOp::Ge};
  auto is_comparison = [](BinaryOp op) { return op >= BinaryOp::Eq; };
  auto lhs_values = [&](BinaryOp op) {
    return op == BinaryOp::Pow ? Values::Positive : (is_comparison(op) ? Values::Discrete : Values::Normal);
  };
  auto rhs_values = [&](BinaryOp op) {
    return op == BinaryOp::Div
               ? Values::Positive
               : (is_comparison(op) || op == BinaryOp::Maximum ? Values::Discrete : Values::Normal);
  };
  for (BinaryOp op : binary_ops) {
    const Values a = lhs_values(op), b = rhs_values(op);
    for (DType d : floating) {
      OpCase c = make_case(Op::Binary, d, {in({3, 4}, a), in({3, 4}, b)});
      c.binary_op = op;
      t.add(c);
    }
    // Broadcasting, in both directions and with prepended dims.
    for (auto [sa, sb] : std::vector<std::pair<Shape, Shape>>{
             {{2, 3, 4}, {4}}, {{3, 1}, {1, 4}}, {{}, {2, 3}}, {{5, 1, 3}, {4, 1}}, {{2, 1, 4}, {2, 3, 1}}}) {
      OpCase c = make_case(Op::Binary, kFloat32, {in(sa, a), in(sb, b)});
      c.binary_op = op;
      t.add(c);
    }
    // Non-contiguous operands.
    OpCase c = make_case(Op::Binary, kFloat32, {transposed({4, 3}, 0, 1, a), narrowed({3, 6}, 1, 1, 4, b)});
    c.binary_op = op;
    t.add(c);
  }
  for (auto [sa, sb] : std::vector<std::pair<Shape, Shape>>{{{0, 4}, {4}}, {{2, 0}, {1}}, {{1, 1}, {1}}}) {
    OpCase c = make_case(Op::Binary, kFloat32, {in(sa), in(sb)});
    c.binary_op = BinaryOp::Mul;
    t.add(c);
  }
  {
    OpCase c = make_case(Op::Binary, kFloat32, {in({256, 160}), in({160})});  // OpenMP path
    c.binary_op = BinaryOp::Add;
    t.add(c);
    c = make_case(Op::Binary, kBFloat16, {expanded({3, 1}, {3, 5}), transposed({5, 3}, 0, 1)});
    c.binary_op = BinaryOp::Sub;
    t.add(c);
  }

  // ---- binary with a scalar, on both sides
  for (auto [op, scalar] : std::vector<std::pair<BinaryOp, double>>{{BinaryOp::Add, 1.5},
                                                                    {BinaryOp::Sub, 1.0},
                                                                    {BinaryOp::Mul, -2.5},
                                                                    {BinaryOp::Div, 4.0},
                                                                    {BinaryOp::Maximum, 0.0},
                                                                    {BinaryOp::Pow, 2.0},
                                                                    {BinaryOp::Eq, 0.5},
                                                                    {BinaryOp::Lt, 0.5},
                                                                    {BinaryOp::Ge, -0.5}}) {
    const bool positive = op == BinaryOp::Pow || op == BinaryOp::Div;
    const Values v = positive ? Values::Positive : (is_comparison(op) ? Values::Discrete : Values::Normal);
    for (DType d : floating) {
      OpCase c = make_case(Op::BinaryScalar, d, {in({3, 5}, v)});
      c.binary_op = op;
      c.scalar = scalar;
      t.add(c);
      c.op = Op::ScalarBinary;
      t.add(c);
    }
    OpCase c = make_case(Op::ScalarBinary, kFloat32, {transposed({5, 3}, 0, 1, v)});
    c.binary_op = op;
    c.scalar = scalar;
    t.add(c);
  }

  // ---- in place
  for (DType d : floating) {
    t.add(make_case(Op::AddInPlace, d, {in({3, 4}), in({4})}));
    OpCase c = make_case(Op::MulInPlace, d, {in({3, 4})});
    c.scalar = 0.75;
    t.add(c);
  }
  t.add(make_case(Op::AddInPlace, kFloat32, {transposed({4, 3}, 0, 1), in({3, 4})}));
  t.add(make_case(Op::AddInPlace, kFloat32, {narrowed({3, 8}, 1, 2, 4), in({3, 1})}));
  t.add(make_case(Op::AddInPlace, kFloat32, {in({0, 4}), in({4})}));
  {
    OpCase c = make_case(Op::MulInPlace, kFloat32, {narrowed({5, 6}, 0, 1, 3)});
    c.scalar = -3.0;
    t.add(c);
  }

  // ---- where, masked_fill
  for (DType d : floating) {
    t.add(make_case(Op::Where, d, {mask({3, 1}), in({3, 4}), in({4})}));
    t.add(make_case(Op::Where, d,
                    {with_dtype(in({2, 3}, Values::Mask), InputDType::Case), in({2, 3}), in({})}));
    OpCase c = make_case(Op::MaskedFill, d, {in({2, 3, 4}), mask({3, 4})});
    c.scalar = -3.5;
    t.add(c);
  }
  t.add(make_case(Op::Where, kFloat32,
                  {mask({4, 3}, InputDType::Int32), transposed({3, 4}, 0, 1), in({4, 1})}));
  t.add(make_case(Op::Where, kFloat32, {mask({0, 3}), in({3}), in({0, 3})}));
  {
    OpCase c = make_case(Op::MaskedFill, kFloat32, {in({2, 5, 5}), mask({5, 5})});
    c.scalar = -std::numeric_limits<double>::infinity();  // the attention use: masked scores become -inf
    t.add(c);
    c = make_case(Op::MaskedFill, kFloat32, {transposed({4, 3}, 0, 1), mask({1, 4})});
    c.scalar = 2.0;
    t.add(c);
  }

  // ---- reductions
  struct DimsCase {
    std::vector<int64_t> dims;
    bool keepdim;
  };
  const std::vector<DimsCase> dim_sets = {{{}, false},     {{0}, false},   {{1}, true},      {{-1}, false},
                                          {{0, 2}, false}, {{2, 0}, true}, {{0, 1, 2}, true}};
  for (Op op : {Op::Sum, Op::Mean, Op::Max}) {
    for (const DimsCase& ds : dim_sets) {
      for (DType d : floating) {
        OpCase c = make_case(op, d, {in({2, 3, 4})});
        c.dims = ds.dims;
        c.keepdim = ds.keepdim;
        t.add(c);
      }
    }
    OpCase c = make_case(op, kFloat32, {transposed({4, 3, 2}, 0, 2)});
    c.dims = {1};
    t.add(c);
    c = make_case(op, kFloat32, {expanded({3, 1}, {3, 5})});
    c.dims = {1};
    t.add(c);
    c = make_case(op, kFloat32, {in({})});  // 0-d: all dims
    t.add(c);
    c = make_case(op, kFloat32, {in({2, 1, 3})});
    c.dims = {1};
    c.keepdim = true;
    t.add(c);
  }
  {
    OpCase c = make_case(Op::Sum, kFloat32, {in({2, 0, 3})});  // empty rows: sums are 0
    c.dims = {1};
    t.add(c);
    c = make_case(Op::Sum, kFloat32, {in({0, 3})});  // no rows
    c.dims = {1};
    t.add(c);
    c = make_case(Op::Mean, kFloat32, {in({2, 0})});  // mean of nothing: NaN
    c.dims = {1};
    t.add(c);
    c = make_case(Op::Max, kFloat32, {in({0, 3})});
    c.dims = {1};
    t.add(c);
    c = make_case(Op::Sum, kFloat32, {in({3, 20000})});  // few long rows: the chunked parallel path
    c.dims = {1};
    t.add(c);
    c = make_case(Op::Sum, kFloat32, {in({40000})});
    t.add(c);
    c = make_case(Op::Sum, kFloat32, {in({512, 96})});  // many rows: parallel over rows
    c.dims = {-1};
    t.add(c);
    c = make_case(Op::Mean, kBFloat16, {in({4, 300})});
    c.dims = {1};
    t.add(c);
  }
  for (DType d : floating) {
    for (auto [dim, keep] : std::vector<std::pair<int64_t, bool>>{{0, false}, {1, true}, {-1, false}}) {
      OpCase c = make_case(Op::ArgMax, d, {in({3, 5, 4})});
      c.dims = {dim};
      c.keepdim = keep;
      t.add(c);
    }
  }
  {
    OpCase c = make_case(Op::ArgMax, kFloat32, {transposed({6, 4}, 0, 1)});
    c.dims = {1};
    t.add(c);
    c = make_case(Op::ArgMax, kFloat32, {in({4, 6}, Values::Discrete)});  // ties: the first maximum
    c.dims = {1};
    t.add(c);
    c = make_case(Op::ArgMax, kFloat32, {in({5, 1})});
    c.dims = {1};
    t.add(c);
  }
  for (auto [from, to] : std::vector<std::pair<Shape, Shape>>{{{2, 3, 4}, {3, 1}},
                                                              {{2, 3, 4}, {4}},
                                                              {{3, 4}, {3, 4}},
                                                              {{2, 3}, {}},
                                                              {{2, 3, 4}, {2, 1, 4}},
                                                              {{4, 1, 3}, {1, 1}}}) {
    for (DType d : floating) {
      OpCase c = make_case(Op::SumTo, d, {in(from)});
      c.shape = to;
      t.add(c);
    }
  }
  {
    OpCase c = make_case(Op::SumTo, kFloat32, {expanded({3, 1}, {2, 3, 4})});
    c.shape = {3, 1};
    t.add(c);
    c = make_case(Op::SumTo, kFloat32, {in({2, 0, 3})});
    c.shape = {1, 3};
    t.add(c);
  }

  // ---- softmax family (the backward cases take dy of the view's shape as a second input)
  for (Op op : {Op::Softmax, Op::LogSoftmax, Op::SoftmaxBackward, Op::LogSoftmaxBackward}) {
    const bool backward = op == Op::SoftmaxBackward || op == Op::LogSoftmaxBackward;
    auto inputs = [&](InputSpec x, const Shape& viewed) {
      std::vector<InputSpec> v = {std::move(x)};
      if (backward) v.push_back(in(viewed));
      return v;
    };
    for (DType d : floating) t.add(make_case(op, d, inputs(in({4, 10}), {4, 10})));
    t.add(make_case(op, kFloat32, inputs(transposed({10, 4}, 0, 1), {4, 10})));
    t.add(make_case(op, kFloat32, inputs(in({2, 3, 5}), {2, 3, 5})));
    t.add(make_case(op, kFloat32, inputs(in({3, 1}), {3, 1})));
    t.add(make_case(op, kFloat32, inputs(in({0, 5}), {0, 5})));
    t.add(make_case(op, kFloat32, inputs(in({7}), {7})));
    t.add(make_case(op, kFloat32, inputs(in({64, 600}), {64, 600})));  // OpenMP path
  }

  // ---- layernorm (forward and backward together)
  for (auto [w, b] :
       std::vector<std::pair<bool, bool>>{{true, true}, {true, false}, {false, false}, {false, true}}) {
    for (DType d : floating) {
      std::vector<InputSpec> inputs = {in({4, 16}), in({4, 16})};
      if (w) inputs.push_back(in({16}));
      if (b) inputs.push_back(in({16}));
      OpCase c = make_case(Op::LayerNorm, d, inputs);
      c.has_weight = w;
      c.has_bias = b;
      c.scalar = 1e-5;
      t.add(c);
    }
  }
  {
    OpCase c =
        make_case(Op::LayerNorm, kFloat32, {transposed({8, 2, 3}, 0, 2), in({3, 2, 8}), in({8}), in({8})});
    c.has_weight = c.has_bias = true;
    c.scalar = 1e-3;
    t.add(c);
    c = make_case(Op::LayerNorm, kFloat32, {in({200, 200}), in({200, 200}), in({200}), in({200})});  // OpenMP
    c.has_weight = c.has_bias = true;
    c.scalar = 1e-5;
    t.add(c);
    c = make_case(Op::LayerNorm, kFloat32, {in({0, 6}), in({0, 6}), in({6}), in({6})});
    c.has_weight = c.has_bias = true;
    c.scalar = 1e-5;
    t.add(c);
    c = make_case(Op::LayerNorm, kFloat32, {in({5}), in({5})});
    c.scalar = 1e-5;
    t.add(c);
  }

  // ---- embedding
  for (DType d : floating) {
    t.add(make_case(Op::Embedding, d, {in({10, 6}), ids({2, 3}, 10)}));
    OpCase c = make_case(Op::EmbeddingBackward, d, {in({4, 6, 3}), ids({4, 6}, 5)});  // 24 ids over 5 rows
    c.index = 5;
    t.add(c);
  }
  t.add(make_case(Op::Embedding, kFloat32, {in({7, 4}), ids({9}, 7, InputDType::Int32)}));
  t.add(make_case(Op::Embedding, kFloat32, {transposed({5, 8}, 0, 1), ids({3, 2, 2}, 8)}));
  t.add(make_case(Op::Embedding, kFloat32, {in({6, 3}), ids({0}, 6)}));
  t.add(make_case(Op::Embedding, kFloat32, {in({6, 3}), ids({}, 6)}));
  {
    OpCase c = make_case(Op::EmbeddingBackward, kFloat32,
                         {transposed({3, 10}, 0, 1), ids({10}, 3, InputDType::Int32)});
    c.index = 4;  // row 3 is never hit and stays 0
    t.add(c);
    c = make_case(Op::EmbeddingBackward, kFloat32, {in({500, 80}), ids({500}, 50)});  // OpenMP path
    c.index = 50;
    t.add(c);
    c = make_case(Op::EmbeddingBackward, kFloat32, {in({0, 4}), ids({0}, 3)});
    c.index = 3;
    t.add(c);
  }

  // ---- cross-entropy
  for (DType d : floating) {
    OpCase c = make_case(Op::CrossEntropy, d, {in({6, 9}), targets({6}, 9, -100)});
    c.index = -100;
    t.add(c);
  }
  {
    OpCase c = make_case(Op::CrossEntropy, kFloat32, {in({8, 5}), targets({8}, 5, 2, InputDType::Int32)});
    c.index = 2;  // ignore_index that is also a valid class
    t.add(c);
    c = make_case(Op::CrossEntropy, kFloat32, {transposed({7, 4}, 0, 1), targets({4}, 7, -1)});
    c.index = -1;
    t.add(c);
    c = make_case(Op::CrossEntropy, kFloat32, {in({2, 3, 6}), targets({2, 3}, 6, -100)});
    c.index = -100;
    t.add(c);
    c = make_case(Op::CrossEntropy, kFloat32, {in({6, 9}), targets({6}, 9, -100)});
    c.index = -100;
    c.compute_grad = false;
    t.add(c);
    c = make_case(Op::CrossEntropy, kFloat32, {in({3, 4}), targets({3}, 1, 0)});
    c.index = 0;  // every target is 0 = ignore_index: nothing counts, the loss and gradient are 0
    t.add(c);
    c = make_case(Op::CrossEntropy, kFloat32, {in({128, 300}), targets({128}, 300, -100)});  // OpenMP path
    c.index = -100;
    t.add(c);
    c = make_case(Op::CrossEntropy, kFloat32, {in({0, 5}), targets({0}, 5, -100)});
    c.index = -100;
    t.add(c);
  }

  // ---- dropout
  for (DType d : floating) {
    OpCase c = make_case(Op::Dropout, d, {in({8, 16})});
    c.scalar = 0.25;
    c.rng = {1234, 7};
    t.add(c);
  }
  for (auto [p, rng] :
       std::vector<std::pair<double, GeneratorState>>{{0.5, {99, 0}}, {0.0, {5, 5}}, {1.0, {5, 5}}}) {
    OpCase c = make_case(Op::Dropout, kFloat32, {transposed({16, 9}, 0, 1)});
    c.scalar = p;
    c.rng = rng;
    t.add(c);
  }
  {
    OpCase c = make_case(Op::Dropout, kFloat32, {in({300, 200})});  // OpenMP path
    c.scalar = 0.125;
    c.rng = {42, 3};
    t.add(c);
  }

  // ---- causal mask
  for (DType d : floating) {
    OpCase c = make_case(Op::CausalMask, d, {});
    c.index = 5;
    t.add(c);
  }
  for (int64_t T : {0, 1, 200}) {
    OpCase c = make_case(Op::CausalMask, kFloat32, {});
    c.index = T;
    t.add(c);
  }

  // ---- AdamW
  for (DType d : floating) {
    for (double wd : {0.1, 0.0}) {
      OpCase c =
          make_case(Op::AdamW, d,
                    {in({5, 7}), in({5, 7}), with_dtype(in({5, 7}, Values::Small), InputDType::Accumulator),
                     with_dtype(in({5, 7}, Values::Positive), InputDType::Accumulator)});
      c.adamw.lr = 1e-2;
      c.adamw.weight_decay = wd;
      c.adamw.step = 3;
      t.add(c);
    }
  }
  {
    OpCase c = make_case(
        Op::AdamW, kFloat32,
        {in({4, 6}), transposed({6, 4}, 0, 1), with_dtype(in({4, 6}, Values::Small), InputDType::Accumulator),
         with_dtype(in({4, 6}, Values::Positive), InputDType::Accumulator)});
    c.adamw = kernels::AdamWStep{3e-4, 0.8, 0.99, 1e-6, 0.01, 1};
    t.add(c);
    c = make_case(
        Op::AdamW, kFloat32,
        {in({200, 200}), in({200, 200}), with_dtype(in({200, 200}, Values::Small), InputDType::Accumulator),
         with_dtype(in({200, 200}, Values::Positive), InputDType::Accumulator)});  // OpenMP path
    c.adamw.step = 10;
    c.adamw.weight_decay = 0.05;
    t.add(c);
  }

  // ---- global L2 norm
  for (DType d : floating)
    t.add(make_case(Op::GlobalL2Norm, d, {in({3, 4}), in({5}), transposed({2, 3, 2}, 0, 2)}));
  t.add(make_case(Op::GlobalL2Norm, kFloat32, {in({10000}), in({0, 3}), in({100, 100})}));
  return t.take();
}

/// Every case, built once.
inline const std::vector<OpCase>& op_cases() {
  static const std::vector<OpCase> cases = build_op_cases();
  return cases;
}

}  // namespace brigade::testing
