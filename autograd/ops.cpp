// Differentiable ops. Each op is its forward (raw kernels under NoGradGuard) followed by record(...) with
// its backward lambda; the lambda's captures are what the op saves for backward.
//
// Backward lambdas run under NoGradGuard (the engine sets it) and use raw kernels only. A gradient that
// flows to an input broadcast by the forward is summed back to that input's shape (reduce_to).
#include "autograd/ops.h"

#include <cmath>
#include <utility>

#include "autograd/autocast.h"
#include "autograd/node.h"
#include "kernels/kernels.h"

namespace brigade {
namespace {

using autograd::forward_no_grad;
using autograd::record;
using autograd::saved;
using kernels::BinaryOp;
using kernels::UnaryOp;
using Grads = std::vector<Tensor>;

// ---- raw arithmetic for backward lambdas -----------------------------------------------------------------
namespace raw {
Tensor add(const Tensor& a, const Tensor& b) {
  return kernels::binary(BinaryOp::Add, a, b);
}
Tensor mul(const Tensor& a, const Tensor& b) {
  return kernels::binary(BinaryOp::Mul, a, b);
}
Tensor mul(const Tensor& a, double s) {
  return kernels::binary(BinaryOp::Mul, a, s);
}
Tensor div(const Tensor& a, const Tensor& b) {
  return kernels::binary(BinaryOp::Div, a, b);
}
Tensor div(const Tensor& a, double s) {
  return kernels::binary(BinaryOp::Div, a, s);
}
Tensor neg(const Tensor& a) {
  return kernels::unary(UnaryOp::Neg, a);
}
}  // namespace raw

/// A 0-d tensor holding `value` with like's dtype and device.
Tensor scalar_like(double value, const Tensor& like) {
  return full({}, value, TensorOptions(like.dtype()).device(like.device()));
}

/// The gradient of a broadcast input: `grad` summed back to `shape` (grad itself when nothing was
/// broadcast).
Tensor reduce_to(const Tensor& grad, const Shape& shape) {
  return grad.shape() == shape ? grad : kernels::sum_to(grad, shape);
}

/// dims wrapped into [0, ndim), sorted, duplicates removed; empty means every dim.
std::vector<int64_t> reduced_dims(const std::vector<int64_t>& dims, int64_t ndim, const char* op) {
  std::vector<bool> reduced(static_cast<size_t>(ndim), dims.empty());
  for (int64_t d : dims) reduced[static_cast<size_t>(wrap_dim(d, ndim, op))] = true;
  std::vector<int64_t> out;
  for (int64_t d = 0; d < ndim; ++d) {
    if (reduced[static_cast<size_t>(d)]) out.push_back(d);
  }
  return out;
}

/// x's shape with the reduced dims set to 1 (the keepdim shape of a reduction's result).
Shape keepdim_shape(const Shape& shape, const std::vector<int64_t>& reduced) {
  Shape out = shape;
  for (int64_t d : reduced) out[static_cast<size_t>(d)] = 1;
  return out;
}

// ---- unary -----------------------------------------------------------------------------------------------

Tensor unary_op(UnaryOp op, const char* name, const Tensor& x) {
  Tensor y = forward_no_grad([&] { return kernels::unary(op, x); });
  // The kernel's formula reads x or y depending on the op; both are saved (y usually shares its storage
  // with the next op's saved input, so this rarely costs memory).
  return record(name, y, {x}, [op, x = saved(x), y = saved(y)](const Tensor& g, const NeedsGrad&) {
    return Grads{kernels::unary_backward(op, g, x, y)};
  });
}

// ---- binary ----------------------------------------------------------------------------------------------

/// Weight of `a` in d max(a, b): 1 where a > b, 1/2 where a == b, 0 elsewhere (in a's dtype).
Tensor maximum_weight(const Tensor& a_gt_b, const Tensor& a_eq_b) {
  return raw::add(a_gt_b, raw::mul(a_eq_b, 0.5));
}

}  // namespace

Tensor neg(const Tensor& x) {
  return unary_op(UnaryOp::Neg, "neg", x);
}
Tensor exp(const Tensor& x) {
  return unary_op(UnaryOp::Exp, "exp", x);
}
Tensor log(const Tensor& x) {
  return unary_op(UnaryOp::Log, "log", x);
}
Tensor sqrt(const Tensor& x) {
  return unary_op(UnaryOp::Sqrt, "sqrt", x);
}
Tensor rsqrt(const Tensor& x) {
  return unary_op(UnaryOp::Rsqrt, "rsqrt", x);
}
Tensor tanh(const Tensor& x) {
  return unary_op(UnaryOp::Tanh, "tanh", x);
}
Tensor sigmoid(const Tensor& x) {
  return unary_op(UnaryOp::Sigmoid, "sigmoid", x);
}
Tensor relu(const Tensor& x) {
  return unary_op(UnaryOp::Relu, "relu", x);
}
Tensor gelu(const Tensor& x) {
  return unary_op(UnaryOp::Gelu, "gelu", x);
}
Tensor abs(const Tensor& x) {
  return unary_op(UnaryOp::Abs, "abs", x);
}

// ---- add, sub ---------------------------------------------------------------------------------------------

Tensor add(const Tensor& a_in, const Tensor& b_in) {
  const auto [a, b] = autograd::autocast_promote(a_in, b_in);  // bf16 + fp32 meet in fp32 under autocast
  Tensor y = forward_no_grad([&] { return kernels::binary(BinaryOp::Add, a, b); });
  return record("add", y, {a, b}, [sa = a.shape(), sb = b.shape()](const Tensor& g, const NeedsGrad& needs) {
    return Grads{needs[0] ? reduce_to(g, sa) : Tensor(), needs[1] ? reduce_to(g, sb) : Tensor()};
  });
}
Tensor add(const Tensor& a, double b) {
  Tensor y = forward_no_grad([&] { return kernels::binary(BinaryOp::Add, a, b); });
  return record("add", y, {a}, [](const Tensor& g, const NeedsGrad&) { return Grads{g}; });
}
Tensor add(double a, const Tensor& b) {
  return add(b, a);
}

Tensor sub(const Tensor& a_in, const Tensor& b_in) {
  const auto [a, b] = autograd::autocast_promote(a_in, b_in);  // bf16 + fp32 meet in fp32 under autocast
  Tensor y = forward_no_grad([&] { return kernels::binary(BinaryOp::Sub, a, b); });
  return record("sub", y, {a, b}, [sa = a.shape(), sb = b.shape()](const Tensor& g, const NeedsGrad& needs) {
    return Grads{needs[0] ? reduce_to(g, sa) : Tensor(), needs[1] ? raw::neg(reduce_to(g, sb)) : Tensor()};
  });
}
Tensor sub(const Tensor& a, double b) {
  Tensor y = forward_no_grad([&] { return kernels::binary(BinaryOp::Sub, a, b); });
  return record("sub", y, {a}, [](const Tensor& g, const NeedsGrad&) { return Grads{g}; });
}
Tensor sub(double a, const Tensor& b) {
  Tensor y = forward_no_grad([&] { return kernels::binary(BinaryOp::Sub, a, b); });
  return record("sub", y, {b}, [](const Tensor& g, const NeedsGrad&) { return Grads{raw::neg(g)}; });
}

// ---- mul, div ---------------------------------------------------------------------------------------------

Tensor mul(const Tensor& a_in, const Tensor& b_in) {
  const auto [a, b] = autograd::autocast_promote(a_in, b_in);  // bf16 + fp32 meet in fp32 under autocast
  Tensor y = forward_no_grad([&] { return kernels::binary(BinaryOp::Mul, a, b); });
  return record("mul", y, {a, b}, [a = saved(a), b = saved(b)](const Tensor& g, const NeedsGrad& needs) {
    return Grads{needs[0] ? reduce_to(raw::mul(g, b), a.shape()) : Tensor(),
                 needs[1] ? reduce_to(raw::mul(g, a), b.shape()) : Tensor()};
  });
}
Tensor mul(const Tensor& a, double b) {
  Tensor y = forward_no_grad([&] { return kernels::binary(BinaryOp::Mul, a, b); });
  return record("mul", y, {a}, [b](const Tensor& g, const NeedsGrad&) { return Grads{raw::mul(g, b)}; });
}
Tensor mul(double a, const Tensor& b) {
  return mul(b, a);
}

Tensor div(const Tensor& a_in, const Tensor& b_in) {
  const auto [a, b] = autograd::autocast_promote(a_in, b_in);  // bf16 + fp32 meet in fp32 under autocast
  Tensor y = forward_no_grad([&] { return kernels::binary(BinaryOp::Div, a, b); });
  // d(a/b)/da = 1/b, d(a/b)/db = -a/b^2 = -y/b.
  return record("div", y, {a, b},
                [b = saved(b), y = saved(y), sa = a.shape()](const Tensor& g, const NeedsGrad& needs) {
                  return Grads{
                      needs[0] ? reduce_to(raw::div(g, b), sa) : Tensor(),
                      needs[1] ? reduce_to(raw::neg(raw::div(raw::mul(g, y), b)), b.shape()) : Tensor()};
                });
}
Tensor div(const Tensor& a, double b) {
  Tensor y = forward_no_grad([&] { return kernels::binary(BinaryOp::Div, a, b); });
  return record("div", y, {a}, [b](const Tensor& g, const NeedsGrad&) { return Grads{raw::div(g, b)}; });
}
Tensor div(double a, const Tensor& b) {
  Tensor y = forward_no_grad([&] { return kernels::binary(BinaryOp::Div, a, b); });
  // d(s/b)/db = -s/b^2 = -y/b.
  return record("div", y, {b}, [b = saved(b), y = saved(y)](const Tensor& g, const NeedsGrad&) {
    return Grads{raw::neg(raw::div(raw::mul(g, y), b))};
  });
}

// ---- maximum ----------------------------------------------------------------------------------------------

Tensor maximum(const Tensor& a_in, const Tensor& b_in) {
  const auto [a, b] = autograd::autocast_promote(a_in, b_in);  // bf16 + fp32 meet in fp32 under autocast
  Tensor y = forward_no_grad([&] { return kernels::binary(BinaryOp::Maximum, a, b); });
  return record("maximum", y, {a, b}, [a = saved(a), b = saved(b)](const Tensor& g, const NeedsGrad& needs) {
    Tensor wa = maximum_weight(kernels::binary(BinaryOp::Gt, a, b), kernels::binary(BinaryOp::Eq, a, b));
    Tensor ga = raw::mul(g, wa);
    return Grads{needs[0] ? reduce_to(ga, a.shape()) : Tensor(),
                 needs[1] ? reduce_to(kernels::binary(BinaryOp::Sub, g, ga), b.shape()) : Tensor()};
  });
}
Tensor maximum(const Tensor& a, double b) {
  Tensor y = forward_no_grad([&] { return kernels::binary(BinaryOp::Maximum, a, b); });
  return record("maximum", y, {a}, [a = saved(a), b](const Tensor& g, const NeedsGrad&) {
    return Grads{raw::mul(
        g, maximum_weight(kernels::binary(BinaryOp::Gt, a, b), kernels::binary(BinaryOp::Eq, a, b)))};
  });
}
Tensor maximum(double a, const Tensor& b) {
  return maximum(b, a);
}

// ---- pow --------------------------------------------------------------------------------------------------

namespace {
/// d(a^b)/db * g = g * y * log(a), set to 0 where a == 0 (the limit for b > 0; log alone would give NaN).
Tensor pow_exponent_grad(const Tensor& g, const Tensor& a, const Tensor& y) {
  Tensor t = raw::mul(raw::mul(g, y), kernels::unary(UnaryOp::Log, a));
  return kernels::where(kernels::binary(BinaryOp::Eq, a, 0.0), scalar_like(0.0, t), t);
}
/// d(a^s)/da * g = g * s * a^(s-1) (0 for s == 0, where the formula would give 0 * inf at a == 0).
Tensor pow_base_grad(const Tensor& g, const Tensor& a, const Tensor& s) {
  Tensor a_pow = kernels::binary(BinaryOp::Pow, a, kernels::binary(BinaryOp::Sub, s, 1.0));
  Tensor t = raw::mul(raw::mul(g, s), a_pow);
  return kernels::where(kernels::binary(BinaryOp::Eq, s, 0.0), scalar_like(0.0, t), t);
}
}  // namespace

Tensor pow(const Tensor& a_in, const Tensor& b_in) {
  const auto [a, b] = autograd::autocast_promote(a_in, b_in);  // bf16 + fp32 meet in fp32 under autocast
  Tensor y = forward_no_grad([&] { return kernels::binary(BinaryOp::Pow, a, b); });
  return record("pow", y, {a, b},
                [a = saved(a), b = saved(b), y = saved(y)](const Tensor& g, const NeedsGrad& needs) {
                  return Grads{needs[0] ? reduce_to(pow_base_grad(g, a, b), a.shape()) : Tensor(),
                               needs[1] ? reduce_to(pow_exponent_grad(g, a, y), b.shape()) : Tensor()};
                });
}
Tensor pow(const Tensor& a, double b) {
  Tensor y = forward_no_grad([&] { return kernels::binary(BinaryOp::Pow, a, b); });
  return record("pow", y, {a}, [a = saved(a), b](const Tensor& g, const NeedsGrad&) {
    if (b == 0.0) return Grads{zeros_like(g)};
    return Grads{raw::mul(raw::mul(g, b), kernels::binary(BinaryOp::Pow, a, b - 1.0))};
  });
}
Tensor pow(double a, const Tensor& b) {
  Tensor y = forward_no_grad([&] { return kernels::binary(BinaryOp::Pow, a, b); });
  return record("pow", y, {b}, [a, y = saved(y)](const Tensor& g, const NeedsGrad&) {
    // d(s^b)/db = y * log(s); 0 for s == 0 (as in the tensor form).
    if (a == 0.0) return Grads{zeros_like(g)};
    return Grads{raw::mul(raw::mul(g, y), std::log(a))};
  });
}

// ---- operators --------------------------------------------------------------------------------------------

Tensor operator-(const Tensor& x) {
  return neg(x);
}
Tensor operator+(const Tensor& a, const Tensor& b) {
  return add(a, b);
}
Tensor operator+(const Tensor& a, double b) {
  return add(a, b);
}
Tensor operator+(double a, const Tensor& b) {
  return add(a, b);
}
Tensor operator-(const Tensor& a, const Tensor& b) {
  return sub(a, b);
}
Tensor operator-(const Tensor& a, double b) {
  return sub(a, b);
}
Tensor operator-(double a, const Tensor& b) {
  return sub(a, b);
}
Tensor operator*(const Tensor& a, const Tensor& b) {
  return mul(a, b);
}
Tensor operator*(const Tensor& a, double b) {
  return mul(a, b);
}
Tensor operator*(double a, const Tensor& b) {
  return mul(a, b);
}
Tensor operator/(const Tensor& a, const Tensor& b) {
  return div(a, b);
}
Tensor operator/(const Tensor& a, double b) {
  return div(a, b);
}
Tensor operator/(double a, const Tensor& b) {
  return div(a, b);
}

// ---- comparisons ------------------------------------------------------------------------------------------

#define BRIGADE_COMPARISON(name, op)                                             \
  Tensor name(const Tensor& a, const Tensor& b) {                                \
    return forward_no_grad([&] { return kernels::binary(BinaryOp::op, a, b); }); \
  }                                                                              \
  Tensor name(const Tensor& a, double b) {                                       \
    return forward_no_grad([&] { return kernels::binary(BinaryOp::op, a, b); }); \
  }
BRIGADE_COMPARISON(eq, Eq)
BRIGADE_COMPARISON(ne, Ne)
BRIGADE_COMPARISON(lt, Lt)
BRIGADE_COMPARISON(le, Le)
BRIGADE_COMPARISON(gt, Gt)
BRIGADE_COMPARISON(ge, Ge)
#undef BRIGADE_COMPARISON

// ---- selection --------------------------------------------------------------------------------------------

Tensor where(const Tensor& cond, const Tensor& a_in, const Tensor& b_in) {
  const auto [a, b] = autograd::autocast_promote(a_in, b_in);  // bf16 + fp32 meet in fp32 under autocast
  Tensor y = forward_no_grad([&] { return kernels::where(cond, a, b); });
  return record(
      "where", y, {a, b},
      [cond = saved(cond), sa = a.shape(), sb = b.shape()](const Tensor& g, const NeedsGrad& needs) {
        Tensor zero = scalar_like(0.0, g);
        return Grads{needs[0] ? reduce_to(kernels::where(cond, g, zero), sa) : Tensor(),
                     needs[1] ? reduce_to(kernels::where(cond, zero, g), sb) : Tensor()};
      });
}

Tensor masked_fill(const Tensor& x, const Tensor& mask, double value) {
  Tensor y = forward_no_grad([&] { return kernels::masked_fill(x, mask, value); });
  return record("masked_fill", y, {x}, [mask = saved(mask)](const Tensor& g, const NeedsGrad&) {
    return Grads{kernels::masked_fill(g, mask, 0.0)};
  });
}

// ---- reductions -------------------------------------------------------------------------------------------

Tensor sum(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  Tensor y = forward_no_grad([&] { return kernels::sum(x, dims, keepdim); });
  const Shape kept = keepdim_shape(x.shape(), reduced_dims(dims, x.dim(), "sum"));
  return record("sum", y, {x}, [kept, shape = x.shape()](const Tensor& g, const NeedsGrad&) {
    return Grads{g.reshape(kept).expand(shape)};
  });
}

Tensor mean(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  Tensor y = forward_no_grad([&] { return kernels::mean(x, dims, keepdim); });
  const std::vector<int64_t> reduced = reduced_dims(dims, x.dim(), "mean");
  int64_t count = 1;
  for (int64_t d : reduced) count *= x.size(d);
  return record("mean", y, {x},
                [kept = keepdim_shape(x.shape(), reduced), shape = x.shape(), count](const Tensor& g,
                                                                                     const NeedsGrad&) {
                  Tensor scaled = count > 0 ? raw::div(g, static_cast<double>(count)) : g;
                  return Grads{scaled.reshape(kept).expand(shape)};
                });
}

Tensor max(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  Tensor y = forward_no_grad([&] { return kernels::max(x, dims, keepdim); });
  if (!autograd::any_requires_grad({x})) return y;

  // Lay x out as [R, K]: the kept dims (in order) times the reduced dims (in order), so that argmax over
  // the last dim finds the first maximum in row-major order of the reduced dims. Only the argmax indices
  // ([R, 1] int64) are saved, not x.
  const std::vector<int64_t> reduced = reduced_dims(dims, x.dim(), "max");
  std::vector<int64_t> perm;
  std::vector<bool> is_reduced(static_cast<size_t>(x.dim()), false);
  for (int64_t d : reduced) is_reduced[static_cast<size_t>(d)] = true;
  int64_t rows = 1, cols = 1;
  for (int64_t d = 0; d < x.dim(); ++d) {
    if (!is_reduced[static_cast<size_t>(d)]) {
      perm.push_back(d);
      rows *= x.size(d);
    }
  }
  for (int64_t d : reduced) {
    perm.push_back(d);
    cols *= x.size(d);
  }
  Shape permuted_shape;
  std::vector<int64_t> inverse(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) {
    permuted_shape.push_back(x.size(perm[i]));
    inverse[static_cast<size_t>(perm[i])] = static_cast<int64_t>(i);
  }
  Tensor index = forward_no_grad([&] {
    return kernels::argmax(x.permute(perm).reshape({rows, cols}), 1, true);
  });

  return record(
      "max", y, {x}, [index, rows, cols, permuted_shape, inverse](const Tensor& g, const NeedsGrad&) {
        // One-hot rows from comparing column numbers with the argmax (in float32: exact below 2^24 columns).
        Tensor columns = arange(0, cols, 1, kInt64).to(kFloat32).to(g.device()).reshape({1, cols});
        Tensor one_hot = kernels::binary(BinaryOp::Eq, columns, index.to(kFloat32));
        Tensor spread = kernels::where(one_hot, g.reshape({rows, 1}), scalar_like(0.0, g));  // [R, K]
        return Grads{spread.reshape(permuted_shape).permute(inverse)};
      });
}

// ---- matmul -----------------------------------------------------------------------------------------------

namespace {
/// The gradients of y = op(a) op(b) for the incoming g. With A = op(a), B = op(b): dA = g B^T and
/// dB = A^T g. When a is stored transposed its gradient is dA^T = B g^T (likewise for b), so every product
/// below is one GEMM with trans flags. A 2-d operand shared by a batch gets the sum over the batch.
Grads matmul_grads(const Tensor& a, const Tensor& b, bool ta, bool tb, const Tensor& g,
                   const NeedsGrad& needs) {
  auto unbatch = [](const Tensor& grad, const Tensor& like) {
    return grad.dim() > like.dim() ? kernels::sum(grad, {0}) : grad;
  };
  Tensor da, db;
  if (needs[0]) da = unbatch(ta ? kernels::matmul(b, g, tb, true) : kernels::matmul(g, b, false, !tb), a);
  if (needs[1]) db = unbatch(tb ? kernels::matmul(g, a, true, ta) : kernels::matmul(a, g, !ta, false), b);
  return Grads{da, db};
}
}  // namespace

Tensor matmul(const Tensor& a_in, const Tensor& b_in, bool transpose_a, bool transpose_b) {
  // Autocast: the GEMM reads bf16 (half the bytes, tensor cores on GPU) and accumulates in fp32.
  const Tensor a = autograd::autocast_low(a_in), b = autograd::autocast_low(b_in);
  Tensor y = forward_no_grad([&] { return kernels::matmul(a, b, transpose_a, transpose_b); });
  return record(
      "matmul", y, {a, b},
      [a = saved(a), b = saved(b), ta = transpose_a, tb = transpose_b](
          const Tensor& g, const NeedsGrad& needs) { return matmul_grads(a, b, ta, tb, g, needs); });
}

Tensor matmul_bias(const Tensor& a_in, const Tensor& b_in, const Tensor& bias_in, bool transpose_a,
                   bool transpose_b) {
  // Autocast: the bias joins the bf16 product in bf16, as add() would add the two.
  const Tensor a = autograd::autocast_low(a_in), b = autograd::autocast_low(b_in);
  const Tensor bias = autograd::autocast_low(bias_in);
  Tensor y = forward_no_grad([&] { return kernels::matmul_bias(a, b, bias, transpose_a, transpose_b); });
  // matmul's gradients, and the bias's as add() gives it: g summed over the rows (and the batch).
  return record("matmul_bias", y, {a, b, bias},
                [a = saved(a), b = saved(b), bias_shape = bias.shape(), ta = transpose_a, tb = transpose_b](
                    const Tensor& g, const NeedsGrad& needs) {
                  Grads grads = matmul_grads(a, b, ta, tb, g, needs);
                  grads.push_back(needs[2] ? reduce_to(g, bias_shape) : Tensor());
                  return grads;
                });
}

// ---- softmax, layer norm ----------------------------------------------------------------------------------

Tensor softmax(const Tensor& x_in) {
  const Tensor x = autograd::autocast_fp32(x_in);  // autocast: exp and row sums in fp32
  Tensor y = forward_no_grad([&] { return kernels::softmax(x); });
  return record("softmax", y, {x}, [y = saved(y)](const Tensor& g, const NeedsGrad&) {
    return Grads{kernels::softmax_backward(g, y)};
  });
}

Tensor log_softmax(const Tensor& x_in) {
  const Tensor x = autograd::autocast_fp32(x_in);
  Tensor y = forward_no_grad([&] { return kernels::log_softmax(x); });
  return record("log_softmax", y, {x}, [y = saved(y)](const Tensor& g, const NeedsGrad&) {
    return Grads{kernels::log_softmax_backward(g, y)};
  });
}

namespace {
/// Records layer_norm's node for out (the forward of x, already computed).
Tensor record_layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias,
                         const kernels::LayerNormOutput& out) {
  return record("layer_norm", out.y, {x, weight, bias},
                [x = saved(x), weight = saved(weight), mean = out.mean, rstd = out.rstd,
                 has_bias = bias.defined()](const Tensor& g, const NeedsGrad& needs) {
                  kernels::LayerNormGrads grads =
                      kernels::layernorm_backward(g, x, weight, mean, rstd, has_bias);
                  auto as_param = [](const Tensor& grad, const Tensor& param) {
                    return grad.defined() && grad.dtype() != param.dtype() ? grad.to(param.dtype()) : grad;
                  };
                  return Grads{grads.dx, needs[1] ? as_param(grads.dweight, weight) : Tensor(),
                               needs[2] ? grads.dbias : Tensor()};
                });
}
}  // namespace

Tensor layer_norm(const Tensor& x_in, const Tensor& weight, const Tensor& bias, double eps) {
  const Tensor x = autograd::autocast_fp32(x_in);  // autocast: statistics and output in fp32
  kernels::LayerNormOutput out = forward_no_grad([&] { return kernels::layernorm(x, weight, bias, eps); });
  return record_layer_norm(x, weight, bias, out);
}

// ---- fused ops --------------------------------------------------------------------------------------------

Tensor bias_gelu(const Tensor& x, const Tensor& bias) {
  Tensor y = forward_no_grad([&] { return kernels::bias_gelu(x, bias); });
  return record("bias_gelu", y, {x, bias},
                [x = saved(x), bias = saved(bias)](const Tensor& g, const NeedsGrad& needs) {
                  kernels::BiasGeluGrads grads = kernels::bias_gelu_backward(g, x, bias);
                  return Grads{grads.dx, needs[1] ? grads.dbias : Tensor()};
                });
}

AddLayerNorm add_layer_norm(const Tensor& x_in, const Tensor& residual_in, const Tensor& weight,
                            const Tensor& bias, double eps) {
  // The autocast rules of add() then layer_norm(): bf16 + fp32 meet in fp32 (a block's residual stream),
  // and the norm runs in fp32. Two bf16 tensors under autocast add in bf16 and the norm reads an fp32 copy
  // of the sum: that case keeps the two ops.
  const auto [x, residual] = autograd::autocast_promote(x_in, residual_in);
  if (autograd::autocast_dtype() && x.dtype() == kBFloat16) {
    Tensor sum = add(x, residual);
    return {sum, layer_norm(sum, weight, bias, eps)};
  }
  kernels::AddLayerNormOutput out =
      forward_no_grad([&] { return kernels::add_layernorm(x, residual, weight, bias, eps); });
  // Two nodes, as add() and layer_norm() record them: the sum is an input of the norm's node, and its
  // gradient (from the norm and from whatever else reads the sum) reaches x and residual through the add's.
  Tensor sum = record("add", out.sum, {x, residual}, [](const Tensor& g, const NeedsGrad& needs) {
    return Grads{needs[0] ? g : Tensor(), needs[1] ? g : Tensor()};
  });
  return {sum, record_layer_norm(sum, weight, bias, out.norm)};
}

// ---- embedding, cross-entropy, dropout --------------------------------------------------------------------

Tensor embedding(const Tensor& weight, const Tensor& ids) {
  Tensor y = forward_no_grad([&] { return kernels::embedding(weight, ids); });
  return record(
      "embedding", y, {weight},
      [ids = saved(ids), rows = weight.size(0), dtype = weight.dtype()](const Tensor& g, const NeedsGrad&) {
        Tensor grad = kernels::embedding_backward(g, ids, rows);
        return Grads{grad.dtype() == dtype ? grad : grad.to(dtype)};
      });
}

Tensor cross_entropy(const Tensor& logits_in, const Tensor& targets, int64_t ignore_index) {
  const Tensor logits = autograd::autocast_fp32(logits_in);  // autocast: log-softmax and loss in fp32
  const bool want_grad = autograd::any_requires_grad({logits});
  kernels::CrossEntropyOutput out =
      forward_no_grad([&] { return kernels::cross_entropy(logits, targets, ignore_index, want_grad); });
  // The fused kernel already produced d loss / d logits; backward only scales it by the incoming gradient.
  return record("cross_entropy", out.loss, {logits},
                [grad_logits = out.grad_logits](const Tensor& g, const NeedsGrad&) {
                  Tensor scale = g.dtype() == grad_logits.dtype() ? g : g.to(grad_logits.dtype());
                  return Grads{raw::mul(grad_logits, scale)};
                });
}

Tensor dropout(const Tensor& x, double p, bool training, Generator* generator) {
  BRIGADE_CHECK_VALUE(p >= 0.0 && p <= 1.0, "dropout: p must lie in [0, 1], found ", p);
  if (!training || p == 0.0) return x;
  if (p == 1.0) return mul(x, 0.0);  // every element dropped (the kernel's 1 / (1 - p) would be inf)
  const GeneratorState state = (generator ? *generator : default_generator()).next_draw();
  Tensor y = forward_no_grad([&] { return kernels::dropout(x, p, state); });
  // The mask is a function of (state, element index): backward regenerates it on the gradient.
  return record("dropout", y, {x}, [p, state](const Tensor& g, const NeedsGrad&) {
    return Grads{kernels::dropout(g, p, state)};
  });
}

}  // namespace brigade
