// Tiling pictures of the CUDA kernels, drawn from the tile sizes in the kernels' own source
// (source_constants.h): GEMM v2 (kernels/cuda/matmul.cu), v3 and v4 (kernels/cuda/matmul_sgemm.cu), and flash
// attention v2 (kernels/cuda/attention_flash.cu) and v3/v4 (kernels/cuda/attention_flash_tc.cu). Which
// element a thread owns follows the index formulas of each kernel (quoted beside each drawing below).
#include <functional>
#include <string>

#include "docs/figures/figure_svg.h"
#include "docs/figures/figures.h"
#include "docs/figures/source_constants.h"
#include "tensor/error.h"

namespace brigade::figures {
namespace {

const char* kWarpShade = "#ffe9a8";
const char* kThread0 = "#d62728";
const char* kThread1 = "#1f77b4";

/// owner(i, j): 0 for thread 0's outputs, 1 for thread 1's, 2 for the rest of warp 0's, -1 otherwise.
using Owner = std::function<int(int, int)>;

void draw_block_tile(Svg& svg, double x, double y, int bm, int bn, double scale, const Owner& owner) {
  svg.rect(x, y, bn * scale, bm * scale, "#f4f4f4", "#333", 1);
  for (int i = 0; i < bm; ++i) {
    for (int j = 0; j < bn;) {  // one rect per run of equal owners along the row keeps the file small
      const int who = owner(i, j);
      int end = j + 1;
      while (end < bn && owner(i, end) == who) ++end;
      if (who >= 0) {
        const char* fill = who == 0 ? kThread0 : who == 1 ? kThread1 : kWarpShade;
        svg.rect(x + j * scale, y + i * scale, (end - j) * scale, scale, fill, "none", 0);
      }
      j = end;
    }
  }
}

void legend(Svg& svg, double x, double y) {
  svg.rect(x, y - 9, 10, 10, kThread0, "none");
  svg.text(x + 14, y, "thread 0's outputs", 11);
  svg.rect(x + 140, y - 9, 10, 10, kThread1, "none");
  svg.text(x + 154, y, "thread 1's", 11);
  svg.rect(x + 240, y - 9, 10, 10, kWarpShade, "none");
  svg.text(x + 254, y, "the rest of warp 0 (threads 0-31)", 11);
}

}  // namespace

std::string gemm_tiling_figure() {
  const std::string v2_file = "kernels/cuda/matmul.cu", sgemm = "kernels/cuda/matmul_sgemm.cu";
  const std::vector<int> v2 = source_template_arguments(v2_file, "launch_tiled", 0);  // BM, BN, BK, TM, TN
  const std::vector<int> v2_small = source_template_arguments(v2_file, "launch_tiled", 1);
  BRIGADE_CHECK_VALUE(v2.size() == 5 && v2_small.size() == 5,
                      "gemm figure: launch_tiled<T, BM, BN, BK, TM, TN>");
  const int v2_bm = v2[0], v2_bn = v2[1], v2_bk = v2[2], v2_tm = v2[3], v2_tn = v2[4];
  const int v2_ty_count = v2_bm / v2_tm, v2_tx_count = v2_bn / v2_tn;  // kThreadsY, kThreadsX
  const int threads = source_constant(sgemm, "kThreads");
  const int v3_bm = source_constant(sgemm, "kV3BM"), v3_bn = source_constant(sgemm, "kV3BN");
  const int v3_bk = source_constant(sgemm, "kV3BK");
  const int v4_bm = source_constant(sgemm, "kV4BM"), v4_bn = source_constant(sgemm, "kV4BN");
  const int v4_bk = source_constant(sgemm, "kV4BK");
  const int warps_m = source_constant(sgemm, "kV4WarpsM"), warps_n = source_constant(sgemm, "kV4WarpsN");
  const int lanes_m = source_constant(sgemm, "kV4LanesM"), lanes_n = source_constant(sgemm, "kV4LanesN");
  const int wm = v4_bm / warps_m, wn = v4_bn / warps_n, sub_m = lanes_m * 4, sub_n = lanes_n * 4;
  BRIGADE_CHECK_VALUE(v3_bm % 2 == 0 && v3_bn % 2 == 0 && (v3_bm / 8) * (v3_bn / 8) == threads,
                      "gemm figure: v3 is drawn as a (BM/8) x (BN/8) thread grid with 8 x 8 outputs each");

  const double scale = 3, panel = 128 * scale + 40;
  Svg svg(3 * panel + 10, 570);
  svg.text(20, 24, "fp32 GEMM: who computes which element of a block's C tile", 15, "start", "#222", true);
  legend(svg, 20, 46);

  // v2: thread (ty, tx) of a kThreadsY x kThreadsX grid owns rows ty + r*kThreadsY, columns tx + s*kThreadsX.
  const auto v2_owner = [&](int i, int j) {
    const int tid = (i % v2_ty_count) * v2_tx_count + (j % v2_tx_count);
    return tid == 0 ? 0 : tid == 1 ? 1 : tid < 32 ? 2 : -1;
  };
  // v3: thread (ty, tx) of 16 x 16 owns rows (r/4)*(BM/2) + ty*4 + r%4 and columns h*(BN/2) + tx*4 + s.
  const int v3_tx_count = v3_bn / 8;
  const auto v3_owner = [&](int i, int j) {
    const int ty = (i % (v3_bm / 2)) / 4, tx = (j % (v3_bn / 2)) / 4;
    const int tid = ty * v3_tx_count + tx;
    return tid == 0 ? 0 : tid == 1 ? 1 : tid < 32 ? 2 : -1;
  };
  // v4: warp w owns the (w / WarpsN, w % WarpsN) warp tile; lane (lm, ln) owns rows im*SubM + lm*4 + r and
  // columns in*SubN + ln*4 + s inside it.
  const auto v4_owner = [&](int i, int j) {
    const int warp = (i / wm) * warps_n + j / wn;
    if (warp != 0) return -1;
    const int lane = ((i % wm) % sub_m) / 4 * lanes_n + ((j % wn) % sub_n) / 4;
    return lane == 0 ? 0 : lane == 1 ? 1 : 2;
  };

  const double top = 80;
  struct Panel {
    std::string title, line1, line2, line3;
    int bm, bn;
    Owner owner;
  };
  const Panel panels[] = {
      {"v2 tiled (matmul.cu)",
       "block " + std::to_string(v2_bm) + "x" + std::to_string(v2_bn) + ", BK " + std::to_string(v2_bk) +
           ", " + std::to_string(v2_ty_count * v2_tx_count) + " threads as " + std::to_string(v2_ty_count) +
           "x" + std::to_string(v2_tx_count),
       std::to_string(v2_tm) + "x" + std::to_string(v2_tn) + " outputs per thread, " +
           std::to_string(v2_ty_count) + " rows and " + std::to_string(v2_tx_count) + " columns apart",
       "(small products: " + std::to_string(v2_small[0]) + "x" + std::to_string(v2_small[1]) + ", BK " +
           std::to_string(v2_small[2]) + ", " + std::to_string(v2_small[3]) + "x" +
           std::to_string(v2_small[4]) + " per thread)",
       v2_bm, v2_bn, v2_owner},
      {"v3 float4 (matmul_sgemm.cu)",
       "block " + std::to_string(v3_bm) + "x" + std::to_string(v3_bn) + ", BK " + std::to_string(v3_bk) +
           ", " + std::to_string(threads) + " threads as " + std::to_string(v3_bm / 8) + "x" +
           std::to_string(v3_tx_count),
       "8x8 outputs per thread: four 4x4 blocks, one per", "quadrant, read as float4s from shared memory",
       v3_bm, v3_bn, v3_owner},
      {"v4 warp tiles (matmul_sgemm.cu)",
       "block " + std::to_string(v4_bm) + "x" + std::to_string(v4_bn) + ", BK " + std::to_string(v4_bk) +
           ", " + std::to_string(warps_m * warps_n) + " warps as " + std::to_string(warps_m) + "x" +
           std::to_string(warps_n) + " of " + std::to_string(wm) + "x" + std::to_string(wn),
       "lanes " + std::to_string(lanes_m) + "x" + std::to_string(lanes_n) +
           " in a warp tile; a lane owns 2x2 blocks",
       "of 4x4, " + std::to_string(sub_m) + " rows and " + std::to_string(sub_n) + " columns apart", v4_bm,
       v4_bn, v4_owner},
  };
  for (int p = 0; p < 3; ++p) {
    const Panel& pn = panels[p];
    const double x = 20 + p * panel;
    svg.text(x, top, pn.title, 13, "start", "#222", true);
    svg.text(x, top + 17, pn.line1, 10.5);
    svg.text(x, top + 31, pn.line2, 10.5);
    svg.text(x, top + 45, pn.line3, 10.5);
    const double y = top + 58;
    draw_block_tile(svg, x, y, pn.bm, pn.bn, scale, pn.owner);
    if (p == 2) {  // the warp tiles' outlines
      for (int w = 0; w < warps_m * warps_n; ++w) {
        const double wx = x + (w % warps_n) * wn * scale, wy = y + (w / warps_n) * wm * scale;
        svg.rect(wx, wy, wn * scale, wm * scale, "none", "#333", 1.2);
        svg.text(wx + wn * scale / 2, wy + wm * scale - 8, "warp " + std::to_string(w), 11, "middle", "#555");
      }
    }
    svg.text(x, y + pn.bm * scale + 16, "rows: M, columns: N of C", 10, "start", "#777");
  }
  svg.text(
      20, 560,
      "Drawn by docs/figures (scripts/make_docs_images.sh) from the tile constants in the kernels' source.",
      10, "start", "#777");
  return svg.str();
}

std::string flash_tiling_figure() {
  const std::string v2_file = "kernels/cuda/attention_flash.cu", tc = "kernels/cuda/attention_flash_tc.cu";
  const int rows = source_constant(v2_file, "kFwdRows"), keys = source_constant(v2_file, "kFwdKeys");
  const int fwd_threads = source_constant(v2_file, "kFwdThreads");
  const int tile = source_constant(tc, "kTile"), warps = source_constant(tc, "kWarps");
  const int frag = source_constant(tc, "kFrag");
  BRIGADE_CHECK_VALUE((rows / 4) * (keys / 4) == fwd_threads, "flash figure: v2's forward is drawn as a ",
                      "(rows/4) x (keys/4) thread grid with 4 x 4 scores per thread");
  BRIGADE_CHECK_VALUE(tile % warps == 0 && (tile / warps) % frag == 0,
                      "flash figure: v3's warps split the tile");

  Svg svg(1010, 470);
  svg.text(20, 24, "Flash attention: tiles of the causal score matrix S = Q Kᵀ", 15, "start", "#222", true);

  // Panel 1: a T x T causal score matrix of 4 x 4 tiles; one query block walks the key tiles up to its
  // diagonal.
  const int t_tiles = 4;
  const double s1 = 72;  // pixels per tile
  const double x1 = 20, y1 = 100;
  const int block = 2;  // the query block drawn walking its key tiles
  svg.text(x1, 52, "v2 forward: one block = " + std::to_string(rows) + " queries", 12, "start", "#222", true);
  svg.text(x1, 68,
           "streams " + std::to_string(keys) +
               "-key tiles of Kᵀ, V to the diagonal (T = " + std::to_string(t_tiles * rows) + ")",
           11);
  for (int qi = 0; qi < t_tiles; ++qi) {
    for (int kj = 0; kj < t_tiles; ++kj) {
      const double x = x1 + kj * s1, y = y1 + qi * s1;
      const bool above = kj > qi;
      const char* fill = above ? "#eeeeee" : qi == block ? "#c6dbef" : "#ffffff";
      svg.rect(x, y, s1, s1, fill, "#888", 0.8);
      if (kj == qi) {  // the diagonal tile: the masked upper triangle
        svg.line(x, y, x + s1, y + s1, "#888", 0.8);
        svg.text(x + s1 * 0.72, y + s1 * 0.3, "j > i", 9, "middle", "#999");
      }
      if (above) svg.text(x + s1 / 2, y + s1 / 2 + 3, "skipped", 9, "middle", "#999");
      if (qi == block && kj <= qi) {
        svg.text(x + s1 / 2, y + s1 / 2 + (kj == qi ? 14 : 4), "step " + std::to_string(kj + 1), 10,
                 "middle");
      }
    }
  }
  svg.text(x1 + t_tiles * s1 / 2, y1 - 6, "keys j →", 11, "middle");
  svg.text(x1 - 4, y1 + t_tiles * s1 + 16,
           "queries i ↓; each tile " + std::to_string(rows) + "x" + std::to_string(keys), 10, "start",
           "#555");

  // Panel 2: one score tile, its threads: thread (ty, tx) owns queries ty*4 + r and keys tx*4 + c.
  const double x2 = 360, y2 = 100, c2 = 3.6;
  svg.text(x2, 52,
           "v2: one " + std::to_string(rows) + "x" + std::to_string(keys) + " score tile, " +
               std::to_string(fwd_threads) + " threads",
           12, "start", "#222", true);
  svg.text(x2, 68,
           "as " + std::to_string(rows / 4) + "x" + std::to_string(keys / 4) +
               "; (ty, tx) owns queries ty*4+r, keys tx*4+c",
           11);
  svg.rect(x2, y2, keys * c2, rows * c2, "#ffffff", "#333", 1);
  for (int i = 0; i < rows; ++i) {
    for (int j = 0; j < keys; ++j) {
      const int ty = i / 4, tx = j / 4;
      const char* fill = ty == 0 && tx == 0   ? kThread0
                         : ty == 0 && tx == 1 ? kThread1
                         : ty == 0            ? kWarpShade
                                              : nullptr;
      if (fill != nullptr) svg.rect(x2 + j * c2, y2 + i * c2, c2, c2, fill, "none", 0);
    }
  }
  for (int g = 1; g < rows / 4; ++g)
    svg.line(x2, y2 + g * 4 * c2, x2 + keys * c2, y2 + g * 4 * c2, "#ddd", 0.5);
  for (int g = 1; g < keys / 4; ++g)
    svg.line(x2 + g * 4 * c2, y2, x2 + g * 4 * c2, y2 + rows * c2, "#ddd", 0.5);
  svg.text(x2, y2 + rows * c2 + 16,
           "the " + std::to_string(keys / 4) + " threads of a row group share 4 queries:", 10.5);
  svg.text(x2, y2 + rows * c2 + 30, "shuffles give the tile's row max and sum (online softmax)", 10.5);
  svg.rect(x2, y2 + rows * c2 + 44, 10, 10, kThread0, "none");
  svg.text(x2 + 14, y2 + rows * c2 + 53, "thread (0,0)", 10);
  svg.rect(x2 + 95, y2 + rows * c2 + 44, 10, 10, kThread1, "none");
  svg.text(x2 + 109, y2 + rows * c2 + 53, "(0,1)", 10);
  svg.rect(x2 + 150, y2 + rows * c2 + 44, 10, 10, kWarpShade, "none");
  svg.text(x2 + 164, y2 + rows * c2 + 53, "rest of row group 0", 10);

  // Panel 3: v3/v4 on tensor cores: warp w owns rows w*16 .. w*16+15; each strip is frag x frag fragments.
  const double x3 = 680, y3 = 100, c3 = 4.2;
  const int warp_rows = tile / warps;
  svg.text(x3, 52,
           "v3/v4: tensor cores, " + std::to_string(warps) + " warps x " + std::to_string(warp_rows) +
               " query rows",
           12, "start", "#222", true);
  svg.text(x3, 68,
           "a warp's strip of S: " + std::to_string(tile / frag) + " WMMA fragments of " +
               std::to_string(frag) + "x" + std::to_string(frag),
           11);
  static const char* warp_fill[] = {"#fde0dd", "#c6dbef", "#c7e9c0", "#fdd0a2", "#dadaeb", "#d9d9d9"};
  for (int w = 0; w < warps; ++w) {
    for (int f = 0; f < tile / frag; ++f) {
      for (int fr = 0; fr < warp_rows / frag; ++fr) {
        svg.rect(x3 + f * frag * c3, y3 + (w * warp_rows + fr * frag) * c3, frag * c3, frag * c3,
                 warp_fill[w % 6], "#555", 0.8);
      }
    }
    svg.text(x3 + tile * c3 + 6, y3 + (w * warp_rows + warp_rows / 2.0) * c3 + 4, "warp " + std::to_string(w),
             11);
  }
  svg.text(x3, y3 + tile * c3 + 16, "S goes to a per-warp fp32 scratch; lanes do the", 10.5);
  svg.text(x3, y3 + tile * c3 + 30, "softmax there and reload P as bf16 fragments", 10.5);
  svg.text(
      20, 460,
      "Drawn by docs/figures (scripts/make_docs_images.sh) from the tile constants in the kernels' source.",
      10, "start", "#777");
  return svg.str();
}

}  // namespace brigade::figures
