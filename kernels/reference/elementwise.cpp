// Reference elementwise ops: each output element from its formula in double, operands read through the
// broadcast index. Shapes: a, b, cond, mask broadcast to the output shape (NumPy rules).
#include <cmath>
#include <numbers>

#include "kernels/reference/index_math.h"
#include "kernels/reference/reference.h"

namespace brigade::kernels::reference {

using detail::broadcast_source;
using detail::float64_tensor;
using detail::values_of;

namespace {
constexpr double kGeluK = 0.044715;
double gelu_inner(double x) {
  return std::sqrt(2.0 / std::numbers::pi) * (x + kGeluK * x * x * x);
}
}  // namespace

double unary(UnaryOp op, double x) {
  switch (op) {
    case UnaryOp::Neg:
      return -x;
    case UnaryOp::Exp:
      return std::exp(x);
    case UnaryOp::Log:
      return std::log(x);
    case UnaryOp::Sqrt:
      return std::sqrt(x);
    case UnaryOp::Rsqrt:
      return 1.0 / std::sqrt(x);
    case UnaryOp::Tanh:
      return std::tanh(x);
    case UnaryOp::Sigmoid:
      return 1.0 / (1.0 + std::exp(-x));
    case UnaryOp::Relu:
      return x > 0 ? x : 0.0;
    case UnaryOp::Gelu:
      return 0.5 * x * (1.0 + std::tanh(gelu_inner(x)));
    case UnaryOp::Abs:
      return std::fabs(x);
  }
  return 0;
}

double unary_derivative(UnaryOp op, double x, double y) {
  switch (op) {
    case UnaryOp::Neg:
      return -1.0;
    case UnaryOp::Exp:
      return y;
    case UnaryOp::Log:
      return 1.0 / x;
    case UnaryOp::Sqrt:
      return 0.5 / y;
    case UnaryOp::Rsqrt:
      return -0.5 * y * y * y;
    case UnaryOp::Tanh:
      return 1.0 - y * y;
    case UnaryOp::Sigmoid:
      return y * (1.0 - y);
    case UnaryOp::Relu:
      return x > 0 ? 1.0 : 0.0;
    case UnaryOp::Gelu: {
      // d/dx of 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3)
      const double t = std::tanh(gelu_inner(x));
      const double du = std::sqrt(2.0 / std::numbers::pi) * (1.0 + 3.0 * kGeluK * x * x);
      return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * du;
    }
    case UnaryOp::Abs:
      return x > 0 ? 1.0 : (x < 0 ? -1.0 : 0.0);
  }
  return 0;
}

double binary(BinaryOp op, double a, double b) {
  switch (op) {
    case BinaryOp::Add:
      return a + b;
    case BinaryOp::Sub:
      return a - b;
    case BinaryOp::Mul:
      return a * b;
    case BinaryOp::Div:
      return a / b;
    case BinaryOp::Maximum:
      return a > b ? a : b;
    case BinaryOp::Pow:
      return std::pow(a, b);
    case BinaryOp::Eq:
      return a == b;
    case BinaryOp::Ne:
      return a != b;
    case BinaryOp::Lt:
      return a < b;
    case BinaryOp::Le:
      return a <= b;
    case BinaryOp::Gt:
      return a > b;
    case BinaryOp::Ge:
      return a >= b;
  }
  return 0;
}

Tensor unary(UnaryOp op, const Tensor& x) {
  std::vector<double> v = values_of(x);
  for (double& e : v) e = unary(op, e);
  return float64_tensor(v, x.shape());
}

Tensor unary_backward(UnaryOp op, const Tensor& grad_y, const Tensor& x, const Tensor& y) {
  BRIGADE_CHECK_SHAPE(grad_y.shape() == x.shape() && y.shape() == x.shape(),
                      "reference unary_backward: grad_y, x, y of one shape");
  const std::vector<double> g = values_of(grad_y), xv = values_of(x), yv = values_of(y);
  std::vector<double> dx(xv.size());
  for (size_t i = 0; i < dx.size(); ++i) dx[i] = g[i] * unary_derivative(op, xv[i], yv[i]);
  return float64_tensor(dx, x.shape());
}

Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b) {
  const Shape shape = broadcast_shapes(a.shape(), b.shape(), "reference binary");
  const std::vector<double> av = values_of(a), bv = values_of(b);
  std::vector<double> out(static_cast<size_t>(shape_numel(shape)));
  for (int64_t i = 0; i < shape_numel(shape); ++i) {
    out[static_cast<size_t>(i)] =
        binary(op, av[broadcast_source(shape, a.shape(), i)], bv[broadcast_source(shape, b.shape(), i)]);
  }
  return float64_tensor(out, shape);
}

Tensor binary(BinaryOp op, const Tensor& a, double scalar) {
  std::vector<double> v = values_of(a);
  for (double& e : v) e = binary(op, e, scalar);
  return float64_tensor(v, a.shape());
}

Tensor binary(BinaryOp op, double scalar, const Tensor& b) {
  std::vector<double> v = values_of(b);
  for (double& e : v) e = binary(op, scalar, e);
  return float64_tensor(v, b.shape());
}

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  const Shape shape = broadcast_shapes(broadcast_shapes(cond.shape(), a.shape(), "reference where"),
                                       b.shape(), "reference where");
  const std::vector<double> cv = values_of(cond), av = values_of(a), bv = values_of(b);
  std::vector<double> out(static_cast<size_t>(shape_numel(shape)));
  for (int64_t i = 0; i < shape_numel(shape); ++i) {
    const bool take_a = cv[broadcast_source(shape, cond.shape(), i)] != 0;
    out[static_cast<size_t>(i)] =
        take_a ? av[broadcast_source(shape, a.shape(), i)] : bv[broadcast_source(shape, b.shape(), i)];
  }
  return float64_tensor(out, shape);
}

Tensor masked_fill(const Tensor& x, const Tensor& mask, double value) {
  BRIGADE_CHECK_SHAPE(broadcast_shapes(x.shape(), mask.shape(), "reference masked_fill") == x.shape(),
                      "reference masked_fill: mask ", shape_str(mask.shape()), " must broadcast to x ",
                      shape_str(x.shape()));
  std::vector<double> out = values_of(x);
  const std::vector<double> mv = values_of(mask);
  for (int64_t i = 0; i < x.numel(); ++i) {
    if (mv[broadcast_source(x.shape(), mask.shape(), i)] != 0) out[static_cast<size_t>(i)] = value;
  }
  return float64_tensor(out, x.shape());
}

}  // namespace brigade::kernels::reference
