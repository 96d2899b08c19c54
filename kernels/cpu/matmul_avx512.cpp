// CPU GEMM v3: BLIS's five loops (kernels/cpu/gemm_loops.h) around a 12 x 32 AVX-512 micro-kernel.
//
// What v2 (kernels/cpu/matmul_avx2_fma.cpp) leaves on the table: with 16 registers its 6 x 16 tile loads
// one value per 24 flops and issues one instruction per 16 flops. AVX-512 has 32 zmm registers of 16
// floats: a 12 x 32 tile = 24 accumulators + 2 for a row of B + 1 broadcast = 27 registers. Per k step:
// 2 vector loads and 12 broadcasts (folded into the FMA as an embedded {1to16} operand) for 24 FMAs
// (768 flops): 55 flops per value loaded and 32 flops per instruction. On Intel server cores with two
// 512-bit FMA pipes that doubles the peak; on Zen 4 a 512-bit FMA occupies both 256-bit pipes for one
// cycle (the same 32 flops/cycle as AVX2), and the gain is fewer instructions and loads per flop, which
// leaves room for the packing and C traffic. The A micro-panel is 12 x KC floats: KC = 336 at 32 KiB L1.
//
// What v4 improves: bfloat16 operands multiplied as bf16 pairs (vdpbf16ps), twice the flops per
// instruction, instead of widened to float while packing.
#include "kernels/cpu/cpu_features.h"  // BRIGADE_CPU_X86
#include "kernels/cpu/matmul.h"

#if BRIGADE_CPU_X86
#include <immintrin.h>

#include "kernels/cpu/gemm_loops.h"
#include "kernels/cpu/gemm_tile_avx512.h"
#endif

namespace brigade::kernels::cpu {
#if BRIGADE_CPU_X86
namespace {

struct Avx512Kernel {
  static constexpr int64_t MR = detail::kAvx512TileRows, NR = 32, KSTEP = 1;
  using Packed = float;

  template <typename T>
  __attribute__((target("avx512f"), noinline)) static void pack_a(const T* a, int64_t lda, bool trans,
                                                                  int64_t mc, int64_t kc, float* out) {
    detail::pack_a<T, float, MR>(a, lda, trans, mc, kc, out);
  }
  template <typename T>
  __attribute__((target("avx512f"), noinline)) static void pack_b(const T* b, int64_t ldb, bool trans,
                                                                  int64_t kc, int64_t nc, float* out) {
    detail::pack_b<T, float, NR>(b, ldb, trans, kc, nc, out);
  }

  __attribute__((target("avx512f"), noinline)) static void tile(int64_t kc, const float* __restrict a,
                                                                const float* __restrict b,
                                                                float* __restrict c, int64_t ldc, bool first,
                                                                const float* bias) {
    tile_loop<false>(kc, a, 0, b, c, ldc, first, bias);
  }

  /// tile with op(A) read where it lies instead of from a packed micro-panel: row i of the tile at a + i *
  /// lda, its k values contiguous (an untransposed A). The 12 rows are 12 streams, each cache line of them
  /// used for 16 k steps and again for every B micro-panel of the block; gemm_loops.h (reads_rows_of_a) says
  /// when.
  __attribute__((target("avx512f"), noinline)) static void tile_rows(int64_t kc, const float* __restrict a,
                                                                     int64_t lda, const float* __restrict b,
                                                                     float* __restrict c, int64_t ldc,
                                                                     bool first, const float* bias) {
    tile_loop<true>(kc, a, lda, b, c, ldc, first, bias);
  }

  /// tile and tile_rows for a last micro-panel of at most 16 real columns (`cols`), into the caller's
  /// scratch tile (ldc = NR, stored): the tile's left 16 columns (zmm) or, for at most 8, its left 8 (ymm:
  /// two a cycle where a zmm FMA takes one, so half the time again). The baby GPT's logits (N = 65) end in
  /// a panel with one real column: 96 computed columns become 72. Each element's sum is the same FMA chain
  /// as in the whole tile, so the bits are too.
  __attribute__((target("avx512f,fma"), noinline)) static void tile_narrow(int64_t kc,
                                                                           const float* __restrict a,
                                                                           const float* __restrict b,
                                                                           float* __restrict c, int64_t ldc,
                                                                           int64_t cols) {
    if (cols <= 8) return narrow_loop<false, __m256>(kc, a, 0, b, c, ldc);
    narrow_loop<false, __m512>(kc, a, 0, b, c, ldc);
  }
  __attribute__((target("avx512f,fma"), noinline)) static void tile_rows_narrow(
      int64_t kc, const float* __restrict a, int64_t lda, const float* __restrict b, float* __restrict c,
      int64_t ldc, int64_t cols) {
    if (cols <= 8) return narrow_loop<true, __m256>(kc, a, lda, b, c, ldc);
    narrow_loop<true, __m512>(kc, a, lda, b, c, ldc);
  }

  /// The narrow tiles' k loop: the left 16 (V = __m512) or 8 (__m256) columns of the 12 x 32 tile, stored
  /// at c; A addressed as tile_loop does.
  template <bool kRowsOfA, typename V>
  __attribute__((target("avx512f,fma"), always_inline)) static void narrow_loop(
      int64_t kc, const float* __restrict a, int64_t lda, const float* __restrict b, float* __restrict c,
      int64_t ldc) {
    constexpr bool kZmm = sizeof(V) == 64;
    V acc[MR];
    for (int i = 0; i < MR; ++i) acc[i] = V{};
    for (int64_t p = 0; p < kc; ++p, a += kRowsOfA ? 1 : MR, b += NR) {
      V bv;
      if constexpr (kZmm) {
        bv = _mm512_loadu_ps(b);
      } else {
        bv = _mm256_loadu_ps(b);
      }
      const float* const bases[4] = {a, a + 3 * lda, a + 6 * lda, a + 9 * lda};
#pragma GCC unroll 12
      for (int i = 0; i < MR; ++i) {
        const float ai = kRowsOfA ? bases[i / 3][i % 3 * lda] : a[i];
        if constexpr (kZmm) {
          acc[i] = _mm512_fmadd_ps(_mm512_set1_ps(ai), bv, acc[i]);
        } else {
          acc[i] = _mm256_fmadd_ps(_mm256_set1_ps(ai), bv, acc[i]);
        }
      }
    }
    for (int i = 0; i < MR; ++i) {
      if constexpr (kZmm) {
        _mm512_storeu_ps(c + i * ldc, acc[i]);
      } else {
        _mm256_storeu_ps(c + i * ldc, acc[i]);
      }
    }
  }

  /// The k loop of tile and tile_rows: A's element (i, p) at a[p * MR + i] (packed) or a[i * lda + p]
  /// (kRowsOfA).
  template <bool kRowsOfA>
  __attribute__((target("avx512f"), always_inline)) static void tile_loop(
      int64_t kc, const float* __restrict a, int64_t lda, const float* __restrict b, float* __restrict c,
      int64_t ldc, bool first, const float* bias) {
    detail::Avx512Tile acc;
    detail::zero_tile(acc);
    // Two runs of the same k loop, with the C tile prefetched between them (detail::prefetch_tile).
    const int64_t tail = kc < detail::kPrefetchCAhead ? kc : detail::kPrefetchCAhead;
    for (int phase = 0; phase < 2; ++phase) {
      if (phase == 1) detail::prefetch_tile(c, ldc);
      const int64_t count = phase == 0 ? kc - tail : tail;
      for (int64_t p = 0; p < count; ++p, a += kRowsOfA ? 1 : MR, b += NR) {
        const __m512 b0 = _mm512_loadu_ps(b), b1 = _mm512_loadu_ps(b + 16);
        // The B micro-panel streams from L2: ask for its lines 8 k steps (1 KiB) ahead.
        __builtin_prefetch(b + 8 * NR, 0, 3);
        __builtin_prefetch(b + 8 * NR + 16, 0, 3);
        // Rows of A: row 3q + r at (a + 3q lda) + r lda, r < 3, which x86 addresses as base + lda * 4 or
        // * 8 bytes: four bases and lda in registers, where twelve row pointers would not all fit.
        const float* const bases[4] = {a, a + 3 * lda, a + 6 * lda, a + 9 * lda};
#pragma GCC unroll 12
        for (int i = 0; i < MR; ++i) {
          const __m512 ai = _mm512_set1_ps(kRowsOfA ? bases[i / 3][i % 3 * lda] : a[i]);
          acc[i][0] = _mm512_fmadd_ps(ai, b0, acc[i][0]);
          acc[i][1] = _mm512_fmadd_ps(ai, b1, acc[i][1]);
        }
      }
    }
    detail::store_tile(acc, c, ldc, first, bias);
  }
};

}  // namespace

void gemm_avx512(const GemmArgs& args) {
  static const detail::GemmBlocks blocks =
      detail::blocks_from_caches(Avx512Kernel::MR, Avx512Kernel::NR, sizeof(float));
  if (args.dtype == DType::BFloat16) {
    detail::run_gemm<bfloat16, Avx512Kernel>(args, blocks);
  } else {
    detail::run_gemm<float, Avx512Kernel>(args, blocks);
  }
}

#else

void gemm_avx512(const GemmArgs&) {
  BRIGADE_THROW(DeviceError, "matmul: v3-avx512 needs an x86-64 build");
}

#endif  // BRIGADE_CPU_X86
}  // namespace brigade::kernels::cpu
