// Op table cases (op_cases.h): the fused ops: bias + GELU and its backward, the residual add + layernorm,
// and AdamW over a list of parameters in one call. Each is checked against the unfused references in turn
// (kernels/reference/fused.cpp); tests/kernels/fused_ops_test.cpp checks them bit for bit against the
// unfused CPU ops.
#pragma once

#include <utility>
#include <vector>

#include "tests/ops/op_case.h"

namespace brigade::testing {

inline void add_fused_cases(OpTableBuilder& t) {
  const std::vector<DType> floating = {kFloat32, kBFloat16, kFloat64};
  // ---- bias + GELU: x [..., C] and bias [C]; the backward takes (x, dy, bias). Shapes: C below a vector
  // (3), partial 128-column blocks of the backward (40, 70, 600), past the forward's 256-element span (600),
  // enough rows for the OpenMP paths (300 x 600) and for two chunks of the column sums (9000 rows).
  auto bias_gelu = [&t](DType d, InputSpec x, const Shape& dy, int64_t C) {
    t.add(make_case(Op::BiasGelu, d, {x, in({C})}));
    t.add(make_case(Op::BiasGeluBackward, d, {x, in(dy), in({C})}));
  };
  for (DType d : floating) bias_gelu(d, in({4, 16}), {4, 16}, 16);
  bias_gelu(kFloat32, in({2, 3, 40}), {2, 3, 40}, 40);
  bias_gelu(kFloat32, transposed({16, 4}, 0, 1), {4, 16}, 16);
  bias_gelu(kFloat32, in({300, 600}), {300, 600}, 600);
  bias_gelu(kBFloat16, in({37, 70}), {37, 70}, 70);
  bias_gelu(kFloat32, in({9000, 3}), {9000, 3}, 3);
  bias_gelu(kFloat32, in({0, 8}), {0, 8}, 8);
  bias_gelu(kFloat64, in({5, 33}), {5, 33}, 33);
  bias_gelu(kFloat64, in({2, 3, 5}), {2, 3, 5}, 5);

  // ---- residual add + layernorm: x, residual, then weight and bias when the case has them
  auto add_layernorm = [&t](DType d, InputSpec x, InputSpec residual, int64_t C, bool w, bool b, double eps) {
    std::vector<InputSpec> inputs = {std::move(x), std::move(residual)};
    if (w) inputs.push_back(in({C}));
    if (b) inputs.push_back(in({C}));
    OpCase c = make_case(Op::AddLayerNorm, d, inputs);
    c.has_weight = w;
    c.has_bias = b;
    c.scalar = eps;
    t.add(c);
  };
  for (auto [w, b] : std::vector<std::pair<bool, bool>>{{true, true}, {false, false}, {true, false}}) {
    for (DType d : floating) add_layernorm(d, in({4, 16}), in({4, 16}), 16, w, b, 1e-5);
  }
  add_layernorm(kFloat32, in({2, 3, 8}), transposed({8, 3, 2}, 0, 2), 8, true, true, 1e-3);
  add_layernorm(kFloat32, in({200, 200}), in({200, 200}), 200, true, true, 1e-5);  // OpenMP path
  add_layernorm(kBFloat16, in({33, 100}), in({33, 100}), 100, true, true, 1e-5);
  add_layernorm(kFloat32, in({0, 6}), in({0, 6}), 6, true, true, 1e-5);
  add_layernorm(kFloat64, in({2, 3, 6}), in({2, 3, 6}), 6, true, false, 1e-5);

  // ---- AdamW over a list: (param, grad, m, v) per entry (op_call.h: adamw_entries gives each entry its
  // own lr and weight decay)
  auto entry = [](Shape shape, bool transposed_grad = false) {
    InputSpec grad = in(shape);
    if (transposed_grad) {
      Shape base = {shape[1], shape[0]};
      grad = transposed(base, 0, 1);
    }
    return std::vector<InputSpec>{in(shape), grad,
                                  with_dtype(in(shape, Values::Small), InputDType::Accumulator),
                                  with_dtype(in(shape, Values::Positive), InputDType::Accumulator)};
  };
  auto adamw_all = [&t](DType d, const std::vector<std::vector<InputSpec>>& entries, int64_t step) {
    std::vector<InputSpec> inputs;
    for (const auto& e : entries) inputs.insert(inputs.end(), e.begin(), e.end());
    OpCase c = make_case(Op::AdamWAll, d, inputs);
    c.adamw.lr = 1e-2;
    c.adamw.weight_decay = 0.1;
    c.adamw.step = step;
    t.add(c);
  };
  for (DType d : floating) adamw_all(d, {entry({5, 7}), entry({13}), entry({3, 3, 3})}, 3);
  adamw_all(kFloat32, {entry({4, 6}, true), entry({1})}, 1);
  // Past kParallelGrain in total: several 32k-element segments of one tensor, shared by the threads.
  adamw_all(kFloat32, {entry({300, 300}), entry({3}), entry({50000})}, 10);
}

}  // namespace brigade::testing
