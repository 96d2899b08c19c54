// CPU fused causal attention, forward and backward (kernels.h: causal_attention).
//
//   q, k, v, out, dout, dq, dk, dv [B, H, T, D] (stride 1 on D, any other strides), lse [B, H, T]
//   forward   s_ij = scale q_i.k_j (j <= i),  lse_i = log sum_j exp(s_ij),
//             out_i = sum_j exp(s_ij - lse_i) v_j
//   backward  p_ij = exp(s_ij - lse_i) recomputed,  delta_i = dout_i.out_i,  dp_ij = dout_i.v_j,
//             ds_ij = p_ij (dp_ij - delta_i),  dq_i = scale sum_j ds_ij k_j,  dk_j = scale sum_i ds_ij q_i,
//             dv_j = sum_i p_ij dout_i
//   dropout on the weights (kernels/attention_dropout.h), m_ij = 1 / (1 - p) kept, 0 dropped:
//             out_i = sum_j m_ij p_ij v_j (lse stays the undropped one),  ds_ij = p_ij (m_ij dp_ij -
//             delta_i), dv_j = sum_i m_ij p_ij dout_i (delta_i = dout_i.out_i still: sum_j p_ij m_ij dp_ij);
//             the mask is drawn again in the backward, never stored
//
// Work split: one (b, h) pair is one task, done whole by one thread (OpenMP over the B * H tasks when the
// product is big enough to pay for a parallel region), so every output element is summed in a fixed order
// whatever the thread count: results do not depend on it. No T x T matrix is made: a task holds the scores
// of a few query rows at a time.
//
// float32 and bfloat16 (the fast path): a task copies its q, k, v, dout into the thread's scratch as float,
// zero-padded to whole vectors (D to Dp, a multiple of the lane count L; k and v also transposed to
// [Dp, Tp]), then walks the queries in blocks of kRows = 4 rows. Every product is a small register-blocked
// tile, 4 rows x L columns of accumulators, each step one vector load and 4 broadcast multiply-adds:
//   forward   S = Q_blk K^T (over d), masked to -inf above the diagonal, row max, P = exp(S - max), row sums
//             l; O_blk = P V (over j) / l
//   backward  S again, P = exp(S - lse), dP = dO_blk V^T, dS = P (dP - delta) scale; dQ_blk = dS K,
//             dK += dS^T Q_blk, dV += P^T dO_blk (each over the block's rows, Q_blk/dO_blk held in registers)
// Vector code is written on GCC vector types (vector_math.h, including its exp, ~2 ulp) and compiled twice:
// version 1 for baseline x86-64 (4 lanes) and version 2 for AVX2 (8 lanes), AttentionKernel::CpuBaseline
// and CpuAvx2 of kernels/attention_versions.h, whose default picks v2 where the CPU has AVX2. No FMA,
// lane-wise operations only, and every element summed in the same order (d ascending, j ascending, rows
// ascending), so both give the same bits; row sums are scalar, j ascending.
// float64 (gradcheck's dtype, accuracy over speed): the same formulas row by row with libm's exp.
// Version 3 (AVX-512 with FMA, float32 and bfloat16: AttentionKernel::CpuAvx512) is in attention_avx512.cpp;
// it shares this file's operand views and padded copies (attention_tasks.h) and is picked in pick_forward.
//
// Napkin math, per (b, h): forward 2 T(T+1)/2 D multiply-adds (scores + weighted sum), backward 5; the tiles
// also compute the masked half of each diagonal block (~L/2 columns per row). At the small GPTs' shapes
// (T = 13..64, D = 16..32) a task is 3-70 k multiply-adds: the attention of a training step is ~5% of its
// GEMM work, so the tiles aim at the GEMM's rate per multiply-add rather than at the last few percent.

// The 8-lane templates of vector_math.h are inlined into this file's AVX2 functions (see elementwise.cpp).
#pragma GCC diagnostic ignored "-Wpsabi"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "kernels/attention_versions.h"
#include "kernels/backend.h"
#include "kernels/cpu/attention_tasks.h"
#include "kernels/cpu/cpu_access.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/vector_math.h"
#include "tensor/bfloat16.h"

namespace brigade::kernels::cpu {
namespace {

using attention::acc_t;
using attention::ForwardScratch;
using attention::Heads;
using attention::load_padded;
using attention::Problem;
using attention::round_up;
using attention::scratch;
using attention::TileSizes;
template <typename T>
using ForwardTask = attention::ForwardTask<T>;
template <typename T>
using BackwardTask = attention::BackwardTask<T>;

/// Multiply-adds of a call above which the (b, h) tasks are spread over OpenMP threads: ~1 ms of one
/// thread's work (see cpu_access.h for why small parallel regions are avoided).
constexpr int64_t kAttentionParallelWork = int64_t{1} << 21;

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

// ---- float64: row by row ----------------------------------------------------------------------------------

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
    A inv = A(1) / l;
    if (pr.dropout > 0.0) {  // the weights' dropout: l stays the undropped sum
      attention::drop_row_weights(pr, b, h, i, s, n);
      inv *= attention::kept_weight_scale<A>(pr);
    }
    for (int64_t d = 0; d < D; ++d) o[d] = A(0);
    for (int64_t j = 0; j < n; ++j) axpy(s[j], vs + j * D, o, D);
    for (int64_t d = 0; d < D; ++d) o[d] *= inv;
    store_row(out.mutable_row<T>(b, h, i), o, D);
    lse[i] = m + std::log(l);
  }
}

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
    if (pr.dropout > 0.0) {
      attention::drop_row_backward(pr, b, h, i, p, ds, n, delta, scale);
    } else {
      for (int64_t j = 0; j < n; ++j) ds[j] = p[j] * (ds[j] - delta) * scale;
    }
    for (int64_t d = 0; d < D; ++d) dqi[d] = A(0);
    for (int64_t j = 0; j < n; ++j) {
      axpy(ds[j], ks + j * D, dqi, D);
      axpy(ds[j], qi, dks + j * D, D);
      axpy(p[j], gi, dvs + j * D, D);
    }
    store_row(dq.mutable_row<T>(b, h, i), dqi, D);
  }
  if (pr.dropout > 0.0) {  // dv summed the kept p_ij dout_i: each times 1 / (1 - p)
    const A kept = attention::kept_weight_scale<A>(pr);
    for (int64_t e = 0; e < block; ++e) dvs[e] *= kept;
  }
  for (int64_t t = 0; t < Tn; ++t) {
    store_row(dk.mutable_row<T>(b, h, t), dks + t * D, D);
    store_row(dv.mutable_row<T>(b, h, t), dvs + t * D, D);
  }
}

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

// ---- float32 / bfloat16: register tiles
// ----------------------------------------------------------------------

constexpr int64_t kRows = 4;  // query rows per block: 4 accumulators + 1 load + 1 broadcast of 16 registers

/// The padded sizes of one task for L lanes.
inline TileSizes tile_sizes(int64_t T, int64_t D, int64_t lanes) {
  return TileSizes(T, D, lanes, kRows);
}

/// s[r][c] = scale * sum_d x[r][d] yt[d][c] for r < kRows, c < cols (a multiple of L): x [kRows, >= depth]
/// with row stride ldx, yt [depth, >= cols] with row stride ldy, s [kRows, >= cols] with row stride lds.
template <typename V>
BRIGADE_VECTOR_INLINE void tile_x_yt(const float* x, int64_t ldx, const float* yt, int64_t ldy, int64_t depth,
                                     int64_t cols, float scale, float* s, int64_t lds) {
  constexpr int64_t L = sizeof(V) / sizeof(float);
  for (int64_t c = 0; c < cols; c += L) {
    V acc[kRows] = {};
    for (int64_t d = 0; d < depth; ++d) {
      const V y = detail::load_v<V>(yt + d * ldy + c);
      for (int64_t r = 0; r < kRows; ++r) acc[r] += x[r * ldx + d] * y;
    }
    for (int64_t r = 0; r < kRows; ++r) detail::store_v(s + r * lds + c, acc[r] * scale);
  }
}

/// out[r][c] = sum_{j < n} p[r][j] y[j][c] for r < kRows, c < Dp: p [kRows, >= n] (row stride ldp), y [n,
/// Dp].
template <typename V>
BRIGADE_VECTOR_INLINE void tile_p_y(const float* p, int64_t ldp, int64_t n, const float* y, int64_t Dp,
                                    float* out) {
  constexpr int64_t L = sizeof(V) / sizeof(float);
  for (int64_t c = 0; c < Dp; c += L) {
    V acc[kRows] = {};
    for (int64_t j = 0; j < n; ++j) {
      const V yv = detail::load_v<V>(y + j * Dp + c);
      for (int64_t r = 0; r < kRows; ++r) acc[r] += p[r * ldp + j] * yv;
    }
    for (int64_t r = 0; r < kRows; ++r) detail::store_v(out + r * Dp + c, acc[r]);
  }
}

/// acc[j][c] += sum_r p[r][j] x[r][c] for j < n, c < Dp: p [kRows, >= n] (row stride ldp), x [kRows, Dp],
/// acc [n, Dp]. The rows of x stay in registers while j runs.
template <typename V>
BRIGADE_VECTOR_INLINE void tile_pt_x(const float* p, int64_t ldp, int64_t n, const float* x, int64_t Dp,
                                     float* acc) {
  constexpr int64_t L = sizeof(V) / sizeof(float);
  for (int64_t c = 0; c < Dp; c += L) {
    V xr[kRows];
    for (int64_t r = 0; r < kRows; ++r) xr[r] = detail::load_v<V>(x + r * Dp + c);
    for (int64_t j = 0; j < n; ++j) {
      V a = detail::load_v<V>(acc + j * Dp + c);
      for (int64_t r = 0; r < kRows; ++r) a += p[r * ldp + j] * xr[r];
      detail::store_v(acc + j * Dp + c, a);
    }
  }
}

/// Row r of a block starting at query i0 sees keys j <= i0 + r: s[r][j] = -inf beyond, up to `cols`.
BRIGADE_VECTOR_INLINE void mask_block(float* s, int64_t lds, int64_t i0, int64_t cols) {
  for (int64_t r = 0; r < kRows; ++r) {
    for (int64_t j = i0 + r + 1; j < cols; ++j) s[r * lds + j] = -std::numeric_limits<float>::infinity();
  }
}

/// p[j] = exp(p[j] - shift) for j < cols (a multiple of L); -inf gives 0.
template <typename V>
BRIGADE_VECTOR_INLINE void exp_row(float* p, float shift, int64_t cols) {
  constexpr int64_t L = sizeof(V) / sizeof(float);
  for (int64_t j = 0; j < cols; j += L)
    detail::store_v(p + j, detail::exp_v(detail::load_v<V>(p + j) - shift));
}

template <typename T, typename V>
BRIGADE_VECTOR_INLINE void forward_tiles(const Problem& pr, int64_t b, int64_t h, const Heads& q,
                                         const Heads& k, const Heads& v, const Heads& out, float* lse) {
  constexpr int64_t L = sizeof(V) / sizeof(float);
  const TileSizes z = tile_sizes(pr.T, pr.D, L);
  const ForwardScratch w = attention::load_forward<T>(q, k, v, b, h, z, kRows);
  float *qs = w.qs, *kT = w.kT, *vs = w.vs, *s = w.s, *o = w.o;
  const auto scale = static_cast<float>(pr.scale);
  for (int64_t i0 = 0; i0 < z.T; i0 += kRows) {
    const int64_t keys = std::min(i0 + kRows, z.T);  // keys any row of the block sees
    const int64_t cols = round_up(keys, L);
    tile_x_yt<V>(qs + i0 * z.Dp, z.Dp, kT, z.Tp, z.D, cols, scale, s, z.Tp);
    mask_block(s, z.Tp, i0, cols);
    float inv[kRows];
    for (int64_t r = 0; r < kRows; ++r) {
      float* row = s + r * z.Tp;
      float m = row[0];
      for (int64_t j = 1; j < cols; ++j) m = row[j] > m ? row[j] : m;
      exp_row<V>(row, m, cols);
      float l = 0.0f;
      for (int64_t j = 0; j < cols; ++j) l += row[j];
      inv[r] = 1.0f / l;
      if (i0 + r < z.T) lse[i0 + r] = m + std::log(l);
      if (pr.dropout > 0.0 && i0 + r < z.T) {  // the weights' dropout: l stays the undropped sum
        attention::drop_row_weights(pr, b, h, i0 + r, row, i0 + r + 1);
        inv[r] *= attention::kept_weight_scale<float>(pr);
      }
    }
    tile_p_y<V>(s, z.Tp, keys, vs, z.Dp, o);
    for (int64_t r = 0; r < kRows && i0 + r < z.T; ++r) {
      T* dst = out.mutable_row<T>(b, h, i0 + r);
      for (int64_t d = 0; d < z.D; ++d) dst[d] = static_cast<T>(o[r * z.Dp + d] * inv[r]);
    }
  }
}

template <typename T, typename V>
BRIGADE_VECTOR_INLINE void backward_tiles(const Problem& pr, int64_t b, int64_t h, const Heads& dout,
                                          const Heads& q, const Heads& k, const Heads& v, const Heads& out,
                                          const float* lse, const Heads& dq, const Heads& dk,
                                          const Heads& dv) {
  constexpr int64_t L = sizeof(V) / sizeof(float);
  const TileSizes z = tile_sizes(pr.T, pr.D, L);
  const int64_t rows_block = z.Tr * z.Dp, t_block = z.Dp * z.Tp;
  float* qs =
      scratch<float>(static_cast<size_t>(2 * rows_block + 5 * t_block + 2 * kRows * z.Tp + kRows * z.Dp));
  float* gs = qs + rows_block;     // dout [Tr, Dp]
  float* ks = gs + rows_block;     // k [Tp, Dp]
  float* kT = ks + t_block;        // k [Dp, Tp]
  float* vT = kT + t_block;        // v [Dp, Tp]
  float* dks = vT + t_block;       // dk accumulator [Tp, Dp]
  float* dvs = dks + t_block;      // dv accumulator [Tp, Dp]
  float* p = dvs + t_block;        // [kRows, Tp] probabilities
  float* ds = p + kRows * z.Tp;    // [kRows, Tp] dp, then ds
  float* dqb = ds + kRows * z.Tp;  // [kRows, Dp]
  load_padded<T>(q, b, h, z, z.Tr, qs, false);
  load_padded<T>(dout, b, h, z, z.Tr, gs, false);
  load_padded<T>(k, b, h, z, z.Tp, ks, false);
  load_padded<T>(k, b, h, z, 0, kT, true);
  load_padded<T>(v, b, h, z, 0, vT, true);
  std::fill(dks, dks + 2 * t_block, 0.0f);
  const auto scale = static_cast<float>(pr.scale);
  for (int64_t i0 = 0; i0 < z.T; i0 += kRows) {
    const int64_t keys = std::min(i0 + kRows, z.T);
    const int64_t cols = round_up(keys, L);
    tile_x_yt<V>(qs + i0 * z.Dp, z.Dp, kT, z.Tp, z.D, cols, scale, p, z.Tp);
    mask_block(p, z.Tp, i0, cols);
    tile_x_yt<V>(gs + i0 * z.Dp, z.Dp, vT, z.Tp, z.D, cols, 1.0f, ds, z.Tp);  // dp
    for (int64_t r = 0; r < kRows; ++r) {
      const int64_t i = i0 + r;
      float* prow = p + r * z.Tp;
      float* srow = ds + r * z.Tp;
      if (i >= z.T) {  // a padding row: contributes nothing
        std::fill(prow, prow + cols, 0.0f);
        std::fill(srow, srow + cols, 0.0f);
        continue;
      }
      exp_row<V>(prow, lse[i], cols);
      const T* orow = out.row<T>(b, h, i);
      const float* grow = gs + i * z.Dp;
      float delta = 0.0f;
      for (int64_t d = 0; d < z.D; ++d) delta += grow[d] * static_cast<float>(orow[d]);
      int64_t j = 0;
      if (pr.dropout > 0.0) {  // keys j <= i: the mask; past them p is 0
        attention::drop_row_backward(pr, b, h, i, prow, srow, i + 1, delta, scale);
        j = i + 1;
      }
      for (; j < cols; ++j) srow[j] = prow[j] * (srow[j] - delta) * scale;
    }
    tile_p_y<V>(ds, z.Tp, keys, ks, z.Dp, dqb);
    for (int64_t r = 0; r < kRows && i0 + r < z.T; ++r) {
      T* dst = dq.mutable_row<T>(b, h, i0 + r);
      for (int64_t d = 0; d < z.D; ++d) dst[d] = static_cast<T>(dqb[r * z.Dp + d]);
    }
    tile_pt_x<V>(ds, z.Tp, keys, qs + i0 * z.Dp, z.Dp, dks);
    tile_pt_x<V>(p, z.Tp, keys, gs + i0 * z.Dp, z.Dp, dvs);
  }
  // dv summed the kept p_ij dout_i: times 1 / (1 - p) with dropout (times 1, exactly, without).
  const float dv_scale = pr.dropout > 0.0 ? attention::kept_weight_scale<float>(pr) : 1.0f;
  for (int64_t t = 0; t < z.T; ++t) {
    T* dkr = dk.mutable_row<T>(b, h, t);
    T* dvr = dv.mutable_row<T>(b, h, t);
    for (int64_t d = 0; d < z.D; ++d) {
      dkr[d] = static_cast<T>(dks[t * z.Dp + d]);
      dvr[d] = static_cast<T>(dvs[t * z.Dp + d] * dv_scale);
    }
  }
}

/// The task for dtype T: register tiles for float accumulation, rows for double.
template <typename T, typename V>
BRIGADE_VECTOR_INLINE void forward_any(const Problem& pr, int64_t b, int64_t h, const Heads& q,
                                       const Heads& k, const Heads& v, const Heads& out, acc_t<T>* lse) {
  if constexpr (std::is_same_v<acc_t<T>, float>) {
    forward_tiles<T, V>(pr, b, h, q, k, v, out, lse);
  } else {
    forward_task<T, V>(pr, b, h, q, k, v, out, lse);
  }
}

template <typename T, typename V>
BRIGADE_VECTOR_INLINE void backward_any(const Problem& pr, int64_t b, int64_t h, const Heads& dout,
                                        const Heads& q, const Heads& k, const Heads& v, const Heads& out,
                                        const acc_t<T>* lse, const Heads& dq, const Heads& dk,
                                        const Heads& dv) {
  if constexpr (std::is_same_v<acc_t<T>, float>) {
    backward_tiles<T, V>(pr, b, h, dout, q, k, v, out, lse, dq, dk, dv);
  } else {
    backward_task<T, V>(pr, b, h, dout, q, k, v, out, lse, dq, dk, dv);
  }
}

// ---- instantiations: baseline and AVX2 (the OpenMP loops stay outside the target-specific code) ---------

template <typename T>
__attribute__((noinline)) void forward_task_baseline(const Problem& pr, int64_t b, int64_t h, const Heads& q,
                                                     const Heads& k, const Heads& v, const Heads& out,
                                                     acc_t<T>* lse) {
  forward_any<T, detail::f32x4>(pr, b, h, q, k, v, out, lse);
}

template <typename T>
__attribute__((noinline)) void backward_task_baseline(const Problem& pr, int64_t b, int64_t h,
                                                      const Heads& dout, const Heads& q, const Heads& k,
                                                      const Heads& v, const Heads& out, const acc_t<T>* lse,
                                                      const Heads& dq, const Heads& dk, const Heads& dv) {
  backward_any<T, detail::f32x4>(pr, b, h, dout, q, k, v, out, lse, dq, dk, dv);
}

#if BRIGADE_CPU_AVX2
template <typename T>
__attribute__((target("avx2"), noinline)) void forward_task_avx2(const Problem& pr, int64_t b, int64_t h,
                                                                 const Heads& q, const Heads& k,
                                                                 const Heads& v, const Heads& out,
                                                                 acc_t<T>* lse) {
  forward_any<T, detail::f32x8>(pr, b, h, q, k, v, out, lse);
}

template <typename T>
__attribute__((target("avx2"), noinline)) void backward_task_avx2(const Problem& pr, int64_t b, int64_t h,
                                                                  const Heads& dout, const Heads& q,
                                                                  const Heads& k, const Heads& v,
                                                                  const Heads& out, const acc_t<T>* lse,
                                                                  const Heads& dq, const Heads& dk,
                                                                  const Heads& dv) {
  backward_any<T, detail::f32x8>(pr, b, h, dout, q, k, v, out, lse, dq, dk, dv);
}
#endif

/// v3 (AVX-512 FMA, kernel CpuAvx512, kernels/cpu/attention_avx512.cpp) for float32 and bfloat16 where the
/// CPU has AVX-512F; v2 (AVX2, kernel CpuAvx2) where the CPU runs it; else v1 (baseline x86-64). v1 and v2
/// give the same bits; v3 (FMA, other summation orders) does not.
template <typename T>
ForwardTask<T> pick_forward(AttentionKernel kernel) {
  if constexpr (std::is_same_v<acc_t<T>, float>) {
    if (kernel == AttentionKernel::CpuAvx512 && cpu_features().avx512f) {
      if (ForwardTask<T> task = attention::avx512_forward_task<T>()) return task;
    }
  }
#if BRIGADE_CPU_AVX2
  if (kernel == AttentionKernel::CpuAvx2 && detail::cpu_has_avx2()) return &forward_task_avx2<T>;
#endif
  (void)kernel;
  return &forward_task_baseline<T>;
}

template <typename T>
BackwardTask<T> pick_backward(AttentionKernel kernel) {
  if constexpr (std::is_same_v<acc_t<T>, float>) {
    if (kernel == AttentionKernel::CpuAvx512 && cpu_features().avx512f) {
      if (BackwardTask<T> task = attention::avx512_backward_task<T>()) return task;
    }
  }
#if BRIGADE_CPU_AVX2
  if (kernel == AttentionKernel::CpuAvx2 && detail::cpu_has_avx2()) return &backward_task_avx2<T>;
#endif
  (void)kernel;
  return &backward_task_baseline<T>;
}

Problem problem_of(const Tensor& q, double scale, const AttentionDropout& dropout) {
  return Problem{q.size(0), q.size(1), q.size(2), q.size(3), scale, dropout.p, dropout.state};
}

}  // namespace

void causal_attention_forward_with(AttentionKernel kernel, const Tensor& q, const Tensor& k, const Tensor& v,
                                   double scale, const Tensor& out, const Tensor& lse,
                                   const AttentionDropout& dropout) {
  const Problem pr = problem_of(q, scale, dropout);
  BRIGADE_DISPATCH_FLOATING(q.dtype(), "causal_attention", [&] {
    forward_all<scalar_t>(pick_forward<scalar_t>(kernel), pr, Heads(q), Heads(k), Heads(v), Heads(out),
                          lse.data<acc_t<scalar_t>>());
  });
}

void causal_attention_backward_with(AttentionKernel kernel, const Tensor& dout, const Tensor& q,
                                    const Tensor& k, const Tensor& v, const Tensor& out, const Tensor& lse,
                                    double scale, const Tensor& dq, const Tensor& dk, const Tensor& dv,
                                    const AttentionDropout& dropout) {
  const Problem pr = problem_of(q, scale, dropout);
  BRIGADE_DISPATCH_FLOATING(q.dtype(), "causal_attention_backward", [&] {
    backward_all<scalar_t>(pick_backward<scalar_t>(kernel), pr, Heads(dout), Heads(q), Heads(k), Heads(v),
                           Heads(out), lse.data<acc_t<scalar_t>>(), Heads(dq), Heads(dk), Heads(dv));
  });
}

// ---- the backend entry points (kernels/backend.h): the default version ------------------------------------

void causal_attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, double scale,
                              const Tensor& out, const Tensor& lse) {
  cpu::causal_attention_forward_with(default_attention_kernel(DeviceKind::CPU, q.dtype(), q.size(3)), q, k, v,
                                     scale, out, lse);
}

void causal_attention_backward(const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v,
                               const Tensor& out, const Tensor& lse, double scale, const Tensor& dq,
                               const Tensor& dk, const Tensor& dv) {
  cpu::causal_attention_backward_with(default_attention_kernel(DeviceKind::CPU, q.dtype(), q.size(3)), dout,
                                      q, k, v, out, lse, scale, dq, dk, dv);
}

}  // namespace brigade::kernels::cpu
