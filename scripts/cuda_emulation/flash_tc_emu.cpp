// CPU emulation of causal attention v3 and v4 (kernels/cuda/attention_flash_tc.cu: flash attention on WMMA
// tensor cores; v4 adds cp.async double buffering, emulated as synchronous copies into the second buffer),
// bfloat16, D 64 and 128: the forward, delta, dK/dV and dQ kernels called directly, T around the
// 64-row tiles (1, 37, 64, 65, 130, 200: tails and several tiles), inputs with padded rows (the padding
// holds NaN bits, so a stray read shows) and unaligned row strides (the scalar staging path).
// References: the CPU backend on the same bf16 inputs (kernels::causal_attention and its backward), with
// the bf16 tolerances of tests/kernels/cuda_attention_flash_test.cpp (rtol 2e-2, atol 4e-3; lse 1e-5).
// Built and run by run.sh.
#define EMU_ATTENTION_V3  // this harness compiles v3's entry points itself (stubs.h)
#ifndef BRIGADE_CUDA_EMULATION
#define BRIGADE_CUDA_EMULATION 1  // kernels/cuda/mma_ptx.cuh's cp.async takes its host reference path
#endif
#include <cuda_runtime.h>

#include "stubs.h"
#include "tensor/cuda/cuda_check.h"
#include GEN_FILE
#include <cstdio>

#include "kernels/kernels.h"

using namespace brigade;
using namespace brigade::kernels::cuda::attention_detail;

/// Worst |got - ref| / (atol + rtol |ref|) over all elements (NaN counts as a failure).
template <typename G>
double max_err(const std::vector<G>& got, const Tensor& ref, double atol, double rtol) {
  auto r = ref.to_vector<double>();
  double worst = 0;
  for (size_t i = 0; i < r.size(); ++i) {
    double e = std::fabs(double(float(got[i])) - r[i]) / (atol + rtol * std::fabs(r[i]));
    if (!(e <= worst)) worst = std::isnan(e) ? 1e30 : e;
  }
  return worst;
}

/// bf16 bits of a [B,H,T,D] tensor laid out with row stride `st` >= D; the padding holds NaN bits.
std::vector<uint16_t> layout(const Tensor& t, int64_t st) {
  const int64_t rows = t.size(0) * t.size(1) * t.size(2), D = t.size(3);
  auto v = t.to_vector<float>();
  std::vector<uint16_t> out(rows * st, 0x7fc0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t d = 0; d < D; ++d) out[r * st + d] = bfloat16(v[r * D + d]).bits;
  return out;
}

/// The backward as the kernels compute it, in double: with p = exp(scale q.k - lse), dv takes bf16(p) and
/// dq, dk take ds = bf16(p (dout.v - delta)) (p unrounded there), as the kernels round P and dS for the
/// tensor cores. Agreement to a bf16 step says the kernels' index math is exact and only that rounding
/// separates them from the CPU backend (modelling dS from the rounded p instead misses by 2-7 steps).
struct RoundedGrads {
  std::vector<double> dq, dk, dv;
};
RoundedGrads rounded_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& dout,
                              const std::vector<float>& lse, const std::vector<float>& delta, double scale) {
  const int64_t BH = q.size(0) * q.size(1), T = q.size(2), D = q.size(3);
  auto Q = q.to_vector<double>(), K = k.to_vector<double>(), V = v.to_vector<double>(),
       G = dout.to_vector<double>();
  RoundedGrads g{std::vector<double>(Q.size()), std::vector<double>(Q.size()), std::vector<double>(Q.size())};
  auto round_bf16 = [](double x) { return double(float(bfloat16(float(x)))); };
  for (int64_t bh = 0; bh < BH; ++bh)
    for (int64_t i = 0; i < T; ++i)
      for (int64_t j = 0; j <= i; ++j) {
        const int64_t qi = (bh * T + i) * D, kj = (bh * T + j) * D;
        double s = 0, dp = 0;
        for (int64_t d = 0; d < D; ++d) s += Q[qi + d] * K[kj + d], dp += G[qi + d] * V[kj + d];
        const double p_exact = std::exp(s * scale - lse[bh * T + i]);
        const double p = round_bf16(p_exact);
        const double ds = round_bf16(p_exact * (dp - delta[bh * T + i]));
        for (int64_t d = 0; d < D; ++d) {
          g.dv[kj + d] += p * G[qi + d];
          g.dk[kj + d] += scale * ds * Q[qi + d];
          g.dq[qi + d] += scale * ds * K[kj + d];
        }
      }
  return g;
}

/// Worst |got - ref| / (atol + rtol |ref|) against a double reference.
double max_err_to(const std::vector<bfloat16>& got, const std::vector<double>& ref, double atol,
                  double rtol) {
  double worst = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    double e = std::fabs(double(float(got[i])) - ref[i]) / (atol + rtol * std::fabs(ref[i]));
    if (!(e <= worst)) worst = std::isnan(e) ? 1e30 : e;
  }
  return worst;
}

template <int D, bool kAsync>
int run(int64_t B, int64_t H, int64_t T, int64_t pad) {
  Generator gen(T * 7 + D + pad);
  const Shape shape{B, H, T, D};
  auto rnd = [&] { return randn(shape, kFloat32, &gen).to(kBFloat16); };
  const Tensor q = rnd(), k = rnd(), v = rnd(), dout = rnd();
  const double scale = 1.0 / std::sqrt(double(D));
  auto ref = kernels::causal_attention(q, k, v, scale);
  auto gref = kernels::causal_attention_backward(dout, q, k, v, ref.out, ref.lse, scale);

  const int64_t st = D + pad, BH = B * H, n = B * H * T * D;
  auto qv = layout(q, st), kv = layout(k, st), vv = layout(v, st), gv = layout(dout, st),
       ov = layout(ref.out, st);
  const bool vec = st % 8 == 0;  // what the launcher's rows_16b_aligned decides for these strides
  const Heads in{H * T * st, T * st, st}, outh{H * T * D, T * D, D};
  std::vector<bfloat16> out(n), dq(n), dk(n), dv(n);
  std::vector<float> lse(BH * T), delta(BH * T);
  auto lse_ref = ref.lse.to_vector<float>();
  const dim3 grid((T + 63) / 64, BH);
  emu::launch(emu::cfg(grid, kThreads, forward_shared_bytes<D, kAsync>()),
              attention_flash_tc_forward_kernel<D, kAsync>, (const uint16_t*)qv.data(), in,
              (const uint16_t*)kv.data(), in, (const uint16_t*)vv.data(), in, vec, out.data(), outh,
              lse.data(), H, T, (float)scale);
  emu::launch(emu::cfg(dim3(4), 256), kernels::cuda::attention_flash_delta_kernel<bfloat16>,
              (const bfloat16*)gv.data(), in, (const bfloat16*)ov.data(), in, delta.data(), H, T, BH * T, D);
  // The backward starts from the CPU forward's lse (as the CUDA test does), so only the backward differs.
  emu::launch(emu::cfg(grid, kThreads, dkdv_shared_bytes<D, kAsync>()),
              attention_flash_tc_dkdv_kernel<D, kAsync>, (const uint16_t*)gv.data(), in,
              (const uint16_t*)qv.data(), in, (const uint16_t*)kv.data(), in, (const uint16_t*)vv.data(), in,
              vec, (const float*)lse_ref.data(), (const float*)delta.data(), dk.data(), outh, dv.data(), outh,
              H, T, (float)scale);
  emu::launch(emu::cfg(grid, kThreads, dq_shared_bytes<D, kAsync>()), attention_flash_tc_dq_kernel<D, kAsync>,
              (const uint16_t*)gv.data(), in, (const uint16_t*)qv.data(), in, (const uint16_t*)kv.data(), in,
              (const uint16_t*)vv.data(), in, vec, (const float*)lse_ref.data(), (const float*)delta.data(),
              dq.data(), outh, H, T, (float)scale);
  // Against the CPU backend: bf16 tolerances, the gradients' atol widened for the rounding of P and dS (see
  // tests/kernels/cuda_attention_flash_test.cpp). Against the rounded double backward: one bf16 step
  // (the kernels round their fp32 sums once) and atol 1e-3 for sums that cancel.
  const double rtol = 2e-2, atol = 4e-3, grad_atol = 1e-2;
  const RoundedGrads rg = rounded_backward(q, k, v, dout, lse_ref, delta, scale);
  const double e[8] = {max_err(out, ref.out, atol, rtol),     max_err(lse, ref.lse, 1e-5, 1e-5),
                       max_err(dq, gref.dq, grad_atol, rtol), max_err(dk, gref.dk, grad_atol, rtol),
                       max_err(dv, gref.dv, grad_atol, rtol), max_err_to(dq, rg.dq, 1e-3, 8e-3),
                       max_err_to(dk, rg.dk, 1e-3, 8e-3),     max_err_to(dv, rg.dv, 1e-3, 8e-3)};
  bool ok = true;
  for (double x : e) ok = ok && x <= 1;
  std::printf(
      "%s B%ld H%ld T%ld D%d pad%ld%s: out %.3g lse %.3g dq %.3g dk %.3g dv %.3g | rounded "
      "reference: dq %.3g dk %.3g dv %.3g %s\n",
      kAsync ? "flash_tc_async" : "flash_tc", (long)B, (long)H, (long)T, D, (long)pad,
      vec ? "" : " (scalar staging)", e[0], e[1], e[2], e[3], e[4], e[5], e[6], e[7], ok ? "ok" : "FAIL");
  return !ok;
}

template <bool kAsync>
int run_all() {
  int f = 0;
  f += run<64, kAsync>(1, 1, 1, 0);
  f += run<64, kAsync>(2, 3, 37, 0);
  f += run<64, kAsync>(1, 2, 65, 8);
  f += run<64, kAsync>(1, 1, 200, 3);
  f += run<128, kAsync>(1, 1, 130, 0);
  f += run<128, kAsync>(2, 1, 70, 5);
  f += run<128, kAsync>(2, 1, 200, 0);
  return f;
}

int main() {
  const int f = run_all<false>() + run_all<true>();
  std::printf("flash_tc emulation: %d failures\n", f);
  return f != 0;
}
