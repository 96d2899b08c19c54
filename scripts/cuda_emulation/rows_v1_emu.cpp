// CPU emulation of the v1 row kernels (kernels/cuda/softmax.cu and layernorm.cu: one block per row, the
// default CUDA path today), float32, kernels called directly with the launch shapes of their host code:
// softmax and log-softmax forward (rows with -inf entries) and backward, layernorm forward, dx, and the
// deterministic dweight/dbias partials + column sums; C from 1 to 1500, R 3 and 9. References: the CPU
// backend. GEN_FILE is softmax.cu, GEN_FILE2 layernorm.cu (transformed). Built and run by run.sh.
#include <cuda_runtime.h>

#define EMU_ROWS_V1
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

int run(int64_t R, int64_t C) {
  Generator gen(R * 1000 + C);
  Tensor x = randn({R, C}, kFloat32, &gen);
  auto xv = x.to_vector<float>();
  for (int64_t i = 0; i < R; ++i)
    for (int64_t j = 1; j < C; j += 3) xv[i * C + j] = -INFINITY;
  x = from_vector(xv, {R, C});
  Tensor dy = randn({R, C}, kFloat32, &gen), w = randn({C}, kFloat32, &gen), bb = randn({C}, kFloat32, &gen);
  auto dyv = dy.to_vector<float>(), wv = w.to_vector<float>(), bv = bb.to_vector<float>();
  int fails = 0;
  const dim3 grid(row_blocks(R)), block(row_threads(C));
  for (int log = 0; log < 2; ++log) {
    std::vector<float> y(R * C), dx(R * C);
    emu::launch(emu::cfg(grid, block), softmax_rows_kernel<float>, (const float*)xv.data(), y.data(), R, C,
                (bool)log);
    Tensor yref = log ? kernels::log_softmax(x) : kernels::softmax(x);
    const double e1 = max_err(y, yref, 1e-6, 1e-5);
    auto yr = yref.to_vector<float>();
    emu::launch(emu::cfg(grid, block), softmax_backward_rows_kernel<float>, (const float*)dyv.data(),
                (const float*)yr.data(), dx.data(), R, C, (bool)log);
    Tensor dxref = log ? kernels::log_softmax_backward(dy, yref) : kernels::softmax_backward(dy, yref);
    const double e2 = max_err(dx, dxref, 1e-6, 1e-5);
    if (e1 > 1 || e2 > 1) {
      ++fails;
      std::printf("softmax v1 R%ld C%ld log%d: fwd %g bwd %g FAIL\n", (long)R, (long)C, log, e1, e2);
    }
  }
  Tensor xn = randn({R, C}, kFloat32, &gen);
  auto xnv = xn.to_vector<float>();
  std::vector<float> y(R * C), mean(R), rstd(R), dx(R * C), dw(C), db(C);
  emu::launch(emu::cfg(grid, block), layernorm_forward_kernel<float>, (const float*)xnv.data(),
              (const float*)wv.data(), (const float*)bv.data(), 1e-5f, y.data(), mean.data(), rstd.data(), R,
              C);
  auto ref = kernels::layernorm(xn, w, bb, 1e-5);
  auto mv = ref.mean.to_vector<float>(), rv = ref.rstd.to_vector<float>();
  emu::launch(emu::cfg(grid, block), layernorm_dx_kernel<float>, (const float*)dyv.data(),
              (const float*)xnv.data(), (const float*)wv.data(), (const float*)mv.data(),
              (const float*)rv.data(), dx.data(), R, C);
  const int64_t P = std::min<int64_t>(R, kMaxParamPartials), rows_per_partial = (R + P - 1) / P;
  std::vector<float> dw_partial(P * C, 12345.f), db_partial(P * C, 12345.f);
  emu::launch(emu::cfg(dim3((C + kParamThreads - 1) / kParamThreads, P), kParamThreads),
              layernorm_param_partials_kernel<float>, (const float*)dyv.data(), (const float*)xnv.data(),
              (const float*)mv.data(), (const float*)rv.data(), dw_partial.data(), db_partial.data(), R, C,
              rows_per_partial);
  emu::launch(emu::cfg(grid_for(C, kParamThreads), kParamThreads), column_sum_kernel<float>,
              (const float*)dw_partial.data(), dw.data(), P, C);
  emu::launch(emu::cfg(grid_for(C, kParamThreads), kParamThreads), column_sum_kernel<float>,
              (const float*)db_partial.data(), db.data(), P, C);
  auto g = kernels::layernorm_backward(dy, xn, w, ref.mean, ref.rstd, true);
  const double e[6] = {max_err(y, ref.y, 1e-6, 1e-5),       max_err(mean, ref.mean, 1e-6, 1e-5),
                       max_err(rstd, ref.rstd, 1e-6, 1e-5), max_err(dx, g.dx, 1e-5, 1e-4),
                       max_err(dw, g.dweight, 1e-4, 1e-5),  max_err(db, g.dbias, 1e-4, 1e-5)};
  bool ok = true;
  for (double v : e) ok = ok && v <= 1;
  if (!ok) {
    ++fails;
    std::printf("layernorm v1 R%ld C%ld: y %g mean %g rstd %g dx %g dw %g db %g FAIL\n", (long)R, (long)C,
                e[0], e[1], e[2], e[3], e[4], e[5]);
  }
  return fails;
}

int main() {
  int f = 0;
  for (int64_t R : {3, 9}) {
    for (int64_t C : {1, 5, 33, 100, 768, 1500}) f += run(R, C);
  }
  std::printf("rows v1 emulation: %d failures\n", f);
  return f != 0;
}
