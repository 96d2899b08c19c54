// The op table's perf cases (ggml's make_test_cases_perf): the same ops as op_cases.h at the shapes one
// training step of a GPT gives them, for bench/kernels_bench.cpp. OpCase::label is the benchmark's op name
// (stable: scripts/memory_bound_summary.py and bench/results/ read it).
//   addition  B=128 T=13   C=64  H=4  V=16     the default `brigade train` model (2 layers)
//   char128   B=16  T=64   C=128 H=4  V=65     a small character model (2 layers)
//   gpt2      B=8   T=1024 C=768 H=12 V=50257  GPT-2 small, on CUDA (12 layers)
//   gpt2-b1   B=1, otherwise gpt2              GPT-2 small on the CPU (one sequence keeps a run in minutes)
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "tests/ops/op_case.h"

namespace brigade::testing {

struct PerfModel {
  std::string name;
  int64_t B, T, C, H, V, layers;
  int64_t N() const { return B * T; }
  /// GPT parameters: token + position embeddings, per block 12 C^2 + 13 C (qkv, proj, fc, fc_proj with
  /// biases, two layernorms), the final layernorm; the LM head is tied to the token embedding.
  int64_t params() const { return V * C + T * C + layers * (12 * C * C + 13 * C) + 2 * C; }
};

/// The models a perf run covers: the two small ones, and (not in smoke runs) GPT-2 small, with one sequence
/// on the CPU.
inline std::vector<PerfModel> perf_models(bool cuda, bool smoke) {
  std::vector<PerfModel> list = {{"addition", 128, 13, 64, 4, 16, 2}, {"char128", 16, 64, 128, 4, 65, 2}};
  if (!smoke) {
    list.push_back(cuda ? PerfModel{"gpt2", 8, 1024, 768, 12, 50257, 12}
                        : PerfModel{"gpt2-b1", 1, 1024, 768, 12, 50257, 12});
  }
  return list;
}

/// The ops of one step of model m in `dtype`; `head_dim_128` adds attention at head dim 128 (GPT-2's shapes
/// with half the heads: the CUDA flash kernels' other tile width).
inline std::vector<OpCase> perf_cases(const PerfModel& m, DType dtype, bool head_dim_128) {
  using kernels::BinaryOp;
  using kernels::UnaryOp;
  OpTableBuilder t;
  auto add = [&t](const char* label, OpCase c) {
    c.label = label;
    t.add(std::move(c));
  };
  const int64_t N = m.N(), C = m.C, T = m.T, V = m.V, F = 4 * m.C, R = m.B * m.H * m.T, P = m.params();
  // Attention probabilities [B*H*T, T] and the logits' log-softmax [N, V].
  add("softmax_fwd.attn", make_case(Op::Softmax, dtype, {in({R, T})}));
  add("softmax_bwd.attn", make_case(Op::SoftmaxBackward, dtype, {in({R, T}), in({R, T})}));
  add("log_softmax_fwd.logits", make_case(Op::LogSoftmax, dtype, {in({N, V})}));
  add("log_softmax_bwd.logits", make_case(Op::LogSoftmaxBackward, dtype, {in({N, V}), in({N, V})}));
  // Fused causal attention on q, k, v [B, H, T, D].
  auto attention = [&](const char* fwd, const char* bwd, int64_t H, int64_t D) {
    const Shape shape{m.B, H, T, D};
    OpCase f = make_case(Op::Attention, dtype, {in(shape), in(shape), in(shape)});
    f.scalar = 1.0 / std::sqrt(static_cast<double>(D));
    add(fwd, f);
    OpCase b = make_case(Op::AttentionBackward, dtype, {in(shape), in(shape), in(shape), in(shape)});
    b.scalar = f.scalar;
    add(bwd, b);
  };
  attention("attention_fwd", "attention_bwd", m.H, C / m.H);
  if (head_dim_128) attention("attention_fwd.d128", "attention_bwd.d128", m.H / 2, 128);
  // The causal mask on the scores [B*H, T, T] (a [T, T] mask broadcast).
  {
    OpCase c = make_case(Op::MaskedFill, dtype,
                         {in({m.B * m.H, T, T}), with_dtype(in({T, T}, Values::Mask), InputDType::Case)});
    c.scalar = -1e30;
    add("masked_fill.attn", c);
  }
  // LayerNorm [N, C] with weight and bias.
  {
    OpCase f = make_case(Op::LayerNorm, dtype, {in({N, C}), in({C}), in({C})});
    f.has_weight = f.has_bias = true;
    f.scalar = 1e-5;
    add("layernorm_fwd", f);
    OpCase b = make_case(Op::LayerNormBackward, dtype, {in({N, C}), in({N, C}), in({C})});
    b.has_weight = b.has_bias = true;
    b.scalar = 1e-5;
    add("layernorm_bwd", b);
    // The block's fused residual add + layernorm (its sum and the normalised sum).
    OpCase a = make_case(Op::AddLayerNorm, dtype, {in({N, C}), in({N, C}), in({C}), in({C})});
    a.has_weight = a.has_bias = true;
    a.scalar = 1e-5;
    add("add_layernorm_fwd", a);
  }
  // GELU on the MLP's hidden [N, 4C]; the other unary ops on [N, C] (positive: log and sqrt defined).
  {
    OpCase c = make_case(Op::Unary, dtype, {in({N, F})});
    c.unary_op = UnaryOp::Gelu;
    add("gelu_fwd", c);
    c = make_case(Op::UnaryBackward, dtype, {in({N, F}), in({N, F})});
    c.unary_op = UnaryOp::Gelu;
    add("gelu_bwd", c);
  }
  // The MLP's bias + GELU as the GPT runs it (fused): the fc output [N, 4C] and its bias; the backward
  // takes (x, dy, bias).
  add("bias_gelu_fwd", make_case(Op::BiasGelu, dtype, {in({N, F}), in({F})}));
  add("bias_gelu_bwd", make_case(Op::BiasGeluBackward, dtype, {in({N, F}), in({N, F}), in({F})}));
  static const char* const kUnaryLabels[] = {"unary_neg",   "unary_exp",  "unary_log",     "unary_sqrt",
                                             "unary_rsqrt", "unary_tanh", "unary_sigmoid", "unary_relu",
                                             "unary_gelu",  "unary_abs"};
  for (UnaryOp op : {UnaryOp::Neg, UnaryOp::Exp, UnaryOp::Log, UnaryOp::Sqrt, UnaryOp::Rsqrt, UnaryOp::Tanh,
                     UnaryOp::Sigmoid, UnaryOp::Relu, UnaryOp::Abs}) {
    OpCase c = make_case(Op::Unary, dtype, {in({N, C}, Values::Positive)});
    c.unary_op = op;
    add(kUnaryLabels[static_cast<int>(op)], c);
  }
  // A Linear with its bias, as the attention's qkv projection runs it: x [N, C] @ W^T [3C, C] + bias [3C],
  // the bias added by the GEMM as it stores C (matmul_bias), beside the product alone and the pass over C
  // that adds the bias unfused.
  {
    OpCase c = make_case(Op::Matmul, dtype, {in({N, C}), in({3 * C, C})});
    c.transpose_b = true;
    add("matmul.qkv", c);
    c = make_case(Op::MatmulBias, dtype, {in({N, C}), in({3 * C, C}), in({3 * C})});
    c.transpose_b = true;
    add("matmul_bias.qkv", c);
    c = make_case(Op::Binary, dtype, {in({N, 3 * C}), in({3 * C})});
    c.binary_op = BinaryOp::Add;
    add("bias_add.qkv", c);
  }
  // Elementwise binaries as the GPT uses them: the residual add, the bias add of a linear layer [N, 4C] +
  // [4C], a scale by a scalar, a product, and gradient accumulation in place.
  {
    OpCase c = make_case(Op::Binary, dtype, {in({N, C}), in({N, C})});
    c.binary_op = BinaryOp::Add;
    add("residual_add", c);
    c = make_case(Op::Binary, dtype, {in({N, F}), in({F})});
    c.binary_op = BinaryOp::Add;
    add("bias_add", c);
    c = make_case(Op::BinaryScalar, dtype, {in({N, C})});
    c.binary_op = BinaryOp::Mul;
    c.scalar = 0.125;
    add("mul_scalar", c);
    c = make_case(Op::Binary, dtype, {in({N, C}), in({N, C})});
    c.binary_op = BinaryOp::Mul;
    add("mul", c);
    add("add_inplace", make_case(Op::AddInPlace, dtype, {in({N, C}), in({N, C})}));
  }
  {
    OpCase c = make_case(Op::Dropout, dtype, {in({N, C})});
    c.scalar = 0.1;
    c.rng = {1, 0};
    add("dropout", c);
  }
  // Embedding [V, C] at N ids, and its backward.
  add("embedding_fwd", make_case(Op::Embedding, dtype, {in({V, C}), ids({N}, V)}));
  {
    OpCase c = make_case(Op::EmbeddingBackward, dtype, {in({N, C}), ids({N}, V)});
    c.index = V;
    add("embedding_bwd", c);
  }
  // Cross-entropy fused with log-softmax over the logits [N, V], with and without the gradient.
  for (bool grad : {true, false}) {
    OpCase c = make_case(Op::CrossEntropy, dtype, {in({N, V}), ids({N}, V)});
    c.index = -100;
    c.compute_grad = grad;
    add(grad ? "cross_entropy" : "cross_entropy_nograd", c);
  }
  // Reductions: the bias gradient (sum over the rows of [N, 4C]), a row sum and mean of [N, C], the row max
  // and argmax of the logits (sampling, accuracy).
  {
    OpCase c = make_case(Op::Sum, dtype, {in({N, F})});
    c.dims = {0};
    add("sum_rows.bias_grad", c);
    c = make_case(Op::Sum, dtype, {in({N, C})});
    c.dims = {1};
    add("sum_last", c);
    c = make_case(Op::Mean, dtype, {in({N, C})});
    c.dims = {1};
    add("mean_last", c);
    c = make_case(Op::Max, dtype, {in({N, V})});
    c.dims = {1};
    add("max_last.logits", c);
    c = make_case(Op::ArgMax, dtype, {in({N, V})});
    c.dims = {1};
    add("argmax.logits", c);
  }
  // AdamW over all parameters as one flat tensor (float32 moments), and the global gradient norm.
  {
    OpCase c = make_case(Op::AdamW, dtype,
                         {in({P}), in({P}), with_dtype(in({P}, Values::Small), InputDType::Accumulator),
                          with_dtype(in({P}, Values::Positive), InputDType::Accumulator)});
    c.adamw = kernels::AdamWStep{.lr = 1e-9, .weight_decay = 0.1};
    add("adamw", c);
    add("global_l2_norm", make_case(Op::GlobalL2Norm, dtype, {in({P})}));
  }
  return t.take();
}

}  // namespace brigade::testing
