// The doc figures: each function returns one self-contained SVG of docs/img/ (main.cpp writes them).
#pragma once

#include <string>

namespace brigade::figures {

/// Strides of a transpose, a narrow and an expand, from real tensors (views_figure.cpp).
std::string views_figure();
/// Which outputs of a 128 x 128 block tile each thread and warp of GEMM v2, v3 and v4 owns
/// (tiling_figure.cpp).
std::string gemm_tiling_figure();
/// Flash attention's tiles: the causal walk over key tiles, the threads of a score tile (v2) and the warps
/// and WMMA fragments of v3/v4 (tiling_figure.cpp).
std::string flash_tiling_figure();
/// The online softmax on a row of real numbers, tile by tile (online_softmax_figure.cpp). `report` gets the
/// same steps as text.
std::string online_softmax_figure(std::string* report);
/// The autograd graph of the README's example (main.cpp).
std::string readme_graph_figure();

}  // namespace brigade::figures
