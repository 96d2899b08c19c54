// CPU emulation of the fp32 SGEMM v3 (Vectorized) and v4 (Warptiled), kernels/cuda/matmul_sgemm.cu, through
// their host launchers: shapes with tails in M, N and K, all four trans combinations, batch 2 with B
// broadcast (stride 0), aligned and misaligned operands (odd leading dims, pointers one element in), C
// with padded rows whose padding must stay untouched. Error measure as tests/kernels/matmul_cases.h:
// |c - ref| / sum_k |a b| <= 1e-5. Built and run by run.sh.
#include <cuda_runtime.h>

#include "stubs.h"
#include "tensor/cuda/cuda_check.h"
#include GEN_FILE
#include <cstdio>
#include <random>

using namespace brigade::kernels;
// cuda_detail stubs are declared in cuda_check.h; define them.

int main() {
  std::mt19937 rng(1);
  std::normal_distribution<float> nd;
  struct S {
    int m, n, k;
  };
  S shapes[] = {{1, 1, 1}, {37, 53, 29}, {131, 136, 48}, {130, 260, 33}, {128, 128, 16}, {5, 7, 300}};
  int failures = 0;
  for (auto s : shapes) {
    for (int flags = 0; flags < 4; ++flags) {
      for (int misalign = 0; misalign < 2; ++misalign) {
        const bool ta = flags & 1, tb = flags & 2;
        const int batch = 2;
        const int ar = ta ? s.k : s.m, ac = ta ? s.m : s.k, br = tb ? s.n : s.k, bc = tb ? s.k : s.n;
        const int lda = misalign ? ac + 3 : (ac + 3) / 4 * 4, ldb = misalign ? bc + 1 : (bc + 3) / 4 * 4;
        const int ldc = (s.n + 3) / 4 * 4 + 4;
        std::vector<float> abuf(batch * ar * lda + 4 + 16), bbuf(br * ldb + 4 + 16),
            cbuf(batch * s.m * ldc + 8, 7.f);
        for (auto& v : abuf) v = nd(rng);
        for (auto& v : bbuf) v = nd(rng);
        float* abase =
            reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(abuf.data()) + 15) / 16 * 16) + misalign;
        float* bbase =
            reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(bbuf.data()) + 15) / 16 * 16) + misalign;
        float* cbase = reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(cbuf.data()) + 15) / 16 * 16);
        GemmArgs args;
        args.a = abase;
        args.b = bbase;
        args.c = cbase;
        args.dtype = brigade::kFloat32;
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
        for (int version = 3; version <= 4; ++version) {
          for (int b = 0; b < batch; ++b)
            for (int i = 0; i < s.m; ++i)
              for (int j = 0; j < ldc; ++j) cbase[b * s.m * ldc + i * ldc + j] = 7.f;
          if (version == 3)
            cuda::gemm_detail::launch_sgemm_vectorized(args, nullptr);
          else
            cuda::gemm_detail::launch_sgemm_warptiled(args, nullptr);
          double worst = 0;
          int bad_pad = 0;
          for (int b = 0; b < batch; ++b)
            for (int i = 0; i < s.m; ++i) {
              for (int j = 0; j < s.n; ++j) {
                double ref = 0, mag = 0;
                for (int p = 0; p < s.k; ++p) {
                  double av = ta ? abase[b * ar * lda + p * lda + i] : abase[b * ar * lda + i * lda + p];
                  double bv = tb ? bbase[j * ldb + p] : bbase[p * ldb + j];
                  ref += av * bv;
                  mag += std::fabs(av * bv);
                }
                double err = std::fabs(cbase[b * s.m * ldc + i * ldc + j] - ref) / (mag + 1e-30);
                if (!(err <= worst)) worst = std::isnan(err) ? 1e30 : err;
              }
              for (int j = s.n; j < ldc; ++j) bad_pad += cbase[b * s.m * ldc + i * ldc + j] != 7.f;
            }
          const bool ok = worst <= 1e-5 && bad_pad == 0;
          failures += !ok;
          if (!ok || (s.m == 131 && flags == 3))
            std::printf("v%d %dx%dx%d ta=%d tb=%d misalign=%d: worst %.3g, pad writes %d %s\n", version, s.m,
                        s.n, s.k, ta, tb, misalign, worst, bad_pad, ok ? "ok" : "FAIL");
        }
      }
    }
  }
  std::printf("sgemm emulation: %d failures\n", failures);
  return failures != 0;
}
