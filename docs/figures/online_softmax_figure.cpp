// The online softmax of flash attention, step by step, on real numbers: a row of six scores s_j with one
// value v_j per key (head dim 1), visited in tiles of two keys as a flash kernel visits key tiles. Per tile:
//   m_new = max(m, max_j s_j)             the running maximum
//   alpha = exp(m - m_new)                how much everything summed so far shrinks under the new maximum
//   p_j   = exp(s_j - m_new)
//   l     = alpha * l + sum_j p_j         the running denominator
//   o     = alpha * o + sum_j p_j v_j     the running numerator (a row of O in the kernels)
// and at the end out = o / l, lse = m + log l. The result is compared with brigade's own softmax
// (kernels::softmax) of the whole row, in float64; the figure prints both.
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include "docs/figures/figure_svg.h"
#include "docs/figures/figures.h"
#include "kernels/kernels.h"
#include "tensor/error.h"
#include "tensor/tensor.h"

namespace brigade::figures {
namespace {

std::string fmt(double x, const char* format = "%.4f") {
  if (std::isinf(x)) return x < 0 ? "-inf" : "inf";
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, format, x);
  return buffer;
}

struct Step {
  int first = 0;  // first key of the tile
  double m_old = 0, m_new = 0, alpha = 0, l = 0, o = 0;
  std::vector<double> p;
};

}  // namespace

std::string online_softmax_figure(std::string* report) {
  const std::vector<double> s = {1.0, 3.0, 0.5, 2.0, 4.0, -1.0};  // scores (already scaled)
  const std::vector<double> v = {1.0, 2.0, 3.0, 4.0, 5.0, 6.0};   // one value per key
  const int tile = 2;

  std::vector<Step> steps;
  double m = -std::numeric_limits<double>::infinity(), l = 0, o = 0;
  for (int first = 0; first < static_cast<int>(s.size()); first += tile) {
    Step st;
    st.first = first;
    st.m_old = m;
    st.m_new = m;
    for (int j = first; j < first + tile; ++j) st.m_new = std::max(st.m_new, s[j]);
    st.alpha = std::exp(m - st.m_new);  // exp(-inf) = 0 on the first tile
    double sum_p = 0, sum_pv = 0;
    for (int j = first; j < first + tile; ++j) {
      st.p.push_back(std::exp(s[j] - st.m_new));
      sum_p += st.p.back();
      sum_pv += st.p.back() * v[j];
    }
    l = st.alpha * l + sum_p;
    o = st.alpha * o + sum_pv;
    m = st.m_new;
    st.l = l;
    st.o = o;
    steps.push_back(st);
  }
  const double out = o / l, lse = m + std::log(l);

  // The same row through brigade's softmax kernel, in float64.
  const Tensor probabilities = kernels::softmax(from_vector<double>(s, {1, static_cast<int64_t>(s.size())}));
  const std::vector<double> p_direct = probabilities.to_vector<double>();
  double out_direct = 0, sum_exp = 0;
  for (size_t j = 0; j < s.size(); ++j) out_direct += p_direct[j] * v[j];
  for (double x : s) sum_exp += std::exp(x);
  const double lse_direct = std::log(sum_exp);
  BRIGADE_CHECK_VALUE(std::fabs(out - out_direct) < 1e-12 && std::fabs(lse - lse_direct) < 1e-12,
                      "online softmax figure: the online result ", out,
                      " differs from softmax(s) . v = ", out_direct);

  Svg svg(900, 400);
  svg.text(20, 24, "The online softmax: one pass over key tiles, rescaling what was summed so far", 15,
           "start", "#222", true);
  // The row, tiles boxed.
  const double cell = 58, x0 = 110, y0 = 44;
  svg.text(20, y0 + 20, "scores s", 12);
  svg.text(20, y0 + 48, "values v", 12);
  for (size_t j = 0; j < s.size(); ++j) {
    const char* fill = (j / tile) % 2 == 0 ? "#c6dbef" : "#fdd0a2";
    svg.rect(x0 + j * cell, y0 + 4, cell, 24, fill, "#777");
    svg.text(x0 + j * cell + cell / 2, y0 + 21, fmt(s[j], "%.1f"), 12, "middle");
    svg.rect(x0 + j * cell, y0 + 32, cell, 24, "#f4f4f4", "#777");
    svg.text(x0 + j * cell + cell / 2, y0 + 49, fmt(v[j], "%.0f"), 12, "middle");
  }
  for (size_t t = 0; t < steps.size(); ++t) {
    svg.text(x0 + (t * tile + tile / 2.0) * cell, y0 + 72, "tile " + std::to_string(t + 1), 11, "middle",
             "#555");
  }

  // The steps as a table.
  const double ty = 150, row = 30;
  const char* head[] = {"tile",         "m → m_new",     "α = e^(m − m_new)", "p_j = e^(s_j − m_new)",
                        "l = α·l + Σp", "o = α·o + Σp·v"};
  const double col[] = {20, 80, 210, 360, 560, 700};
  for (int c = 0; c < 6; ++c) svg.text(col[c], ty, head[c], 12, "start", "#222", true);
  for (size_t t = 0; t < steps.size(); ++t) {
    const Step& st = steps[t];
    const double y = ty + (t + 1) * row;
    svg.rect(15, y - 18, 860, row - 4, t % 2 == 0 ? "#f7fbff" : "#fff5eb", "none");
    svg.text(col[0], y, std::to_string(t + 1), 12);
    svg.text(col[1], y, fmt(st.m_old, "%.1f") + " → " + fmt(st.m_new, "%.1f"), 12);
    svg.text(col[2], y, fmt(st.alpha), 12, "start", st.alpha < 1 && st.alpha > 0 ? "#8c2d2d" : "#222");
    svg.text(col[3], y, fmt(st.p[0]) + ", " + fmt(st.p[1]), 12);
    svg.text(col[4], y, fmt(st.l), 12);
    svg.text(col[5], y, fmt(st.o), 12);
  }
  const double yr = ty + (steps.size() + 1) * row + 20;
  svg.text(20, yr, "out = o / l = " + fmt(out, "%.6f") + ",  lse = m + log l = " + fmt(lse, "%.6f"), 13,
           "start", "#222", true);
  svg.text(20, yr + 22,
           "one pass over the whole row with brigade's softmax kernel: softmax(s)·v = " +
               fmt(out_direct, "%.6f") + ", log Σ e^s = " + fmt(lse_direct, "%.6f"),
           12);
  svg.text(20, yr + 48,
           "α rescales l and o whenever a tile raises the maximum (red); no tile ever needs the scores "
           "of another, so no T×T matrix is stored.",
           11, "start", "#555");
  svg.text(20, 392, "Drawn by docs/figures (scripts/make_docs_images.sh), which computes every number shown.",
           10, "start", "#777");

  if (report != nullptr) {
    std::string r;
    for (size_t t = 0; t < steps.size(); ++t) {
      const Step& st = steps[t];
      r += "tile " + std::to_string(t + 1) + ": m " + fmt(st.m_old, "%.1f") + " -> " + fmt(st.m_new, "%.1f") +
           ", alpha " + fmt(st.alpha) + ", p " + fmt(st.p[0]) + " " + fmt(st.p[1]) + ", l " + fmt(st.l) +
           ", o " + fmt(st.o) + "\n";
    }
    r += "out = o / l = " + fmt(out, "%.6f") + ", lse = " + fmt(lse, "%.6f") +
         "; softmax(s).v = " + fmt(out_direct, "%.6f") + "\n";
    *report = r;
  }
  return svg.str();
}

}  // namespace brigade::figures
