// CPU emulation of a bf16 tensor-core GEMM, v5 (matmul_wmma.cu) or v6 (matmul_wmma_async.cu): GEN_FILE is
// the transformed kernel file and LAUNCH its launcher. Same cases as sgemm_emu.cpp, bf16 operands, error
// <= 1e-2 of sum_k |a b| (the output is rounded to bf16). Built and run by run.sh.
#include <cuda_runtime.h>

#include "stubs.h"
#include "tensor/cuda/cuda_check.h"
#include GEN_FILE
#include <cstdio>
#include <random>

using namespace brigade;
using namespace brigade::kernels;

int main() {
  std::mt19937 rng(1);
  std::normal_distribution<float> nd;
  struct S {
    int m, n, k;
  };
  S shapes[] = {{1, 1, 1}, {37, 53, 29}, {131, 136, 48}, {130, 260, 33}, {16, 128, 64}};
  int failures = 0;
  for (auto s : shapes) {
    for (int flags = 0; flags < 4; ++flags) {
      for (int misalign = 0; misalign < 2; ++misalign) {
        const bool ta = flags & 1, tb = flags & 2;
        const int batch = 2;
        const int ar = ta ? s.k : s.m, ac = ta ? s.m : s.k, br = tb ? s.n : s.k, bc = tb ? s.k : s.n;
        const int lda = misalign ? ac + 3 : (ac + 7) / 8 * 8, ldb = misalign ? bc + 1 : (bc + 7) / 8 * 8;
        const int ldc = s.n + 5;
        std::vector<bfloat16> abuf(batch * ar * lda + 16), bbuf(br * ldb + 16), cbuf(batch * s.m * ldc + 16);
        for (auto& v : abuf) v = bfloat16(nd(rng));
        for (auto& v : bbuf) v = bfloat16(nd(rng));
        auto align = [&](bfloat16* p) {
          return reinterpret_cast<bfloat16*>((reinterpret_cast<uintptr_t>(p) + 15) / 16 * 16);
        };
        bfloat16* abase = align(abuf.data()) + misalign;
        bfloat16* bbase = align(bbuf.data()) + misalign;
        bfloat16* cbase = align(cbuf.data());
        for (int i = 0; i < batch * s.m * ldc; ++i) cbase[i] = bfloat16(7.f);
        GemmArgs args;
        args.a = abase;
        args.b = bbase;
        args.c = cbase;
        args.dtype = kBFloat16;
        args.m = s.m;
        args.n = s.n;
        args.k = s.k;
        args.lda = lda;
        args.ldb = ldb;
        args.ldc = ldc;
        args.trans_a = ta;
        args.trans_b = tb;
        args.batch = batch;
        args.stride_a = ar * lda;
        args.stride_b = 0;
        args.stride_c = s.m * ldc;
        cuda::gemm_detail::LAUNCH(args, nullptr);
        double worst = 0;
        int bad_pad = 0;
        for (int b = 0; b < batch; ++b)
          for (int i = 0; i < s.m; ++i) {
            for (int j = 0; j < s.n; ++j) {
              double ref = 0, mag = 0;
              for (int p = 0; p < s.k; ++p) {
                double av =
                    ta ? float(abase[b * ar * lda + p * lda + i]) : float(abase[b * ar * lda + i * lda + p]);
                double bv = tb ? float(bbase[j * ldb + p]) : float(bbase[p * ldb + j]);
                ref += av * bv;
                mag += std::fabs(av * bv);
              }
              double err = std::fabs(float(cbase[b * s.m * ldc + i * ldc + j]) - ref) / (mag + 1e-30);
              if (!(err <= worst)) worst = std::isnan(err) ? 1e30 : err;
            }
            for (int j = s.n; j < ldc; ++j) bad_pad += float(cbase[b * s.m * ldc + i * ldc + j]) != 7.f;
          }
        const bool ok = worst <= 1e-2 && bad_pad == 0;
        failures += !ok;
        if (!ok || s.m == 131)
          std::printf("%dx%dx%d ta=%d tb=%d misalign=%d: worst %.3g pad %d %s\n", s.m, s.n, s.k, ta, tb,
                      misalign, worst, bad_pad, ok ? "ok" : "FAIL");
      }
    }
  }
  std::printf("wmma emulation (" GEN_FILE "): %d failures\n", failures);
  return failures != 0;
}
