// CPU fused causal attention, forward and backward (kernels.h: causal_attention).
//
//   q, k, v, out, dout, dq, dk, dv [B, H, T, D] (stride 1 on D, any other strides), lse [B, H, T]
//   forward   s_ij = scale q_i.k_j (j <= i),  lse_i = log sum_j exp(s_ij),  out_i = sum_j exp(s_ij - lse_i)
//   v_j backward  p_ij = exp(s_ij - lse_i) recomputed,  delta_i = dout_i.out_i,  dp_ij = dout_i.v_j,
//             ds_ij = p_ij (dp_ij - delta_i),  dq_i = scale sum_j ds_ij k_j,  dk_j = scale sum_i ds_ij q_i,
//             dv_j = sum_i p_ij dout_i
//
// Work split: one (b, h) pair is one task, done whole by one thread (OpenMP over the B * H tasks when the
// product is big enough to pay for a parallel region), so every output element is summed in a fixed order
// whatever the thread count: results do not depend on it. A task copies its q, k, v (and dout) into the
// thread's scratch in the accumulation type (float for float32/bfloat16, double for float64), k and v also
// transposed to [D, T], then walks the query rows: only one row of T scores lives at a time (no T x T
// matrix). Every inner loop is an axpy, lane-wise, that g++ vectorises:
//   scores  s[0..i] += q_i[d] * kT[d][0..i]     over d        (i + 1 wide)
//   out_i  += p_j * v_j                          over j <= i   (D wide)
// and in backward dp the same way as s (vT), dq_i += ds_j k_j, dk_j += ds_j q_i, dv_j += p_j dout_i (D wide),
// dk and dv accumulated per task in scratch. float32 exp uses vector_math.h's exp (~2 ulp), float64 libm.
// The float path is compiled twice, for baseline x86-64 and for AVX2 (picked at run time): no FMA and only
// lane-wise operations, so both give the same bits.
//
// Napkin math, per (b, h): forward 2 T(T+1)/2 D multiply-adds (scores + weighted sum), backward 5. At the
// small GPTs' shapes (T = 13..64, D = 16..32) a task is 3-70 k multiply-adds: the attention of a whole
// training step is a few % of its GEMM work, and the copies into scratch (3-4 T D values) are cheap next to
// the T^2 D loops once T >= 16.

// The 8-lane templates of vector_math.h are inlined into this file's AVX2 functions (see elementwise.cpp).
#pragma GCC diagnostic ignored "-Wpsabi"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "kernels/backend.h"
#include "kernels/cpu/cpu_access.h"
#include "kernels/cpu/vector_math.h"
#include "tensor/bfloat16.h"

namespace brigade::kernels::cpu {
namespace {

using detail::acc_t;

/// Multiply-adds of a call above which the (b, h) tasks are spread over OpenMP threads: ~1 ms of one
/// thread's work (see cpu_access.h for why small parallel regions are avoided).
constexpr int64_t kAttentionParallelWork = int64_t{1} << 21;

/// Element (b, h, t, 0) of a [B, H, T, D] tensor with stride 1 on D.
struct Heads {
  const void* base;
  int64_t sb, sh, st;
  explicit Heads(const Tensor& t) : base(t.data_ptr()), sb(t.stride(0)), sh(t.stride(1)), st(t.stride(2)) {}
  template <typename T>
  const T* row(int64_t b, int64_t h, int64_t t) const {
    return static_cast<const T*>(base) + b * sb + h * sh + t * st;
  }
  template <typename T>
  T* mutable_row(int64_t b, int64_t h, int64_t t) const {
    return const_cast<T*>(row<T>(b, h, t));
  }
};

struct Problem {
  int64_t B, H, T, D;
  double scale;
};

/// The calling thread's scratch, kept between calls (a fresh buffer per task would be a malloc each time).
template <typename A>
A* scratch(size_t count) {
  thread_local std::vector<A> buffer;
  if (buffer.size() < count) buffer.resize(count);
  return buffer.data();
}

/// rows [T, D] of (b, h) into dst [T, D] (transpose false) or [D, T] (true), as A.
template <typename T, typename A>
BRIGADE_VECTOR_INLINE void load_head(const Heads& src, int64_t b, int64_t h, int64_t rows, int64_t D, A* dst,
                                     bool transpose) {
  for (int64_t t = 0; t < rows; ++t) {
    const T* row = src.row<T>(b, h, t);
    if (transpose) {
      for (int64_t d = 0; d < D; ++d) dst[d * rows + t] = static_cast<A>(row[d]);
    } else {
      for (int64_t d = 0; d < D; ++d) dst[t * D + d] = static_cast<A>(row[d]);
    }
  }
}

template <typename T, typename A>
BRIGADE_VECTOR_INLINE void store_row(T* dst, const A* src, int64_t D) {
  for (int64_t d = 0; d < D; ++d) dst[d] = static_cast<T>(src[d]);
}

/// s[0..n) = sum_d x[d] * mT[d][0..n) (mT is [D, T] with row length T).
template <typename A>
BRIGADE_VECTOR_INLINE void row_times_transposed(const A* __restrict x, const A* __restrict mT, int64_t n,
                                                int64_t T, int64_t D, A* __restrict s) {
  for (int64_t j = 0; j < n; ++j) s[j] = A(0);
  for (int64_t d = 0; d < D; ++d) {
    const A a = x[d];
    const A* __restrict m = mT + d * T;
    for (int64_t j = 0; j < n; ++j) s[j] += a * m[j];
  }
}

/// y[0..D) += a * x[0..D)
template <typename A>
BRIGADE_VECTOR_INLINE void axpy(A a, const A* __restrict x, A* __restrict y, int64_t D) {
  for (int64_t d = 0; d < D; ++d) y[d] += a * x[d];
}

/// p[j] = exp(p[j] - shift) for j in [0, n): vector exp for float (V lanes at a time), libm for double.
template <typename A, typename V>
BRIGADE_VECTOR_INLINE void exp_shifted(A* p, A shift, int64_t n) {
  if constexpr (std::is_same_v<A, float>) {
    constexpr int64_t L = sizeof(V) / sizeof(float);
    int64_t j = 0;
    for (; j + L <= n; j += L) detail::store_v(p + j, detail::exp_v(detail::load_v<V>(p + j) - shift));
    if (j < n) {
      float lanes[L] = {};
      std::memcpy(lanes, p + j, static_cast<size_t>(n - j) * sizeof(float));
      detail::store_v(lanes, detail::exp_v(detail::load_v<V>(lanes) - shift));
      std::memcpy(p + j, lanes, static_cast<size_t>(n - j) * sizeof(float));
    }
  } else {
    for (int64_t j = 0; j < n; ++j) p[j] = std::exp(p[j] - shift);
  }
}

// ---- forward ----------------------------------------------------------------------------------------------

template <typename T, typename V>
BRIGADE_VECTOR_INLINE void forward_task(const Problem& pr, int64_t b, int64_t h, const Heads& q,
                                        const Heads& k, const Heads& v, const Heads& out, acc_t<T>* lse) {
  using A = acc_t<T>;
  const int64_t Tn = pr.T, D = pr.D;
  A* qs = scratch<A>(static_cast<size_t>(3 * Tn * D + Tn + D));
  A* kT = qs + Tn * D;
  A* vs = kT + Tn * D;
  A* s = vs + Tn * D;
  A* o = s + Tn;
  load_head<T>(q, b, h, Tn, D, qs, false);
  load_head<T>(k, b, h, Tn, D, kT, true);
  load_head<T>(v, b, h, Tn, D, vs, false);
  const A scale = static_cast<A>(pr.scale);
  for (int64_t i = 0; i < Tn; ++i) {
    const int64_t n = i + 1;
    row_times_transposed(qs + i * D, kT, n, Tn, D, s);
    A m = -std::numeric_limits<A>::infinity();
    for (int64_t j = 0; j < n; ++j) {
      s[j] *= scale;
      m = std::max(m, s[j]);
    }
    // A row whose scores are all -inf (or NaN) would give NaN here, as unfused softmax does.
    exp_shifted<A, V>(s, m, n);
    A l = A(0);
    for (int64_t j = 0; j < n; ++j) l += s[j];
    for (int64_t d = 0; d < D; ++d) o[d] = A(0);
    for (int64_t j = 0; j < n; ++j) axpy(s[j], vs + j * D, o, D);
    const A inv = A(1) / l;
    for (int64_t d = 0; d < D; ++d) o[d] *= inv;
    store_row(out.mutable_row<T>(b, h, i), o, D);
    lse[i] = m + std::log(l);
  }
}

/// One (b, h) task; `lse` points at the task's T values.
template <typename T>
using ForwardTask = void (*)(const Problem&, int64_t, int64_t, const Heads&, const Heads&, const Heads&,
                             const Heads&, acc_t<T>*);

template <typename T>
void forward_all(ForwardTask<T> task_fn, const Problem& pr, const Heads& q, const Heads& k, const Heads& v,
                 const Heads& out, acc_t<T>* lse) {
  const int64_t tasks = pr.B * pr.H;
  const bool parallel = tasks > 1 && tasks * pr.T * (pr.T + 1) * pr.D >= kAttentionParallelWork;
#pragma omp parallel for if (parallel) schedule(static)
  for (int64_t task = 0; task < tasks; ++task) {
    task_fn(pr, task / pr.H, task % pr.H, q, k, v, out, lse + task * pr.T);
  }
}

// ---- backward ---------------------------------------------------------------------------------------------

template <typename T, typename V>
BRIGADE_VECTOR_INLINE void backward_task(const Problem& pr, int64_t b, int64_t h, const Heads& dout,
                                         const Heads& q, const Heads& k, const Heads& v, const Heads& out,
                                         const acc_t<T>* lse, const Heads& dq, const Heads& dk,
                                         const Heads& dv) {
  using A = acc_t<T>;
  const int64_t Tn = pr.T, D = pr.D;
  const int64_t block = Tn * D;
  A* qs = scratch<A>(static_cast<size_t>(7 * block + 2 * Tn + D));
  A* ks = qs + block;   // k [T, D]
  A* kT = ks + block;   // k [D, T]
  A* vT = kT + block;   // v [D, T]
  A* gs = vT + block;   // dout [T, D]
  A* dks = gs + block;  // dk accumulator [T, D]
  A* dvs = dks + block;
  A* p = dvs + block;  // one row of probabilities
  A* ds = p + Tn;      // one row of ds
  A* dqi = ds + Tn;    // one row of dq
  load_head<T>(q, b, h, Tn, D, qs, false);
  load_head<T>(k, b, h, Tn, D, ks, false);
  load_head<T>(k, b, h, Tn, D, kT, true);
  load_head<T>(v, b, h, Tn, D, vT, true);
  load_head<T>(dout, b, h, Tn, D, gs, false);
  std::fill(dks, dks + 2 * block, A(0));
  const A scale = static_cast<A>(pr.scale);
  for (int64_t i = 0; i < Tn; ++i) {
    const int64_t n = i + 1;
    const A* qi = qs + i * D;
    const A* gi = gs + i * D;
    const T* oi = out.row<T>(b, h, i);
    A delta = A(0);
    for (int64_t d = 0; d < D; ++d) delta += gi[d] * static_cast<A>(oi[d]);
    row_times_transposed(qi, kT, n, Tn, D, p);
    for (int64_t j = 0; j < n; ++j) p[j] *= scale;
    exp_shifted<A, V>(p, lse[i], n);
    row_times_transposed(gi, vT, n, Tn, D, ds);  // dp
    for (int64_t j = 0; j < n; ++j) ds[j] = p[j] * (ds[j] - delta) * scale;
    for (int64_t d = 0; d < D; ++d) dqi[d] = A(0);
    for (int64_t j = 0; j < n; ++j) {
      axpy(ds[j], ks + j * D, dqi, D);
      axpy(ds[j], qi, dks + j * D, D);
      axpy(p[j], gi, dvs + j * D, D);
    }
    store_row(dq.mutable_row<T>(b, h, i), dqi, D);
  }
  for (int64_t t = 0; t < Tn; ++t) {
    store_row(dk.mutable_row<T>(b, h, t), dks + t * D, D);
    store_row(dv.mutable_row<T>(b, h, t), dvs + t * D, D);
  }
}

template <typename T>
using BackwardTask = void (*)(const Problem&, int64_t, int64_t, const Heads&, const Heads&, const Heads&,
                              const Heads&, const Heads&, const acc_t<T>*, const Heads&, const Heads&,
                              const Heads&);

template <typename T>
void backward_all(BackwardTask<T> task_fn, const Problem& pr, const Heads& dout, const Heads& q,
                  const Heads& k, const Heads& v, const Heads& out, const acc_t<T>* lse, const Heads& dq,
                  const Heads& dk, const Heads& dv) {
  const int64_t tasks = pr.B * pr.H;
  const bool parallel = tasks > 1 && 2 * tasks * pr.T * (pr.T + 1) * pr.D >= kAttentionParallelWork;
#pragma omp parallel for if (parallel) schedule(static)
  for (int64_t task = 0; task < tasks; ++task) {
    task_fn(pr, task / pr.H, task % pr.H, dout, q, k, v, out, lse + task * pr.T, dq, dk, dv);
  }
}

// ---- instantiations: baseline and AVX2 (the OpenMP loops stay outside the target-specific code) ---------

template <typename T>
__attribute__((noinline)) void forward_task_baseline(const Problem& pr, int64_t b, int64_t h, const Heads& q,
                                                     const Heads& k, const Heads& v, const Heads& out,
                                                     acc_t<T>* lse) {
  forward_task<T, detail::f32x4>(pr, b, h, q, k, v, out, lse);
}

template <typename T>
__attribute__((noinline)) void backward_task_baseline(const Problem& pr, int64_t b, int64_t h,
                                                      const Heads& dout, const Heads& q, const Heads& k,
                                                      const Heads& v, const Heads& out, const acc_t<T>* lse,
                                                      const Heads& dq, const Heads& dk, const Heads& dv) {
  backward_task<T, detail::f32x4>(pr, b, h, dout, q, k, v, out, lse, dq, dk, dv);
}

#if BRIGADE_CPU_AVX2
template <typename T>
__attribute__((target("avx2"), noinline)) void forward_task_avx2(const Problem& pr, int64_t b, int64_t h,
                                                                 const Heads& q, const Heads& k,
                                                                 const Heads& v, const Heads& out,
                                                                 acc_t<T>* lse) {
  forward_task<T, detail::f32x8>(pr, b, h, q, k, v, out, lse);
}

template <typename T>
__attribute__((target("avx2"), noinline)) void backward_task_avx2(const Problem& pr, int64_t b, int64_t h,
                                                                  const Heads& dout, const Heads& q,
                                                                  const Heads& k, const Heads& v,
                                                                  const Heads& out, const acc_t<T>* lse,
                                                                  const Heads& dq, const Heads& dk,
                                                                  const Heads& dv) {
  backward_task<T, detail::f32x8>(pr, b, h, dout, q, k, v, out, lse, dq, dk, dv);
}
#endif

template <typename T>
ForwardTask<T> pick_forward() {
#if BRIGADE_CPU_AVX2
  if (detail::cpu_has_avx2()) return &forward_task_avx2<T>;
#endif
  return &forward_task_baseline<T>;
}

template <typename T>
BackwardTask<T> pick_backward() {
#if BRIGADE_CPU_AVX2
  if (detail::cpu_has_avx2()) return &backward_task_avx2<T>;
#endif
  return &backward_task_baseline<T>;
}

Problem problem_of(const Tensor& q, double scale) {
  return Problem{q.size(0), q.size(1), q.size(2), q.size(3), scale};
}

}  // namespace

void causal_attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, double scale,
                              const Tensor& out, const Tensor& lse) {
  const Problem pr = problem_of(q, scale);
  BRIGADE_DISPATCH_FLOATING(q.dtype(), "causal_attention", [&] {
    forward_all<scalar_t>(pick_forward<scalar_t>(), pr, Heads(q), Heads(k), Heads(v), Heads(out),
                          lse.data<acc_t<scalar_t>>());
  });
}

void causal_attention_backward(const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v,
                               const Tensor& out, const Tensor& lse, double scale, const Tensor& dq,
                               const Tensor& dk, const Tensor& dv) {
  const Problem pr = problem_of(q, scale);
  BRIGADE_DISPATCH_FLOATING(q.dtype(), "causal_attention_backward", [&] {
    backward_all<scalar_t>(pick_backward<scalar_t>(), pr, Heads(dout), Heads(q), Heads(k), Heads(v),
                           Heads(out), lse.data<acc_t<scalar_t>>(), Heads(dq), Heads(dk), Heads(dv));
  });
}

}  // namespace brigade::kernels::cpu
