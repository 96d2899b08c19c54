// What an op case is, and the machinery around the table in op_cases.h: input specs and their
// deterministic values, run_case() (the one place that calls brigade::kernels for a case), and naming.
//
// A case is data: which op (and its parameters), the case dtype, and its inputs. An input names the shape
// that is allocated, how its values are drawn (deterministically from the case name, so the CPU and CUDA
// runs see the same numbers), its dtype, and optionally a view taken of it (transpose, narrow, expand), so
// that non-contiguous and broadcast operands go through the real dispatch code.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "kernels/kernels.h"
#include "tensor/tensor.h"

namespace brigade::testing {

enum class Op {
  Unary,
  UnaryBackward,
  Binary,
  BinaryScalar,
  ScalarBinary,
  AddInPlace,
  MulInPlace,
  Where,
  MaskedFill,
  Sum,
  Mean,
  Max,
  ArgMax,
  SumTo,
  Softmax,
  LogSoftmax,
  SoftmaxBackward,
  LogSoftmaxBackward,
  LayerNorm,
  Embedding,
  EmbeddingBackward,
  CrossEntropy,
  Dropout,
  CausalMask,
  AdamW,
  GlobalL2Norm,
};

/// How an input's values are drawn.
enum class Values {
  Normal,    // standard normal
  Positive,  // uniform [0.5, 2): log, sqrt, rsqrt, divisors, pow bases, AdamW's v
  Discrete,  // multiples of 0.5 in [-2, 2]: comparisons meet equal values
  Small,     // normal * 0.1 (AdamW's m)
  Mask,      // 0 or 1
  Ids,       // integers in [0, range)
  Targets,   // integers in [0, range), about a quarter replaced by `ignore`
};

/// The dtype of an input: the case dtype, an index dtype, or the accumulator dtype (float32, or float64
/// for a float64 case: AdamW's moments).
enum class InputDType { Case, Int64, Int32, Accumulator };

struct InputSpec {
  Shape base;  ///< the allocated (row-major) shape
  Values values = Values::Normal;
  InputDType dtype = InputDType::Case;
  int64_t range = 0;                          ///< Ids / Targets: values lie in [0, range)
  int64_t ignore = -100;                      ///< Targets: the ignore_index mixed in
  std::function<Tensor(const Tensor&)> view;  ///< optional view of the base
  const char* view_label = "";                ///< "T", "N", "E" for names (a literal: gcc 12 warns
                                              ///< falsely (-Wrestrict) on assigning short literals to std::string)
};

struct OpCase {
  std::string name;  ///< unique, made of [A-Za-z0-9_]
  Op op = Op::Unary;
  DType dtype = kFloat32;
  std::vector<InputSpec> inputs;
  kernels::UnaryOp unary_op = kernels::UnaryOp::Neg;
  kernels::BinaryOp binary_op = kernels::BinaryOp::Add;
  double scalar = 0.0;        ///< scalar operand, masked_fill value, dropout p, layernorm eps
  std::vector<int64_t> dims;  ///< reduction dims (ArgMax: dims[0])
  bool keepdim = false;
  Shape shape;                                ///< SumTo target
  bool has_weight = false, has_bias = false;  ///< LayerNorm
  int64_t index = 0;  ///< ignore_index (CrossEntropy), num_embeddings (EmbeddingBackward), T (CausalMask)
  bool compute_grad = true;  ///< CrossEntropy
  GeneratorState rng{};      ///< Dropout
  kernels::AdamWStep adamw{};
};

// ---- inputs -------------------------------------------------------------------------------------------

inline InputSpec in(Shape base, Values values = Values::Normal) {
  InputSpec s;
  s.base = std::move(base);
  s.values = values;
  return s;
}
inline InputSpec transposed(Shape base, int64_t d0, int64_t d1, Values values = Values::Normal) {
  InputSpec s = in(std::move(base), values);
  s.view = [d0, d1](const Tensor& t) { return t.transpose(d0, d1); };
  s.view_label = "T";
  return s;
}
inline InputSpec narrowed(Shape base, int64_t dim, int64_t start, int64_t length,
                          Values values = Values::Normal) {
  InputSpec s = in(std::move(base), values);
  s.view = [dim, start, length](const Tensor& t) { return t.narrow(dim, start, length); };
  s.view_label = "N";
  return s;
}
inline InputSpec expanded(Shape base, Shape to, Values values = Values::Normal) {
  InputSpec s = in(std::move(base), values);
  s.view = [to](const Tensor& t) { return t.expand(to); };
  s.view_label = "E";
  return s;
}
inline InputSpec with_dtype(InputSpec s, InputDType dtype) {
  s.dtype = dtype;
  return s;
}
inline InputSpec ids(Shape base, int64_t range, InputDType dtype = InputDType::Int64) {
  InputSpec s = in(std::move(base), Values::Ids);
  s.range = range;
  s.dtype = dtype;
  return s;
}
inline InputSpec targets(Shape base, int64_t range, int64_t ignore, InputDType dtype = InputDType::Int64) {
  InputSpec s = ids(std::move(base), range, dtype);
  s.values = Values::Targets;
  s.ignore = ignore;
  return s;
}
inline InputSpec mask(Shape base, InputDType dtype = InputDType::Int64) {
  return with_dtype(in(std::move(base), Values::Mask), dtype);
}

inline DType resolve_dtype(const InputSpec& spec, DType case_dtype) {
  switch (spec.dtype) {
    case InputDType::Case:
      return case_dtype;
    case InputDType::Int64:
      return kInt64;
    case InputDType::Int32:
      return kInt32;
    case InputDType::Accumulator:
      return case_dtype == kFloat64 ? kFloat64 : kFloat32;
  }
  return case_dtype;
}

/// FNV-1a, so that a case's numbers do not depend on the standard library's std::hash.
inline uint64_t stable_hash(const std::string& text) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : text) h = (h ^ c) * 1099511628211ull;
  return h;
}

/// The case's inputs on `device`: values drawn on the host, converted to the input's dtype, moved, viewed.
inline std::vector<Tensor> make_inputs(const OpCase& c, const Device& device) {
  std::vector<Tensor> out;
  for (size_t k = 0; k < c.inputs.size(); ++k) {
    const InputSpec& spec = c.inputs[k];
    std::mt19937_64 rng(stable_hash(c.name) + 7919 * k);
    std::normal_distribution<double> normal(0.0, 1.0);
    std::uniform_real_distribution<double> unit(0.0, 1.0);
    const int64_t n = shape_numel(spec.base);
    std::vector<double> values(static_cast<size_t>(n));
    for (auto& v : values) {
      switch (spec.values) {
        case Values::Normal:
          v = normal(rng);
          break;
        case Values::Positive:
          v = 0.5 + 1.5 * unit(rng);
          break;
        case Values::Discrete:
          v = 0.5 * static_cast<double>(static_cast<int>(unit(rng) * 9.0) - 4);
          break;
        case Values::Small:
          v = 0.1 * normal(rng);
          break;
        case Values::Mask:
          v = unit(rng) < 0.4 ? 1.0 : 0.0;
          break;
        case Values::Ids:
          v = static_cast<double>(static_cast<int64_t>(unit(rng) * static_cast<double>(spec.range)));
          break;
        case Values::Targets:
          v = unit(rng) < 0.25
                  ? static_cast<double>(spec.ignore)
                  : static_cast<double>(static_cast<int64_t>(unit(rng) * static_cast<double>(spec.range)));
          break;
      }
    }
    const DType dtype = resolve_dtype(spec, c.dtype);
    Tensor t;
    if (is_floating(dtype)) {
      t = from_vector<double>(values, spec.base).to(dtype);
    } else {
      std::vector<int64_t> ints(values.begin(), values.end());
      t = from_vector<int64_t>(ints, spec.base).to(dtype);
    }
    t = t.to(device);
    out.push_back(spec.view ? spec.view(t) : t);
  }
  return out;
}

/// Runs the case through brigade::kernels on `inputs` (already on `device`) and returns what to compare.
inline std::vector<Tensor> run_case(const OpCase& c, const std::vector<Tensor>& x, const Device& device) {
  namespace k = brigade::kernels;
  switch (c.op) {
    case Op::Unary:
      return {k::unary(c.unary_op, x[0])};
    case Op::UnaryBackward:
      return {k::unary_backward(c.unary_op, x[1], x[0], k::unary(c.unary_op, x[0]))};
    case Op::Binary:
      return {k::binary(c.binary_op, x[0], x[1])};
    case Op::BinaryScalar:
      return {k::binary(c.binary_op, x[0], c.scalar)};
    case Op::ScalarBinary:
      return {k::binary(c.binary_op, c.scalar, x[0])};
    case Op::AddInPlace:
      k::add_(x[0], x[1]);
      return {x[0]};
    case Op::MulInPlace:
      k::mul_(x[0], c.scalar);
      return {x[0]};
    case Op::Where:
      return {k::where(x[0], x[1], x[2])};
    case Op::MaskedFill:
      return {k::masked_fill(x[0], x[1], c.scalar)};
    case Op::Sum:
      return {k::sum(x[0], c.dims, c.keepdim)};
    case Op::Mean:
      return {k::mean(x[0], c.dims, c.keepdim)};
    case Op::Max:
      return {k::max(x[0], c.dims, c.keepdim)};
    case Op::ArgMax:
      return {k::argmax(x[0], c.dims.at(0), c.keepdim)};
    case Op::SumTo:
      return {k::sum_to(x[0], c.shape)};
    case Op::Softmax:
      return {k::softmax(x[0])};
    case Op::LogSoftmax:
      return {k::log_softmax(x[0])};
    case Op::SoftmaxBackward:
      return {k::softmax_backward(x[1], k::softmax(x[0]))};
    case Op::LogSoftmaxBackward:
      return {k::log_softmax_backward(x[1], k::log_softmax(x[0]))};
    case Op::LayerNorm: {
      // inputs: x, dy, then weight and bias when the case has them
      size_t next = 2;
      Tensor weight = c.has_weight ? x[next++] : Tensor();
      Tensor bias = c.has_bias ? x[next++] : Tensor();
      k::LayerNormOutput f = k::layernorm(x[0], weight, bias, c.scalar);
      k::LayerNormGrads g = k::layernorm_backward(x[1], x[0], weight, f.mean, f.rstd, c.has_bias);
      std::vector<Tensor> out = {f.y, f.mean, f.rstd, g.dx};
      if (c.has_weight) out.push_back(g.dweight);
      if (c.has_bias) out.push_back(g.dbias);
      return out;
    }
    case Op::Embedding:
      return {k::embedding(x[0], x[1])};
    case Op::EmbeddingBackward:
      return {k::embedding_backward(x[0], x[1], c.index)};
    case Op::CrossEntropy: {
      k::CrossEntropyOutput r = k::cross_entropy(x[0], x[1], c.index, c.compute_grad);
      std::vector<Tensor> out = {r.loss, from_vector<int64_t>({r.count}, {})};
      if (c.compute_grad) out.push_back(r.grad_logits);
      return out;
    }
    case Op::Dropout:
      return {k::dropout(x[0], c.scalar, c.rng)};
    case Op::CausalMask:
      return {k::causal_mask(c.index, TensorOptions().dtype(c.dtype).device(device))};
    case Op::AdamW:
      k::adamw_update(x[0], x[1], x[2], x[3], c.adamw);
      return {x[0], x[2], x[3]};
    case Op::GlobalL2Norm:
      return {from_vector<double>({k::global_l2_norm(x)}, {})};
  }
  return {};
}

// ---- naming and building ------------------------------------------------------------------------------

inline const char* dtype_short(DType d) {
  switch (d) {
    case DType::Float32:
      return "f32";
    case DType::BFloat16:
      return "bf16";
    case DType::Float64:
      return "f64";
    case DType::Int32:
      return "i32";
    case DType::Int64:
      return "i64";
  }
  return "dt";
}

inline std::string op_label(const OpCase& c) {
  switch (c.op) {
    case Op::Unary:
      return kernels::unary_op_name(c.unary_op);
    case Op::UnaryBackward:
      return std::string(kernels::unary_op_name(c.unary_op)) + "_backward";
    case Op::Binary:
      return kernels::binary_op_name(c.binary_op);
    case Op::BinaryScalar:
      return std::string(kernels::binary_op_name(c.binary_op)) + "_scalar";
    case Op::ScalarBinary:
      return std::string("scalar_") + kernels::binary_op_name(c.binary_op);
    case Op::AddInPlace:
      return "add_";
    case Op::MulInPlace:
      return "mul_";
    case Op::Where:
      return "where";
    case Op::MaskedFill:
      return "masked_fill";
    case Op::Sum:
      return "sum";
    case Op::Mean:
      return "mean";
    case Op::Max:
      return "max";
    case Op::ArgMax:
      return "argmax";
    case Op::SumTo:
      return "sum_to";
    case Op::Softmax:
      return "softmax";
    case Op::LogSoftmax:
      return "log_softmax";
    case Op::SoftmaxBackward:
      return "softmax_backward";
    case Op::LogSoftmaxBackward:
      return "log_softmax_backward";
    case Op::LayerNorm:
      return std::string("layernorm") + (c.has_weight ? "_w" : "") + (c.has_bias ? "_b" : "");
    case Op::Embedding:
      return "embedding";
    case Op::EmbeddingBackward:
      return "embedding_backward";
    case Op::CrossEntropy:
      return c.compute_grad ? "cross_entropy" : "cross_entropy_nograd";
    case Op::Dropout:
      return "dropout";
    case Op::CausalMask:
      return "causal_mask";
    case Op::AdamW:
      return "adamw";
    case Op::GlobalL2Norm:
      return "global_l2_norm";
  }
  return "op";
}

/// "sum_f32_2x3x4T_d0_2_keep": op, dtype, input shapes (view label appended), parameters.
/// (Built with a stream: gcc 12 warns falsely (-Wrestrict) on `"literal" + std::string` chains.)
inline std::string case_name(const OpCase& c) {
  std::ostringstream name;
  auto signed_label = [&name](int64_t v) { name << (v < 0 ? "m" : "") << (v < 0 ? -v : v); };
  name << op_label(c) << "_" << dtype_short(c.dtype);
  for (const InputSpec& s : c.inputs) {
    name << "_";
    if (s.base.empty()) name << "scalar";
    for (size_t d = 0; d < s.base.size(); ++d) name << (d ? "x" : "") << s.base[d];
    name << s.view_label;
    if (s.dtype == InputDType::Int32) name << "i32";
  }
  if (!c.dims.empty()) {
    name << "_d";
    for (int64_t d : c.dims) signed_label(d);
  }
  if (c.keepdim) name << "_keep";
  if (c.op == Op::SumTo) {
    name << "_to";
    for (int64_t d : c.shape) name << "_" << d;
  }
  if (c.op == Op::CausalMask || c.op == Op::EmbeddingBackward || c.op == Op::CrossEntropy) {
    name << "_i";
    signed_label(c.index);
  }
  return name.str();
}

class OpTableBuilder {
 public:
  void add(OpCase c) {
    std::string base = case_name(c);
    // Disambiguate cases that differ only in parameters the name does not show (scalars, p, ...).
    c.name = base + "_" + std::to_string(count_[base]++);
    cases_.push_back(std::move(c));
  }
  std::vector<OpCase> take() { return std::move(cases_); }

 private:
  std::vector<OpCase> cases_;
  std::map<std::string, int> count_;
};

inline OpCase make_case(Op op, DType dtype, std::vector<InputSpec> inputs) {
  OpCase c;
  c.op = op;
  c.dtype = dtype;
  c.inputs = std::move(inputs);
  return c;
}

}  // namespace brigade::testing
