// What an op case is: the op (and its parameters), the case dtype, and its inputs. An input names the shape
// that is allocated, how its values are drawn (deterministically from the case name, so that every backend
// and every kernel version sees the same numbers), its dtype, whether the float64 gradcheck differentiates
// it, and optionally a view taken of it (transpose, narrow, expand, permute + select, ...), so that
// non-contiguous and broadcast operands go through the real dispatch code and through autograd's views.
//
// The table of cases is op_cases.h; what each op does with a case (its kernel call, its reference, its
// differentiable form, its work) is op_calls.h; how to add a case: op_cases.h.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "autograd/gradcheck.h"
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
  Matmul,
  MatmulBias,
  Softmax,
  LogSoftmax,
  SoftmaxBackward,
  LogSoftmaxBackward,
  LayerNorm,
  LayerNormBackward,
  Attention,
  AttentionBackward,
  Embedding,
  EmbeddingBackward,
  CrossEntropy,
  Dropout,
  CausalMask,
  AdamW,
  GlobalL2Norm,
  BiasGelu,
  BiasGeluBackward,
  AddLayerNorm,
  AdamWAll,
  Composite,  ///< a composition of autograd ops with no kernel of its own: gradcheck only (OpCase::composite)
};
constexpr int kOpCount = static_cast<int>(Op::Composite) + 1;

/// How an input's values are drawn.
enum class Values {
  Normal,    // standard normal
  Masked,    // standard normal with every third element of each row (j = 1, 4, ...) -inf: masked scores
  Positive,  // uniform [0.5, 2): log, sqrt, rsqrt, divisors, pow bases, AdamW's v
  Discrete,  // multiples of 0.5 in [-2, 2]: comparisons meet equal values
  Small,     // normal * 0.1 (AdamW's m)
  Mask,      // 0 or 1
  Ids,       // integers in [0, range)
  Targets,   // integers in [0, range), about a quarter replaced by `ignore`
  Fixed,     // InputSpec::fixed, as written (ids with chosen repeats, targets with chosen ignores)
};

/// The dtype of an input: the case dtype, an index dtype, or the accumulator dtype (float32, or float64
/// for a float64 case: AdamW's moments).
enum class InputDType { Case, Int64, Int32, Accumulator };

struct InputSpec {
  Shape base;  ///< the allocated (row-major) shape
  Values values = Values::Normal;
  InputDType dtype = InputDType::Case;
  int64_t range = 0;          ///< Ids / Targets: values lie in [0, range)
  int64_t ignore = -100;      ///< Targets: the ignore_index mixed in
  std::vector<double> fixed;  ///< Fixed: the values, row-major
  bool constant = false;      ///< the gradcheck does not differentiate it (see differentiable())
  std::function<Tensor(const Tensor&)> view;  ///< optional view of the base
  const char* view_label = "";                ///< "T", "N", "E", ... for names (a literal: gcc 12 warns
                                ///< falsely (-Wrestrict) on assigning short literals to std::string)
};

/// Whether the float64 gradcheck differentiates this input: floating values that are not masks, ids or
/// marked constant.
inline bool differentiable(const InputSpec& s) {
  return !s.constant && s.dtype == InputDType::Case && s.values != Values::Mask && s.values != Values::Ids &&
         s.values != Values::Targets && s.values != Values::Fixed && s.values != Values::Masked;
}

/// Napkin work of one call, for the perf mode (bench/kernels_bench.cpp): floating-point operations (2 per
/// multiply-add) and bytes moved (each input read once, each output written once).
struct Work {
  double flops = 0;
  double bytes = 0;
};

struct OpCase {
  std::string name;  ///< unique, made of [A-Za-z0-9_]
  Op op = Op::Unary;
  DType dtype = kFloat32;
  std::vector<InputSpec> inputs;
  kernels::UnaryOp unary_op = kernels::UnaryOp::Neg;
  kernels::BinaryOp binary_op = kernels::BinaryOp::Add;
  double scalar = 0.0;  ///< scalar operand, masked_fill value, dropout p, layernorm eps, attention scale
  std::vector<int64_t> dims;  ///< reduction dims (ArgMax: dims[0])
  bool keepdim = false;
  Shape shape;                                    ///< SumTo target
  bool transpose_a = false, transpose_b = false;  ///< Matmul
  bool has_weight = false, has_bias = false;      ///< LayerNorm, LayerNormBackward, AddLayerNorm
  int64_t index = 0;  ///< ignore_index (CrossEntropy), num_embeddings (EmbeddingBackward), T (CausalMask)
  bool compute_grad = true;  ///< CrossEntropy
  GeneratorState rng{};      ///< Dropout
  kernels::AdamWStep adamw{};
  /// Composite: the autograd function of the (viewed) inputs.
  std::function<Tensor(const std::vector<Tensor>&)> composite;
  /// A literal: a composite's name; a perf case's benchmark op name (op_cases_perf.h).
  const char* label = "";
  /// The float64 gradcheck's step and tolerances for this case (autograd/gradcheck.h's defaults unless a
  /// case says why not).
  autograd::GradcheckOptions grad_options{};
};

// ---- inputs -------------------------------------------------------------------------------------------

inline InputSpec in(Shape base, Values values = Values::Normal) {
  InputSpec s;
  s.base = std::move(base);
  s.values = values;
  return s;
}
/// A view of `base` made by `view`; `label` (a literal) goes into the case name.
inline InputSpec viewed(Shape base, const char* label, std::function<Tensor(const Tensor&)> view,
                        Values values = Values::Normal) {
  InputSpec s = in(std::move(base), values);
  s.view = std::move(view);
  s.view_label = label;
  return s;
}
inline InputSpec transposed(Shape base, int64_t d0, int64_t d1, Values values = Values::Normal) {
  return viewed(
      std::move(base), "T", [d0, d1](const Tensor& t) { return t.transpose(d0, d1); }, values);
}
inline InputSpec narrowed(Shape base, int64_t dim, int64_t start, int64_t length,
                          Values values = Values::Normal) {
  return viewed(
      std::move(base), "N", [dim, start, length](const Tensor& t) { return t.narrow(dim, start, length); },
      values);
}
inline InputSpec expanded(Shape base, Shape to, Values values = Values::Normal) {
  return viewed(
      std::move(base), "E", [to](const Tensor& t) { return t.expand(to); }, values);
}
/// Head `part` (0, 1, 2 for q, k, v) of a packed [B, T, 3, H, D] projection, as a GPT splits it: a
/// [B, H, T, D] view with row stride 3 H D and head stride D.
inline InputSpec head_split(int64_t B, int64_t T, int64_t H, int64_t D, int64_t part) {
  return viewed({B, T, 3, H, D}, "H", [part](const Tensor& t) {
    return t.permute({2, 0, 3, 1, 4}).select(0, part);
  });
}
inline InputSpec with_dtype(InputSpec s, InputDType dtype) {
  s.dtype = dtype;
  return s;
}
/// An input the gradcheck holds fixed (it still feeds the op).
inline InputSpec constant(InputSpec s) {
  s.constant = true;
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
/// Integer values as written (ids, targets), int64.
inline InputSpec fixed_ids(std::vector<double> values, Shape base) {
  InputSpec s = in(std::move(base), Values::Fixed);
  s.fixed = std::move(values);
  s.dtype = InputDType::Int64;
  return s;
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

/// The values of input k of case c, drawn on the host in double from the case name.
inline std::vector<double> draw_values(const OpCase& c, size_t k) {
  const InputSpec& spec = c.inputs[k];
  if (spec.values == Values::Fixed) return spec.fixed;
  std::mt19937_64 rng(stable_hash(c.name) + 7919 * k);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  std::vector<double> values(static_cast<size_t>(shape_numel(spec.base)));
  const int64_t row = spec.base.empty() ? 1 : spec.base.back();
  for (size_t i = 0; i < values.size(); ++i) {
    double& v = values[i];
    switch (spec.values) {
      case Values::Normal:
        v = normal(rng);
        break;
      case Values::Masked:
        v = normal(rng);
        if (static_cast<int64_t>(i) % row % 3 == 1) v = -std::numeric_limits<double>::infinity();
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
      case Values::Fixed:
        break;
    }
  }
  return values;
}

/// The unviewed base of input k on the host, in `dtype` (the input's own dtype unless a caller asks for
/// another: the gradcheck's float64).
inline Tensor make_base(const OpCase& c, size_t k, DType dtype) {
  const std::vector<double> values = draw_values(c, k);
  const Shape& shape = c.inputs[k].base;
  if (is_floating(dtype)) return from_vector<double>(values, shape).to(dtype);
  return from_vector<int64_t>(std::vector<int64_t>(values.begin(), values.end()), shape).to(dtype);
}

/// The case's inputs on `device`: values drawn on the host, converted to the input's dtype, moved, viewed.
inline std::vector<Tensor> make_inputs(const OpCase& c, const Device& device) {
  std::vector<Tensor> out;
  for (size_t k = 0; k < c.inputs.size(); ++k) {
    const InputSpec& spec = c.inputs[k];
    Tensor t = make_base(c, k, resolve_dtype(spec, c.dtype)).to(device);
    out.push_back(spec.view ? spec.view(t) : t);
  }
  return out;
}

/// The case's inputs drawn on `device` by brigade's Philox generator where the values are floating
/// (normal, small, positive), on the host as make_inputs draws them otherwise: the same kinds of values as
/// make_inputs, other numbers. For the perf mode, whose inputs (a GPT's logits: 400M elements) are too
/// many to draw one by one on the host.
inline std::vector<Tensor> random_inputs(const OpCase& c, const Device& device, uint64_t seed) {
  using kernels::BinaryOp;
  std::vector<Tensor> out;
  for (size_t k = 0; k < c.inputs.size(); ++k) {
    const InputSpec& spec = c.inputs[k];
    const TensorOptions options = TensorOptions().dtype(resolve_dtype(spec, c.dtype)).device(device);
    Generator gen(seed + 7919 * k);
    Tensor t;
    switch (spec.values) {
      case Values::Normal:
        t = randn(spec.base, options, &gen);
        break;
      case Values::Small:
        t = kernels::binary(BinaryOp::Mul, randn(spec.base, options, &gen), 0.1);
        break;
      case Values::Positive:
        t = kernels::binary(BinaryOp::Add,
                            kernels::binary(BinaryOp::Mul, rand(spec.base, options, &gen), 1.5), 0.5);
        break;
      default:
        t = make_base(c, k, options.dtype_).to(device);
        break;
    }
    out.push_back(spec.view ? spec.view(t) : t);
  }
  return out;
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
    case Op::Matmul:
      return std::string("matmul") + (c.transpose_a ? "_ta" : "") + (c.transpose_b ? "_tb" : "");
    case Op::MatmulBias:
      return std::string("matmul_bias") + (c.transpose_a ? "_ta" : "") + (c.transpose_b ? "_tb" : "");
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
    case Op::LayerNormBackward:
      return std::string("layernorm_backward") + (c.has_weight ? "_w" : "") + (c.has_bias ? "_b" : "");
    case Op::Attention:
      return "attention";
    case Op::AttentionBackward:
      return "attention_backward";
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
    case Op::BiasGelu:
      return "bias_gelu";
    case Op::BiasGeluBackward:
      return "bias_gelu_backward";
    case Op::AddLayerNorm:
      return std::string("add_layernorm") + (c.has_weight ? "_w" : "") + (c.has_bias ? "_b" : "");
    case Op::AdamWAll:
      return "adamw_all";
    case Op::Composite:
      return std::string("composite_") + c.label;
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
    if (s.constant) name << "C";
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
