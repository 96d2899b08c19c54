// CPU backend: unary ops and their backward, binary ops (tensor-tensor and tensor-scalar), where.
// Operands arrive already expanded to the output's shape; any strides. Math in float (float32, bfloat16)
// or double (float64).
//
// Speed: the op is chosen once per call (a template argument, not a switch per element), and the loop
// runs over the runs of tensor/strided_loop.h: a contiguous operand, a row vector broadcast over a matrix
// (bias add) or a scalar broadcast (masked_fill's value) becomes a plain pointer loop that g++ -O3
// vectorises; other layouts take a strided loop with the same math. GELU in float uses the exp form of
// kernels/cpu/vector_math.h (vectorisable; 8 lanes where the CPU has AVX2: ElementwiseKernel::CpuAvx2, v2)
// instead of libm's tanhf; v3 (CpuAvx512) runs kernels/cpu/gelu_avx512.cpp's 16-lane FMA code instead, and
// float32 and bfloat16 exp, log, sqrt, 1/sqrt, tanh and sigmoid through kernels/cpu/unary_avx512.cpp's
// arrays (unary_avx512 below: every layout through the arrays, so every layout gives their bits).
// bfloat16 runs with unit steps are widened to float a chunk at a time (tensor/bf16_arrays.h: 16 lanes),
// computed by the same float loop (or GELU's arrays) and narrowed once: the bits of the element-by-element
// path, which also computes in float and rounds once.

// The 8-lane templates of vector_math.h are always inlined into this file's AVX2 functions, so the ABI
// g++ warns about (a 32-byte vector returned without AVX) is never used. Before the includes: the warning
// points into the header.
#pragma GCC diagnostic ignored "-Wpsabi"

#include "kernels/cpu/elementwise.h"

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <utility>

#include "kernels/backend.h"
#include "kernels/cpu/cpu_access.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/exp_rows_avx512.h"  // avx512_rows_run
#include "kernels/cpu/vector_math.h"
#include "kernels/elementwise_formulas.h"
#include "kernels/elementwise_versions.h"
#include "tensor/bf16_arrays.h"
#include "tensor/strided_loop.h"

namespace brigade::kernels::cpu {

using brigade::detail::for_each_run;
using brigade::detail::Offsets;
using detail::acc_t;
using detail::kElementwiseGrain;
using detail::kParallelGrain;

namespace {

// The formulas are kernels/elementwise_formulas.h (shared with CUDA). Float GELU keeps the vectorised code of
// vector_math.h (the same expression, a polynomial exp): scalar calls go through its one-lane entry points
// so that every layout gives the bits of the array loops.
template <UnaryOp op, typename A>
A unary_value(A x) {
  if constexpr (op == UnaryOp::Gelu && std::is_same_v<A, float>) {
    return detail::gelu_float(x);
  } else {
    return formulas::unary_value<op>(x);
  }
}

/// dL/dx from g = dL/dy, the input x and the output y.
template <UnaryOp op, typename A>
A unary_grad(A g, A x, A y) {
  if constexpr (op == UnaryOp::Gelu && std::is_same_v<A, float>) {
    return detail::gelu_grad_float(g, x);
  } else {
    return formulas::unary_grad<op>(g, x, y);
  }
}

using formulas::binary_value;

/// Calls body(std::integral_constant<UnaryOp, op>{}): the op becomes a compile-time constant.
template <typename Body>
void with_unary_op(UnaryOp op, Body&& body) {
  switch (op) {
#define BRIGADE_UNARY_CASE(name) \
  case UnaryOp::name:            \
    return body(std::integral_constant<UnaryOp, UnaryOp::name>{});
    BRIGADE_UNARY_CASE(Neg)
    BRIGADE_UNARY_CASE(Exp)
    BRIGADE_UNARY_CASE(Log)
    BRIGADE_UNARY_CASE(Sqrt)
    BRIGADE_UNARY_CASE(Rsqrt)
    BRIGADE_UNARY_CASE(Tanh)
    BRIGADE_UNARY_CASE(Sigmoid)
    BRIGADE_UNARY_CASE(Relu)
    BRIGADE_UNARY_CASE(Gelu)
    BRIGADE_UNARY_CASE(Abs)
#undef BRIGADE_UNARY_CASE
  }
}

template <typename Body>
void with_binary_op(BinaryOp op, Body&& body) {
  switch (op) {
#define BRIGADE_BINARY_CASE(name) \
  case BinaryOp::name:            \
    return body(std::integral_constant<BinaryOp, BinaryOp::name>{});
    BRIGADE_BINARY_CASE(Add)
    BRIGADE_BINARY_CASE(Sub)
    BRIGADE_BINARY_CASE(Mul)
    BRIGADE_BINARY_CASE(Div)
    BRIGADE_BINARY_CASE(Maximum)
    BRIGADE_BINARY_CASE(Pow)
    BRIGADE_BINARY_CASE(Eq)
    BRIGADE_BINARY_CASE(Ne)
    BRIGADE_BINARY_CASE(Lt)
    BRIGADE_BINARY_CASE(Le)
    BRIGADE_BINARY_CASE(Gt)
    BRIGADE_BINARY_CASE(Ge)
#undef BRIGADE_BINARY_CASE
  }
}

/// Ops whose element costs a libm call or a division chain: a thread team pays off sooner.
constexpr bool is_costly(UnaryOp op) {
  return op != UnaryOp::Neg && op != UnaryOp::Relu && op != UnaryOp::Abs;
}

template <typename T>
T* ptr(const Tensor& t) {
  return static_cast<T*>(t.data_ptr());
}

// ---- bfloat16 runs through float arrays -------------------------------------------------------------------

/// Elements a bfloat16 run is widened in: a few KiB of float buffers on the stack, in L1 with the run.
constexpr int64_t kBf16Chunk = 256;

/// o[k] = narrow(array_f over the widened inputs)[k] for k in [0, n): array_f(float* out, const float*
/// in_0, ..., int64_t m) fills out[0, m) from the inputs' float copies, chunk by chunk.
template <typename ArrayF, typename... In>
void bf16_run(bfloat16* o, int64_t n, const ArrayF& array_f, const In*... in) {
  float wide[sizeof...(In)][kBf16Chunk];
  float result[kBf16Chunk];
  for (int64_t start = 0; start < n; start += kBf16Chunk) {
    const int64_t m = std::min(kBf16Chunk, n - start);
    int input = 0;
    (float_from_bf16_array(wide[input++], in + start, m), ...);
    [&]<size_t... I>(std::index_sequence<I...>) {
      array_f(result, static_cast<const float*>(wide[I])..., m);
    }
    (std::index_sequence_for<In...>{});
    bf16_from_float_array(o + start, result, m);
  }
}

/// The float-array forms of an element function f of 1, 2, 3 inputs: out[k] = f(a[k], ...).
template <typename F>
auto loop_arrays1(F f) {
  return [f](float* out, const float* a, int64_t m) {
    for (int64_t k = 0; k < m; ++k) out[k] = f(a[k]);
  };
}
template <typename F>
auto loop_arrays2(F f) {
  return [f](float* out, const float* a, const float* b, int64_t m) {
    for (int64_t k = 0; k < m; ++k) out[k] = f(a[k], b[k]);
  };
}
template <typename F>
auto loop_arrays3(F f) {
  return [f](float* out, const float* a, const float* b, const float* c, int64_t m) {
    for (int64_t k = 0; k < m; ++k) out[k] = f(a[k], b[k], c[k]);
  };
}

// ---- loops: out[i] = f(inputs[i]...) over runs; unit steps take a loop g++ vectorises -------------------

/// array_f: the float-array form used for bfloat16 runs with unit steps (loop_arrays1(f) unless a
/// vectorised one, GELU's, gives the same bits).
template <typename T, typename F, typename ArrayF>
void map1(const Tensor& x, const Tensor& out, int64_t grain, F f, ArrayF array_f) {
  using A = acc_t<T>;
  const T* xp = ptr<const T>(x);
  T* op = ptr<T>(out);
  for_each_run<2>(out.shape(), {&out.strides(), &x.strides()}, grain,
                  [=](int64_t, int64_t n, const Offsets<2>& off, const Offsets<2>& st) {
                    T* o = op + off[0];
                    const T* a = xp + off[1];
                    if constexpr (std::is_same_v<T, bfloat16>) {
                      if (st[0] == 1 && st[1] == 1) return bf16_run(o, n, array_f, a);
                    }
                    if (st[0] == 1 && st[1] == 1) {
                      for (int64_t k = 0; k < n; ++k) o[k] = static_cast<T>(f(static_cast<A>(a[k])));
                    } else {
                      for (int64_t k = 0; k < n; ++k) {
                        o[k * st[0]] = static_cast<T>(f(static_cast<A>(a[k * st[1]])));
                      }
                    }
                  });
}

template <typename T, typename F>
void map1(const Tensor& x, const Tensor& out, int64_t grain, F f) {
  map1<T>(x, out, grain, f, loop_arrays1(f));
}

template <typename T, typename F>
void map2(const Tensor& a, const Tensor& b, const Tensor& out, int64_t grain, F f) {
  using A = acc_t<T>;
  const T* ap = ptr<const T>(a);
  const T* bp = ptr<const T>(b);
  T* op = ptr<T>(out);
  for_each_run<3>(out.shape(), {&out.strides(), &a.strides(), &b.strides()}, grain,
                  [=](int64_t, int64_t n, const Offsets<3>& off, const Offsets<3>& st) {
                    T* o = op + off[0];
                    const T* x = ap + off[1];
                    const T* y = bp + off[2];
                    if constexpr (std::is_same_v<T, bfloat16>) {
                      if (st[0] == 1 && st[1] == 1 && st[2] == 1)
                        return bf16_run(o, n, loop_arrays2(f), x, y);
                    }
                    if (st[0] == 1 && st[1] == 1 && st[2] == 1) {  // contiguous, or a row broadcast's rows
                      for (int64_t k = 0; k < n; ++k) {
                        o[k] = static_cast<T>(f(static_cast<A>(x[k]), static_cast<A>(y[k])));
                      }
                    } else if (st[0] == 1 && st[1] == 1 && st[2] == 0) {  // b is one value along the run
                      const A yv = static_cast<A>(y[0]);
                      for (int64_t k = 0; k < n; ++k) o[k] = static_cast<T>(f(static_cast<A>(x[k]), yv));
                    } else if (st[0] == 1 && st[1] == 0 && st[2] == 1) {  // a is one value along the run
                      const A xv = static_cast<A>(x[0]);
                      for (int64_t k = 0; k < n; ++k) o[k] = static_cast<T>(f(xv, static_cast<A>(y[k])));
                    } else {
                      for (int64_t k = 0; k < n; ++k) {
                        o[k * st[0]] =
                            static_cast<T>(f(static_cast<A>(x[k * st[1]]), static_cast<A>(y[k * st[2]])));
                      }
                    }
                  });
}

template <typename T, typename F, typename ArrayF>
void map3(const Tensor& a, const Tensor& b, const Tensor& c, const Tensor& out, int64_t grain, F f,
          ArrayF array_f) {
  using A = acc_t<T>;
  const T* ap = ptr<const T>(a);
  const T* bp = ptr<const T>(b);
  const T* cp = ptr<const T>(c);
  T* op = ptr<T>(out);
  for_each_run<4>(
      out.shape(), {&out.strides(), &a.strides(), &b.strides(), &c.strides()}, grain,
      [=](int64_t, int64_t n, const Offsets<4>& off, const Offsets<4>& st) {
        T* o = op + off[0];
        const T* x = ap + off[1];
        const T* y = bp + off[2];
        const T* z = cp + off[3];
        if constexpr (std::is_same_v<T, bfloat16>) {
          if (st[0] == 1 && st[1] == 1 && st[2] == 1 && st[3] == 1) return bf16_run(o, n, array_f, x, y, z);
        }
        if (st[0] == 1 && st[1] == 1 && st[2] == 1 && st[3] == 1) {
          for (int64_t k = 0; k < n; ++k) {
            o[k] = static_cast<T>(f(static_cast<A>(x[k]), static_cast<A>(y[k]), static_cast<A>(z[k])));
          }
        } else {
          for (int64_t k = 0; k < n; ++k) {
            o[k * st[0]] = static_cast<T>(
                f(static_cast<A>(x[k * st[1]]), static_cast<A>(y[k * st[2]]), static_cast<A>(z[k * st[3]])));
          }
        }
      });
}

}  // namespace

// GELU over contiguous float arrays: 16 lanes with AVX-512, 8 with AVX2, else 4 (vector_math.h: the same
// bits on each; fp-contract=off keeps g++ from fusing multiplies and adds on AVX-512, which has FMA).
#if BRIGADE_CPU_AVX2
namespace {
__attribute__((target("avx512f"), optimize("fp-contract=off"))) void gelu_array_avx512(float* out,
                                                                                       const float* a,
                                                                                       int64_t n) {
  detail::gelu_array<detail::f32x16>(out, a, n);
}

__attribute__((target("avx512f"), optimize("fp-contract=off"))) void gelu_grad_array_avx512(float* out,
                                                                                            const float* g,
                                                                                            const float* a,
                                                                                            int64_t n) {
  detail::gelu_grad_array<detail::f32x16>(out, g, a, n);
}

__attribute__((target("avx2"))) void gelu_array_avx2(float* out, const float* a, int64_t n) {
  detail::gelu_array<detail::f32x8>(out, a, n);
}

__attribute__((target("avx2"))) void gelu_grad_array_avx2(float* out, const float* g, const float* a,
                                                          int64_t n) {
  detail::gelu_grad_array<detail::f32x8>(out, g, a, n);
}
}  // namespace
#endif

GeluCode gelu_code(ElementwiseKernel kernel) {
#if BRIGADE_CPU_AVX2
  if (kernel == ElementwiseKernel::CpuAvx512 && detail::avx512_rows_run()) return GeluCode::Avx512Fma;
  if ((kernel == ElementwiseKernel::CpuAvx2 || kernel == ElementwiseKernel::CpuAvx512) &&
      detail::cpu_has_avx2()) {
    return GeluCode::Wide;
  }
#endif
  (void)kernel;
  return GeluCode::Lanes4;
}

void gelu_array(float* out, const float* a, int64_t n, GeluCode code) {
#if BRIGADE_CPU_AVX2
  if (code == GeluCode::Avx512Fma) return detail::gelu_array_avx512_fma(out, a, n);
  if (code == GeluCode::Wide && cpu_features().avx512f) return gelu_array_avx512(out, a, n);
  if (code == GeluCode::Wide) return gelu_array_avx2(out, a, n);
#endif
  (void)code;
  detail::gelu_array<detail::f32x4>(out, a, n);
}

void gelu_grad_array(float* out, const float* g, const float* a, int64_t n, GeluCode code) {
#if BRIGADE_CPU_AVX2
  if (code == GeluCode::Avx512Fma) return detail::gelu_grad_array_avx512_fma(out, g, a, n);
  if (code == GeluCode::Wide && cpu_features().avx512f) return gelu_grad_array_avx512(out, g, a, n);
  if (code == GeluCode::Wide) return gelu_grad_array_avx2(out, g, a, n);
#endif
  (void)code;
  detail::gelu_grad_array<detail::f32x4>(out, g, a, n);
}

namespace {

/// Elements of a strided run that GeluCode::Avx512Fma (v3: GELU and the unary arrays) gathers at a time.
constexpr int64_t kGatherSpan = 256;

/// o[k * so] = array_f's result for a[k * sa], k < n: the run gathered into a float buffer a span at a time,
/// array_f(out, in, m) applied, the results scattered back (rounded to T), so that a strided run gets the
/// bits of the contiguous arrays.
template <typename T, typename ArrayF>
void gather_through_array(T* o, int64_t so, const T* a, int64_t sa, int64_t n, const ArrayF& array_f) {
  float in[kGatherSpan], res[kGatherSpan];
  for (int64_t k0 = 0; k0 < n; k0 += kGatherSpan) {
    const int64_t m = std::min(kGatherSpan, n - k0);
    for (int64_t k = 0; k < m; ++k) in[k] = static_cast<float>(a[(k0 + k) * sa]);
    array_f(res, in, m);
    for (int64_t k = 0; k < m; ++k) o[(k0 + k) * so] = static_cast<T>(res[k]);
  }
}

/// o[k * so] = gelu(a[k * sa]) for k < n, with the bits of gelu_array(code).
void gelu_strided(float* o, int64_t so, const float* a, int64_t sa, int64_t n, GeluCode code) {
  if (code != GeluCode::Avx512Fma) {  // gelu_float: the 4-lane code on one lane, the bits of the arrays
    for (int64_t k = 0; k < n; ++k) o[k * so] = detail::gelu_float(a[k * sa]);
    return;
  }
  gather_through_array(o, so, a, sa, n,
                       [code](float* out, const float* in, int64_t m) { gelu_array(out, in, m, code); });
}

/// o[k * so] = g[k * sg] * gelu'(a[k * sa]) for k < n, as gelu_strided.
void gelu_grad_strided(float* o, int64_t so, const float* g, int64_t sg, const float* a, int64_t sa,
                       int64_t n, GeluCode code) {
  if (code != GeluCode::Avx512Fma) {
    for (int64_t k = 0; k < n; ++k) o[k * so] = detail::gelu_grad_float(g[k * sg], a[k * sa]);
    return;
  }
  float gin[kGatherSpan], ain[kGatherSpan], res[kGatherSpan];
  for (int64_t k0 = 0; k0 < n; k0 += kGatherSpan) {
    const int64_t m = std::min(kGatherSpan, n - k0);
    for (int64_t k = 0; k < m; ++k) gin[k] = g[(k0 + k) * sg], ain[k] = a[(k0 + k) * sa];
    gelu_grad_array(res, gin, ain, m, code);
    for (int64_t k = 0; k < m; ++k) o[(k0 + k) * so] = res[k];
  }
}

// GELU in float32: contiguous runs through gelu_array; strided ones through gelu_strided, so every layout
// gives the same bits.
void gelu_float32(const Tensor& x, const Tensor& out, GeluCode code) {
  const float* xp = ptr<const float>(x);
  float* op = ptr<float>(out);
  for_each_run<2>(out.shape(), {&out.strides(), &x.strides()}, kParallelGrain,
                  [=](int64_t, int64_t n, const Offsets<2>& off, const Offsets<2>& st) {
                    float* o = op + off[0];
                    const float* a = xp + off[1];
                    if (st[0] == 1 && st[1] == 1) {
                      gelu_array(o, a, n, code);
                    } else {
                      gelu_strided(o, st[0], a, st[1], n, code);
                    }
                  });
}

void gelu_backward_float32(const Tensor& grad_y, const Tensor& x, const Tensor& out, GeluCode code) {
  const float* gp = ptr<const float>(grad_y);
  const float* xp = ptr<const float>(x);
  float* op = ptr<float>(out);
  for_each_run<3>(out.shape(), {&out.strides(), &grad_y.strides(), &x.strides()}, kParallelGrain,
                  [=](int64_t, int64_t n, const Offsets<3>& off, const Offsets<3>& st) {
                    float* o = op + off[0];
                    const float* g = gp + off[1];
                    const float* a = xp + off[2];
                    if (st[0] == 1 && st[1] == 1 && st[2] == 1) {
                      gelu_grad_array(o, g, a, n, code);
                    } else {
                      gelu_grad_strided(o, st[0], g, st[1], a, st[2], n, code);
                    }
                  });
}

#if BRIGADE_CPU_X86
/// out = op(x) through v3's float arrays (unary_array_avx512) for every layout, so that every layout gives
/// their bits: contiguous float runs directly, bfloat16 ones widened a chunk at a time (bf16_run), strided
/// runs gathered into a buffer and scattered back.
template <typename T>
void unary_avx512(UnaryOp op, const Tensor& x, const Tensor& out) {
  const T* xp = ptr<const T>(x);
  T* op_out = ptr<T>(out);
  auto array = [op](float* o, const float* a, int64_t m) { detail::unary_array_avx512(op, o, a, m); };
  for_each_run<2>(out.shape(), {&out.strides(), &x.strides()}, kParallelGrain,
                  [=](int64_t, int64_t n, const Offsets<2>& off, const Offsets<2>& st) {
                    T* o = op_out + off[0];
                    const T* a = xp + off[1];
                    if (st[0] == 1 && st[1] == 1) {
                      if constexpr (std::is_same_v<T, float>) return array(o, a, n);
                      if constexpr (std::is_same_v<T, bfloat16>) return bf16_run(o, n, array, a);
                    }
                    gather_through_array(o, st[0], a, st[1], n, array);
                  });
}
#endif

template <typename T>
void unary_impl(UnaryOp op, const Tensor& x, const Tensor& out, GeluCode code) {
  using A = acc_t<T>;
  if constexpr (std::is_same_v<T, float>) {
    if (op == UnaryOp::Gelu) return gelu_float32(x, out, code);
  }
#if BRIGADE_CPU_X86
  if constexpr (!std::is_same_v<T, double>) {  // float32 and bfloat16 (computed in float)
    if (code == GeluCode::Avx512Fma && detail::has_unary_array_avx512(op)) return unary_avx512<T>(op, x, out);
  }
#endif
  const int64_t grain = is_costly(op) ? kParallelGrain : kElementwiseGrain;
  with_unary_op(op, [&](auto k) {
    constexpr UnaryOp kOp = decltype(k)::value;
    const auto f = [](A v) { return unary_value<kOp, A>(v); };
    if constexpr (kOp == UnaryOp::Gelu) {  // bfloat16 runs: gelu_array's lanes, the bits of gelu_float
      map1<T>(x, out, grain, f, [code](float* o, const float* a, int64_t m) { gelu_array(o, a, m, code); });
    } else {
      map1<T>(x, out, grain, f);
    }
  });
}

template <typename T>
void unary_backward_impl(UnaryOp op, const Tensor& grad_y, const Tensor& x, const Tensor& y,
                         const Tensor& out, GeluCode code) {
  using A = acc_t<T>;
  if constexpr (std::is_same_v<T, float>) {
    if (op == UnaryOp::Gelu) return gelu_backward_float32(grad_y, x, out, code);
  }
  const int64_t grain = is_costly(op) ? kParallelGrain : kElementwiseGrain;
  with_unary_op(op, [&](auto k) {
    constexpr UnaryOp kOp = decltype(k)::value;
    const auto f = [](A g, A xv, A yv) { return unary_grad<kOp, A>(g, xv, yv); };
    if constexpr (kOp == UnaryOp::Gelu) {  // gelu_grad_float reads g and x only
      map3<T>(grad_y, x, y, out, grain, f,
              [code](float* o, const float* g, const float* a, const float*, int64_t m) {
                gelu_grad_array(o, g, a, m, code);
              });
    } else {
      map3<T>(grad_y, x, y, out, grain, f, loop_arrays3(f));
    }
  });
}

template <typename T>
void binary_impl(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out) {
  using A = acc_t<T>;
  const int64_t grain = op == BinaryOp::Pow ? kParallelGrain : kElementwiseGrain;
  with_binary_op(op, [&](auto k) {
    map2<T>(a, b, out, grain, [](A x, A y) { return binary_value<decltype(k)::value, A>(x, y); });
  });
}

template <typename T>
void binary_scalar_impl(BinaryOp op, const Tensor& a, double scalar, bool scalar_first, const Tensor& out) {
  using A = acc_t<T>;
  const A s = static_cast<A>(scalar);
  const int64_t grain = op == BinaryOp::Pow ? kParallelGrain : kElementwiseGrain;
  with_binary_op(op, [&](auto k) {
    constexpr BinaryOp kOp = decltype(k)::value;
    if (scalar_first) {
      map1<T>(a, out, grain, [s](A v) { return binary_value<kOp, A>(s, v); });
    } else {
      map1<T>(a, out, grain, [s](A v) { return binary_value<kOp, A>(v, s); });
    }
  });
}

/// Non-zero is true (NaN too, as `!= 0` says).
template <typename C>
bool is_true(C c) {
  if constexpr (std::is_same_v<C, bfloat16>) {
    return static_cast<float>(c) != 0.0f;
  } else {
    return c != C(0);
  }
}

/// masked_fill's contiguous run: o = c ? value : y. Both sides are read before the choice: a select of
/// two loaded values vectorizes (compare, blend), where `c ? value : y[k]` reads one side only and stays
/// a branch per element (~10x slower on a causal mask). A 16-lane twin of this loop (target avx512f) was
/// 1.1-1.4x faster in L2 but 0.85x at GPT-2's 48 MiB scores on a Zen 4 core, so there is none.
template <typename C, typename T>
inline void fill_where(T* o, const C* c, T value, const T* y, int64_t n) {
  for (int64_t k = 0; k < n; ++k) {
    const T kept = y[k];
    o[k] = is_true(c[k]) ? value : kept;
  }
}

template <typename C, typename T>
void where_impl(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out) {
  const C* cp = ptr<const C>(cond);
  const T* ap = ptr<const T>(a);
  const T* bp = ptr<const T>(b);
  T* op = ptr<T>(out);
  for_each_run<4>(out.shape(), {&out.strides(), &cond.strides(), &a.strides(), &b.strides()},
                  kElementwiseGrain, [=](int64_t, int64_t n, const Offsets<4>& off, const Offsets<4>& st) {
                    T* o = op + off[0];
                    const C* c = cp + off[1];
                    const T* x = ap + off[2];
                    const T* y = bp + off[3];
                    if (st[0] == 1 && st[1] == 1 && st[2] == 0 && st[3] == 1) {  // masked_fill
                      fill_where(o, c, x[0], y, n);
                    } else if (st[0] == 1 && st[1] == 1 && st[2] == 1 && st[3] == 1) {
                      for (int64_t k = 0; k < n; ++k) {  // both read before the choice, as fill_where
                        const T when_true = x[k], when_false = y[k];
                        o[k] = is_true(c[k]) ? when_true : when_false;
                      }
                    } else {
                      for (int64_t k = 0; k < n; ++k) {
                        o[k * st[0]] = is_true(c[k * st[1]]) ? x[k * st[2]] : y[k * st[3]];
                      }
                    }
                  });
}

}  // namespace

void unary_with(ElementwiseKernel kernel, UnaryOp op, const Tensor& x, const Tensor& out) {
  const GeluCode code = gelu_code(kernel);
  BRIGADE_DISPATCH_FLOATING(x.dtype(), unary_op_name(op), [&] { unary_impl<scalar_t>(op, x, out, code); });
}

void unary_backward_with(ElementwiseKernel kernel, UnaryOp op, const Tensor& grad_y, const Tensor& x,
                         const Tensor& y, const Tensor& out) {
  const GeluCode code = gelu_code(kernel);
  BRIGADE_DISPATCH_FLOATING(x.dtype(), unary_op_name(op),
                            [&] { unary_backward_impl<scalar_t>(op, grad_y, x, y, out, code); });
}

// ---- the backend entry points (kernels/backend.h): the default version (binary ops: one version) --------

void unary(UnaryOp op, const Tensor& x, const Tensor& out) {
  cpu::unary_with(default_elementwise_kernel(DeviceKind::CPU), op, x, out);
}

void unary_backward(UnaryOp op, const Tensor& grad_y, const Tensor& x, const Tensor& y, const Tensor& out) {
  cpu::unary_backward_with(default_elementwise_kernel(DeviceKind::CPU), op, grad_y, x, y, out);
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
