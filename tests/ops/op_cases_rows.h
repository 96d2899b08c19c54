// Op table cases (op_cases.h): the ops over rows of the last dim: softmax and log-softmax with their
// backward, layernorm forward and backward, cross-entropy.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "tests/ops/op_case.h"

namespace brigade::testing {

inline void add_row_cases(OpTableBuilder& t) {
  const std::vector<DType> floating = {kFloat32, kBFloat16, kFloat64};
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
    for (DType d : {kFloat32, kFloat64}) t.add(make_case(op, d, inputs(in({2, 3, 5}), {2, 3, 5})));
    t.add(make_case(op, kFloat32, inputs(in({3, 1}), {3, 1})));
    t.add(make_case(op, kFloat32, inputs(in({0, 5}), {0, 5})));
    t.add(make_case(op, kFloat32, inputs(in({7}), {7})));
    t.add(make_case(op, kFloat32, inputs(in({64, 600}), {64, 600})));  // OpenMP path
  }

  // ---- layernorm: each spec gives a forward case (x, weight, bias) and a backward case (x, dy, weight; the
  // forward's mean and rstd come from the reference, op_call.h)
  auto layernorm = [&t](DType d, InputSpec x, const Shape& dy, int64_t C, bool w, bool b, double eps) {
    std::vector<InputSpec> fwd = {x}, bwd = {x, in(dy)};
    if (w) {
      fwd.push_back(in({C}));
      bwd.push_back(in({C}));
    }
    if (b) fwd.push_back(in({C}));
    for (OpCase c : {make_case(Op::LayerNorm, d, fwd), make_case(Op::LayerNormBackward, d, bwd)}) {
      c.has_weight = w;
      c.has_bias = b;
      c.scalar = eps;
      t.add(c);
    }
  };
  for (auto [w, b] :
       std::vector<std::pair<bool, bool>>{{true, true}, {true, false}, {false, false}, {false, true}}) {
    for (DType d : floating) layernorm(d, in({4, 16}), {4, 16}, 16, w, b, 1e-5);
  }
  layernorm(kFloat32, transposed({8, 2, 3}, 0, 2), {3, 2, 8}, 8, true, true, 1e-3);
  layernorm(kFloat32, in({200, 200}), {200, 200}, 200, true, true, 1e-5);  // OpenMP path
  layernorm(kFloat32, in({0, 6}), {0, 6}, 6, true, true, 1e-5);
  layernorm(kFloat32, in({5}), {5}, 5, false, false, 1e-5);
  layernorm(kFloat64, in({2, 3, 6}), {2, 3, 6}, 6, true, false, 1e-5);  // 3-d, weight only
  layernorm(kFloat64, in({4, 6}), {4, 6}, 6, false, false, 1e-3);       // plain, a larger eps

  // ---- the widths of the CUDA row kernels: around a warp's 32 lanes and the register-row steps of the
  // warp-per-row versions (1, 5, 32, 33, 100, 768, 1024) and past their limit (1500), 3 and 257 rows; the
  // softmax rows have -inf entries (masked scores, never the first); layernorm with and without affine
  // parameters, its backward with the bias gradient either way
  for (DType d : floating) {
    for (int64_t C : {1, 5, 32, 33, 100, 768, 1024, 1500}) {
      for (int64_t R : {3, 257}) {
        const Values scores = C > 2 ? Values::Masked : Values::Normal;
        for (Op op : {Op::Softmax, Op::LogSoftmax}) t.add(make_case(op, d, {in({R, C}, scores)}));
        for (Op op : {Op::SoftmaxBackward, Op::LogSoftmaxBackward}) {
          t.add(make_case(op, d, {in({R, C}, scores), in({R, C})}));
        }
        layernorm(d, in({R, C}), {R, C}, C, true, true, 1e-5);
        layernorm(d, in({R, C}), {R, C}, C, false, false, 1e-5);
        OpCase b = make_case(Op::LayerNormBackward, d, {in({R, C}), in({R, C})});
        b.has_bias = true;
        b.scalar = 1e-5;
        t.add(b);
      }
    }
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
    // Short rows go in blocks of 8 on the CPU's v2: several blocks and a tail, with and without a gradient.
    for (bool grad : {true, false}) {
      c = make_case(Op::CrossEntropy, kFloat32, {in({13, 50}), targets({13}, 50, -100)});
      c.index = -100;
      c.compute_grad = grad;
      t.add(c);
    }
    c = make_case(Op::CrossEntropy, kFloat32, {in({0, 5}), targets({0}, 5, -100)});
    c.index = -100;
    t.add(c);
    c = make_case(Op::CrossEntropy, kFloat64, {in({4, 5}), fixed_ids({1, -100, 4, 0}, {4})});  // one ignored
    c.index = -100;
    t.add(c);
  }
}

}  // namespace brigade::testing
