// What a case's op must return: kernels/reference on the same operands, with the dtype the op returns each
// output in and, for matmul and the layernorm backward's parameter gradients, the scale their rounding error
// is measured on.
#pragma once

#include <cmath>
#include <utility>
#include <vector>

#include "kernels/reference/reference.h"
#include "tests/ops/op_call.h"
#include "tests/ops/op_case.h"

namespace brigade::testing {

struct Expected {
  Tensor value;  ///< float64 (int64 for indices and counts), on the CPU
  DType dtype;   ///< the dtype the op returns this output in
  /// The error scale of an output that sums many terms: matmul's sum_k |a_ik b_kj| per element, the layernorm
  /// backward's sum over rows of |dy * xhat| (dweight) and |dy| (dbias); undefined for the others.
  Tensor magnitude;
  bool on_host = false;  ///< the op returns it as a host value (a count, a norm), whatever the device
};

/// The error scales of the layernorm backward's parameter gradients, over the rows of dy and x [R, C] with
/// the stored mean and rstd [R]: sum_r |dy * (x - mean) * rstd| and sum_r |dy|, float64 [C]. A column's
/// total can be far smaller than its terms, and its rounding error is on their scale.
inline std::pair<Tensor, Tensor> layernorm_param_grad_scales(const Tensor& dy, const Tensor& x,
                                                             const Tensor& mean, const Tensor& rstd) {
  const int64_t cols = x.size(x.dim() - 1), rows = x.numel() / cols;
  const std::vector<double> g = dy.contiguous().to(kFloat64).to_vector<double>();
  const std::vector<double> v = x.contiguous().to(kFloat64).to_vector<double>();
  const std::vector<double> mu = mean.contiguous().to(kFloat64).to_vector<double>();
  const std::vector<double> rs = rstd.contiguous().to(kFloat64).to_vector<double>();
  std::vector<double> scale_w(static_cast<size_t>(cols), 0.0), scale_b(static_cast<size_t>(cols), 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t j = 0; j < cols; ++j) {
      const auto i = static_cast<size_t>(r * cols + j);
      const auto row = static_cast<size_t>(r);
      scale_w[static_cast<size_t>(j)] += std::fabs(g[i] * (v[i] - mu[row]) * rs[row]);
      scale_b[static_cast<size_t>(j)] += std::fabs(g[i]);
    }
  }
  return {from_vector<double>(scale_w, {cols}), from_vector<double>(scale_b, {cols})};
}

/// The reference outputs of case c on its operands (operands_of(); read before an in-place op runs).
inline std::vector<Expected> reference_outputs(const OpCase& c, const std::vector<Tensor>& x) {
  namespace ref = brigade::kernels::reference;
  const DType dt = c.dtype, stats = stat_dtype(c.dtype);
  auto same = [dt](const Tensor& value) { return Expected{value, dt, Tensor()}; };
  switch (c.op) {
    case Op::Unary:
      return {same(ref::unary(c.unary_op, x[0]))};
    case Op::UnaryBackward:
      return {same(ref::unary_backward(c.unary_op, x[1], x[0], x[2]))};
    case Op::Binary:
      return {same(ref::binary(c.binary_op, x[0], x[1]))};
    case Op::BinaryScalar:
      return {same(ref::binary(c.binary_op, x[0], c.scalar))};
    case Op::ScalarBinary:
      return {same(ref::binary(c.binary_op, c.scalar, x[0]))};
    case Op::AddInPlace:
      return {same(ref::binary(kernels::BinaryOp::Add, x[0], x[1]))};
    case Op::MulInPlace:
      return {same(ref::binary(kernels::BinaryOp::Mul, x[0], c.scalar))};
    case Op::Where:
      return {same(ref::where(x[0], x[1], x[2]))};
    case Op::MaskedFill:
      return {same(ref::masked_fill(x[0], x[1], c.scalar))};
    case Op::Sum:
      return {same(ref::sum(x[0], c.dims, c.keepdim))};
    case Op::Mean:
      return {same(ref::mean(x[0], c.dims, c.keepdim))};
    case Op::Max:
      return {same(ref::max(x[0], c.dims, c.keepdim))};
    case Op::ArgMax:
      return {Expected{ref::argmax(x[0], c.dims.at(0), c.keepdim), kInt64, Tensor()}};
    case Op::SumTo:
      return {same(ref::sum_to(x[0], c.shape))};
    case Op::Matmul: {
      ref::MatmulReference r = ref::matmul(x[0], x[1], c.transpose_a, c.transpose_b);
      return {Expected{r.c, dt, r.magnitude}};
    }
    case Op::MatmulBias: {  // the product, then the bias on every row; its error scale grows by |bias|
      ref::MatmulReference r = ref::matmul(x[0], x[1], c.transpose_a, c.transpose_b);
      const Tensor bias = x[2].to(kFloat64);
      return {Expected{
          kernels::binary(kernels::BinaryOp::Add, r.c, bias), dt,
          kernels::binary(kernels::BinaryOp::Add, r.magnitude, kernels::unary(kernels::UnaryOp::Abs, bias))}};
    }
    case Op::Softmax:
      return {same(ref::softmax(x[0]))};
    case Op::LogSoftmax:
      return {same(ref::log_softmax(x[0]))};
    case Op::SoftmaxBackward:
      return {same(ref::softmax_backward(x[1], x[2]))};
    case Op::LogSoftmaxBackward:
      return {same(ref::log_softmax_backward(x[1], x[2]))};
    case Op::LayerNorm: {
      kernels::LayerNormOutput f =
          ref::layernorm(x[0], layernorm_weight(c, x), layernorm_bias(c, x), c.scalar);
      return {same(f.y), Expected{f.mean, stats, Tensor()}, Expected{f.rstd, stats, Tensor()}};
    }
    case Op::LayerNormBackward: {
      const size_t s = x.size() - 2;
      kernels::LayerNormGrads g =
          ref::layernorm_backward(x[1], x[0], layernorm_weight(c, x), x[s], x[s + 1], c.has_bias);
      const auto [scale_w, scale_b] = layernorm_param_grad_scales(x[1], x[0], x[s], x[s + 1]);
      std::vector<Expected> out = {same(g.dx)};
      if (c.has_weight) out.push_back(Expected{g.dweight, dt, scale_w});
      if (c.has_bias) out.push_back(Expected{g.dbias, dt, scale_b});
      return out;
    }
    case Op::Attention: {
      kernels::AttentionOutput f = ref::causal_attention(x[0], x[1], x[2], c.scalar);
      return {same(f.out), Expected{f.lse, stats, Tensor()}};
    }
    case Op::AttentionBackward: {
      kernels::AttentionGrads g =
          ref::causal_attention_backward(x[3], x[0], x[1], x[2], x[4], x[5], c.scalar);
      return {same(g.dq), same(g.dk), same(g.dv)};
    }
    case Op::Embedding:
      return {same(ref::embedding(x[0], x[1]))};
    case Op::EmbeddingBackward:
      return {same(ref::embedding_backward(x[0], x[1], c.index))};
    case Op::CrossEntropy: {
      kernels::CrossEntropyOutput r = ref::cross_entropy(x[0], x[1], c.index, c.compute_grad);
      std::vector<Expected> out = {Expected{r.loss, stats, Tensor()},
                                   Expected{from_vector<int64_t>({r.count}, {}), kInt64, Tensor(), true}};
      if (c.compute_grad) out.push_back(same(r.grad_logits));
      return out;
    }
    case Op::Dropout:
      return {same(ref::dropout(x[0], c.scalar, c.rng))};
    case Op::CausalMask:
      return {same(ref::causal_mask(c.index))};
    case Op::AdamW: {
      ref::AdamWResult r = ref::adamw_update(x[0], x[1], x[2], x[3], c.adamw);
      const DType moments = x[2].dtype();
      return {same(r.param), Expected{r.m, moments, Tensor()}, Expected{r.v, moments, Tensor()}};
    }
    case Op::GlobalL2Norm:
      return {Expected{from_vector<double>({ref::global_l2_norm(x)}, {}), kFloat64, Tensor(), true}};
    case Op::BiasGelu:
      return {same(ref::bias_gelu(x[0], x[1]))};
    case Op::BiasGeluBackward: {
      kernels::BiasGeluGrads g = ref::bias_gelu_backward(x[1], x[0], x[2]);
      return {same(g.dx), same(g.dbias)};
    }
    case Op::AddLayerNorm: {
      kernels::AddLayerNormOutput f =
          ref::add_layernorm(x[0], x[1], layernorm_weight(c, x), layernorm_bias(c, x), c.scalar);
      return {same(f.sum), same(f.norm.y), Expected{f.norm.mean, stats, Tensor()},
              Expected{f.norm.rstd, stats, Tensor()}};
    }
    case Op::AdamWAll: {
      std::vector<Expected> out;
      for (const ref::AdamWResult& r : ref::adamw_update_all(adamw_entries(c, x))) {
        out.push_back(same(r.param));
        out.push_back(Expected{r.m, stats, Tensor()});
        out.push_back(Expected{r.v, stats, Tensor()});
      }
      return out;
    }
    case Op::Composite:
      return {};
  }
  return {};
}

}  // namespace brigade::testing
