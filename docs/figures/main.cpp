// doc_figures: writes the figures of docs/img/ that are drawn from brigade's code rather than by the
// `brigade` command (scripts/make_docs_images.sh runs both; see it for the whole list).
//
//   doc_figures OUTDIR [--source DIR]     # DIR: the source tree whose kernels' tile sizes are drawn
//
// Each figure is computed here, from brigade itself: the views from real tensors, the tilings from the
// kernels' tile constants, the online softmax with numbers checked against brigade's softmax, the autograd
// graph with autograd::graph_to_svg.
#include <cstdio>
#include <fstream>
#include <string>

#include "autograd/graph_dump.h"
#include "autograd/ops.h"
#include "docs/figures/figures.h"
#include "docs/figures/source_constants.h"
#include "tensor/error.h"
#include "tensor/tensor.h"

namespace brigade::figures {

std::string readme_graph_figure() {
  // The README's first example, as written there.
  Tensor x = randn({8, 4});
  Tensor w = randn({4, 3}, TensorOptions().requires_grad());
  Tensor loss = mean(relu(matmul(x, w)) * 2.0);
  return autograd::graph_to_svg(loss, {{"w", w}});
}

}  // namespace brigade::figures

namespace {

void write(const std::string& dir, const std::string& name, const std::string& svg) {
  const std::string path = dir + "/" + name;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << svg;
  BRIGADE_CHECK_AS(brigade::IOError, out.good(), "doc_figures: cannot write ", path);
  std::printf("wrote %s\n", path.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2 && !(argc == 4 && std::string(argv[2]) == "--source")) {
    std::fprintf(stderr, "usage: doc_figures OUTDIR [--source DIR]\n");
    return 2;
  }
  try {
    namespace fig = brigade::figures;
    if (argc == 4) fig::set_source_root(argv[3]);
    const std::string dir = argv[1];
    write(dir, "tensor_views.svg", fig::views_figure());
    write(dir, "gemm_tiling.svg", fig::gemm_tiling_figure());
    write(dir, "flash_tiling.svg", fig::flash_tiling_figure());
    std::string steps;
    write(dir, "online_softmax.svg", fig::online_softmax_figure(&steps));
    std::fputs(steps.c_str(), stdout);
    write(dir, "autograd_readme_example.svg", fig::readme_graph_figure());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "doc_figures: %s\n", e.what());
    return 1;
  }
  return 0;
}
