// Reference causal attention: for each batch b and head h (q, k, v, out, dout [B, H, T, D]; lse [B, H, T])
// the scores of query i against keys j <= i, one query row at a time:
//   s_ij = scale q_i . k_j,  lse_i = m_i + log sum_{j<=i} exp(s_ij - m_i) with m_i = max_j s_ij,
//   out_i = sum_{j<=i} exp(s_ij - lse_i) v_j.
// Backward with p_ij = exp(s_ij - lse_i) and delta_i = dout_i . out_i:
//   dv_j = sum_{i>=j} p_ij dout_i,  ds_ij = p_ij (dout_i . v_j - delta_i),
//   dq_i = scale sum_{j<=i} ds_ij k_j,  dk_j = scale sum_{i>=j} ds_ij q_i.
#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/reference/index_math.h"
#include "kernels/reference/reference.h"

namespace brigade::kernels::reference {

using detail::float64_tensor;
using detail::values_of;

namespace {

/// The sizes of a [B, H, T, D] operand and where row i of head (b, h) starts in its row-major values.
struct Heads {
  int64_t B, H, T, D;
  explicit Heads(const Tensor& q) {
    BRIGADE_CHECK_SHAPE(q.dim() == 4, "reference attention: q, k, v [B, H, T, D], found ",
                        shape_str(q.shape()));
    B = q.size(0), H = q.size(1), T = q.size(2), D = q.size(3);
  }
  size_t row(int64_t bh, int64_t i) const { return static_cast<size_t>((bh * T + i) * D); }
  double dot(const std::vector<double>& a, size_t ra, const std::vector<double>& b, size_t rb) const {
    double s = 0;
    for (int64_t d = 0; d < D; ++d) s += a[ra + d] * b[rb + d];
    return s;
  }
};

void check_like(const Heads& h, const Tensor& t, const char* name) {
  BRIGADE_CHECK_SHAPE(t.shape() == (Shape{h.B, h.H, h.T, h.D}), "reference attention: ", name, " ",
                      shape_str(t.shape()), " vs q [", h.B, ", ", h.H, ", ", h.T, ", ", h.D, "]");
}

}  // namespace

AttentionOutput causal_attention(const Tensor& q, const Tensor& k, const Tensor& v, double scale) {
  const Heads h(q);
  check_like(h, k, "k");
  check_like(h, v, "v");
  const std::vector<double> qv = values_of(q), kv = values_of(k), vv = values_of(v);
  std::vector<double> out(qv.size(), 0.0), lse(static_cast<size_t>(h.B * h.H * h.T));
  std::vector<double> s(static_cast<size_t>(h.T));
  for (int64_t bh = 0; bh < h.B * h.H; ++bh) {
    for (int64_t i = 0; i < h.T; ++i) {
      double m = -std::numeric_limits<double>::infinity(), total = 0;
      for (int64_t j = 0; j <= i; ++j) {
        s[j] = scale * h.dot(qv, h.row(bh, i), kv, h.row(bh, j));
        m = std::max(m, s[j]);
      }
      for (int64_t j = 0; j <= i; ++j) total += std::exp(s[j] - m);
      const double l = m + std::log(total);
      lse[static_cast<size_t>(bh * h.T + i)] = l;
      for (int64_t j = 0; j <= i; ++j) {
        const double p = std::exp(s[j] - l);
        for (int64_t d = 0; d < h.D; ++d) out[h.row(bh, i) + d] += p * vv[h.row(bh, j) + d];
      }
    }
  }
  return {float64_tensor(out, q.shape()), float64_tensor(lse, {h.B, h.H, h.T})};
}

AttentionGrads causal_attention_backward(const Tensor& dout, const Tensor& q, const Tensor& k,
                                         const Tensor& v, const Tensor& out, const Tensor& lse,
                                         double scale) {
  const Heads h(q);
  check_like(h, k, "k");
  check_like(h, v, "v");
  check_like(h, dout, "dout");
  check_like(h, out, "out");
  BRIGADE_CHECK_SHAPE(lse.shape() == (Shape{h.B, h.H, h.T}), "reference attention: lse ",
                      shape_str(lse.shape()), " vs [B, H, T]");
  const std::vector<double> qv = values_of(q), kv = values_of(k), vv = values_of(v);
  const std::vector<double> g = values_of(dout), ov = values_of(out), lv = values_of(lse);
  std::vector<double> dq(qv.size(), 0.0), dk(qv.size(), 0.0), dv(qv.size(), 0.0);
  for (int64_t bh = 0; bh < h.B * h.H; ++bh) {
    for (int64_t i = 0; i < h.T; ++i) {
      const size_t ri = h.row(bh, i);
      const double delta = h.dot(g, ri, ov, ri);
      const double l = lv[static_cast<size_t>(bh * h.T + i)];
      for (int64_t j = 0; j <= i; ++j) {
        const size_t rj = h.row(bh, j);
        const double p = std::exp(scale * h.dot(qv, ri, kv, rj) - l);
        const double ds = p * (h.dot(g, ri, vv, rj) - delta);
        for (int64_t d = 0; d < h.D; ++d) {
          dv[rj + d] += p * g[ri + d];
          dq[ri + d] += scale * ds * kv[rj + d];
          dk[rj + d] += scale * ds * qv[ri + d];
        }
      }
    }
  }
  return {float64_tensor(dq, q.shape()), float64_tensor(dk, q.shape()), float64_tensor(dv, q.shape())};
}

}  // namespace brigade::kernels::reference
