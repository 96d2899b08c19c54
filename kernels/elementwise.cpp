// Dispatch of the elementwise ops: checks, broadcasting (expand to the result shape, stride 0 where an
// operand is broadcast), output allocation, then the device's backend.
#include <string>

#include "kernels/backend.h"
#include "kernels/kernels.h"
#include "kernels/op_checks.h"
#include "tensor/grad_mode.h"

namespace brigade::kernels {

using detail::check_defined;
using detail::check_floating;
using detail::check_same_device;
using detail::check_same_dtype;
using detail::output_options;

const char* unary_op_name(UnaryOp op) {
  switch (op) {
    case UnaryOp::Neg:
      return "neg";
    case UnaryOp::Exp:
      return "exp";
    case UnaryOp::Log:
      return "log";
    case UnaryOp::Sqrt:
      return "sqrt";
    case UnaryOp::Rsqrt:
      return "rsqrt";
    case UnaryOp::Tanh:
      return "tanh";
    case UnaryOp::Sigmoid:
      return "sigmoid";
    case UnaryOp::Relu:
      return "relu";
    case UnaryOp::Gelu:
      return "gelu";
    case UnaryOp::Abs:
      return "abs";
  }
  return "unknown_unary_op";
}

const char* binary_op_name(BinaryOp op) {
  switch (op) {
    case BinaryOp::Add:
      return "add";
    case BinaryOp::Sub:
      return "sub";
    case BinaryOp::Mul:
      return "mul";
    case BinaryOp::Div:
      return "div";
    case BinaryOp::Maximum:
      return "maximum";
    case BinaryOp::Pow:
      return "pow";
    case BinaryOp::Eq:
      return "eq";
    case BinaryOp::Ne:
      return "ne";
    case BinaryOp::Lt:
      return "lt";
    case BinaryOp::Le:
      return "le";
    case BinaryOp::Gt:
      return "gt";
    case BinaryOp::Ge:
      return "ge";
  }
  return "unknown_binary_op";
}

Tensor unary(UnaryOp op, const Tensor& x) {
  NoGradGuard no_grad;  // raw op: the views made here must not be recorded
  const char* name = unary_op_name(op);
  check_defined(name, "x", x);
  check_floating(name, "x", x);
  Tensor out = empty(x.shape(), output_options(x));
  if (out.numel() > 0) BRIGADE_ON_BACKEND(x.device(), unary(op, x, out));
  return out;
}

Tensor unary_backward(UnaryOp op, const Tensor& grad_y, const Tensor& x, const Tensor& y) {
  NoGradGuard no_grad;
  const std::string name_str = std::string(unary_op_name(op)) + "_backward";
  const char* name = name_str.c_str();
  check_defined(name, "grad_y", grad_y);
  check_defined(name, "x", x);
  check_floating(name, "grad_y", grad_y);
  check_same_device(name, "grad_y", grad_y, "x", x);
  check_same_dtype(name, "grad_y", grad_y, "x", x);
  detail::check_same_shape(name, "grad_y", grad_y, "x", x);
  // y may be left undefined by a caller that did not keep it; it is then recomputed from x.
  Tensor y_used = y.defined() ? y : unary(op, x);
  check_same_device(name, "grad_y", grad_y, "y", y_used);
  check_same_dtype(name, "grad_y", grad_y, "y", y_used);
  detail::check_same_shape(name, "grad_y", grad_y, "y", y_used);
  Tensor out = empty(x.shape(), output_options(x));
  if (out.numel() > 0) BRIGADE_ON_BACKEND(x.device(), unary_backward(op, grad_y, x, y_used, out));
  return out;
}

Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b) {
  NoGradGuard no_grad;
  const char* name = binary_op_name(op);
  check_defined(name, "a", a);
  check_defined(name, "b", b);
  check_same_device(name, "a", a, "b", b);
  check_floating(name, "a", a);
  check_floating(name, "b", b);
  check_same_dtype(name, "a", a, "b", b);
  Shape shape = broadcast_shapes(a.shape(), b.shape(), name);
  Tensor out = empty(shape, output_options(a));
  if (out.numel() > 0) BRIGADE_ON_BACKEND(a.device(), binary(op, a.expand(shape), b.expand(shape), out));
  return out;
}

Tensor binary(BinaryOp op, const Tensor& a, double scalar) {
  NoGradGuard no_grad;
  const char* name = binary_op_name(op);
  check_defined(name, "a", a);
  check_floating(name, "a", a);
  Tensor out = empty(a.shape(), output_options(a));
  if (out.numel() > 0) BRIGADE_ON_BACKEND(a.device(), binary_scalar(op, a, scalar, false, out));
  return out;
}

Tensor binary(BinaryOp op, double scalar, const Tensor& b) {
  NoGradGuard no_grad;
  const char* name = binary_op_name(op);
  check_defined(name, "b", b);
  check_floating(name, "b", b);
  Tensor out = empty(b.shape(), output_options(b));
  if (out.numel() > 0) BRIGADE_ON_BACKEND(b.device(), binary_scalar(op, b, scalar, true, out));
  return out;
}

void add_(const Tensor& dst, const Tensor& src) {
  NoGradGuard no_grad;
  const char* name = "add_";
  check_defined(name, "dst", dst);
  check_defined(name, "src", src);
  check_same_device(name, "dst", dst, "src", src);
  check_floating(name, "dst", dst);
  check_same_dtype(name, "dst", dst, "src", src);
  Shape shape = broadcast_shapes(dst.shape(), src.shape(), name);
  BRIGADE_CHECK_SHAPE(shape == dst.shape(), name, ": src of shape ", shape_str(src.shape()),
                      " does not broadcast to dst's shape ", shape_str(dst.shape()), " (the result would be ",
                      shape_str(shape), ")");
  detail::check_writable(name, "dst", dst);
  if (dst.numel() > 0) BRIGADE_ON_BACKEND(dst.device(), binary(BinaryOp::Add, dst, src.expand(shape), dst));
}

void mul_(const Tensor& dst, double scalar) {
  NoGradGuard no_grad;
  const char* name = "mul_";
  check_defined(name, "dst", dst);
  check_floating(name, "dst", dst);
  detail::check_writable(name, "dst", dst);
  if (dst.numel() > 0)
    BRIGADE_ON_BACKEND(dst.device(), binary_scalar(BinaryOp::Mul, dst, scalar, false, dst));
}

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  NoGradGuard no_grad;
  const char* name = "where";
  check_defined(name, "cond", cond);
  check_defined(name, "a", a);
  check_defined(name, "b", b);
  check_same_device(name, "cond", cond, "a", a);
  check_same_device(name, "a", a, "b", b);
  check_floating(name, "a", a);
  check_floating(name, "b", b);
  check_same_dtype(name, "a", a, "b", b);
  Shape shape = broadcast_shapes(broadcast_shapes(cond.shape(), a.shape(), name), b.shape(), name);
  Tensor out = empty(shape, output_options(a));
  if (out.numel() > 0) {
    BRIGADE_ON_BACKEND(a.device(), where(cond.expand(shape), a.expand(shape), b.expand(shape), out));
  }
  return out;
}

Tensor masked_fill(const Tensor& x, const Tensor& mask, double value) {
  NoGradGuard no_grad;
  const char* name = "masked_fill";
  check_defined(name, "x", x);
  check_defined(name, "mask", mask);
  check_same_device(name, "x", x, "mask", mask);
  check_floating(name, "x", x);
  Shape shape = broadcast_shapes(x.shape(), mask.shape(), name);
  BRIGADE_CHECK_SHAPE(shape == x.shape(), name, ": mask of shape ", shape_str(mask.shape()),
                      " does not broadcast to x's shape ", shape_str(x.shape()));
  Tensor out = empty(shape, output_options(x));
  if (out.numel() > 0) {
    // One element holding `value` (in x's dtype), broadcast: where(mask, value, x).
    Tensor fill = full({}, value, output_options(x));
    BRIGADE_ON_BACKEND(x.device(), where(mask.expand(shape), fill.expand(shape), x, out));
  }
  return out;
}

}  // namespace brigade::kernels
