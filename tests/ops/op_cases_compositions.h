// Op table cases (op_cases.h): compositions of autograd ops that have no kernel of their own, for the
// float64 gradcheck only: the operators, scalar ops feeding a product (so that the gradient of the scalar op
// is not constant), views that overlap or feed a product, the copies (contiguous, clone, a dtype round trip),
// checkpointing, and the attention, MLP and head-split blocks of a GPT.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "autograd/attention.h"
#include "autograd/checkpoint.h"
#include "autograd/ops.h"
#include "kernels/kernels.h"
#include "tests/ops/op_case.h"

namespace brigade::testing {

inline void add_composition_cases(OpTableBuilder& t) {
  using Inputs = std::vector<Tensor>;
  auto add = [&t](const char* label, std::vector<InputSpec> inputs, std::function<Tensor(const Inputs&)> fn,
                  autograd::GradcheckOptions options = {}) {
    OpCase c = make_case(Op::Composite, kFloat64, std::move(inputs));
    c.label = label;
    c.composite = std::move(fn);
    c.grad_options = options;
    t.add(std::move(c));
  };
  const Values positive = Values::Positive;
  add("unary_minus", {in({5})}, [](const Inputs& x) { return -x[0]; });
  add("operators", {in({3, 4}), in({3, 4}, positive)},
      [](const Inputs& x) { return (x[0] * x[1] - x[0] / x[1] + (-x[0])) * 2.0 - 1.0 / x[1] + x[0]; });
  add("add_scalar_times_x", {in({4})}, [](const Inputs& x) { return brigade::add(x[0], 2.5) * x[0]; });
  add("scalar_add_times_x", {in({4})}, [](const Inputs& x) { return brigade::add(2.5, x[0]) * x[0]; });
  add("sub_scalar_times_x", {in({4})}, [](const Inputs& x) { return brigade::sub(x[0], 1.5) * x[0]; });
  add("scalar_sub_times_x", {in({4})}, [](const Inputs& x) { return brigade::sub(1.5, x[0]) * x[0]; });
  add("cross_entropy_scaled", {in({3, 6}), fixed_ids({5, 0, 2}, {3})},
      [](const Inputs& x) { return brigade::cross_entropy(x[0], x[1]) * 3.0 + brigade::sum(x[0]); });
  add("permute_times_tanh", {in({2, 3, 4})}, [](const Inputs& x) {
    Tensor p = x[0].permute({2, 0, 1});
    return brigade::tanh(p) * p;
  });
  add("overlapping_views", {in({6})},
      [](const Inputs& x) { return x[0].narrow(0, 0, 4) * x[0].narrow(0, 2, 4); });
  add("contiguous", {in({3, 4})},
      [](const Inputs& x) { return brigade::tanh(x[0].transpose(0, 1).contiguous()); });
  add("clone", {in({3, 4})}, [](const Inputs& x) { return x[0].clone() * x[0]; });
  // Through float32: the numeric derivative carries float32 rounding (~6e-8 relative) divided by 2 eps,
  // so this case uses eps 1e-3 and atol 1e-3, rtol 1e-2.
  add(
      "to_float32_and_back", {in({3, 4})},
      [](const Inputs& x) { return (x[0].to(kFloat32) * 2.0).to(kFloat64); },
      autograd::GradcheckOptions{1e-3, 1e-3, 1e-2, 1234});
  add("checkpoint", {in({3, 4}), in({4, 5})}, [](const Inputs& x) {
    return brigade::checkpoint(
        [](const Inputs& y) { return Inputs{brigade::tanh(brigade::matmul(y[0], y[1]))}; }, x)[0];
  });
  add("causal_attention_unfused", {in({2, 3, 4}), in({2, 3, 4}), in({2, 3, 4})}, [](const Inputs& x) {
    Tensor scores = brigade::matmul(x[0], x[1], false, true) * 0.5;
    Tensor masked = brigade::masked_fill(scores, kernels::causal_mask(3, kFloat64), -1e9);
    return brigade::matmul(brigade::softmax(masked), x[2]);
  });
  add("mlp_block", {in({4, 6}), in({6, 8}), in({8, 6}), in({6})}, [](const Inputs& x) {
    Tensor h = brigade::gelu(brigade::matmul(brigade::layer_norm(x[0], x[3], Tensor()), x[1]));
    return x[0] + brigade::matmul(h, x[2]);
  });
  // The head split of a GPT: q, k, v are strided views of one [B, T, 3, H, D] leaf.
  add("attention_head_split_of_one_projection", {in({2, 5, 3, 2, 3})}, [](const Inputs& x) {
    const Tensor heads = x[0].permute({2, 0, 3, 1, 4});  // [3, B, H, T, D]
    return brigade::causal_attention(heads.select(0, 0), heads.select(0, 1), heads.select(0, 2), 0.6);
  });
  add("packed_self_attention_1_head", {in({2, 5, 12})},
      [](const Inputs& x) { return brigade::causal_self_attention(x[0], 1, 0.6); });
  add("packed_self_attention_2_heads", {in({2, 5, 12})},
      [](const Inputs& x) { return brigade::causal_self_attention(x[0], 2, 0.6); });
}

}  // namespace brigade::testing
