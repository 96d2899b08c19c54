// CPU fused causal attention v3 (AttentionKernel::CpuAvx512): AVX-512 with fused multiply-adds, float32
// and bfloat16 (float math). The formulas, the work split (one (b, h) task per thread, so results do not
// depend on the thread count) and the zero-padded float copies are v1's (kernels/cpu/attention.cpp); what
// changes is the tiles and the row work.
//
// What v2 leaves on the table: its tiles are 4 rows x 8 lanes with a separate multiply and add (kept so
// that 4- and 8-lane builds give the same bits). On a core whose FMA has a 4-cycle latency and issues one
// 512-bit (or two 256-bit) FMAs a cycle, 4 accumulators are one short of hiding the latency even with
// FMA, and without FMA every multiply-add is two instructions. Its row max, row sum, delta and dS loops
// are scalar, one element per instruction: at T = 64, D = 32 they cost about as much as the products.
//
// v3, per block of R = 8 query rows:
//   tile_ab     C[r][c] = scale sum_k A[r][k] B[k][c]: 8 rows x 2 zmm (32 columns) = 16 accumulators,
//               per k 2 vector loads + 8 broadcasts for 16 FMAs (512 flops). S = Q K^T (B = K^T), dP = dO
//               V^T, O = P V, dQ = dS K.
//   tile_atb    Acc[j][c] += sum_r A[r][j] X[r][c]: X's 8 rows x 2 zmm held in 16 registers, 4 rows j of
//               Acc at a time (8 independent chains of 8 FMAs). dK += dS^T Q, dV += P^T dO.
//   rows        max, exp (exp_avx512.h's table exp, ~1 ulp), sum, 1/l, delta = dO.O, dS = P (dP - delta)
//               scale: 16 lanes at a time, horizontal reductions at the end of a row.
// Summation orders differ from v1/v2 (lane-partial sums, FMA's single rounding): v3 is checked against
// kernels/reference/ within the op table's tolerance, not bit for bit against v2.
//
// Napkin math, per (b, h), T queries, D = head dim, padded to Dp (16) and the causal block edge:
//   forward  2 products of sum_i cols(i) * D multiply-adds, cols(i) = i rounded up to 16 within a block of
//            8 rows: at T = 64 about 1.23 x the exact T(T+1)/2. Baby GPT (T 64, D 32; B 12, H 4 = 48 tasks):
//            exact 2 T(T+1)/2 D = 133 k multiply-adds = 0.27 MFLOP a task, 12.8 MFLOP a call; the op
//            table counts 4 B H T^2 D = 25 MFLOP (the full T x T). Bytes: q, k, v, out 4 x 8 KiB a task
//            (L1-resident): 1.6 MB a call, 16 flops a byte at the exact count, far above this core's ridge
//            (115.5 GFLOP/s over ~20 GB/s of one core's DRAM stream, ~6), and every operand fits in L1/L2:
//            FMA bound. At the peak the exact work takes 0.11 ms; the exp (T^2/2 lanes, ~13 instructions a
//            vector) and the padded 23 % add ~40 %.
//   backward 5 products (S, dP, dQ, dK, dV): 2.5 x the forward's multiply-adds, plus the exp again.
//   GPT-2 small at batch 1 (T 1024, D 64, H 12): forward 2 T(T+1)/2 D = 67 M multiply-adds a task (0.8
//            GFLOP a call), backward 2.5 x; still L2-resident (k, v, kT 3 x 256 KiB), FMA bound.
// "70 % of the FMA peak" is the aim. Measured (1 thread, docs/kernels.md): on an AMD EPYC (115.5 GFLOP/s a
// core, its ymm and zmm FMAs alike) 80-83 % at GPT-2's T = 1024 and 42-50 % at T = 64; on an Intel Xeon,
// whose zmm FMAs run twice its ymm ones (~185 GFLOP/s), 60 % (forward) and 73 % (backward) at T = 1024
// and 34 % / 43 % at T = 64, where the per-row work (masking, exp, log), the causal edge and the copies
// that remain (k^T and v^T; q, v and the backward's other operands are read where they lie for float32
// heads of whole vectors) are about as large as the products.

// 512-bit vector types pass through this file's inline functions (g++ notes the ABI change otherwise).
#pragma GCC diagnostic ignored "-Wpsabi"
// g++ 12 warns "__Y may be used uninitialized" inside the exp's intrinsics (their _mm512_undefined_*
// pass-through operand, fully overwritten under an all-ones mask): a known false positive of its headers,
// as in exp_rows_avx512.cpp. Before the includes: the warning points into them.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <cmath>
#include <limits>
#include <type_traits>

#include "kernels/cpu/attention_tasks.h"
#include "kernels/cpu/cpu_features.h"  // BRIGADE_CPU_X86
#include "kernels/cpu/exp_avx512.h"    // BRIGADE_AVX512*, exp16_not_above_88
#include "kernels/cpu/log_avx512.h"    // log8
#include "tensor/bfloat16.h"
#include "tensor/philox_avx512.h"  // keeps16

namespace brigade::kernels::cpu::attention {
#if BRIGADE_CPU_X86
namespace {

constexpr int64_t kRows = 8;    // query rows per block: 8 x 2 accumulators + 2 loads of 32 zmm registers
constexpr int64_t kLanes = 16;  // floats per zmm

/// C[r][c] = scale * sum_{k < depth} A[r][k] B[k][c] for r < R, c < cols (a multiple of 16): A row stride
/// lda, B [depth, >= cols] row stride ldb, C row stride ldc. R = 8 (kRows) holds 16 accumulators; R = 12
/// (the forward's tall blocks) 24, with the two B vectors and a broadcast 27 of the 32 zmm registers.
template <int64_t R = kRows>
BRIGADE_AVX512_INLINE void tile_ab(const float* a, int64_t lda, const float* b, int64_t ldb, int64_t depth,
                                   int64_t cols, float scale, float* c, int64_t ldc) {
  const __m512 s = _mm512_set1_ps(scale);
  int64_t col = 0;
  for (; col + 2 * kLanes <= cols; col += 2 * kLanes) {
    __m512 acc[R][2];
    for (int64_t r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
    for (int64_t k = 0; k < depth; ++k) {
      const __m512 b0 = _mm512_loadu_ps(b + k * ldb + col), b1 = _mm512_loadu_ps(b + k * ldb + col + kLanes);
#pragma GCC unroll 12
      for (int64_t r = 0; r < R; ++r) {
        const __m512 ar = _mm512_set1_ps(a[r * lda + k]);
        acc[r][0] = _mm512_fmadd_ps(ar, b0, acc[r][0]);
        acc[r][1] = _mm512_fmadd_ps(ar, b1, acc[r][1]);
      }
    }
    for (int64_t r = 0; r < R; ++r) {
      _mm512_storeu_ps(c + r * ldc + col, _mm512_mul_ps(acc[r][0], s));
      _mm512_storeu_ps(c + r * ldc + col + kLanes, _mm512_mul_ps(acc[r][1], s));
    }
  }
  if (col < cols) {  // one zmm of columns left
    __m512 acc[R];
    for (int64_t r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
    for (int64_t k = 0; k < depth; ++k) {
      const __m512 b0 = _mm512_loadu_ps(b + k * ldb + col);
#pragma GCC unroll 12
      for (int64_t r = 0; r < R; ++r) acc[r] = _mm512_fmadd_ps(_mm512_set1_ps(a[r * lda + k]), b0, acc[r]);
    }
    for (int64_t r = 0; r < R; ++r) _mm512_storeu_ps(c + r * ldc + col, _mm512_mul_ps(acc[r], s));
  }
}

/// acc[j][c] += sum_{r < kRows} a[r][j] x[r][c] for j < n, c < width (a multiple of 16): a row stride lda,
/// x [kRows, >= width] row stride ldx, acc [n, >= width] row stride ldacc. NC zmm columns of x stay in
/// registers while j runs, 4 rows j at a time (4 x NC independent accumulators).
template <int NC>
BRIGADE_AVX512_INLINE void tile_atb_columns(const float* a, int64_t lda, int64_t n, const float* x,
                                            int64_t ldx, float* acc, int64_t ldacc) {
  __m512 xr[kRows][NC];
  for (int64_t r = 0; r < kRows; ++r) {
    for (int q = 0; q < NC; ++q) xr[r][q] = _mm512_loadu_ps(x + r * ldx + q * kLanes);
  }
  constexpr int64_t J = 4;
  int64_t j = 0;
  for (; j + J <= n; j += J) {
    __m512 t[J][NC];
    for (int64_t jj = 0; jj < J; ++jj) {
      for (int q = 0; q < NC; ++q) t[jj][q] = _mm512_loadu_ps(acc + (j + jj) * ldacc + q * kLanes);
    }
#pragma GCC unroll 8
    for (int64_t r = 0; r < kRows; ++r) {
      for (int64_t jj = 0; jj < J; ++jj) {
        const __m512 ar = _mm512_set1_ps(a[r * lda + j + jj]);
        for (int q = 0; q < NC; ++q) t[jj][q] = _mm512_fmadd_ps(ar, xr[r][q], t[jj][q]);
      }
    }
    for (int64_t jj = 0; jj < J; ++jj) {
      for (int q = 0; q < NC; ++q) _mm512_storeu_ps(acc + (j + jj) * ldacc + q * kLanes, t[jj][q]);
    }
  }
  for (; j < n; ++j) {
    for (int q = 0; q < NC; ++q) {
      __m512 t = _mm512_loadu_ps(acc + j * ldacc + q * kLanes);
      for (int64_t r = 0; r < kRows; ++r) t = _mm512_fmadd_ps(_mm512_set1_ps(a[r * lda + j]), xr[r][q], t);
      _mm512_storeu_ps(acc + j * ldacc + q * kLanes, t);
    }
  }
}

/// tile_atb_columns over Dp columns: x's rows ldx apart, acc's Dp apart.
BRIGADE_AVX512_INLINE void tile_atb(const float* a, int64_t lda, int64_t n, const float* x, int64_t ldx,
                                    int64_t Dp, float* acc) {
  int64_t c = 0;
  for (; c + 2 * kLanes <= Dp; c += 2 * kLanes) tile_atb_columns<2>(a, lda, n, x + c, ldx, acc + c, Dp);
  if (c < Dp) tile_atb_columns<1>(a, lda, n, x + c, ldx, acc + c, Dp);
}

/// dst [16 rows, ldd] = the transpose of src [16 rows, lds] (16 x 16 floats): four butterfly stages, each
/// swapping the off-diagonal s x s blocks (s = 8, 4, 2, 1) of row pairs (i, i + s) with two-source permutes.
/// 64 permutes per 256 floats, instead of v1's strided scalar stores (~15 % of the backward at T = 64).
BRIGADE_AVX512_INLINE void transpose16(const float* src, int64_t lds, float* dst, int64_t ldd) {
  __m512 m[kLanes];
#pragma GCC unroll 16
  for (int64_t r = 0; r < kLanes; ++r) m[r] = _mm512_loadu_ps(src + r * lds);
#pragma GCC unroll 4
  for (int s = 8; s >= 1; s /= 2) {
    alignas(64) int lo[kLanes], hi[kLanes];
    for (int c = 0; c < kLanes; ++c) {
      lo[c] = (c & s) != 0 ? kLanes + c - s : c;  // row i: its own low block, then row i + s's low block
      hi[c] = (c & s) != 0 ? kLanes + c : c + s;  // row i + s: row i's high block, then its own high block
    }
    const __m512i ilo = _mm512_load_si512(lo), ihi = _mm512_load_si512(hi);
#pragma GCC unroll 16
    for (int i = 0; i < kLanes; ++i) {
      if ((i & s) != 0) continue;
      const __m512 a = m[i], b = m[i + s];
      m[i] = _mm512_permutex2var_ps(a, ilo, b);
      m[i + s] = _mm512_permutex2var_ps(a, ihi, b);
    }
  }
#pragma GCC unroll 16
  for (int64_t r = 0; r < kLanes; ++r) _mm512_storeu_ps(dst + r * ldd, m[r]);
}

/// dst [Dp, Tp] = the transpose of src [Tp, Dp] (both multiples of 16), src's rows lds apart.
BRIGADE_AVX512_INLINE void transpose(const float* src, int64_t lds, const TileSizes& z, float* dst) {
  for (int64_t t = 0; t < z.Tp; t += kLanes) {
    for (int64_t d = 0; d < z.Dp; d += kLanes) transpose16(src + t * lds + d, lds, dst + d * z.Tp + t, z.Tp);
  }
}

/// The padded sizes of a v3 forward task. Rows of T-wide scratch (k^T, a block's scores) are Tp floats
/// apart; where Tp is a multiple of 32 floats from 128 up (GPT-2's 1024 keys: 4 KiB), every row of k^T would
/// fall in the same few L1 sets (an L1 way is 4 KiB: 64 sets of 64 bytes) and the 64 rows that S = Q K^T
/// walks would evict each other. An odd number of cache lines a row spreads them over all the sets: Tp
/// grows by 16 floats, as if T had 16 more keys (zero rows of k and v, never inside the causal mask). The
/// forward at T = 1024 gained 2-6 % by it on an Intel Xeon; the backward (five products over its own
/// buffers) measured no faster, so it keeps the plain sizes (docs/kernels.md).
BRIGADE_AVX512_INLINE TileSizes task_sizes(int64_t T, int64_t D, int64_t rows) {
  TileSizes z(T, D, kLanes, rows);
  if (z.Tp >= 128 && (z.Tp / kLanes) % 2 == 0) z.Tp += kLanes;
  return z;
}

/// Row r of a block of R rows starting at query i0 sees keys j <= i0 + r: s[r][j] = -inf beyond, up to
/// `cols` (a multiple of 16), by masked stores of whole vectors.
template <int64_t R>
BRIGADE_AVX512_INLINE void mask_block(float* s, int64_t lds, int64_t i0, int64_t cols) {
  const __m512 minus_inf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  for (int64_t r = 0; r < R; ++r) {
    const int64_t first = i0 + r + 1;  // the first masked key
    for (int64_t j = first / kLanes * kLanes; j < cols; j += kLanes) {
      // Lanes at or past `first`: all of them once j has passed it.
      const __mmask16 lanes =
          first > j ? static_cast<__mmask16>(~detail::first_lanes(first - j)) : __mmask16{0xffff};
      _mm512_mask_storeu_ps(s + r * lds + j, lanes, minus_inf);
    }
  }
}

/// mask_block by scalar stores, for the backward: there the masked vector stores measured ~2 % slower at
/// T = 64 (9 alternating rounds on an Intel Xeon; in the forward they were ~3 % faster). The backward reads
/// the masked row back right after the dP product, and a load that spans a masked store waits for it.
BRIGADE_AVX512_INLINE void mask_block_scalar(float* s, int64_t lds, int64_t i0, int64_t cols) {
  for (int64_t r = 0; r < kRows; ++r) {
    for (int64_t j = i0 + r + 1; j < cols; ++j) s[r * lds + j] = -std::numeric_limits<float>::infinity();
  }
}

/// lse[r] = max[r] + log(sum[r]) for a block's rows r < count, in double, rounded once: eight at a time.
BRIGADE_AVX512_INLINE void store_log_sum_exp(const float* max, const float* sum, int64_t count, float* lse) {
  for (int64_t r = 0; r < count; r += 8) {
    const __m512d m = _mm512_cvtps_pd(_mm256_loadu_ps(max + r)),
                  l = _mm512_cvtps_pd(_mm256_loadu_ps(sum + r));
    const __m256 v = _mm512_cvtpd_ps(_mm512_add_pd(m, detail::log8(l)));
    _mm512_mask_storeu_ps(lse + r, detail::first_lanes(std::min<int64_t>(8, count - r)),
                          _mm512_castps256_ps512(v));
  }
}

// Horizontal reductions by halving shuffles (GCC's _mm512_reduce_* and _mm512_max_ps trip
// -Wmaybe-uninitialized in g++ 12's headers).
using Lanes = int __attribute__((vector_size(64)));

BRIGADE_AVX512_INLINE __m512 max_v(__m512 a, __m512 b) {
  return a > b ? a : b;
}

template <bool kMax>
BRIGADE_AVX512_INLINE __m512 combine(__m512 a, __m512 b) {
  return kMax ? max_v(a, b) : a + b;
}

/// The sum (kMax false) or the max of v's lanes.
template <bool kMax>
BRIGADE_AVX512_INLINE float reduce(__m512 v) {
  v = combine<kMax>(v, __builtin_shuffle(v, Lanes{8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7}));
  v = combine<kMax>(v, __builtin_shuffle(v, Lanes{4, 5, 6, 7, 0, 1, 2, 3, 12, 13, 14, 15, 8, 9, 10, 11}));
  v = combine<kMax>(v, __builtin_shuffle(v, Lanes{2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13}));
  v = combine<kMax>(v, __builtin_shuffle(v, Lanes{1, 0, 3, 2, 5, 4, 7, 6, 9, 8, 11, 10, 13, 12, 15, 14}));
  return v[0];
}

BRIGADE_AVX512_INLINE float sum_lanes(__m512 v) {
  return reduce<false>(v);
}

/// The lane-wise max of a row's vectors (cols a multiple of 16): reduce<true> of it is the row's max.
BRIGADE_AVX512_INLINE __m512 row_max_lanes(const float* row, int64_t cols) {
  __m512 m = _mm512_loadu_ps(row);
  for (int64_t j = kLanes; j < cols; j += kLanes) m = max_v(m, _mm512_loadu_ps(row + j));
  return m;
}

/// row[j] = exp(row[j] - shift) for j < cols (a multiple of 16); returns their lane-wise sums (reduce<false>
/// of them is the row's sum). -inf gives 0. The arguments are never far above 0 (shift is the row's max, or
/// its log-sum-exp), so exp16_not_above_88 (~1 ulp, 13 instructions a vector: its masked low end sets the
/// -inf lanes to 0 without an underflow) serves.
BRIGADE_AVX512_INLINE __m512 exp_row_sum_lanes(float* row, float shift, int64_t cols) {
  const __m512 sh = _mm512_set1_ps(shift);
  __m512 sum = _mm512_setzero_ps();
  for (int64_t j = 0; j < cols; j += kLanes) {
    const __m512 e = detail::exp16_not_above_88(_mm512_sub_ps(_mm512_loadu_ps(row + j), sh));
    _mm512_storeu_ps(row + j, e);
    sum = _mm512_add_ps(sum, e);
  }
  return sum;
}

/// out[r] = reduce<kMax>(v[r]) for r < 8, the eight reductions taken together: each level combines two
/// vectors' halves into one vector (shuffle_f32x4 across 128-bit quarters, then shuffle_ps within them),
/// 15 shuffles and 8 combines for the 8 rows where one at a time they take 32 and 32. The pairs combine in
/// reduce's order (lane i with i + 8, then i + 4, i + 2, i + 1, the lower lane first), so each out[r] has
/// reduce's bits.
template <bool kMax>
BRIGADE_AVX512_INLINE void reduce8(const __m512* v, float* out) {
  __m512 w[4];  // w[k]: quarters (v[2k] lanes i + (i + 8), i < 4 and 4..7; then v[2k + 1]'s)
  for (int k = 0; k < 4; ++k) {
    const __m512 a = _mm512_shuffle_f32x4(v[2 * k], v[2 * k + 1], _MM_SHUFFLE(1, 0, 1, 0));
    const __m512 b = _mm512_shuffle_f32x4(v[2 * k], v[2 * k + 1], _MM_SHUFFLE(3, 2, 3, 2));
    w[k] = combine<kMax>(a, b);
  }
  __m512 x[2];  // x[k]: quarter q holds v[4k + q]'s lanes i + (i + 4) (of the above), i < 4
  for (int k = 0; k < 2; ++k) {
    const __m512 a = _mm512_shuffle_f32x4(w[2 * k], w[2 * k + 1], _MM_SHUFFLE(2, 0, 2, 0));
    const __m512 b = _mm512_shuffle_f32x4(w[2 * k], w[2 * k + 1], _MM_SHUFFLE(3, 1, 3, 1));
    x[k] = combine<kMax>(a, b);
  }
  // Quarter q: [x0 + x2, x1 + x3] of v[q], then of v[4 + q]; then the pair's lanes.
  const __m512 c = combine<kMax>(_mm512_shuffle_ps(x[0], x[1], _MM_SHUFFLE(1, 0, 1, 0)),
                                 _mm512_shuffle_ps(x[0], x[1], _MM_SHUFFLE(3, 2, 3, 2)));
  const __m512 e = combine<kMax>(c, _mm512_shuffle_ps(c, c, _MM_SHUFFLE(2, 3, 0, 1)));
  // v[q]'s result in lane 4q, v[4 + q]'s in lane 4q + 2.
  const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 2, 6, 10, 14, 0, 0, 0, 0, 0, 0, 0, 0);
  _mm256_storeu_ps(out, _mm512_castps512_ps256(_mm512_permutexvar_ps(order, e)));
}

/// out[r] = reduce<kMax>(v[r]) for r < R (8 or 12); out has 16 floats, and for R = 12 its last four get
/// copies of rows 8-11's.
template <bool kMax, int64_t R>
BRIGADE_AVX512_INLINE void reduce_rows(const __m512* v, float* out) {
  static_assert(R == 8 || R == 12, "blocks of 8 or 12 rows");
  reduce8<kMax>(v, out);
  if constexpr (R == 12) {
    const __m512 rest[8] = {v[8], v[9], v[10], v[11], v[8], v[9], v[10], v[11]};
    reduce8<kMax>(rest, out + 8);
  }
}

/// row[j] = exp(row[j] - shift) for j < cols (a multiple of 16), without the sum (the backward's
/// probabilities, whose shift is the log-sum-exp).
BRIGADE_AVX512_INLINE void exp_row(float* row, float shift, int64_t cols) {
  const __m512 sh = _mm512_set1_ps(shift);
  for (int64_t j = 0; j < cols; j += kLanes) {
    _mm512_storeu_ps(row + j, detail::exp16_not_above_88(_mm512_sub_ps(_mm512_loadu_ps(row + j), sh)));
  }
}

/// The weights' dropout (kernels/attention_dropout.h), 16 draws at a time: philox::keeps16, the keep rule
/// of kernels::dropout. Lane j of a row's vector at key j0 is weight index first + j0 + j.
struct WeightMask {
  uint64_t seed, offset;
  int threshold;
  explicit WeightMask(const Problem& pr)
      : seed(pr.state.seed), offset(pr.state.offset), threshold(philox::keep_threshold(pr.dropout)) {}
  BRIGADE_AVX512_INLINE __mmask16 keep(uint64_t index) const {
    return philox::keeps16(seed, offset, index, threshold);
  }
};

/// Forward: row[j] = 0 for the dropped weights of keys j < n (whole vectors from key 0; the lanes past the
/// row's last key are 0 already, and stay so).
BRIGADE_AVX512_INLINE void drop_row(const WeightMask& mask, uint64_t first, float* row, int64_t n) {
  for (int64_t j = 0; j < n; j += kLanes) {
    const __mmask16 keep = mask.keep(first + static_cast<uint64_t>(j));
    _mm512_storeu_ps(row + j, _mm512_maskz_mov_ps(keep, _mm512_loadu_ps(row + j)));
  }
}

BRIGADE_AVX512_INLINE float dot(const float* x, const float* y, int64_t width) {
  __m512 acc = _mm512_setzero_ps();
  for (int64_t d = 0; d < width; d += kLanes) {
    acc = _mm512_fmadd_ps(_mm512_loadu_ps(x + d), _mm512_loadu_ps(y + d), acc);
  }
  return sum_lanes(acc);
}

/// dst[d] = T(src[d] * factor) for d < D. float32 in whole vectors (a masked last one), where the loop
/// left to g++ checked the two rows' overlap and its remainder at every row (~4 % of the forward at
/// T = 64, D = 32); the same products, so the same bits.
template <typename T>
BRIGADE_AVX512_INLINE void store_row(T* dst, const float* src, float factor, int64_t D) {
  if constexpr (std::is_same_v<T, float>) {
    const __m512 f = _mm512_set1_ps(factor);
    int64_t d = 0;
    for (; d + kLanes <= D; d += kLanes)
      _mm512_storeu_ps(dst + d, _mm512_mul_ps(_mm512_loadu_ps(src + d), f));
    if (d < D) {
      const __mmask16 m = detail::first_lanes(D - d);
      _mm512_mask_storeu_ps(dst + d, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, src + d), f));
    }
  } else {
    for (int64_t d = 0; d < D; ++d) dst[d] = static_cast<T>(src[d] * factor);
  }
}

/// One forward task in blocks of R query rows. Every block's S = Q K^T reads all of k^T once; where k^T
/// no longer fits in L1 (GPT-2's 1024 keys: 266 KiB), those reads come from L2 and cost about as much as
/// the block's multiply-adds, so there the blocks are 12 rows tall (a third fewer reads of k^T).
template <typename T, int64_t R>
BRIGADE_AVX512_INLINE void forward_blocks(const Problem& pr, int64_t b, int64_t h, const Heads& q,
                                          const Heads& k, const Heads& v, const Heads& out, float* lse) {
  const TileSizes z = task_sizes(pr.T, pr.D, R);
  // float32 heads whose D is whole vectors are read where they lie, not copied into padded scratch first:
  // v's rows (those of O = P V), q's where T is whole blocks (the broadcasts of S = Q K^T), and k's, which
  // are transposed into k^T, where T is whole vectors and not padded (task_sizes).
  const bool whole = std::is_same_v<T, float> && z.D == z.Dp;
  const bool q_in_place = whole && z.T % R == 0, k_in_place = whole && z.T == z.Tp;
  const ForwardScratch w = attention::forward_scratch(z, R, /*k_rows=*/true);
  if (!q_in_place) load_padded<T>(q, b, h, z, z.Tr, w.qs, false);
  if (!k_in_place) load_padded<T>(k, b, h, z, z.Tp, w.k, false);
  if (!whole) load_padded<T>(v, b, h, z, z.Tp, w.vs, false);
  float *kT = w.kT, *s = w.s, *o = w.o;
  const float* qs = q_in_place ? q.row<float>(b, h, 0) : w.qs;
  const float* vs = whole ? v.row<float>(b, h, 0) : w.vs;
  const int64_t ldq = q_in_place ? q.st : z.Dp, ldv = whole ? v.st : z.Dp;
  if (k_in_place) {
    transpose(k.row<float>(b, h, 0), k.st, z, kT);
  } else {
    transpose(w.k, z.Dp, z, kT);
  }
  const auto scale = static_cast<float>(pr.scale);
  const bool dropout = pr.dropout > 0.0;
  const WeightMask mask(pr);
  const float kept = dropout ? kept_weight_scale<float>(pr) : 1.0f;
  static_assert(R <= kLanes, "a block's sums are one vector");
  for (int64_t i0 = 0; i0 < z.T; i0 += R) {
    const int64_t keys = std::min(i0 + R, z.T);  // keys any row of the block sees
    const int64_t cols = round_up(keys, kLanes);
    tile_ab<R>(qs + i0 * ldq, ldq, kT, z.Tp, z.D, cols, scale, s, z.Tp);
    mask_block<R>(s, z.Tp, i0, cols);
    // Rows past R keep max 0 and sum 1, and padding rows past T get them (log 0, reciprocal 1): the vector
    // log and division see no stale values. The rows' maxes, then their sums, are reduced together.
    alignas(64) float inv[kLanes], max[kLanes] = {}, sum[kLanes];
    std::fill(sum, sum + kLanes, 1.0f);
    __m512 lanes[R];
    for (int64_t r = 0; r < R; ++r) {
      float* row = s + r * z.Tp;
      if (i0 + r >= z.T) {  // a padding row: zero weights, nothing stored
        std::fill(row, row + cols, 0.0f);
        lanes[r] = _mm512_setzero_ps();
        continue;
      }
      lanes[r] = row_max_lanes(row, cols);
    }
    // A row whose scores are all -inf (or NaN) gives NaN here, as unfused softmax does.
    reduce_rows<true, R>(lanes, max);
    for (int64_t r = 0; r < R; ++r) {
      float* row = s + r * z.Tp;
      if (i0 + r >= z.T) {
        lanes[r] = _mm512_maskz_mov_ps(1, _mm512_set1_ps(1.0f));  // sum 1
        continue;
      }
      lanes[r] = exp_row_sum_lanes(row, max[r], cols);
      if (dropout) drop_row(mask, weight_row_index(pr, b, h, i0 + r), row, i0 + r + 1);
    }
    reduce_rows<false, R>(lanes, sum);
    // 1 / l, and with dropout 1 / ((1 - p) l): the kept weights' factor rides on the row's normalisation.
    _mm512_store_ps(inv, _mm512_div_ps(_mm512_set1_ps(kept), _mm512_load_ps(sum)));
    store_log_sum_exp(max, sum, std::min(R, z.T - i0), lse + i0);
    tile_ab<R>(s, z.Tp, vs, ldv, keys, z.Dp, 1.0f, o, z.Dp);
    for (int64_t r = 0; r < R && i0 + r < z.T; ++r) {
      store_row(out.mutable_row<T>(b, h, i0 + r), o + r * z.Dp, inv[r], z.D);
    }
  }
}

/// k^T's bytes above which the forward's blocks are 12 rows tall: about what L1 holds beside the block's
/// own rows (48 KiB of L1d on the Intel Xeon, 32 KiB on Zen 4).
constexpr int64_t kTallBlocksAbove = 32 * 1024;

template <typename T>
BRIGADE_AVX512 void forward_task(const Problem& pr, int64_t b, int64_t h, const Heads& q, const Heads& k,
                                 const Heads& v, const Heads& out, float* lse) {
  const TileSizes plain(pr.T, pr.D, kLanes, kRows);
  if (plain.Dp * plain.Tp * static_cast<int64_t>(sizeof(float)) > kTallBlocksAbove) {
    forward_blocks<T, 12>(pr, b, h, q, k, v, out, lse);
  } else {
    forward_blocks<T, kRows>(pr, b, h, q, k, v, out, lse);
  }
}

/// The scratch of one backward task.
struct BackwardScratch {
  float *qs, *gs, *os, *ks, *kT, *vT, *dks, *dvs, *p, *ds, *dqb;
  explicit BackwardScratch(const TileSizes& z) {
    const int64_t rows_block = z.Tr * z.Dp, t_block = z.Dp * z.Tp;
    qs = scratch<float>(static_cast<size_t>(3 * rows_block + 5 * t_block + 2 * kRows * z.Tp + kRows * z.Dp));
    gs = qs + rows_block;     // dout [Tr, Dp]
    os = gs + rows_block;     // out [Tr, Dp]
    ks = os + rows_block;     // k [Tp, Dp]
    kT = ks + t_block;        // k [Dp, Tp]
    vT = kT + t_block;        // v [Dp, Tp]
    dks = vT + t_block;       // dk accumulator [Tp, Dp]
    dvs = dks + t_block;      // dv accumulator [Tp, Dp]
    p = dvs + t_block;        // [kRows, Tp] probabilities
    ds = p + kRows * z.Tp;    // [kRows, Tp] dp, then ds
    dqb = ds + kRows * z.Tp;  // [kRows, Dp]
  }
};

/// Where a backward task reads q, dout, out and k: their padded copies (rows Dp apart) or, for float32 heads
/// whose D is whole vectors and T whole vectors, the tensors themselves (rows their own stride apart).
struct BackwardOperands {
  const float *q, *g, *o, *k;
  int64_t ldq, ldg, ldo, ldk;
};

/// Rows of a backward block: p = exp(s - lse), ds = p (dp - delta) scale (padding rows: 0). With dropout
/// (kernels/cpu/attention.cpp's formulas) ds = p (m dp - delta) scale and p = 0 where dropped, for keys up to
/// the row's own (m: 1 / (1 - p) kept, 0 dropped; past the row's key p is 0 and the mask is not drawn).
BRIGADE_AVX512_INLINE void backward_rows(const Problem& pr, int64_t b, int64_t h, const TileSizes& z,
                                         int64_t i0, int64_t cols, const float* lse, float scale,
                                         const BackwardScratch& w, const BackwardOperands& x) {
  const __m512 sc = _mm512_set1_ps(scale);
  const bool dropout = pr.dropout > 0.0;
  const WeightMask mask(pr);
  const __m512 kept = _mm512_set1_ps(dropout ? kept_weight_scale<float>(pr) : 1.0f);
  for (int64_t r = 0; r < kRows; ++r) {
    const int64_t i = i0 + r;
    float* prow = w.p + r * z.Tp;
    float* srow = w.ds + r * z.Tp;
    if (i >= z.T) {
      std::fill(prow, prow + cols, 0.0f);
      std::fill(srow, srow + cols, 0.0f);
      continue;
    }
    exp_row(prow, lse[i], cols);
    const __m512 delta = _mm512_set1_ps(dot(x.g + i * x.ldg, x.o + i * x.ldo, z.Dp));
    const uint64_t first = weight_row_index(pr, b, h, i);
    for (int64_t j = 0; j < cols; j += kLanes) {
      const __m512 p = _mm512_loadu_ps(prow + j);
      __m512 dp = _mm512_loadu_ps(srow + j);
      if (dropout && j <= i) {
        const __mmask16 keep = mask.keep(first + static_cast<uint64_t>(j));
        dp = _mm512_maskz_mul_ps(keep, dp, kept);
        _mm512_storeu_ps(prow + j, _mm512_maskz_mov_ps(keep, p));
      }
      _mm512_storeu_ps(srow + j, _mm512_mul_ps(_mm512_mul_ps(p, _mm512_sub_ps(dp, delta)), sc));
    }
  }
}

template <typename T>
BRIGADE_AVX512 void backward_task(const Problem& pr, int64_t b, int64_t h, const Heads& dout, const Heads& q,
                                  const Heads& k, const Heads& v, const Heads& out, const float* lse,
                                  const Heads& dq, const Heads& dk, const Heads& dv) {
  const TileSizes z(pr.T, pr.D, kLanes, kRows);
  const BackwardScratch w(z);
  // float32 heads whose D and T are whole vectors (so no padding row or column is ever read) are read
  // where they lie; others are copied into padded float scratch first.
  const bool in_place = std::is_same_v<T, float> && z.D == z.Dp && z.T == z.Tp;
  BackwardOperands x{w.qs, w.gs, w.os, w.ks, z.Dp, z.Dp, z.Dp, z.Dp};
  if (in_place) {
    x = {q.row<float>(b, h, 0),
         dout.row<float>(b, h, 0),
         out.row<float>(b, h, 0),
         k.row<float>(b, h, 0),
         q.st,
         dout.st,
         out.st,
         k.st};
    transpose(x.k, x.ldk, z, w.kT);
    transpose(v.row<float>(b, h, 0), v.st, z, w.vT);
  } else {
    load_padded<T>(q, b, h, z, z.Tr, w.qs, false);
    load_padded<T>(dout, b, h, z, z.Tr, w.gs, false);
    load_padded<T>(out, b, h, z, z.Tr, w.os, false);
    load_padded<T>(k, b, h, z, z.Tp, w.ks, false);
    transpose(w.ks, z.Dp, z, w.kT);
    load_padded<T>(v, b, h, z, z.Tp, w.dvs, false);  // v [Tp, Dp] in the dv accumulator's room, for now
    transpose(w.dvs, z.Dp, z, w.vT);
  }
  std::fill(w.dks, w.dks + 2 * z.Dp * z.Tp, 0.0f);
  const auto scale = static_cast<float>(pr.scale);
  for (int64_t i0 = 0; i0 < z.T; i0 += kRows) {
    const int64_t keys = std::min(i0 + kRows, z.T);
    const int64_t cols = round_up(keys, kLanes);
    tile_ab(x.q + i0 * x.ldq, x.ldq, w.kT, z.Tp, z.D, cols, scale, w.p, z.Tp);
    mask_block_scalar(w.p, z.Tp, i0, cols);
    tile_ab(x.g + i0 * x.ldg, x.ldg, w.vT, z.Tp, z.D, cols, 1.0f, w.ds, z.Tp);  // dp
    backward_rows(pr, b, h, z, i0, cols, lse, scale, w, x);
    tile_ab(w.ds, z.Tp, x.k, x.ldk, keys, z.Dp, 1.0f, w.dqb, z.Dp);
    for (int64_t r = 0; r < kRows && i0 + r < z.T; ++r) {
      store_row(dq.mutable_row<T>(b, h, i0 + r), w.dqb + r * z.Dp, 1.0f, z.D);
    }
    tile_atb(w.ds, z.Tp, keys, x.q + i0 * x.ldq, x.ldq, z.Dp, w.dks);
    tile_atb(w.p, z.Tp, keys, x.g + i0 * x.ldg, x.ldg, z.Dp, w.dvs);
  }
  // dv summed the kept p_ij dout_i: times 1 / (1 - p) with dropout (times 1, exactly, without).
  const float dv_scale = pr.dropout > 0.0 ? kept_weight_scale<float>(pr) : 1.0f;
  for (int64_t t = 0; t < z.T; ++t) {
    store_row(dk.mutable_row<T>(b, h, t), w.dks + t * z.Dp, 1.0f, z.D);
    store_row(dv.mutable_row<T>(b, h, t), w.dvs + t * z.Dp, dv_scale, z.D);
  }
}

}  // namespace

template <>
ForwardTask<float> avx512_forward_task<float>() {
  return &forward_task<float>;
}
template <>
ForwardTask<bfloat16> avx512_forward_task<bfloat16>() {
  return &forward_task<bfloat16>;
}
template <>
BackwardTask<float> avx512_backward_task<float>() {
  return &backward_task<float>;
}
template <>
BackwardTask<bfloat16> avx512_backward_task<bfloat16>() {
  return &backward_task<bfloat16>;
}

#else  // not x86: no v3

template <>
ForwardTask<float> avx512_forward_task<float>() {
  return nullptr;
}
template <>
ForwardTask<bfloat16> avx512_forward_task<bfloat16>() {
  return nullptr;
}
template <>
BackwardTask<float> avx512_backward_task<float>() {
  return nullptr;
}
template <>
BackwardTask<bfloat16> avx512_backward_task<bfloat16>() {
  return nullptr;
}
#endif

}  // namespace brigade::kernels::cpu::attention
