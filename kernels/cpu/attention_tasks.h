// What the CPU fused attention versions share (kernels/cpu/attention.cpp: v1 and v2;
// kernels/cpu/attention_avx512.cpp: v3): the view of a [B, H, T, D] operand, the problem, the weights'
// dropout mask, the per-thread scratch, the zero-padded float copies a task works on, and the signature of
// one (b, h) task.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "kernels/cpu/cpu_access.h"
#include "kernels/cpu/vector_math.h"  // BRIGADE_VECTOR_INLINE
#include "tensor/generator.h"
#include "tensor/philox.h"
#include "tensor/tensor.h"

namespace brigade::kernels::cpu::attention {

using detail::acc_t;

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
  double dropout = 0.0;  ///< p of the dropout on the weights (kernels/attention_dropout.h); 0: none
  GeneratorState state;  ///< the mask's Philox draw
};

/// The Philox index of weight (b, h, i, 0) of the [B, H, T, T] weights that the dropout mask covers; weight
/// (b, h, i, j) is this + j.
inline uint64_t weight_row_index(const Problem& pr, int64_t b, int64_t h, int64_t i) {
  return static_cast<uint64_t>(((b * pr.H + h) * pr.T + i) * pr.T);
}

/// Whether the weight at `index` is kept: kernels::dropout's rule (uniform >= p), so both drop alike.
inline bool keeps_weight(const Problem& pr, uint64_t index) {
  return philox::keeps(pr.state.seed, pr.state.offset, index, pr.dropout);
}

/// 1 / (1 - p), the kept weights' factor, in the accumulation type A.
template <typename A>
A kept_weight_scale(const Problem& pr) {
  return static_cast<A>(1.0 / (1.0 - pr.dropout));
}

/// Forward, row i of (b, h) with its n = i + 1 unnormalised weights e[0..n): the dropped ones set to 0 (the
/// caller folds 1 / (1 - p) into the row's 1 / l). Scalar draws: v1 and v2 (v3 draws 16 at a time).
template <typename A>
void drop_row_weights(const Problem& pr, int64_t b, int64_t h, int64_t i, A* e, int64_t n) {
  const uint64_t first = weight_row_index(pr, b, h, i);
  for (int64_t j = 0; j < n; ++j) {
    if (!keeps_weight(pr, first + static_cast<uint64_t>(j))) e[j] = A(0);
  }
}

/// Backward, row i of (b, h) with p[0..n) = exp(s - lse) and ds[0..n) = dp = dout_i . v_j (n = i + 1):
/// ds_j = p_j (m_j dp_j - delta) scale, with m_j = 1 / (1 - p) where kept and 0 where dropped, then p_j = 0
/// where dropped (dv sums p_j m_j dout_i: the caller scales dv by 1 / (1 - p) once, at its store).
template <typename A>
void drop_row_backward(const Problem& pr, int64_t b, int64_t h, int64_t i, A* p, A* ds, int64_t n, A delta,
                       A scale) {
  const uint64_t first = weight_row_index(pr, b, h, i);
  const A kept = kept_weight_scale<A>(pr);
  for (int64_t j = 0; j < n; ++j) {
    const bool keep = keeps_weight(pr, first + static_cast<uint64_t>(j));
    ds[j] = p[j] * ((keep ? ds[j] * kept : A(0)) - delta) * scale;
    if (!keep) p[j] = A(0);
  }
}

/// The calling thread's scratch, kept between calls (a fresh buffer per task would be a malloc each time).
template <typename A>
A* scratch(size_t count) {
  thread_local std::vector<A> buffer;
  if (buffer.size() < count) buffer.resize(count);
  return buffer.data();
}

inline int64_t round_up(int64_t x, int64_t multiple) {
  return (x + multiple - 1) / multiple * multiple;
}

/// The padded sizes of one task: Dp, Tp multiples of `lanes` (the vector width), Tr of `rows` (query rows
/// per block).
struct TileSizes {
  int64_t T, D, Dp, Tp, Tr;
  TileSizes(int64_t t, int64_t d, int64_t lanes, int64_t rows)
      : T(t), D(d), Dp(round_up(d, lanes)), Tp(round_up(t, lanes)), Tr(round_up(t, rows)) {}
};

/// Rows [0, T) of (b, h) into dst [rows_padded, Dp] as float (padding is zero: columns D..Dp and rows
/// T..rows_padded), or transposed into dst [Dp, Tp].
template <typename T>
BRIGADE_VECTOR_INLINE void load_padded(const Heads& src, int64_t b, int64_t h, const TileSizes& z,
                                       int64_t rows_padded, float* dst, bool transpose) {
  if (transpose) {
    std::fill(dst, dst + z.Dp * z.Tp, 0.0f);
    for (int64_t t = 0; t < z.T; ++t) {
      const T* row = src.row<T>(b, h, t);
      for (int64_t d = 0; d < z.D; ++d) dst[d * z.Tp + t] = static_cast<float>(row[d]);
    }
    return;
  }
  std::fill(dst, dst + rows_padded * z.Dp, 0.0f);
  for (int64_t t = 0; t < z.T; ++t) {
    const T* row = src.row<T>(b, h, t);
    for (int64_t d = 0; d < z.D; ++d) dst[t * z.Dp + d] = static_cast<float>(row[d]);
  }
}

/// A forward task's scratch: q [Tr, Dp], k^T [Dp, Tp], v [Tp, Dp], then room for a block's scores
/// s [rows, Tp] and outputs o [rows, Dp]; with k_rows also room for k as rows [Tp, Dp] (v3 copies k there
/// and transposes it into k^T in registers), else `k` is null.
struct ForwardScratch {
  float *qs, *kT, *vs, *s, *o, *k;
};

/// The scratch laid out, nothing loaded (v3 copies only what it does not read where it lies).
inline ForwardScratch forward_scratch(const TileSizes& z, int64_t rows, bool k_rows) {
  ForwardScratch w;
  const int64_t k_room = k_rows ? z.Tp * z.Dp : 0;
  w.qs =
      scratch<float>(static_cast<size_t>(z.Tr * z.Dp + 2 * z.Dp * z.Tp + rows * z.Tp + rows * z.Dp + k_room));
  w.kT = w.qs + z.Tr * z.Dp;
  w.vs = w.kT + z.Dp * z.Tp;
  w.s = w.vs + z.Tp * z.Dp;
  w.o = w.s + rows * z.Tp;
  w.k = k_rows ? w.o + rows * z.Dp : nullptr;
  return w;
}

/// The scratch with q, k^T and v of (b, h) loaded as float, zero-padded (v2's tiles).
template <typename T>
BRIGADE_VECTOR_INLINE ForwardScratch load_forward(const Heads& q, const Heads& k, const Heads& v, int64_t b,
                                                  int64_t h, const TileSizes& z, int64_t rows) {
  const ForwardScratch w = forward_scratch(z, rows, /*k_rows=*/false);
  load_padded<T>(q, b, h, z, z.Tr, w.qs, false);
  load_padded<T>(k, b, h, z, 0, w.kT, true);
  load_padded<T>(v, b, h, z, z.Tp, w.vs, false);
  return w;
}

/// One (b, h) task; `lse` points at the task's T values.
template <typename T>
using ForwardTask = void (*)(const Problem&, int64_t, int64_t, const Heads&, const Heads&, const Heads&,
                             const Heads&, acc_t<T>*);
template <typename T>
using BackwardTask = void (*)(const Problem&, int64_t, int64_t, const Heads&, const Heads&, const Heads&,
                              const Heads&, const Heads&, const acc_t<T>*, const Heads&, const Heads&,
                              const Heads&);

/// v3's tasks (kernels/cpu/attention_avx512.cpp) for T = float or bfloat16; nullptr where the build has
/// no x86 code. Call them only where the CPU has AVX-512F.
template <typename T>
ForwardTask<T> avx512_forward_task();
template <typename T>
BackwardTask<T> avx512_backward_task();

}  // namespace brigade::kernels::cpu::attention
