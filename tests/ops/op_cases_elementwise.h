// Op table cases (op_cases.h): the elementwise ops: unary and its backward, binary with broadcasting, with
// a scalar on either side, in place, where and masked_fill; and every view kind of tensor.h as an input.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <tuple>
#include <utility>
#include <vector>

#include "tests/ops/op_case.h"

namespace brigade::testing {

inline void add_elementwise_cases(OpTableBuilder& t) {
  using kernels::BinaryOp;
  using kernels::UnaryOp;
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

  // ---- float64 shapes and scalars the gradcheck differentiates besides the cases above
  for (auto [op, a, b] : std::vector<std::tuple<BinaryOp, InputSpec, InputSpec>>{
           {BinaryOp::Add, in({2, 3, 4}), in({3, 1})},
           {BinaryOp::Sub, in({3, 4}), in({4})},
           {BinaryOp::Mul, in({2, 1, 4}), in({3, 1})},
           {BinaryOp::Div, in({3, 4}), in({4}, Values::Positive)},
           {BinaryOp::Maximum, in({3, 4}), in({4})},
           {BinaryOp::Pow, in({3, 4}, Values::Positive), in({4})}}) {
    OpCase c = make_case(Op::Binary, kFloat64, {a, b});
    c.binary_op = op;
    t.add(c);
  }
  for (auto [op, scalar, v, first] : std::vector<std::tuple<BinaryOp, double, Values, bool>>{
           {BinaryOp::Mul, -3.0, Values::Normal, false},
           {BinaryOp::Mul, -3.0, Values::Normal, true},
           {BinaryOp::Div, 4.0, Values::Normal, false},
           {BinaryOp::Div, 2.0, Values::Positive, true},
           {BinaryOp::Maximum, 0.1, Values::Normal, false},
           {BinaryOp::Maximum, 0.1, Values::Normal, true},
           {BinaryOp::Pow, 3.0, Values::Positive, false},
           {BinaryOp::Pow, -0.5, Values::Positive, false},
           {BinaryOp::Pow, 2.0, Values::Normal, true}}) {
    OpCase c = make_case(first ? Op::ScalarBinary : Op::BinaryScalar, kFloat64,
                         {in({op == BinaryOp::Maximum ? 6 : 4}, v)});
    c.binary_op = op;
    c.scalar = scalar;
    t.add(c);
  }
  t.add(make_case(Op::Where, kFloat64,
                  {with_dtype(in({3, 4}, Values::Mask), InputDType::Case), in({3, 4}), in({4})}));
  t.add(make_case(Op::Where, kFloat64,
                  {with_dtype(in({4}, Values::Mask), InputDType::Case), in({3, 1}), in({3, 4})}));

  // ---- the views of tensor.h, each under tanh (so that the gradient is not just the view's projection): the
  // kernel reads the view in place, the gradcheck differentiates through it back to the allocated base
  for (InputSpec x :
       {viewed({2, 6}, "V",
               [](const Tensor& v) {
                 return v.view({3, 4});
               }),
        viewed({2, 3}, "R", [](const Tensor& v) { return v.t().reshape({6}); }), transposed({2, 3, 4}, 0, 2),
        narrowed({4, 5}, 1, 1, 3), viewed({5, 3}, "S", [](const Tensor& v) { return v.slice(0, 1, 5, 2); }),
        viewed({3, 4}, "L", [](const Tensor& v) { return v.select(1, 2); }),
        viewed({3, 4}, "L", [](const Tensor& v) { return v.select(0, -1); }), expanded({3, 1}, {2, 3, 4}),
        viewed({3, 1, 4}, "Q", [](const Tensor& v) { return v.squeeze(1); }),
        viewed({3, 4}, "U", [](const Tensor& v) { return v.unsqueeze(1); }),
        viewed({4, 6}, "C", [](const Tensor& v) {
          return v.narrow(0, 1, 2).transpose(0, 1).unsqueeze(0).expand({3, 6, 2}).select(2, 1);
        })}) {
    OpCase c = make_case(Op::Unary, kFloat64, {x});
    c.unary_op = UnaryOp::Tanh;
    t.add(c);
  }
}

}  // namespace brigade::testing
