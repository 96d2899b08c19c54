// The scalar formulas of the elementwise ops (unary, their derivatives, binary), written once and compiled
// for both backends: kernels/cpu/elementwise.cpp (host) and kernels/cuda/elementwise*.cu (device). A is the
// compute type: float (float32, bfloat16) or double (float64).
//
// BRIGADE_HOST_DEVICE (tensor/bfloat16.h) is `__host__ __device__` under nvcc and empty otherwise. The math
// functions are the C ones (::expf, ::tanh, ...): libm on the host, libdevice on the device (CUDA declares
// them host-device), so the same expression runs on both; results differ only by the two libraries'
// last-bit rounding and nvcc's FMA contraction (the CUDA-vs-CPU tests allow for both).
//
// One exception on the CPU: float GELU and its derivative over arrays run the vectorised code of
// kernels/cpu/vector_math.h (gelu_v, gelu_grad_v). It is the same expression as gelu() / gelu_grad() below
// for float, lane by lane, with a Cephes-style polynomial exp in place of expf (within 2 ulp of it). And
// elementwise v3 (ElementwiseKernel::CpuAvx512) computes float exp, log, tanh and sigmoid with its own
// vector code (kernels/cpu/unary_avx512.cpp, within 1-3 ulp of these formulas in double).
#pragma once

#include <cmath>
#include <type_traits>

#include "kernels/kernels.h"
#include "tensor/bfloat16.h"

namespace brigade::kernels::formulas {

// ---- the C math functions by type (float: the f-suffixed ones) ------------------------------------------

BRIGADE_HOST_DEVICE inline float exp_of(float x) {
  return ::expf(x);
}
BRIGADE_HOST_DEVICE inline double exp_of(double x) {
  return ::exp(x);
}
BRIGADE_HOST_DEVICE inline float log_of(float x) {
  return ::logf(x);
}
BRIGADE_HOST_DEVICE inline double log_of(double x) {
  return ::log(x);
}
BRIGADE_HOST_DEVICE inline float sqrt_of(float x) {
  return ::sqrtf(x);
}
BRIGADE_HOST_DEVICE inline double sqrt_of(double x) {
  return ::sqrt(x);
}
// a * b rounded to A before anything else uses it: nvcc may fuse a product into a following add or subtract
// (one FMA, the product unrounded), so `a * b - c` with c == a * b computed elsewhere is not exactly 0 on the
// device. The _rn intrinsics are never fused. The host compiles a * b (x86-64 without -mfma never fuses).
BRIGADE_HOST_DEVICE inline float rounded_product(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
BRIGADE_HOST_DEVICE inline double rounded_product(double a, double b) {
#ifdef __CUDA_ARCH__
  return __dmul_rn(a, b);
#else
  return a * b;
#endif
}
BRIGADE_HOST_DEVICE inline float tanh_of(float x) {
  return ::tanhf(x);
}
BRIGADE_HOST_DEVICE inline double tanh_of(double x) {
  return ::tanh(x);
}
BRIGADE_HOST_DEVICE inline float abs_of(float x) {
  return ::fabsf(x);
}
BRIGADE_HOST_DEVICE inline double abs_of(double x) {
  return ::fabs(x);
}
BRIGADE_HOST_DEVICE inline float pow_of(float x, float y) {
  return ::powf(x, y);
}
BRIGADE_HOST_DEVICE inline double pow_of(double x, double y) {
  return ::pow(x, y);
}
template <typename A>
BRIGADE_HOST_DEVICE inline bool is_nan(A x) {
  return x != x;
}

// ---- GELU, tanh form: 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3) ------------------------------

constexpr double kSqrt2OverPi = 0.7978845608028654;
constexpr double kGeluCubic = 0.044715;
/// float: beyond |u| = 40, sigmoid(2u) is 1 to float precision or below 2e-35 (vector_math.h's limit).
constexpr float kGeluULimit = 40.0f;

/// float: the sigmoid rewrite x / (1 + exp(-2u)) (the tanh form cancels for x < -3 in float), with u
/// clamped to +-40 and x * 0 below -40 (the tanh form's value: -0, or NaN for -inf). double: the tanh form.
template <typename A>
BRIGADE_HOST_DEVICE inline A gelu(A x) {
  if constexpr (std::is_same_v<A, float>) {
    const float u = 0.7978845608028654f * (x + 0.044715f * x * x * x);
    const float low = u < -kGeluULimit ? -kGeluULimit : u;
    const float clamped = low > kGeluULimit ? kGeluULimit : low;
    const float y = x / (1.0f + exp_of(-2.0f * clamped));
    return u < -kGeluULimit ? x * 0.0f : y;
  } else {
    A u = A(kSqrt2OverPi) * (x + A(kGeluCubic) * x * x * x);
    return A(0.5) * x * (A(1) + tanh_of(u));
  }
}

/// g * d gelu / dx. float: with s = sigmoid(2u) = 1 / (1 + e), e = exp(-2u): s + 2 x (e s) s du/dx (1 - s
/// written e s: no cancellation); 1 beyond u = 40, x * 0 below -40. double: the tanh form's derivative.
template <typename A>
BRIGADE_HOST_DEVICE inline A gelu_grad(A g, A x) {
  if constexpr (std::is_same_v<A, float>) {
    const float x2 = x * x;
    const float u = 0.7978845608028654f * (x + 0.044715f * x2 * x);
    const float du = 0.7978845608028654f * (1.0f + (3.0f * 0.044715f) * x2);
    const float low = u < -kGeluULimit ? -kGeluULimit : u;
    const float clamped = low > kGeluULimit ? kGeluULimit : low;
    const float e = exp_of(-2.0f * clamped);
    const float s = 1.0f / (1.0f + e);
    float d = s + 2.0f * x * (e * s) * s * du;
    d = u > kGeluULimit ? 1.0f : d;
    d = u < -kGeluULimit ? x * 0.0f : d;
    return g * d;
  } else {
    A u = A(kSqrt2OverPi) * (x + A(kGeluCubic) * x * x * x);
    A t = tanh_of(u);
    A du = A(kSqrt2OverPi) * (A(1) + A(3 * kGeluCubic) * x * x);
    return g * (A(0.5) * (A(1) + t) + A(0.5) * x * (A(1) - t * t) * du);
  }
}

// ---- unary ops and their derivatives --------------------------------------------------------------------

template <UnaryOp op, typename A>
BRIGADE_HOST_DEVICE inline A unary_value(A x) {
  if constexpr (op == UnaryOp::Neg) {
    return -x;
  } else if constexpr (op == UnaryOp::Exp) {
    return exp_of(x);
  } else if constexpr (op == UnaryOp::Log) {
    return log_of(x);
  } else if constexpr (op == UnaryOp::Sqrt) {
    return sqrt_of(x);
  } else if constexpr (op == UnaryOp::Rsqrt) {
    return A(1) / sqrt_of(x);
  } else if constexpr (op == UnaryOp::Tanh) {
    return tanh_of(x);
  } else if constexpr (op == UnaryOp::Sigmoid) {
    // Two forms so that exp never overflows.
    if (x >= A(0)) return A(1) / (A(1) + exp_of(-x));
    A e = exp_of(x);
    return e / (A(1) + e);
  } else if constexpr (op == UnaryOp::Relu) {
    return x < A(0) ? A(0) : x;  // NaN stays NaN (like torch)
  } else if constexpr (op == UnaryOp::Gelu) {
    return gelu(x);
  } else {
    static_assert(op == UnaryOp::Abs);
    return abs_of(x);
  }
}

/// dL/dx from g = dL/dy, the input x and the output y (each formula reads whichever is cheaper).
template <UnaryOp op, typename A>
BRIGADE_HOST_DEVICE inline A unary_grad(A g, A x, A y) {
  if constexpr (op == UnaryOp::Neg) {
    return -g;
  } else if constexpr (op == UnaryOp::Exp) {
    return g * y;
  } else if constexpr (op == UnaryOp::Log) {
    return g / x;
  } else if constexpr (op == UnaryOp::Sqrt) {
    return g * A(0.5) / y;
  } else if constexpr (op == UnaryOp::Rsqrt) {
    return A(-0.5) * g * y * y * y;  // d x^(-1/2) = -x^(-3/2) / 2 = -y^3 / 2
  } else if constexpr (op == UnaryOp::Tanh) {
    return g * (A(1) - y * y);
  } else if constexpr (op == UnaryOp::Sigmoid) {
    return g * y * (A(1) - y);
  } else if constexpr (op == UnaryOp::Relu) {
    return x > A(0) ? g : A(0);
  } else if constexpr (op == UnaryOp::Gelu) {
    return gelu_grad(g, x);
  } else {
    static_assert(op == UnaryOp::Abs);
    return x > A(0) ? g : (x < A(0) ? -g : A(0));
  }
}

/// Which of x and y unary_grad<op> reads (the others may be passed as 0).
constexpr bool grad_needs_x(UnaryOp op) {
  return op == UnaryOp::Log || op == UnaryOp::Relu || op == UnaryOp::Gelu || op == UnaryOp::Abs;
}
constexpr bool grad_needs_y(UnaryOp op) {
  return op == UnaryOp::Exp || op == UnaryOp::Sqrt || op == UnaryOp::Rsqrt || op == UnaryOp::Tanh ||
         op == UnaryOp::Sigmoid;
}

// ---- binary ops ---------------------------------------------------------------------------------------

template <BinaryOp op, typename A>
BRIGADE_HOST_DEVICE inline A binary_value(A a, A b) {
  if constexpr (op == BinaryOp::Add) {
    return a + b;
  } else if constexpr (op == BinaryOp::Sub) {
    return a - b;
  } else if constexpr (op == BinaryOp::Mul) {
    return a * b;
  } else if constexpr (op == BinaryOp::Div) {
    return a / b;
  } else if constexpr (op == BinaryOp::Maximum) {
    return (a > b || is_nan(a)) ? a : b;  // NaN propagates from either side, like torch.maximum
  } else if constexpr (op == BinaryOp::Pow) {
    return pow_of(a, b);
  } else if constexpr (op == BinaryOp::Eq) {
    return a == b ? A(1) : A(0);
  } else if constexpr (op == BinaryOp::Ne) {
    return a != b ? A(1) : A(0);
  } else if constexpr (op == BinaryOp::Lt) {
    return a < b ? A(1) : A(0);
  } else if constexpr (op == BinaryOp::Le) {
    return a <= b ? A(1) : A(0);
  } else if constexpr (op == BinaryOp::Gt) {
    return a > b ? A(1) : A(0);
  } else {
    static_assert(op == BinaryOp::Ge);
    return a >= b ? A(1) : A(0);
  }
}

// ---- the same with the op chosen at run time (CUDA kernels take the op as an argument: uniform branch) ---

template <typename A>
BRIGADE_HOST_DEVICE inline A apply_unary(UnaryOp op, A x) {
  switch (op) {
    case UnaryOp::Neg:
      return unary_value<UnaryOp::Neg>(x);
    case UnaryOp::Exp:
      return unary_value<UnaryOp::Exp>(x);
    case UnaryOp::Log:
      return unary_value<UnaryOp::Log>(x);
    case UnaryOp::Sqrt:
      return unary_value<UnaryOp::Sqrt>(x);
    case UnaryOp::Rsqrt:
      return unary_value<UnaryOp::Rsqrt>(x);
    case UnaryOp::Tanh:
      return unary_value<UnaryOp::Tanh>(x);
    case UnaryOp::Sigmoid:
      return unary_value<UnaryOp::Sigmoid>(x);
    case UnaryOp::Relu:
      return unary_value<UnaryOp::Relu>(x);
    case UnaryOp::Gelu:
      return unary_value<UnaryOp::Gelu>(x);
    case UnaryOp::Abs:
      return unary_value<UnaryOp::Abs>(x);
  }
  return x - x + A(NAN);  // not reached (every op is listed)
}

template <typename A>
BRIGADE_HOST_DEVICE inline A apply_unary_grad(UnaryOp op, A g, A x, A y) {
  switch (op) {
    case UnaryOp::Neg:
      return unary_grad<UnaryOp::Neg>(g, x, y);
    case UnaryOp::Exp:
      return unary_grad<UnaryOp::Exp>(g, x, y);
    case UnaryOp::Log:
      return unary_grad<UnaryOp::Log>(g, x, y);
    case UnaryOp::Sqrt:
      return unary_grad<UnaryOp::Sqrt>(g, x, y);
    case UnaryOp::Rsqrt:
      return unary_grad<UnaryOp::Rsqrt>(g, x, y);
    case UnaryOp::Tanh:
      return unary_grad<UnaryOp::Tanh>(g, x, y);
    case UnaryOp::Sigmoid:
      return unary_grad<UnaryOp::Sigmoid>(g, x, y);
    case UnaryOp::Relu:
      return unary_grad<UnaryOp::Relu>(g, x, y);
    case UnaryOp::Gelu:
      return unary_grad<UnaryOp::Gelu>(g, x, y);
    case UnaryOp::Abs:
      return unary_grad<UnaryOp::Abs>(g, x, y);
  }
  return g - g + A(NAN);
}

template <typename A>
BRIGADE_HOST_DEVICE inline A apply_binary(BinaryOp op, A a, A b) {
  switch (op) {
    case BinaryOp::Add:
      return binary_value<BinaryOp::Add>(a, b);
    case BinaryOp::Sub:
      return binary_value<BinaryOp::Sub>(a, b);
    case BinaryOp::Mul:
      return binary_value<BinaryOp::Mul>(a, b);
    case BinaryOp::Div:
      return binary_value<BinaryOp::Div>(a, b);
    case BinaryOp::Maximum:
      return binary_value<BinaryOp::Maximum>(a, b);
    case BinaryOp::Pow:
      return binary_value<BinaryOp::Pow>(a, b);
    case BinaryOp::Eq:
      return binary_value<BinaryOp::Eq>(a, b);
    case BinaryOp::Ne:
      return binary_value<BinaryOp::Ne>(a, b);
    case BinaryOp::Lt:
      return binary_value<BinaryOp::Lt>(a, b);
    case BinaryOp::Le:
      return binary_value<BinaryOp::Le>(a, b);
    case BinaryOp::Gt:
      return binary_value<BinaryOp::Gt>(a, b);
    case BinaryOp::Ge:
      return binary_value<BinaryOp::Ge>(a, b);
  }
  return a - a + A(NAN);
}

}  // namespace brigade::kernels::formulas
