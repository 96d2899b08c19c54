// CPU emulation of flash attention v2 (kernels/cuda/attention_flash.cu), float32, D 64 and 128: forward,
// delta, dK/dV and dQ kernels called directly, T around the 64- and 32-row tiles, inputs with padded rows
// (the padding holds NaN, so any stray read shows). References: the CPU backend (kernels::causal_attention
// and its backward), tolerances as tests/kernels/cuda_attention_flash_test.cpp. Built and run by run.sh.
#include <cuda_runtime.h>

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
  const int64_t B = t.size(0), H = t.size(1), T = t.size(2), D = t.size(3);
  auto v = t.to_vector<float>();
  std::vector<float> out(B * H * T * st, NAN);
  for (int64_t r = 0; r < B * H * T; ++r)
    for (int64_t d = 0; d < D; ++d) out[r * st + d] = v[r * D + d];
  return out;
}

template <int D>
int run(int64_t B, int64_t H, int64_t T, int64_t pad) {
  Generator gen(T * 7 + D + pad);
  const Shape shape{B, H, T, D};
  Tensor q = randn(shape, kFloat32, &gen), k = randn(shape, kFloat32, &gen), v = randn(shape, kFloat32, &gen),
         dout = randn(shape, kFloat32, &gen);
  const double scale = 1.0 / std::sqrt(double(D));
  auto ref = kernels::causal_attention(q, k, v, scale);
  auto gref = kernels::causal_attention_backward(dout, q, k, v, ref.out, ref.lse, scale);
  const int64_t st = D + pad;
  auto qv = layout(q, st), kv = layout(k, st), vv = layout(v, st), gv = layout(dout, st),
       ov = layout(ref.out, st);
  const Heads in{H * T * st, T * st, st}, outh{H * T * D, T * D, D};
  const int64_t BH = B * H;
  std::vector<float> out(B * H * T * D), lse(BH * T), delta(BH * T), dq(B * H * T * D), dk(B * H * T * D),
      dv(B * H * T * D);
  emu::launch(emu::cfg(dim3((T + 63) / 64, BH), kFwdThreads, forward_shared_floats<D>() * 4),
              attention_flash_forward_kernel<float, D>, (const float*)qv.data(), in, (const float*)kv.data(),
              in, (const float*)vv.data(), in, out.data(), outh, lse.data(), H, T, (float)scale);
  emu::launch(emu::cfg(dim3(4), 256), attention_flash_delta_kernel<float>, (const float*)gv.data(), in,
              (const float*)ov.data(), in, delta.data(), H, T, BH * T, D);
  emu::launch(emu::cfg(dim3((T + 63) / 64, BH), kBwdThreads, dkdv_shared_floats<D>() * 4),
              attention_flash_dkdv_kernel<float, D>, (const float*)gv.data(), in, (const float*)qv.data(), in,
              (const float*)kv.data(), in, (const float*)vv.data(), in,
              (const float*)ref.lse.template to_vector<float>().data(), (const float*)delta.data(), dk.data(),
              outh, dv.data(), outh, H, T, (float)scale);
  auto lsev = ref.lse.to_vector<float>();
  emu::launch(emu::cfg(dim3((T + 63) / 64, BH), kBwdThreads, dq_shared_floats<D>() * 4),
              attention_flash_dq_kernel<float, D>, (const float*)gv.data(), in, (const float*)qv.data(), in,
              (const float*)kv.data(), in, (const float*)vv.data(), in, (const float*)lsev.data(),
              (const float*)delta.data(), dq.data(), outh, H, T, (float)scale);
  double e[6] = {max_err(out, ref.out, 1e-5, 1e-4), max_err(lse, ref.lse, 1e-5, 1e-5),
                 max_err(dq, gref.dq, 1e-5, 1e-4),  max_err(dk, gref.dk, 1e-5, 1e-4),
                 max_err(dv, gref.dv, 1e-5, 1e-4),  0};
  bool ok = true;
  for (double x : e) ok = ok && x <= 1;
  std::printf("flash B%ld H%ld T%ld D%d pad%ld: out %.3g lse %.3g dq %.3g dk %.3g dv %.3g %s\n", (long)B,
              (long)H, (long)T, D, (long)pad, e[0], e[1], e[2], e[3], e[4], ok ? "ok" : "FAIL");
  return !ok;
}

int main() {
  int f = 0;
  f += run<64>(1, 1, 1, 0);
  f += run<64>(2, 3, 37, 0);
  f += run<64>(1, 2, 65, 8);
  f += run<128>(1, 1, 130, 0);
  f += run<128>(2, 1, 70, 4);
  std::printf("flash emulation: %d failures\n", f);
  return f != 0;
}
