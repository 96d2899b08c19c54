// CPU GEMM v2: BLIS's five loops (kernels/cpu/gemm_loops.h) around a 6 x 16 AVX2/FMA micro-kernel.
//
// What v1 (kernels/cpu/matmul.cpp) leaves on the table: it avoids FMA on purpose (its AVX2 build keeps the
// bits of the SSE2 build), so each multiply-add is two instructions and its ceiling is half the core's
// peak; its blocks are fixed numbers, not the machine's caches. v2 uses the fused multiply-add and takes its
// blocks from the reported cache sizes.
//
// Micro-kernel, napkin math. 16 ymm registers: 6 x 16 floats of C = 12 accumulators, + 2 for a row of the B
// micro-panel, + 1 for the broadcast of an A value = 15. Per k step: 2 vector loads and 6 broadcasts for
// 12 FMAs (192 flops): 24 flops per value loaded. A core with two 256-bit FMA pipes (Zen 4, Skylake)
// retires 2 FMAs per cycle, so the tile takes 6 cycles per k step; FMA latency 4 cycles x 2 pipes needs
// >= 8 independent accumulators, and there are 12. Peak 32 flops/cycle/core (measured by
// bench/cpu_peak_bench).
//
// Contract of a Kernel for run_gemm (the same in v3, v4):
//   MR, NR                   the register tile
//   KSTEP, Packed            k values per packed element (1: float; 2: a bf16 pair in 32 bits)
//   pack_a<T>(a, lda, trans, mc, kc, out)  op(A) rows [0, mc) x k [0, kc) into MR-row micro-panels
//   pack_b<T>(b, ldb, trans, kc, nc, out)  op(B) k [0, kc) x cols [0, nc) into NR-column micro-panels
//   tile(kc, a, b, c, ldc, first, bias)    the MR x NR product of one pair of micro-panels over kc k
//                                          values, stored into c (first) or added to it, then bias[0..NR)
//                                          added to each row where bias is not nullptr; float c
//   tile_rows(kc, a, lda, b, c, ldc, first, bias)  optional (v2, v3): tile with A's MR rows read where they
//   lie
//                                          (row i at a + i * lda) instead of from a packed micro-panel
//                                          (gemm_loops.h: reads_rows_of_a)
//
// What v3 improves: AVX-512's 32 registers hold a 12 x 32 tile: twice the flops per value loaded, and
// half the instructions per flop.
#include "kernels/cpu/cpu_features.h"  // BRIGADE_CPU_X86
#include "kernels/cpu/matmul.h"

#if BRIGADE_CPU_X86
#include <immintrin.h>

#include "kernels/cpu/gemm_loops.h"
#endif

namespace brigade::kernels::cpu {
#if BRIGADE_CPU_X86
namespace {

struct Avx2FmaKernel {
  static constexpr int64_t MR = 6, NR = 16, KSTEP = 1;
  using Packed = float;

  template <typename T>
  __attribute__((target("avx2,fma"), noinline)) static void pack_a(const T* a, int64_t lda, bool trans,
                                                                   int64_t mc, int64_t kc, float* out) {
    detail::pack_a<T, float, MR>(a, lda, trans, mc, kc, out);
  }
  template <typename T>
  __attribute__((target("avx2,fma"), noinline)) static void pack_b(const T* b, int64_t ldb, bool trans,
                                                                   int64_t kc, int64_t nc, float* out) {
    detail::pack_b<T, float, NR>(b, ldb, trans, kc, nc, out);
  }

  __attribute__((target("avx2,fma"), noinline)) static void tile(int64_t kc, const float* __restrict a,
                                                                 const float* __restrict b,
                                                                 float* __restrict c, int64_t ldc, bool first,
                                                                 const float* bias) {
    tile_loop<false>(kc, a, 0, b, c, ldc, first, bias);
  }

  __attribute__((target("avx2,fma"), noinline)) static void tile_rows(int64_t kc, const float* __restrict a,
                                                                      int64_t lda, const float* __restrict b,
                                                                      float* __restrict c, int64_t ldc,
                                                                      bool first, const float* bias) {
    tile_loop<true>(kc, a, lda, b, c, ldc, first, bias);
  }

  /// The k loop of both: A's element (i, p) at a[p * MR + i] (packed) or a[i * lda + p] (kRowsOfA).
  template <bool kRowsOfA>
  __attribute__((target("avx2,fma"), always_inline)) static void tile_loop(
      int64_t kc, const float* __restrict a, int64_t lda, const float* __restrict b, float* __restrict c,
      int64_t ldc, bool first, const float* bias) {
    __m256 acc[MR][2];
#pragma GCC unroll 6
    for (int i = 0; i < MR; ++i) acc[i][0] = acc[i][1] = _mm256_setzero_ps();
    for (int64_t p = 0; p < kc; ++p, a += kRowsOfA ? 1 : MR, b += NR) {
      const __m256 b0 = _mm256_loadu_ps(b), b1 = _mm256_loadu_ps(b + 8);
#pragma GCC unroll 6
      for (int i = 0; i < MR; ++i) {
        const __m256 ai = _mm256_broadcast_ss(kRowsOfA ? a + i * lda : a + i);
        acc[i][0] = _mm256_fmadd_ps(ai, b0, acc[i][0]);
        acc[i][1] = _mm256_fmadd_ps(ai, b1, acc[i][1]);
      }
    }
    // Stored (first) or added to C, then the bias added: two roundings, as a separate add would make.
    const __m256 bias0 = bias != nullptr ? _mm256_loadu_ps(bias) : _mm256_setzero_ps();
    const __m256 bias1 = bias != nullptr ? _mm256_loadu_ps(bias + 8) : _mm256_setzero_ps();
#pragma GCC unroll 6
    for (int i = 0; i < MR; ++i) {
      float* row = c + i * ldc;
      __m256 v0 = acc[i][0], v1 = acc[i][1];
      if (!first) {
        v0 = _mm256_add_ps(_mm256_loadu_ps(row), v0);
        v1 = _mm256_add_ps(_mm256_loadu_ps(row + 8), v1);
      }
      if (bias != nullptr) {
        v0 = _mm256_add_ps(v0, bias0);
        v1 = _mm256_add_ps(v1, bias1);
      }
      _mm256_storeu_ps(row, v0);
      _mm256_storeu_ps(row + 8, v1);
    }
  }
};

}  // namespace

void gemm_avx2_fma(const GemmArgs& args) {
  static const detail::GemmBlocks blocks =
      detail::blocks_from_caches(Avx2FmaKernel::MR, Avx2FmaKernel::NR, sizeof(float));
  if (args.dtype == DType::BFloat16) {
    detail::run_gemm<bfloat16, Avx2FmaKernel>(args, blocks);
  } else {
    detail::run_gemm<float, Avx2FmaKernel>(args, blocks);
  }
}

#else

void gemm_avx2_fma(const GemmArgs&) {
  BRIGADE_THROW(DeviceError, "matmul: v2-avx2-fma needs an x86-64 build");
}

#endif  // BRIGADE_CPU_X86
}  // namespace brigade::kernels::cpu
