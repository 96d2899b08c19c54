// CPU emulation of the v2 row kernels (one warp per row: kernels/cuda/softmax_warp.cu and layernorm_warp.cu),
// float32, called directly: softmax and log-softmax forward (rows with -inf entries) and backward, layernorm
// forward, layernorm backward with the per-warp partials and the sliced column sums; C from 1 to 1024 across
// the lane-count templates, R 3 and 37. References: the CPU backend. GEN_FILE is softmax_warp.cu, GEN_FILE2
// layernorm_warp.cu (transformed). Built and run by run.sh.
#include <cuda_runtime.h>

#include "stubs.h"
#include "tensor/cuda/cuda_check.h"
#include GEN_FILE
#include GEN_FILE2
#include <cstdio>

#include "kernels/kernels.h"

using namespace brigade;
using namespace brigade::kernels::cuda;

double max_err(const std::vector<float>& got, const Tensor& ref, double atol, double rtol) {
  auto r = ref.to_vector<double>();
  double worst = 0;
  for (size_t i = 0; i < r.size(); ++i) {
    if (std::isinf(r[i]) && r[i] == got[i]) continue;
    double e = std::fabs(got[i] - r[i]) / (atol + rtol * std::fabs(r[i]));
    if (!(e <= worst)) worst = std::isnan(e) ? 1e30 : e;
  }
  return worst;
}

template <int N>
int run(int64_t R, int C) {
  Generator gen(R * 1000 + C);
  Tensor x = randn({R, C}, kFloat32, &gen);
  auto xv = x.to_vector<float>();
  for (int64_t i = 0; i < R; ++i)
    for (int j = 1; j < C; j += 3) xv[i * C + j] = -INFINITY;
  x = from_vector(xv, {R, C});
  Tensor dy = randn({R, C}, kFloat32, &gen), w = randn({C}, kFloat32, &gen), bb = randn({C}, kFloat32, &gen);
  auto dyv = dy.to_vector<float>(), wv = w.to_vector<float>(), bv = bb.to_vector<float>();
  int fails = 0;
  const unsigned grid = grid_for(R, kWarpsPerBlock);
  for (int log = 0; log < 2; ++log) {
    std::vector<float> y(R * C), dx(R * C);
    emu::launch(emu::cfg(grid, kThreads), softmax_warp_kernel<float, N>, (const float*)xv.data(), y.data(), R,
                C, (bool)log);
    Tensor yref = log ? kernels::log_softmax(x) : kernels::softmax(x);
    double e1 = max_err(y, yref, 1e-6, 1e-5);
    auto yr = yref.to_vector<float>();
    emu::launch(emu::cfg(grid, kThreads), softmax_backward_warp_kernel<float, N>, (const float*)dyv.data(),
                (const float*)yr.data(), dx.data(), R, C, (bool)log);
    Tensor dxref = log ? kernels::log_softmax_backward(dy, yref) : kernels::softmax_backward(dy, yref);
    double e2 = max_err(dx, dxref, 1e-6, 1e-5);
    if (e1 > 1 || e2 > 1) {
      ++fails;
      std::printf("softmax R%ld C%d log%d: fwd %g bwd %g FAIL\n", (long)R, C, log, e1, e2);
    }
  }
  // layernorm fwd + bwd (no -inf here)
  Tensor xn = randn({R, C}, kFloat32, &gen);
  auto xnv = xn.to_vector<float>();
  std::vector<float> y(R * C), mean(R), rstd(R), dx(R * C), dw(C), db(C);
  emu::launch(emu::cfg(grid, kThreads), layernorm_forward_warp_kernel<float, N>, (const float*)xnv.data(),
              (const float*)wv.data(), (const float*)bv.data(), 1e-5f, y.data(), mean.data(), rstd.data(), R,
              C);
  auto ref = kernels::layernorm(xn, w, bb, 1e-5);
  double e3 = max_err(y, ref.y, 1e-6, 1e-5), e4 = max_err(mean, ref.mean, 1e-6, 1e-5),
         e5 = max_err(rstd, ref.rstd, 1e-6, 1e-5);
  const int64_t blocks = std::min<int64_t>((R + kWarpsPerBlock - 1) / kWarpsPerBlock, kMaxParamBlocks);
  const int64_t W = blocks * kWarpsPerBlock;
  std::vector<float> partials(2 * W * C, 12345.f);
  auto mv = ref.mean.to_vector<float>(), rv = ref.rstd.to_vector<float>();
  emu::launch(emu::cfg((unsigned)blocks, kThreads), layernorm_backward_warp_kernel<float, N>,
              (const float*)dyv.data(), (const float*)xnv.data(), (const float*)wv.data(),
              (const float*)mv.data(), (const float*)rv.data(), dx.data(), partials.data(),
              partials.data() + W * C, R, C);
  emu::launch(emu::cfg((unsigned)((C + kSumColumns - 1) / kSumColumns), dim3(kSumColumns, kSumSlices)),
              layernorm_param_sum_kernel<float>, (const float*)partials.data(), dw.data(), W, C);
  emu::launch(emu::cfg((unsigned)((C + kSumColumns - 1) / kSumColumns), dim3(kSumColumns, kSumSlices)),
              layernorm_param_sum_kernel<float>, (const float*)partials.data() + W * C, db.data(), W, C);
  auto g = kernels::layernorm_backward(dy, xn, w, ref.mean, ref.rstd, true);
  double e6 = max_err(dx, g.dx, 1e-5, 1e-4), e7 = max_err(dw, g.dweight, 1e-4, 1e-5),
         e8 = max_err(db, g.dbias, 1e-4, 1e-5);
  if (e3 > 1 || e4 > 1 || e5 > 1 || e6 > 1 || e7 > 1 || e8 > 1) {
    ++fails;
    std::printf("layernorm R%ld C%d: y %g mean %g rstd %g dx %g dw %g db %g FAIL\n", (long)R, C, e3, e4, e5,
                e6, e7, e8);
  }
  return fails;
}

int main() {
  int f = 0;
  for (int64_t R : {3, 37}) {
    f += run<1>(R, 1);
    f += run<1>(R, 5);
    f += run<1>(R, 32);
    f += run<2>(R, 33);
    f += run<4>(R, 100);
    f += run<32>(R, 768);
    f += run<32>(R, 1024);
  }
  std::printf("rows emulation: %d failures\n", f);
  return f != 0;
}
