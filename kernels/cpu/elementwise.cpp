// CPU reference: unary ops and their backward, binary ops (tensor-tensor and tensor-scalar), where.
// Operands arrive already expanded to the output's shape; any strides. Math in float (float32, bfloat16)
// or double (float64); one OpenMP-parallel loop over the output's row-major elements.
#include <cmath>

#include "kernels/backend.h"
#include "kernels/cpu/cpu_access.h"

namespace brigade::kernels::cpu {

using detail::acc_t;
using detail::kParallelGrain;
using detail::StridedAccess;

namespace {

template <typename A>
A sigmoid(A x) {
  // Two forms so that exp never overflows.
  if (x >= A(0)) return A(1) / (A(1) + std::exp(-x));
  A e = std::exp(x);
  return e / (A(1) + e);
}

// GELU, tanh form: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
constexpr double kSqrt2OverPi = 0.7978845608028654;
constexpr double kGeluCubic = 0.044715;

template <typename A>
A unary_value(UnaryOp op, A x) {
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
      return A(1) / std::sqrt(x);
    case UnaryOp::Tanh:
      return std::tanh(x);
    case UnaryOp::Sigmoid:
      return sigmoid(x);
    case UnaryOp::Relu:
      return x < A(0) ? A(0) : x;  // NaN stays NaN
    case UnaryOp::Gelu: {
      A u = A(kSqrt2OverPi) * (x + A(kGeluCubic) * x * x * x);
      return A(0.5) * x * (A(1) + std::tanh(u));
    }
    case UnaryOp::Abs:
      return std::fabs(x);
  }
  return x;
}

/// dL/dx from g = dL/dy, the input x and the output y.
template <typename A>
A unary_grad(UnaryOp op, A g, A x, A y) {
  switch (op) {
    case UnaryOp::Neg:
      return -g;
    case UnaryOp::Exp:
      return g * y;
    case UnaryOp::Log:
      return g / x;
    case UnaryOp::Sqrt:
      return g * A(0.5) / y;
    case UnaryOp::Rsqrt:
      return A(-0.5) * g * y * y * y;  // d x^(-1/2) = -x^(-3/2) / 2
    case UnaryOp::Tanh:
      return g * (A(1) - y * y);
    case UnaryOp::Sigmoid:
      return g * y * (A(1) - y);
    case UnaryOp::Relu:
      return x > A(0) ? g : A(0);
    case UnaryOp::Gelu: {
      A u = A(kSqrt2OverPi) * (x + A(kGeluCubic) * x * x * x);
      A t = std::tanh(u);
      A du = A(kSqrt2OverPi) * (A(1) + A(3 * kGeluCubic) * x * x);
      return g * (A(0.5) * (A(1) + t) + A(0.5) * x * (A(1) - t * t) * du);
    }
    case UnaryOp::Abs:
      return x > A(0) ? g : (x < A(0) ? -g : A(0));
  }
  return g;
}

template <typename A>
A binary_value(BinaryOp op, A a, A b) {
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
      return (a > b || std::isnan(a)) ? a : b;  // NaN propagates from either side
    case BinaryOp::Pow:
      return std::pow(a, b);
    case BinaryOp::Eq:
      return a == b ? A(1) : A(0);
    case BinaryOp::Ne:
      return a != b ? A(1) : A(0);
    case BinaryOp::Lt:
      return a < b ? A(1) : A(0);
    case BinaryOp::Le:
      return a <= b ? A(1) : A(0);
    case BinaryOp::Gt:
      return a > b ? A(1) : A(0);
    case BinaryOp::Ge:
      return a >= b ? A(1) : A(0);
  }
  return a;
}

template <typename T>
void unary_impl(UnaryOp op, const Tensor& x, const Tensor& out) {
  using A = acc_t<T>;
  StridedAccess<const T> in(x, unary_op_name(op));
  StridedAccess<T> result(out, unary_op_name(op));
  const int64_t n = out.numel();
#pragma omp parallel for if (n >= kParallelGrain) schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    result[i] = static_cast<T>(unary_value<A>(op, static_cast<A>(in[i])));
  }
}

template <typename T>
void unary_backward_impl(UnaryOp op, const Tensor& grad_y, const Tensor& x, const Tensor& y,
                         const Tensor& out) {
  using A = acc_t<T>;
  StridedAccess<const T> g(grad_y, unary_op_name(op));
  StridedAccess<const T> xs(x, unary_op_name(op));
  StridedAccess<const T> ys(y, unary_op_name(op));
  StridedAccess<T> result(out, unary_op_name(op));
  const int64_t n = out.numel();
#pragma omp parallel for if (n >= kParallelGrain) schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    result[i] =
        static_cast<T>(unary_grad<A>(op, static_cast<A>(g[i]), static_cast<A>(xs[i]), static_cast<A>(ys[i])));
  }
}

template <typename T>
void binary_impl(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out) {
  using A = acc_t<T>;
  StridedAccess<const T> as(a, binary_op_name(op));
  StridedAccess<const T> bs(b, binary_op_name(op));
  StridedAccess<T> result(out, binary_op_name(op));
  const int64_t n = out.numel();
#pragma omp parallel for if (n >= kParallelGrain) schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    result[i] = static_cast<T>(binary_value<A>(op, static_cast<A>(as[i]), static_cast<A>(bs[i])));
  }
}

template <typename T>
void binary_scalar_impl(BinaryOp op, const Tensor& a, double scalar, bool scalar_first, const Tensor& out) {
  using A = acc_t<T>;
  StridedAccess<const T> as(a, binary_op_name(op));
  StridedAccess<T> result(out, binary_op_name(op));
  const A s = static_cast<A>(scalar);
  const int64_t n = out.numel();
#pragma omp parallel for if (n >= kParallelGrain) schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const A v = static_cast<A>(as[i]);
    result[i] = static_cast<T>(scalar_first ? binary_value<A>(op, s, v) : binary_value<A>(op, v, s));
  }
}

template <typename C, typename T>
void where_impl(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out) {
  StridedAccess<const C> cs(cond, "where");
  StridedAccess<const T> as(a, "where");
  StridedAccess<const T> bs(b, "where");
  StridedAccess<T> result(out, "where");
  const int64_t n = out.numel();
#pragma omp parallel for if (n >= kParallelGrain) schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    result[i] = static_cast<double>(cs[i]) != 0.0 ? as[i] : bs[i];
  }
}

}  // namespace

void unary(UnaryOp op, const Tensor& x, const Tensor& out) {
  BRIGADE_DISPATCH_FLOATING(x.dtype(), unary_op_name(op), [&] { unary_impl<scalar_t>(op, x, out); });
}

void unary_backward(UnaryOp op, const Tensor& grad_y, const Tensor& x, const Tensor& y, const Tensor& out) {
  BRIGADE_DISPATCH_FLOATING(x.dtype(), unary_op_name(op),
                            [&] { unary_backward_impl<scalar_t>(op, grad_y, x, y, out); });
}

void binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out) {
  BRIGADE_DISPATCH_FLOATING(out.dtype(), binary_op_name(op), [&] { binary_impl<scalar_t>(op, a, b, out); });
}

void binary_scalar(BinaryOp op, const Tensor& a, double scalar, bool scalar_first, const Tensor& out) {
  BRIGADE_DISPATCH_FLOATING(out.dtype(), binary_op_name(op),
                            [&] { binary_scalar_impl<scalar_t>(op, a, scalar, scalar_first, out); });
}

void where(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out) {
  BRIGADE_DISPATCH_ALL(cond.dtype(), "where", [&] {
    using cond_t = scalar_t;
    BRIGADE_DISPATCH_FLOATING(out.dtype(), "where", [&] { where_impl<cond_t, scalar_t>(cond, a, b, out); });
  });
}

}  // namespace brigade::kernels::cpu
