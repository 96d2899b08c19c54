// CPU GEMM v4: bfloat16 operands multiplied as bf16 pairs by vdpbf16ps (AVX512-BF16), in v3's loops
// (kernels/cpu/gemm_loops.h) and 12 x 32 tile, accumulated in float.
//
// What v3 (kernels/cpu/matmul_avx512.cpp) does with bfloat16: widens both operands to float while packing
// and runs the float kernel: the float32 rate, with twice the packed bytes of the bf16 inputs.
// vdpbf16ps takes two k values per 32-bit lane: acc[j] += a[2q] * b[2q][j] + a[2q+1] * b[2q+1][j], so one
// instruction does 2 x 16 multiply-adds (64 flops) where vfmadd231ps does 16 (32 flops): twice the flops
// per instruction, and packed panels half the size of v3's.
//
// Packing: the A micro-panel holds, per k pair q, MR 32-bit words (row i: a[i][2q] in the low half,
// a[i][2q+1] in the high half), broadcast as one lane pattern; the B micro-panel holds, per k pair, NR
// words (column j: b[2q][j] low, b[2q+1][j] high), two zmm of 16 columns. An odd K is padded with a zero.
// K is not sliced (gemm_loops.h: bfloat16 C), so each sum is rounded to bfloat16 once.
//
// Numerics: vdpbf16ps multiplies exactly (bf16 x bf16 fits a float) and adds the pair into the float
// accumulator with round-to-nearest-even and denormals flushed to zero: within the bfloat16 tolerances
// of the op table. On a CPU without AVX512-BF16 matmul_kernel_supports says no and bfloat16 runs v3 or v2.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // g++ 12's AVX-512 headers (exp_rows_avx512.cpp)

#include <cstring>

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

// One 32-bit word of two bfloat16: `low` in bits 0-15, `high` in bits 16-31 (little-endian pair order).
inline uint32_t pair(bfloat16 low, bfloat16 high) {
  return uint32_t{low.bits} | (uint32_t{high.bits} << 16);
}

// n <= 16 bfloat16 from p, each widened into a 32-bit lane (its bits in the low half), zero past n. The
// loads read n values and no more: a 16-bit masked load needs AVX512-BW, so whole words are loaded up to
// n - 1 and an odd n's last value is set on its own.
__attribute__((target("avx512f,avx512bf16"), always_inline)) inline __m512i widen16(const bfloat16* p,
                                                                                    int64_t n) {
  const __mmask16 words = static_cast<__mmask16>((1u << (n / 2)) - 1);
  __m512i v = _mm512_cvtepu16_epi32(_mm512_castsi512_si256(_mm512_maskz_loadu_epi32(words, p)));
  if (n % 2 != 0) v = _mm512_mask_set1_epi32(v, static_cast<__mmask16>(1u << (n - 1)), p[n - 1].bits);
  return v;
}

// The pairs (low[i], high[i]) of i in [0, n), n <= 16, as 32-bit words (low in bits 0-15), zero past n.
__attribute__((target("avx512f,avx512bf16"), always_inline)) inline __m512i interleave16(const bfloat16* low,
                                                                                         const bfloat16* high,
                                                                                         int64_t n) {
  return _mm512_or_si512(widen16(low, n), _mm512_slli_epi32(widen16(high, n), 16));
}

struct Avx512Bf16Kernel {
  static constexpr int64_t MR = detail::kAvx512TileRows, NR = 32, KSTEP = 2;
  using Packed = uint32_t;

  // op(A) rows [0, mc) x k [0, kc) into MR-row panels of k pairs: panel r holds pair q of row r*MR + i at
  // out[r * MR * groups + q * MR + i], groups = ceil(kc / 2). Rows beyond mc and the odd k are zero.
  // Whole panels go by vectors (a copy: the same words as the scalar loop, which does the rest): an
  // untransposed A's pairs are 32-bit words of its rows already, so the panel is those words transposed
  // (where lda is even); a transposed A's pair q of a panel is two rows of memory, 2q and 2q + 1,
  // interleaved.
  __attribute__((target("avx512f,avx512bf16"), noinline)) static void pack_a(const bfloat16* a, int64_t lda,
                                                                             bool trans, int64_t mc,
                                                                             int64_t kc, uint32_t* out) {
    const int64_t groups = detail::ceil_div(kc, 2), whole = kc / 2;
    const bfloat16 zero;
    for (int64_t r0 = 0; r0 < mc; r0 += MR) {
      uint32_t* panel = out + r0 * groups;
      const int64_t rows = std::min(MR, mc - r0);
      int64_t q0 = 0;  // pairs [0, q0) of the panel are packed
      if (rows == MR && !trans && lda % 2 == 0) {
        // Rows of 32-bit words (pairs), lda / 2 words apart.
        detail::pack_transposed_by_four(a + r0 * lda, lda / 2, MR, whole, panel, MR);
        q0 = whole;
      } else if (rows == MR && trans) {
        for (; q0 < whole; ++q0) {
          const bfloat16* low = a + 2 * q0 * lda + r0;
          _mm512_mask_storeu_epi32(panel + q0 * MR, (1u << MR) - 1, interleave16(low, low + lda, MR));
        }
      }
      for (int64_t q = q0; q < groups; ++q) {
        const int64_t p = 2 * q;
        const bool odd = p + 1 >= kc;
        for (int64_t i = 0; i < rows; ++i) {
          const bfloat16* row = trans ? a + r0 + i : a + (r0 + i) * lda;
          const int64_t step = trans ? lda : 1;
          panel[q * MR + i] = pair(row[p * step], odd ? zero : row[(p + 1) * step]);
        }
        for (int64_t i = rows; i < MR; ++i) panel[q * MR + i] = 0;
      }
    }
  }

  // op(B) k [0, kc) x cols [0, nc) into NR-column panels of k pairs: panel c holds pair q of column c*NR + j
  // at out[c * NR * groups + q * NR + j]. Columns beyond nc and the odd k are zero. Whole panels go by
  // vectors, as pack_a's: an untransposed B's pair is two of its rows interleaved, a transposed B's pairs
  // are 32-bit words of its rows (where ldb is even), transposed.
  __attribute__((target("avx512f,avx512bf16"), noinline)) static void pack_b(const bfloat16* b, int64_t ldb,
                                                                             bool trans, int64_t kc,
                                                                             int64_t nc, uint32_t* out) {
    const int64_t groups = detail::ceil_div(kc, 2), whole = kc / 2;
    const bfloat16 zero;
    for (int64_t c0 = 0; c0 < nc; c0 += NR) {
      uint32_t* panel = out + c0 * groups;
      const int64_t cols = std::min(NR, nc - c0);
      int64_t q0 = 0;  // pairs [0, q0) of the panel are packed
      if (cols == NR && !trans) {
        for (; q0 < whole; ++q0) {
          const bfloat16* low = b + 2 * q0 * ldb + c0;
          _mm512_storeu_si512(panel + q0 * NR, interleave16(low, low + ldb, 16));
          _mm512_storeu_si512(panel + q0 * NR + 16, interleave16(low + 16, low + ldb + 16, 16));
        }
      } else if (cols == NR && trans && ldb % 2 == 0) {
        detail::pack_transposed_by_four(b + c0 * ldb, ldb / 2, NR, whole, panel, NR);
        q0 = whole;
      }
      for (int64_t q = q0; q < groups; ++q) {
        const int64_t p = 2 * q;
        const bool odd = p + 1 >= kc;
        if (!trans) {  // op(B)(p, j) = b[p * ldb + j]: two rows interleaved
          const bfloat16* r0 = b + p * ldb + c0;
          const bfloat16* r1 = odd ? nullptr : r0 + ldb;
          for (int64_t j = 0; j < cols; ++j) panel[q * NR + j] = pair(r0[j], odd ? zero : r1[j]);
        } else {  // op(B)(p, j) = b[j * ldb + p]: the pair is adjacent in memory
          for (int64_t j = 0; j < cols; ++j) {
            const bfloat16* col = b + (c0 + j) * ldb + p;
            panel[q * NR + j] = pair(col[0], odd ? zero : col[1]);
          }
        }
        for (int64_t j = cols; j < NR; ++j) panel[q * NR + j] = 0;
      }
    }
  }

  // The contract of gemm_loops.h; kc counts k values (ceil(kc / 2) pairs).
  __attribute__((target("avx512f,avx512bf16"), noinline)) static void tile(int64_t kc,
                                                                           const uint32_t* __restrict a,
                                                                           const uint32_t* __restrict b,
                                                                           float* __restrict c, int64_t ldc,
                                                                           bool first, const float* bias) {
    detail::Avx512Tile acc;
    detail::zero_tile(acc);
    const int64_t groups = detail::ceil_div(kc, 2);
    for (int64_t q = 0; q < groups; ++q, a += MR, b += NR) {
      const __m512bh b0 = (__m512bh)_mm512_loadu_si512(b), b1 = (__m512bh)_mm512_loadu_si512(b + 16);
#pragma GCC unroll 12
      for (int i = 0; i < MR; ++i) {
        const __m512bh ai = (__m512bh)_mm512_set1_epi32(static_cast<int>(a[i]));
        acc[i][0] = _mm512_dpbf16_ps(acc[i][0], ai, b0);
        acc[i][1] = _mm512_dpbf16_ps(acc[i][1], ai, b1);
      }
    }
    detail::store_tile(acc, c, ldc, first, bias);
  }
};

}  // namespace

void gemm_avx512_bf16(const GemmArgs& args) {
  BRIGADE_CHECK_DTYPE(args.dtype == DType::BFloat16, "matmul: v4-avx512-bf16 runs bfloat16 only, found ",
                      dtype_name(args.dtype));
  static const detail::GemmBlocks blocks =
      detail::blocks_from_caches(Avx512Bf16Kernel::MR, Avx512Bf16Kernel::NR, sizeof(bfloat16));
  detail::run_gemm<bfloat16, Avx512Bf16Kernel>(args, blocks);
}

#else

void gemm_avx512_bf16(const GemmArgs&) {
  BRIGADE_THROW(DeviceError, "matmul: v4-avx512-bf16 needs an x86-64 build");
}

#endif  // BRIGADE_CPU_X86
}  // namespace brigade::kernels::cpu
