// The differentiable form of a case: the autograd op (autograd/ops.h, autograd/attention.h) that records
// the case's kernel, for the float64 finite-difference gradcheck (op_gradcheck_test.cpp). Ops with no
// gradient of their own (comparisons, argmax, the backward kernels, in-place and optimizer ops, masks) have
// none: their kernels are checked against the reference, and the backward kernels also through the
// gradcheck of the forward op whose backward calls them.
#pragma once

#include <functional>
#include <iterator>
#include <vector>

#include "autograd/attention.h"
#include "autograd/ops.h"
#include "tests/ops/op_call.h"
#include "tests/ops/op_case.h"

namespace brigade::testing {

using DifferentiableForm = std::function<Tensor(const std::vector<Tensor>&)>;

/// The autograd function of the case's (viewed) inputs, or an empty function when the op has none.
inline DifferentiableForm differentiable_form(const OpCase& c) {
  using kernels::BinaryOp;
  using kernels::UnaryOp;
  using Inputs = std::vector<Tensor>;
  const OpCase* p = &c;  // the table outlives the form
  auto binary = [](BinaryOp op) -> Tensor (*)(const Tensor&, const Tensor&) {
    switch (op) {
      case BinaryOp::Add:
        return &brigade::add;
      case BinaryOp::Sub:
        return &brigade::sub;
      case BinaryOp::Mul:
        return &brigade::mul;
      case BinaryOp::Div:
        return &brigade::div;
      case BinaryOp::Maximum:
        return &brigade::maximum;
      case BinaryOp::Pow:
        return &brigade::pow;
      default:
        return nullptr;  // comparisons: no gradient
    }
  };
  switch (c.op) {
    case Op::Unary: {
      static constexpr Tensor (*kUnary[])(const Tensor&) = {
          &brigade::neg,  &brigade::exp,     &brigade::log,  &brigade::sqrt, &brigade::rsqrt,
          &brigade::tanh, &brigade::sigmoid, &brigade::relu, &brigade::gelu, &brigade::abs};
      static_assert(std::size(kUnary) == static_cast<size_t>(UnaryOp::Abs) + 1);
      return [f = kUnary[static_cast<size_t>(c.unary_op)]](const Inputs& in) { return f(in[0]); };
    }
    case Op::Binary: {
      auto f = binary(c.binary_op);
      if (!f) return {};
      return [f](const Inputs& in) { return f(in[0], in[1]); };
    }
    case Op::BinaryScalar:
    case Op::ScalarBinary: {
      if (!binary(c.binary_op)) return {};
      return [p](const Inputs& in) {
        // The scalar forms of autograd/ops.h: add(x, s) or add(s, x), ...
        const bool first = p->op == Op::ScalarBinary;
        const double s = p->scalar;
        switch (p->binary_op) {
          case BinaryOp::Add:
            return first ? brigade::add(s, in[0]) : brigade::add(in[0], s);
          case BinaryOp::Sub:
            return first ? brigade::sub(s, in[0]) : brigade::sub(in[0], s);
          case BinaryOp::Mul:
            return first ? brigade::mul(s, in[0]) : brigade::mul(in[0], s);
          case BinaryOp::Div:
            return first ? brigade::div(s, in[0]) : brigade::div(in[0], s);
          case BinaryOp::Maximum:
            return first ? brigade::maximum(s, in[0]) : brigade::maximum(in[0], s);
          default:  // Pow (the comparisons returned above)
            return first ? brigade::pow(s, in[0]) : brigade::pow(in[0], s);
        }
      };
    }
    case Op::Where:
      return [](const Inputs& in) { return brigade::where(in[0], in[1], in[2]); };
    case Op::MaskedFill:
      return [p](const Inputs& in) { return brigade::masked_fill(in[0], in[1], p->scalar); };
    case Op::Sum:
      return [p](const Inputs& in) { return brigade::sum(in[0], p->dims, p->keepdim); };
    case Op::Mean:
      return [p](const Inputs& in) { return brigade::mean(in[0], p->dims, p->keepdim); };
    case Op::Max:
      return [p](const Inputs& in) { return brigade::max(in[0], p->dims, p->keepdim); };
    case Op::Matmul:
      return [p](const Inputs& in) { return brigade::matmul(in[0], in[1], p->transpose_a, p->transpose_b); };
    case Op::MatmulBias:
      return [p](const Inputs& in) {
        return brigade::matmul_bias(in[0], in[1], in[2], p->transpose_a, p->transpose_b);
      };
    case Op::Softmax:
      return [](const Inputs& in) { return brigade::softmax(in[0]); };
    case Op::LogSoftmax:
      return [](const Inputs& in) { return brigade::log_softmax(in[0]); };
    case Op::LayerNorm:
      return [p](const Inputs& in) {
        return brigade::layer_norm(in[0], layernorm_weight(*p, in), layernorm_bias(*p, in), p->scalar);
      };
    case Op::Attention:
      return [p](const Inputs& in) { return brigade::causal_attention(in[0], in[1], in[2], p->scalar); };
    case Op::Embedding:
      return [](const Inputs& in) { return brigade::embedding(in[0], in[1]); };
    case Op::CrossEntropy:
      return [p](const Inputs& in) { return brigade::cross_entropy(in[0], in[1], p->index); };
    case Op::Dropout:
      return [p](const Inputs& in) {
        Generator gen(p->rng.seed);  // the same mask at every call
        return brigade::dropout(in[0], p->scalar, /*training=*/true, &gen);
      };
    case Op::BiasGelu:
      return [](const Inputs& in) { return brigade::bias_gelu(in[0], in[1]); };
    case Op::AddLayerNorm:
      return [p](const Inputs& in) {
        // Both outputs in one function: the norm plus a multiple of the sum, so that the gradient of each
        // reaches x and the residual.
        AddLayerNorm f = brigade::add_layer_norm(in[0], in[1], layernorm_weight(*p, in),
                                                 layernorm_bias(*p, in), p->scalar);
        return f.norm + f.sum * 0.5;
      };
    case Op::Composite:
      return c.composite;
    case Op::UnaryBackward:
    case Op::AddInPlace:
    case Op::MulInPlace:
    case Op::ArgMax:
    case Op::SumTo:
    case Op::SoftmaxBackward:
    case Op::LogSoftmaxBackward:
    case Op::LayerNormBackward:
    case Op::AttentionBackward:
    case Op::EmbeddingBackward:
    case Op::CausalMask:
    case Op::AdamW:
    case Op::GlobalL2Norm:
    case Op::BiasGeluBackward:
    case Op::AdamWAll:
      return {};
  }
  return {};
}

/// Central differences cost two evaluations per input element: cases whose inputs hold more than this
/// many elements are left to the reference check.
constexpr int64_t kGradcheckMaxElements = 4096;

/// Whether the float64 gradcheck runs case c: a float64 case with a differentiable form, at least one
/// element in a differentiable input, and at most kGradcheckMaxElements input elements.
inline bool gradchecked(const OpCase& c) {
  if (c.dtype != kFloat64 || !differentiable_form(c)) return false;
  int64_t elements = 0;
  bool any = false;
  for (const InputSpec& s : c.inputs) {
    elements += shape_numel(s.base);
    any = any || (differentiable(s) && shape_numel(s.base) > 0);
  }
  return any && elements <= kGradcheckMaxElements;
}

}  // namespace brigade::testing
