// CPU emulation of causal attention v1 (kernels/cuda/attention.cu, the simple kernels; the path
// kernels::causal_attention runs on CUDA today), float32: forward, backward query and backward key
// kernels called directly, odd T and D, inputs with NaN-filled padded rows. References: the CPU backend,
// tolerances as the op table's CUDA attention cases (tests/ops/cuda_op_table_test.cpp). Built and run by
// run.sh.
#include <cuda_runtime.h>

#define EMU_ATTENTION_V1
#include "stubs.h"
#include "tensor/cuda/cuda_check.h"
#include GEN_FILE
#include <cstdio>

#include "kernels/kernels.h"

using namespace brigade;
using namespace brigade::kernels::cuda;

double max_err(const std::vector<float>& got, const Tensor& ref, double atol, double rtol) {
  auto r = ref.to_vector<double>();
  double worst = 0;
  for (size_t i = 0; i < r.size(); ++i) {
    double e = std::fabs(got[i] - r[i]) / (atol + rtol * std::fabs(r[i]));
    if (!(e <= worst)) worst = std::isnan(e) ? 1e30 : e;
  }
  return worst;
}

/// [B,H,T,D] values laid out with row stride `st` >= D (padding filled with NaN to catch stray reads).
std::vector<float> layout(const Tensor& t, int64_t st) {
  const int64_t rows = t.size(0) * t.size(1) * t.size(2), D = t.size(3);
  auto v = t.to_vector<float>();
  std::vector<float> out(rows * st, NAN);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t d = 0; d < D; ++d) out[r * st + d] = v[r * D + d];
  return out;
}

int run(int64_t B, int64_t H, int64_t T, int64_t D, int64_t pad) {
  Generator gen(T * 13 + D + pad);
  const Shape shape{B, H, T, D};
  Tensor q = randn(shape, kFloat32, &gen), k = randn(shape, kFloat32, &gen), v = randn(shape, kFloat32, &gen),
         dout = randn(shape, kFloat32, &gen);
  const double scale = 1.0 / std::sqrt(double(D));
  auto ref = kernels::causal_attention(q, k, v, scale);
  auto gref = kernels::causal_attention_backward(dout, q, k, v, ref.out, ref.lse, scale);
  const int64_t st = D + pad, BH = B * H;
  auto qv = layout(q, st), kv = layout(k, st), vv = layout(v, st), gv = layout(dout, st),
       ov = layout(ref.out, st);
  auto lsev = ref.lse.to_vector<float>();
  const Heads in{H * T * st, T * st, st}, outh{H * T * D, T * D, D};
  std::vector<float> out(BH * T * D), lse(BH * T), delta(BH * T), dq(BH * T * D), dk(BH * T * D),
      dv(BH * T * D);
  const float s = static_cast<float>(scale);
  const dim3 grid(row_blocks(BH * T));
  emu::launch(emu::cfg(grid, kThreads, (T + D) * 4), attention_forward_kernel<float>, (const float*)qv.data(),
              in, (const float*)kv.data(), in, (const float*)vv.data(), in, out.data(), outh, lse.data(), BH,
              H, T, D, s);
  emu::launch(emu::cfg(grid, kThreads, (T + D) * 4), attention_backward_query_kernel<float>,
              (const float*)gv.data(), in, (const float*)qv.data(), in, (const float*)kv.data(), in,
              (const float*)vv.data(), in, (const float*)ov.data(), in, (const float*)lsev.data(), dq.data(),
              outh, delta.data(), BH, H, T, D, s);
  emu::launch(emu::cfg(grid, kThreads, (2 * T + 2 * D) * 4), attention_backward_key_kernel<float>,
              (const float*)gv.data(), in, (const float*)qv.data(), in, (const float*)kv.data(), in,
              (const float*)vv.data(), in, (const float*)lsev.data(), (const float*)delta.data(), dk.data(),
              outh, dv.data(), outh, BH, H, T, D, s);
  const double e[5] = {max_err(out, ref.out, 1e-5, 1e-4), max_err(lse, ref.lse, 1e-5, 1e-5),
                       max_err(dq, gref.dq, 1e-5, 1e-4), max_err(dk, gref.dk, 1e-5, 1e-4),
                       max_err(dv, gref.dv, 1e-5, 1e-4)};
  bool ok = true;
  for (double x : e) ok = ok && x <= 1;
  std::printf("attention v1 B%ld H%ld T%ld D%ld pad%ld: out %.3g lse %.3g dq %.3g dk %.3g dv %.3g %s\n",
              (long)B, (long)H, (long)T, (long)D, (long)pad, e[0], e[1], e[2], e[3], e[4],
              ok ? "ok" : "FAIL");
  return !ok;
}

int main() {
  int f = 0;
  f += run(1, 1, 1, 1, 0);
  f += run(2, 3, 7, 5, 3);
  f += run(1, 2, 33, 16, 0);
  f += run(1, 1, 70, 64, 4);
  std::printf("attention v1 emulation: %d failures\n", f);
  return f != 0;
}
