// The table of raw-op cases (in the spirit of ggml's test-backend-ops): one list that every backend runs.
//   op_table_test.cpp       every case on the CPU against a plain loop reference in double
//   cuda_op_table_test.cpp  every case on CUDA against the same case on the CPU
//
// A case is data: which op (and its parameters), the case dtype, and its inputs. An input names the shape
// that is allocated, how its values are drawn (deterministically from the case name, so the CPU and CUDA
// runs see the same numbers), its dtype, and optionally a view taken of it (transpose, narrow, expand), so
// that non-contiguous and broadcast operands go through the real dispatch code. run_case() calls
// brigade::kernels on inputs already placed on a device and returns the tensors to compare.
// Cases cover broadcasting, size-0 and size-1 dims, 0-d tensors, non-contiguous views, every dtype, and a
// few sizes large enough to take the OpenMP / chunked paths of the CPU backend.
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "kernels/kernels.h"
#include "tensor/tensor.h"

namespace brigade::testing {

enum class Op {
  Unary, UnaryBackward, Binary, BinaryScalar, ScalarBinary, AddInPlace, MulInPlace, Where, MaskedFill,
  Sum, Mean, Max, ArgMax, SumTo, Softmax, LogSoftmax, SoftmaxBackward, LogSoftmaxBackward, LayerNorm,
  Embedding, EmbeddingBackward, CrossEntropy, Dropout, CausalMask, AdamW, GlobalL2Norm,
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
  int64_t range = 0;     ///< Ids / Targets: values lie in [0, range)
  int64_t ignore = -100;  ///< Targets: the ignore_index mixed in
  std::function<Tensor(const Tensor&)> view;  ///< optional view of the base
  std::string view_label;                     ///< "T", "N", "E" for names
};

struct OpCase {
  std::string name;  ///< unique, made of [A-Za-z0-9_]
  Op op = Op::Unary;
  DType dtype = kFloat32;
  std::vector<InputSpec> inputs;
  kernels::UnaryOp unary_op = kernels::UnaryOp::Neg;
  kernels::BinaryOp binary_op = kernels::BinaryOp::Add;
  double scalar = 0.0;  ///< scalar operand, masked_fill value, dropout p, layernorm eps
  std::vector<int64_t> dims;  ///< reduction dims (ArgMax: dims[0])
  bool keepdim = false;
  Shape shape;  ///< SumTo target
  bool has_weight = false, has_bias = false;  ///< LayerNorm
  int64_t index = 0;  ///< ignore_index (CrossEntropy), num_embeddings (EmbeddingBackward), T (CausalMask)
  bool compute_grad = true;  ///< CrossEntropy
  GeneratorState rng{};       ///< Dropout
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
inline InputSpec narrowed(Shape base, int64_t dim, int64_t start, int64_t length, Values values = Values::Normal) {
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
    case InputDType::Case: return case_dtype;
    case InputDType::Int64: return kInt64;
    case InputDType::Int32: return kInt32;
    case InputDType::Accumulator: return case_dtype == kFloat64 ? kFloat64 : kFloat32;
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
        case Values::Normal: v = normal(rng); break;
        case Values::Positive: v = 0.5 + 1.5 * unit(rng); break;
        case Values::Discrete: v = 0.5 * static_cast<double>(static_cast<int>(unit(rng) * 9.0) - 4); break;
        case Values::Small: v = 0.1 * normal(rng); break;
        case Values::Mask: v = unit(rng) < 0.4 ? 1.0 : 0.0; break;
        case Values::Ids:
          v = static_cast<double>(static_cast<int64_t>(unit(rng) * static_cast<double>(spec.range)));
          break;
        case Values::Targets:
          v = unit(rng) < 0.25 ? static_cast<double>(spec.ignore)
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
    case Op::Unary: return {k::unary(c.unary_op, x[0])};
    case Op::UnaryBackward: return {k::unary_backward(c.unary_op, x[1], x[0], k::unary(c.unary_op, x[0]))};
    case Op::Binary: return {k::binary(c.binary_op, x[0], x[1])};
    case Op::BinaryScalar: return {k::binary(c.binary_op, x[0], c.scalar)};
    case Op::ScalarBinary: return {k::binary(c.binary_op, c.scalar, x[0])};
    case Op::AddInPlace: k::add_(x[0], x[1]); return {x[0]};
    case Op::MulInPlace: k::mul_(x[0], c.scalar); return {x[0]};
    case Op::Where: return {k::where(x[0], x[1], x[2])};
    case Op::MaskedFill: return {k::masked_fill(x[0], x[1], c.scalar)};
    case Op::Sum: return {k::sum(x[0], c.dims, c.keepdim)};
    case Op::Mean: return {k::mean(x[0], c.dims, c.keepdim)};
    case Op::Max: return {k::max(x[0], c.dims, c.keepdim)};
    case Op::ArgMax: return {k::argmax(x[0], c.dims.at(0), c.keepdim)};
    case Op::SumTo: return {k::sum_to(x[0], c.shape)};
    case Op::Softmax: return {k::softmax(x[0])};
    case Op::LogSoftmax: return {k::log_softmax(x[0])};
    case Op::SoftmaxBackward: return {k::softmax_backward(x[1], k::softmax(x[0]))};
    case Op::LogSoftmaxBackward: return {k::log_softmax_backward(x[1], k::log_softmax(x[0]))};
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
    case Op::Embedding: return {k::embedding(x[0], x[1])};
    case Op::EmbeddingBackward: return {k::embedding_backward(x[0], x[1], c.index)};
    case Op::CrossEntropy: {
      k::CrossEntropyOutput r = k::cross_entropy(x[0], x[1], c.index, c.compute_grad);
      std::vector<Tensor> out = {r.loss, from_vector<int64_t>({r.count}, {})};
      if (c.compute_grad) out.push_back(r.grad_logits);
      return out;
    }
    case Op::Dropout: return {k::dropout(x[0], c.scalar, c.rng)};
    case Op::CausalMask: return {k::causal_mask(c.index, TensorOptions().dtype(c.dtype).device(device))};
    case Op::AdamW: k::adamw_update(x[0], x[1], x[2], x[3], c.adamw); return {x[0], x[2], x[3]};
    case Op::GlobalL2Norm: return {from_vector<double>({k::global_l2_norm(x)}, {})};
  }
  return {};
}

// ---- the table ----------------------------------------------------------------------------------------

inline const char* dtype_short(DType d) {
  switch (d) {
    case DType::Float32: return "f32";
    case DType::BFloat16: return "bf16";
    case DType::Float64: return "f64";
    case DType::Int32: return "i32";
    case DType::Int64: return "i64";
  }
  return "dt";
}

inline std::string op_label(const OpCase& c) {
  switch (c.op) {
    case Op::Unary: return kernels::unary_op_name(c.unary_op);
    case Op::UnaryBackward: return std::string(kernels::unary_op_name(c.unary_op)) + "_backward";
    case Op::Binary: return kernels::binary_op_name(c.binary_op);
    case Op::BinaryScalar: return std::string(kernels::binary_op_name(c.binary_op)) + "_scalar";
    case Op::ScalarBinary: return std::string("scalar_") + kernels::binary_op_name(c.binary_op);
    case Op::AddInPlace: return "add_";
    case Op::MulInPlace: return "mul_";
    case Op::Where: return "where";
    case Op::MaskedFill: return "masked_fill";
    case Op::Sum: return "sum";
    case Op::Mean: return "mean";
    case Op::Max: return "max";
    case Op::ArgMax: return "argmax";
    case Op::SumTo: return "sum_to";
    case Op::Softmax: return "softmax";
    case Op::LogSoftmax: return "log_softmax";
    case Op::SoftmaxBackward: return "softmax_backward";
    case Op::LogSoftmaxBackward: return "log_softmax_backward";
    case Op::LayerNorm: return std::string("layernorm") + (c.has_weight ? "_w" : "") + (c.has_bias ? "_b" : "");
    case Op::Embedding: return "embedding";
    case Op::EmbeddingBackward: return "embedding_backward";
    case Op::CrossEntropy: return c.compute_grad ? "cross_entropy" : "cross_entropy_nograd";
    case Op::Dropout: return "dropout";
    case Op::CausalMask: return "causal_mask";
    case Op::AdamW: return "adamw";
    case Op::GlobalL2Norm: return "global_l2_norm";
  }
  return "op";
}

/// "sum_f32_2x3x4T_d0_2_keep": op, dtype, input shapes (view label appended), parameters.
inline std::string case_name(const OpCase& c) {
  std::string name = op_label(c) + "_" + dtype_short(c.dtype);
  for (const InputSpec& s : c.inputs) {
    name += "_";
    if (s.base.empty()) name += "scalar";
    for (size_t d = 0; d < s.base.size(); ++d) name += (d ? "x" : "") + std::to_string(s.base[d]);
    name += s.view_label;
    if (s.dtype == InputDType::Int32) name += "i32";
  }
  if (!c.dims.empty()) {
    name += "_d";
    for (int64_t d : c.dims) name += (d < 0 ? "m" + std::to_string(-d) : std::to_string(d));
  }
  if (c.keepdim) name += "_keep";
  if (c.op == Op::SumTo) {
    name += "_to";
    for (int64_t d : c.shape) name += "_" + std::to_string(d);
  }
  if (c.op == Op::CausalMask || c.op == Op::EmbeddingBackward || c.op == Op::CrossEntropy) {
    name += "_i" + (c.index < 0 ? "m" + std::to_string(-c.index) : std::to_string(c.index));
  }
  return name;
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

inline std::vector<OpCase> build_op_cases() {
  using kernels::BinaryOp;
  using kernels::UnaryOp;
  OpTableBuilder t;
  const std::vector<DType> floating = {kFloat32, kBFloat16, kFloat64};
  const std::vector<UnaryOp> unary_ops = {UnaryOp::Neg,  UnaryOp::Exp,     UnaryOp::Log,  UnaryOp::Sqrt,
                                          UnaryOp::Rsqrt, UnaryOp::Tanh,   UnaryOp::Sigmoid, UnaryOp::Relu,
                                          UnaryOp::Gelu, UnaryOp::Abs};
  auto unary_values = [](UnaryOp op) {
    return op == UnaryOp::Log || op == UnaryOp::Sqrt || op == UnaryOp::Rsqrt ? Values::Positive : Values::Normal;
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
    OpCase b = make_case(Op::UnaryBackward, kFloat32, {transposed({5, 3}, 0, 1, v), expanded({1, 5}, {3, 5})});
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
  const std::vector<BinaryOp> binary_ops = {BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul, BinaryOp::Div,
                                            BinaryOp::Maximum, BinaryOp::Pow, BinaryOp::Eq, BinaryOp::Ne,
                                            BinaryOp::Lt, BinaryOp::Le, BinaryOp::Gt, BinaryOp::Ge};
  auto is_comparison = [](BinaryOp op) { return op >= BinaryOp::Eq; };
  auto lhs_values = [&](BinaryOp op) {
    return op == BinaryOp::Pow ? Values::Positive : (is_comparison(op) ? Values::Discrete : Values::Normal);
  };
  auto rhs_values = [&](BinaryOp op) {
    return op == BinaryOp::Div ? Values::Positive
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
  for (auto [op, scalar] : std::vector<std::pair<BinaryOp, double>>{
           {BinaryOp::Add, 1.5}, {BinaryOp::Sub, 1.0}, {BinaryOp::Mul, -2.5}, {BinaryOp::Div, 4.0},
           {BinaryOp::Maximum, 0.0}, {BinaryOp::Pow, 2.0}, {BinaryOp::Eq, 0.5}, {BinaryOp::Lt, 0.5},
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
    t.add(make_case(Op::Where, d, {with_dtype(in({2, 3}, Values::Mask), InputDType::Case), in({2, 3}), in({})}));
    OpCase c = make_case(Op::MaskedFill, d, {in({2, 3, 4}), mask({3, 4})});
    c.scalar = -3.5;
    t.add(c);
  }
  t.add(make_case(Op::Where, kFloat32, {mask({4, 3}, InputDType::Int32), transposed({3, 4}, 0, 1), in({4, 1})}));
  t.add(make_case(Op::Where, kFloat32, {mask({0, 3}), in({3}), in({0, 3})}));
  {
    OpCase c = make_case(Op::MaskedFill, kFloat32, {in({2, 5, 5}), mask({5, 5})});
    c.scalar = -std::numeric_limits<double>::infinity();  // the attention use: masked scores become -inf
    t.add(c);
    c = make_case(Op::MaskedFill, kFloat32, {transposed({4, 3}, 0, 1), mask({1, 4})});
    c.scalar = 2.0;
    t.add(c);
  }

  // ---- reductions
  struct DimsCase {
    std::vector<int64_t> dims;
    bool keepdim;
  };
  const std::vector<DimsCase> dim_sets = {{{}, false}, {{0}, false},     {{1}, true},    {{-1}, false},
                                          {{0, 2}, false}, {{2, 0}, true}, {{0, 1, 2}, true}};
  for (Op op : {Op::Sum, Op::Mean, Op::Max}) {
    for (const DimsCase& ds : dim_sets) {
      for (DType d : floating) {
        OpCase c = make_case(op, d, {in({2, 3, 4})});
        c.dims = ds.dims;
        c.keepdim = ds.keepdim;
        t.add(c);
      }
    }
    OpCase c = make_case(op, kFloat32, {transposed({4, 3, 2}, 0, 2)});
    c.dims = {1};
    t.add(c);
    c = make_case(op, kFloat32, {expanded({3, 1}, {3, 5})});
    c.dims = {1};
    t.add(c);
    c = make_case(op, kFloat32, {in({})});  // 0-d: all dims
    t.add(c);
    c = make_case(op, kFloat32, {in({2, 1, 3})});
    c.dims = {1};
    c.keepdim = true;
    t.add(c);
  }
  {
    OpCase c = make_case(Op::Sum, kFloat32, {in({2, 0, 3})});  // empty rows: sums are 0
    c.dims = {1};
    t.add(c);
    c = make_case(Op::Sum, kFloat32, {in({0, 3})});  // no rows
    c.dims = {1};
    t.add(c);
    c = make_case(Op::Mean, kFloat32, {in({2, 0})});  // mean of nothing: NaN
    c.dims = {1};
    t.add(c);
    c = make_case(Op::Max, kFloat32, {in({0, 3})});
    c.dims = {1};
    t.add(c);
    c = make_case(Op::Sum, kFloat32, {in({3, 20000})});  // few long rows: the chunked parallel path
    c.dims = {1};
    t.add(c);
    c = make_case(Op::Sum, kFloat32, {in({40000})});
    t.add(c);
    c = make_case(Op::Sum, kFloat32, {in({512, 96})});  // many rows: parallel over rows
    c.dims = {-1};
    t.add(c);
    c = make_case(Op::Mean, kBFloat16, {in({4, 300})});
    c.dims = {1};
    t.add(c);
  }
  for (DType d : floating) {
    for (auto [dim, keep] : std::vector<std::pair<int64_t, bool>>{{0, false}, {1, true}, {-1, false}}) {
      OpCase c = make_case(Op::ArgMax, d, {in({3, 5, 4})});
      c.dims = {dim};
      c.keepdim = keep;
      t.add(c);
    }
  }
  {
    OpCase c = make_case(Op::ArgMax, kFloat32, {transposed({6, 4}, 0, 1)});
    c.dims = {1};
    t.add(c);
    c = make_case(Op::ArgMax, kFloat32, {in({4, 6}, Values::Discrete)});  // ties: the first maximum
    c.dims = {1};
    t.add(c);
    c = make_case(Op::ArgMax, kFloat32, {in({5, 1})});
    c.dims = {1};
    t.add(c);
  }
  for (auto [from, to] : std::vector<std::pair<Shape, Shape>>{{{2, 3, 4}, {3, 1}}, {{2, 3, 4}, {4}},
                                                               {{3, 4}, {3, 4}}, {{2, 3}, {}}, {{2, 3, 4}, {2, 1, 4}},
                                                               {{4, 1, 3}, {1, 1}}}) {
    for (DType d : floating) {
      OpCase c = make_case(Op::SumTo, d, {in(from)});
      c.shape = to;
      t.add(c);
    }
  }
  {
    OpCase c = make_case(Op::SumTo, kFloat32, {expanded({3, 1}, {2, 3, 4})});
    c.shape = {3, 1};
    t.add(c);
    c = make_case(Op::SumTo, kFloat32, {in({2, 0, 3})});
    c.shape = {1, 3};
    t.add(c);
  }

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
    t.add(make_case(op, kFloat32, inputs(in({2, 3, 5}), {2, 3, 5})));
    t.add(make_case(op, kFloat32, inputs(in({3, 1}), {3, 1})));
    t.add(make_case(op, kFloat32, inputs(in({0, 5}), {0, 5})));
    t.add(make_case(op, kFloat32, inputs(in({7}), {7})));
    t.add(make_case(op, kFloat32, inputs(in({64, 600}), {64, 600})));  // OpenMP path
  }

  // ---- layernorm (forward and backward together)
  for (auto [w, b] : std::vector<std::pair<bool, bool>>{{true, true}, {true, false}, {false, false}, {false, true}}) {
    for (DType d : floating) {
      std::vector<InputSpec> inputs = {in({4, 16}), in({4, 16})};
      if (w) inputs.push_back(in({16}));
      if (b) inputs.push_back(in({16}));
      OpCase c = make_case(Op::LayerNorm, d, inputs);
      c.has_weight = w;
      c.has_bias = b;
      c.scalar = 1e-5;
      t.add(c);
    }
  }
  {
    OpCase c = make_case(Op::LayerNorm, kFloat32, {transposed({8, 2, 3}, 0, 2), in({3, 2, 8}), in({8}), in({8})});
    c.has_weight = c.has_bias = true;
    c.scalar = 1e-3;
    t.add(c);
    c = make_case(Op::LayerNorm, kFloat32, {in({200, 200}), in({200, 200}), in({200}), in({200})});  // OpenMP
    c.has_weight = c.has_bias = true;
    c.scalar = 1e-5;
    t.add(c);
    c = make_case(Op::LayerNorm, kFloat32, {in({0, 6}), in({0, 6}), in({6}), in({6})});
    c.has_weight = c.has_bias = true;
    c.scalar = 1e-5;
    t.add(c);
    c = make_case(Op::LayerNorm, kFloat32, {in({5}), in({5})});
    c.scalar = 1e-5;
    t.add(c);
  }

  // ---- embedding
  for (DType d : floating) {
    t.add(make_case(Op::Embedding, d, {in({10, 6}), ids({2, 3}, 10)}));
    OpCase c = make_case(Op::EmbeddingBackward, d, {in({4, 6, 3}), ids({4, 6}, 5)});  // 24 ids over 5 rows
    c.index = 5;
    t.add(c);
  }
  t.add(make_case(Op::Embedding, kFloat32, {in({7, 4}), ids({9}, 7, InputDType::Int32)}));
  t.add(make_case(Op::Embedding, kFloat32, {transposed({5, 8}, 0, 1), ids({3, 2, 2}, 8)}));
  t.add(make_case(Op::Embedding, kFloat32, {in({6, 3}), ids({0}, 6)}));
  t.add(make_case(Op::Embedding, kFloat32, {in({6, 3}), ids({}, 6)}));
  {
    OpCase c = make_case(Op::EmbeddingBackward, kFloat32, {transposed({3, 10}, 0, 1), ids({10}, 3, InputDType::Int32)});
    c.index = 4;  // row 3 is never hit and stays 0
    t.add(c);
    c = make_case(Op::EmbeddingBackward, kFloat32, {in({500, 80}), ids({500}, 50)});  // OpenMP path
    c.index = 50;
    t.add(c);
    c = make_case(Op::EmbeddingBackward, kFloat32, {in({0, 4}), ids({0}, 3)});
    c.index = 3;
    t.add(c);
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
    c = make_case(Op::CrossEntropy, kFloat32, {in({0, 5}), targets({0}, 5, -100)});
    c.index = -100;
    t.add(c);
  }

  // ---- dropout
  for (DType d : floating) {
    OpCase c = make_case(Op::Dropout, d, {in({8, 16})});
    c.scalar = 0.25;
    c.rng = {1234, 7};
    t.add(c);
  }
  for (auto [p, rng] : std::vector<std::pair<double, GeneratorState>>{{0.5, {99, 0}}, {0.0, {5, 5}}, {1.0, {5, 5}}}) {
    OpCase c = make_case(Op::Dropout, kFloat32, {transposed({16, 9}, 0, 1)});
    c.scalar = p;
    c.rng = rng;
    t.add(c);
  }
  {
    OpCase c = make_case(Op::Dropout, kFloat32, {in({300, 200})});  // OpenMP path
    c.scalar = 0.125;
    c.rng = {42, 3};
    t.add(c);
  }

  // ---- causal mask
  for (DType d : floating) {
    OpCase c = make_case(Op::CausalMask, d, {});
    c.index = 5;
    t.add(c);
  }
  for (int64_t T : {0, 1, 200}) {
    OpCase c = make_case(Op::CausalMask, kFloat32, {});
    c.index = T;
    t.add(c);
  }

  // ---- AdamW
  for (DType d : floating) {
    for (double wd : {0.1, 0.0}) {
      OpCase c = make_case(Op::AdamW, d,
                           {in({5, 7}), in({5, 7}), with_dtype(in({5, 7}, Values::Small), InputDType::Accumulator),
                            with_dtype(in({5, 7}, Values::Positive), InputDType::Accumulator)});
      c.adamw.lr = 1e-2;
      c.adamw.weight_decay = wd;
      c.adamw.step = 3;
      t.add(c);
    }
  }
  {
    OpCase c = make_case(Op::AdamW, kFloat32,
                         {in({4, 6}), transposed({6, 4}, 0, 1), with_dtype(in({4, 6}, Values::Small), InputDType::Accumulator),
                          with_dtype(in({4, 6}, Values::Positive), InputDType::Accumulator)});
    c.adamw = kernels::AdamWStep{3e-4, 0.8, 0.99, 1e-6, 0.01, 1};
    t.add(c);
    c = make_case(Op::AdamW, kFloat32,
                  {in({200, 200}), in({200, 200}), with_dtype(in({200, 200}, Values::Small), InputDType::Accumulator),
                   with_dtype(in({200, 200}, Values::Positive), InputDType::Accumulator)});  // OpenMP path
    c.adamw.step = 10;
    c.adamw.weight_decay = 0.05;
    t.add(c);
  }

  // ---- global L2 norm
  for (DType d : floating) t.add(make_case(Op::GlobalL2Norm, d, {in({3, 4}), in({5}), transposed({2, 3, 2}, 0, 2)}));
  t.add(make_case(Op::GlobalL2Norm, kFloat32, {in({10000}), in({0, 3}), in({100, 100})}));
  return t.take();
}

/// Every case, built once.
inline const std::vector<OpCase>& op_cases() {
  static const std::vector<OpCase> cases = build_op_cases();
  return cases;
}

}  // namespace brigade::testing
