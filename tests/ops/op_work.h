// The napkin work of one call of a case's op, for the perf mode (bench/kernels_bench.cpp divides it by the
// measured time and by the device's peaks).
//   bytes: every operand read once (a broadcast or expanded input: its allocated base, read once) and every
//          output written once; a softmax backward reads dy and y, not x; a unary backward reads x or y,
//          whichever its derivative uses; embedding reads only the gathered rows, and its backward
//          zero-fills the [V, C] gradient and reads and writes the hit rows.
//   FLOPs: 2 per multiply-add; elementwise ops count the arithmetic of their formula roughly (GELU ~10 per
//          element forward and ~15 backward, softmax ~5 and ~4, layernorm ~8 and ~12, cross-entropy ~6, or
//          ~4 without the gradient, AdamW ~12, one for the rest): what matters for them is the bytes.
//          Causal attention: the two T x T x D products of each head, halved by the mask, 2 B H T^2 D
//          forward; the backward recomputes the scores and has five such products, 5 B H T^2 D.
#pragma once

#include <vector>

#include "tests/ops/op_case.h"

namespace brigade::testing {

inline double bytes_of(const Tensor& t) {
  return t.defined() ? static_cast<double>(t.numel()) * static_cast<double>(dtype_size(t.dtype())) : 0.0;
}

/// FLOPs per element of the op's main tensor (see the top), for the ops that are priced per element.
inline double flops_per_element(const OpCase& c) {
  using kernels::UnaryOp;
  switch (c.op) {
    case Op::Unary:
      return c.unary_op == UnaryOp::Gelu ? 10 : 1;
    case Op::UnaryBackward:
      return c.unary_op == UnaryOp::Gelu ? 15 : 1;
    case Op::Softmax:
    case Op::LogSoftmax:
      return 5;
    case Op::SoftmaxBackward:
    case Op::LogSoftmaxBackward:
      return 4;
    case Op::LayerNorm:
      return 8;
    case Op::LayerNormBackward:
      return 12;
    case Op::CrossEntropy:
      return c.compute_grad ? 6 : 4;
    case Op::AdamW:
    case Op::AdamWAll:
      return 12;
    case Op::BiasGelu:
      return 11;
    case Op::BiasGeluBackward:
      return 17;
    case Op::AddLayerNorm:
      return 9;
    case Op::GlobalL2Norm:
      return 2;
    case Op::Embedding:
    case Op::Dropout:
    case Op::CausalMask:
    case Op::Composite:
      return 0;
    default:
      return 1;
  }
}

/// The work of one call of c's op on `operands` (operands_of()) giving `outputs`.
inline Work work_of(const OpCase& c, const std::vector<Tensor>& operands,
                    const std::vector<Tensor>& outputs) {
  Work w;
  for (size_t k = 0; k < operands.size(); ++k) {
    if (k < c.inputs.size()) {
      const DType dtype = operands[k].dtype();
      w.bytes += static_cast<double>(shape_numel(c.inputs[k].base)) * static_cast<double>(dtype_size(dtype));
    } else {
      w.bytes += bytes_of(operands[k]);
    }
  }
  for (const Tensor& t : outputs) w.bytes += bytes_of(t);
  // The element count the per-element FLOPs apply to: the first operand (x, logits, the parameters) or,
  // for ops that make their output, the output.
  const double elements = operands.empty() ? 0.0 : static_cast<double>(operands[0].numel());
  w.flops = flops_per_element(c) * (elements > 0 ? elements : (outputs.empty() ? 0.0 : outputs[0].numel()));
  switch (c.op) {
    case Op::Binary:
    case Op::Where:
      w.flops = static_cast<double>(outputs.at(0).numel());  // one per output element (broadcasts included)
      break;
    case Op::GlobalL2Norm: {
      double n = 0;
      for (const Tensor& t : operands) n += static_cast<double>(t.numel());
      w.flops = 2 * n;
      w.bytes = 0;
      for (const Tensor& t : operands) w.bytes += bytes_of(t);
      break;
    }
    case Op::Matmul:
    case Op::MatmulBias: {
      const Tensor& out = outputs.at(0);
      const int64_t k = c.transpose_a ? operands[0].size(-2) : operands[0].size(-1);
      w.flops = 2.0 * static_cast<double>(out.numel()) * static_cast<double>(k);
      break;
    }
    case Op::Attention:
    case Op::AttentionBackward: {
      const Tensor& q = operands[0];
      const double t2 = static_cast<double>(q.size(0) * q.size(1)) * static_cast<double>(q.size(2)) *
                        static_cast<double>(q.size(2)) * static_cast<double>(q.size(3));
      w.flops = (c.op == Op::Attention ? 2 : 5) * t2;
      break;
    }
    case Op::UnaryBackward: {  // dy, then x or y (whichever the derivative uses, kernels.h), dx
      using kernels::UnaryOp;
      const UnaryOp op = c.unary_op;
      const bool from_y = op == UnaryOp::Exp || op == UnaryOp::Sqrt || op == UnaryOp::Rsqrt ||
                          op == UnaryOp::Tanh || op == UnaryOp::Sigmoid;
      w.bytes = bytes_of(operands[1]) + bytes_of(operands[from_y ? 2 : 0]) + bytes_of(outputs.at(0));
      break;
    }
    case Op::SoftmaxBackward:
    case Op::LogSoftmaxBackward:  // dy and y (x is only the forward's), dx
      w.bytes = bytes_of(operands[1]) + bytes_of(operands[2]) + bytes_of(outputs.at(0));
      break;
    case Op::Embedding:  // the gathered rows (read, write) and the ids
      w.bytes = 2 * bytes_of(outputs.at(0)) + bytes_of(operands[1]);
      break;
    case Op::EmbeddingBackward:  // zero-fill [V, C], read grad, read-modify-write the hit rows, the ids
      w.flops = static_cast<double>(operands[0].numel());
      w.bytes = bytes_of(outputs.at(0)) + 3 * bytes_of(operands[0]) + bytes_of(operands[1]);
      break;
    default:
      break;
  }
  return w;
}

}  // namespace brigade::testing
