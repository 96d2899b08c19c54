// The strides of a view, drawn from real brigade tensors: x = arange(12) as a [3, 4] float tensor, then
// x.transpose(0, 1), x.narrow(1, 1, 2) and one row of x expanded to [3, 4]. Each view is drawn as its
// grid of elements; a cell shows the storage slot it reads, offset + i * stride0 + j * stride1, coloured
// like that slot in the storage row at the top. The slot is checked against the value the view actually
// reads (the storage holds 0, 1, ..., 11), so the picture cannot show a formula brigade does not use.
#include <cstdio>
#include <string>
#include <vector>

#include "docs/figures/figure_svg.h"
#include "docs/figures/figures.h"
#include "tensor/error.h"
#include "tensor/tensor.h"

namespace brigade::figures {
namespace {

std::string slot_colour(int64_t slot) {
  static const char* colours[] = {"#fde0dd", "#fcc5c0", "#fa9fb5", "#f768a1", "#c6dbef", "#9ecae1",
                                  "#6baed6", "#4292c6", "#c7e9c0", "#a1d99b", "#74c476", "#41ab5d"};
  return colours[slot % 12];
}

std::string list(const std::vector<int64_t>& values) {
  std::string s = "[";
  for (size_t i = 0; i < values.size(); ++i) s += (i ? ", " : "") + std::to_string(values[i]);
  return s + "]";
}

constexpr double kCell = 30;

/// One view as a grid of cells at (x, y); returns the height used.
double draw_view(Svg& svg, double x, double y, const std::string& title, const Tensor& view) {
  BRIGADE_CHECK_VALUE(view.dim() == 2, "views figure: 2-d views only");
  const std::vector<float> values = view.contiguous().to_vector<float>();
  svg.text(x, y, title, 13, "start", "#222", true);
  svg.text(x, y + 17,
           "shape " + list(view.shape()) + "   strides " + list(view.strides()) + "   offset " +
               std::to_string(view.offset()) +
               (view.is_contiguous() ? "   contiguous" : "   a view, not contiguous"),
           11);
  const double top = y + 26;
  for (int64_t i = 0; i < view.size(0); ++i) {
    for (int64_t j = 0; j < view.size(1); ++j) {
      const int64_t slot = view.offset() + i * view.stride(0) + j * view.stride(1);
      const float read = values[static_cast<size_t>(i * view.size(1) + j)];
      BRIGADE_CHECK_VALUE(static_cast<int64_t>(read) == slot, "views figure: element [", i, ", ", j,
                          "] reads ", read, " but offset + i*stride0 + j*stride1 = ", slot);
      svg.rect(x + j * kCell, top + i * kCell, kCell, kCell, slot_colour(slot));
      svg.text(x + j * kCell + kCell / 2, top + i * kCell + kCell / 2 + 4, std::to_string(slot), 12,
               "middle");
    }
  }
  return 26 + view.size(0) * kCell;
}

}  // namespace

std::string views_figure() {
  const Tensor x = arange(0, 12, 1, TensorOptions(kFloat32)).view({3, 4});
  Svg svg(760, 450);
  svg.text(20, 24, "One storage, four tensors: a view changes shape, strides and offset, never the data", 14,
           "start", "#222", true);
  svg.text(20, 44, "storage (12 floats)", 11);
  for (int64_t s = 0; s < 12; ++s) {
    svg.rect(20 + s * kCell, 52, kCell, kCell, slot_colour(s));
    svg.text(20 + s * kCell + kCell / 2, 52 + kCell / 2 + 4, std::to_string(s), 12, "middle");
  }
  svg.text(400, 64, "element [i, j] of a view reads", 11);
  svg.text(400, 80, "storage[offset + i * stride0 + j * stride1]", 11, "start", "#8c2d2d");

  draw_view(svg, 20, 120, "x = arange(12).view({3, 4})", x);
  draw_view(svg, 400, 120, "x.transpose(0, 1): strides swapped", x.transpose(0, 1));
  draw_view(svg, 20, 290, "x.narrow(1, 1, 2): offset moved, strides kept", x.narrow(1, 1, 2));
  draw_view(svg, 400, 290, "x.narrow(0, 1, 1).expand({3, 4}): stride 0", x.narrow(0, 1, 1).expand({3, 4}));
  svg.text(20, 440,
           "Drawn by docs/figures (scripts/make_docs_images.sh) from brigade tensors; each cell is checked "
           "against the value the view reads.",
           10, "start", "#777");
  return svg.str();
}

}  // namespace brigade::figures
