// CPU backend: row reductions of x [R, C] (contiguous) into out [R], and column sums (kernels/cpu/reduce.h).
// Sums accumulate in double in a fixed order (see chunked_sum_*), so results do not depend on the thread
// count. Max and ArgMax propagate NaN
// (a NaN is the maximum, at its first position), as PyTorch does.
// The lambda in first_max_avx512 is inlined (BRIGADE_AVX512_LAMBDA): the ABI g++ warns about is never used.
#pragma GCC diagnostic ignored "-Wpsabi"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // g++ 12's AVX-512 headers (exp_rows_avx512.cpp)

#include "kernels/cpu/reduce.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "kernels/backend.h"
#include "kernels/cpu/avx512_rows.h"  // BRIGADE_AVX512, first_lanes
#include "kernels/cpu/cpu_access.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/exp_rows_avx512.h"  // avx512_rows_run

namespace brigade::kernels::cpu {

using detail::acc_t;
using detail::kParallelGrain;

namespace {

#if BRIGADE_CPU_X86
/// Row sums of float rows of at most kSumChunk elements, four rows at a time, on AVX-512: each row's eight
/// running sums of chunk_sum (element j to sum j mod 8, a tail shorter than 8 to sum 0, then added
/// pairwise) are the lanes of one vector of doubles, so every add is chunk_sum's and the bits are the
/// scalar loop's. One row's vector chain waits ~3 cycles an add (8 elements); four rows' chains overlap,
/// so the loads and conversions set the pace instead. The baseline loop's SSE2 vectors (2 sums each) held a
/// GPT-2 layer's [1024, 768] row sums to 27 % of the copy rate on a Zen 4 core.
BRIGADE_AVX512 void sum_float_rows_avx512(const float* x, float* out, int64_t rows, int64_t cols) {
  constexpr int kRows = 4;
  const int64_t full = cols / 8 * 8;
  for (int64_t r0 = 0; r0 < rows; r0 += kRows) {
    const float* row[kRows];  // past the last row, repeat it (computed, not stored)
    for (int k = 0; k < kRows; ++k) row[k] = x + std::min(r0 + k, rows - 1) * cols;
    __m512d acc[kRows];
    for (int k = 0; k < kRows; ++k) acc[k] = _mm512_setzero_pd();
    for (int64_t j = 0; j < full; j += 8) {
      for (int k = 0; k < kRows; ++k)
        acc[k] = _mm512_add_pd(acc[k], _mm512_cvtps_pd(_mm256_loadu_ps(row[k] + j)));
    }
    for (int k = 0; k < kRows && r0 + k < rows; ++k) {
      alignas(64) double s[8];
      _mm512_store_pd(s, acc[k]);
      for (int64_t j = full; j < cols; ++j) s[0] += static_cast<double>(row[k][j]);
      const double chunk = detail::pairwise_sum8(s);
      out[r0 + k] = static_cast<float>(0.0 + chunk);  // chunked_sum_serial's total of one chunk (-0 -> +0)
    }
  }
}
#endif

template <typename T>
void sum_rows(const T* x, T* out, int64_t rows, int64_t cols) {
#if BRIGADE_CPU_X86
  if constexpr (std::is_same_v<T, float>) {
    static const bool avx512 = detail::avx512_rows_run();
    if (avx512 && cols <= detail::kSumChunk) {
      constexpr int64_t kBlock = 64;  // rows a task: 4-row groups, a few hundred KiB at most
#pragma omp parallel for if (rows * cols >= kParallelGrain) schedule(static)
      for (int64_t r = 0; r < rows; r += kBlock) {
        sum_float_rows_avx512(x + r * cols, out + r, std::min(kBlock, rows - r), cols);
      }
      return;
    }
  }
#endif
  auto row_sum = [&](int64_t r, bool parallel) {
    const T* row = x + r * cols;
    auto element = [row](int64_t j) { return static_cast<double>(row[j]); };
    return parallel ? detail::chunked_sum_parallel(cols, element) : detail::chunked_sum_serial(cols, element);
  };
  if (rows >= omp_get_max_threads() || rows * cols < kParallelGrain) {
#pragma omp parallel for if (rows * cols >= kParallelGrain) schedule(static)
    for (int64_t r = 0; r < rows; ++r) out[r] = static_cast<T>(row_sum(r, false));
  } else {
    // Few long rows: parallelise inside each row instead.
    for (int64_t r = 0; r < rows; ++r) out[r] = static_cast<T>(row_sum(r, true));
  }
}

#if BRIGADE_CPU_X86
/// The maximum of a float row on AVX-512 over four running vector maxima (exact), into *best; false when
/// the row holds a NaN (the scalar loop below takes those rows: a NaN is the maximum, at its first
/// position). A zero maximum's sign is vmaxps' choice between -0 and +0, not the first one's.
BRIGADE_AVX512_INLINE bool row_max_avx512(const float* row, int64_t n, float* best) {
  const __m512 lowest = _mm512_set1_ps(-__builtin_inff());
  __m512 m0 = lowest, m1 = lowest, m2 = lowest, m3 = lowest;
  __mmask16 nan = 0;
  auto take = [&](__m512& m, __m512 v) BRIGADE_AVX512_LAMBDA {
    m = _mm512_max_ps(m, v);
    nan |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
  };
  int64_t j = 0;
  for (; j + 64 <= n; j += 64) {
    take(m0, _mm512_loadu_ps(row + j));
    take(m1, _mm512_loadu_ps(row + j + 16));
    take(m2, _mm512_loadu_ps(row + j + 32));
    take(m3, _mm512_loadu_ps(row + j + 48));
  }
  for (; j + 16 <= n; j += 16) take(m0, _mm512_loadu_ps(row + j));
  if (j < n) take(m1, _mm512_mask_loadu_ps(lowest, detail::first_lanes(n - j), row + j));  // the rest -inf
  if (nan != 0) return false;
  *best = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_max_ps(m0, m1), _mm512_max_ps(m2, m3)));
  return true;
}

/// The index of the first maximum of a float row without NaN, on AVX-512, or -1 when the row holds a NaN.
/// row_max_avx512's maximum, then the first element equal to it: both exact, so the index is the scalar
/// loop's, and so is the element at it (-0 and +0 compare equal in both). The scalar loop's compare and
/// branch an element took ~2.5 ns on a Zen 4 core (GPT-2's logits [1024, 50257]: 126 ms, 2 % of the
/// copy rate); here a vector of 16 is a load, a max and a NaN test, and the second pass reads the row
/// from L1 or L2.
BRIGADE_AVX512 int64_t first_max_avx512(const float* row, int64_t n) {
  float m;
  if (!row_max_avx512(row, n, &m)) return -1;
  const __m512 best = _mm512_set1_ps(m);
  for (int64_t j = 0; j < n; j += 16) {
    const __mmask16 lanes = detail::first_lanes(std::min<int64_t>(16, n - j));
    const __mmask16 hit =
        _mm512_mask_cmp_ps_mask(lanes, _mm512_maskz_loadu_ps(lanes, row + j), best, _CMP_EQ_OQ);
    if (hit != 0) return j + __builtin_ctz(hit);
  }
  return -1;  // not reached: the maximum is one of the row's elements
}

/// row_max_avx512's maximum into *best when the row has no NaN and the maximum is not zero.
BRIGADE_AVX512 bool nonzero_row_max_avx512(const float* row, int64_t n, float* best) {
  return row_max_avx512(row, n, best) && *best != 0.0f;
}

/// The row's maximum into *out where row_max_avx512 runs (the CPU has it, T is float) and finds one that is
/// not zero: any element equal to it has its bits, so max needs no index. A zero maximum (whose sign is the
/// first zero's) and a NaN row return false, for first_max_fast or the scalar loop.
template <typename T>
bool nonzero_max_fast(const T* row, int64_t n, T* out) {
  if constexpr (std::is_same_v<T, float>) {
    static const bool avx512 = detail::avx512_rows_run();
    if (avx512) return nonzero_row_max_avx512(row, n, out);
  }
  return false;
}

/// first_max_avx512 where the CPU runs it and T is float, else -1 (the scalar loop).
template <typename T>
int64_t first_max_fast(const T* row, int64_t n) {
  if constexpr (std::is_same_v<T, float>) {
    static const bool avx512 = detail::avx512_rows_run();
    if (avx512) return first_max_avx512(row, n);
  }
  return -1;
}
#else
template <typename T>
bool nonzero_max_fast(const T*, int64_t, T*) {
  return false;
}

template <typename T>
int64_t first_max_fast(const T*, int64_t) {
  return -1;
}
#endif

template <typename T>
void max_rows(const T* x, T* out, int64_t rows, int64_t cols) {
#pragma omp parallel for if (rows * cols >= kParallelGrain) schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const T* row = x + r * cols;
    if (nonzero_max_fast(row, cols, &out[r])) continue;
    if (const int64_t at = first_max_fast(row, cols); at >= 0) {
      out[r] = row[at];
      continue;
    }
    acc_t<T> best = static_cast<acc_t<T>>(row[0]);
    for (int64_t j = 1; j < cols && !std::isnan(best); ++j) {
      acc_t<T> v = static_cast<acc_t<T>>(row[j]);
      if (v > best || std::isnan(v)) best = v;
    }
    out[r] = static_cast<T>(best);
  }
}

template <typename T>
void argmax_rows(const T* x, int64_t* out, int64_t rows, int64_t cols) {
#pragma omp parallel for if (rows * cols >= kParallelGrain) schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const T* row = x + r * cols;
    if (const int64_t at = first_max_fast(row, cols); at >= 0) {
      out[r] = at;
      continue;
    }
    acc_t<T> best = static_cast<acc_t<T>>(row[0]);
    int64_t best_index = 0;
    for (int64_t j = 1; j < cols && !std::isnan(best); ++j) {
      acc_t<T> v = static_cast<acc_t<T>>(row[j]);
      if (v > best || std::isnan(v)) {  // strict: the first maximum wins
        best = v;
        best_index = j;
      }
    }
    out[r] = best_index;
  }
}

// Column blocks of kColumns: eight running sums per column of the block stay in L1 (8 x 128 doubles, 8 KiB),
// and each row gives the block 512 contiguous bytes of float. Rows are usually kilobytes apart (a page at
// GPT-2's 3072 columns) and the prefetchers stop at pages, so the wider a row's piece, the fewer waits: 32
// columns (128 bytes a row) read 15.7 GB/s from L3 at GPT-2's [1024, 3072] on a Zen 4 core, 128 columns
// 1.4-1.6x that (docs/kernels.md). Wider still, fewer blocks share the threads.
constexpr int64_t kColumns = 128;

/// One block of kColumns columns (or fewer, `width`) of sum_columns: out[c0 + c] = sum_i x[i][c0 + c].
template <typename T>
__attribute__((always_inline)) inline void sum_column_block(const T* x, T* out, int64_t rows, int64_t cols,
                                                            int64_t c0, int64_t width) {
  using detail::kSumChunk;
  double total[kColumns] = {};
  // chunk_sum's association, column by column: chunks of kSumChunk rows; within a chunk row i goes to
  // running sum (i - start) mod 8, a tail shorter than 8 to sum 0; the sums added pairwise.
  for (int64_t start = 0; start < rows; start += kSumChunk) {
    const int64_t end = std::min(rows, start + kSumChunk);
    double sums[8][kColumns] = {};
    int64_t i = start;
    for (; i + 8 <= end; i += 8) {
      for (int l = 0; l < 8; ++l) {
        const T* row = x + (i + l) * cols + c0;
        for (int64_t c = 0; c < width; ++c) sums[l][c] += static_cast<double>(row[c]);
      }
    }
    for (; i < end; ++i) {
      const T* row = x + i * cols + c0;
      for (int64_t c = 0; c < width; ++c) sums[0][c] += static_cast<double>(row[c]);
    }
    for (int64_t c = 0; c < width; ++c) {
      total[c] += detail::pairwise_sum8([&](int l) { return sums[l][c]; });
    }
  }
  for (int64_t c = 0; c < width; ++c) out[c0 + c] = static_cast<T>(total[c]);
}

#if BRIGADE_CPU_X86
/// The same block compiled for AVX-512: every column's adds are its own and in the same order, so the
/// wider vectors (8 doubles, against SSE2's 2) give the same bits. A bias gradient's float column sums were
/// bound by their conversions and adds at SSE2's width (45 % of the copy rate at the baby GPT's size).
/// bfloat16 too: its widening to float (a 16-bit shift) and then to double is exact, and vectorizes here.
template <typename T>
__attribute__((target("avx512f"))) void sum_column_block_avx512(const T* x, T* out, int64_t rows, int64_t cols,
                                                                int64_t c0, int64_t width) {
  sum_column_block(x, out, rows, cols, c0, width);
}
#endif

template <typename T>
void sum_columns_typed(const T* x, T* out, int64_t rows, int64_t cols) {
  const int64_t blocks = (cols + kColumns - 1) / kColumns;
#if BRIGADE_CPU_X86
  static const bool avx512 = cpu_features().avx512f;
#endif
#pragma omp parallel for if (rows * cols >= kParallelGrain) schedule(static)
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t c0 = b * kColumns, width = std::min(kColumns, cols - c0);
#if BRIGADE_CPU_X86
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, bfloat16>) {
      if (avx512) {
        sum_column_block_avx512(x, out, rows, cols, c0, width);
        continue;
      }
    }
#endif
    sum_column_block(x, out, rows, cols, c0, width);
  }
}

}  // namespace

namespace detail {

namespace {

__attribute__((target("avx512f"))) void add_float_row_to_sums_avx512(double* sums, const float* row,
                                                                     int64_t n) {
  for (int64_t c = 0; c < n; ++c) sums[c] += static_cast<double>(row[c]);
}

}  // namespace

void add_float_row_to_sums(double* sums, const float* row, int64_t n) {
#if BRIGADE_CPU_X86
  static const bool avx512 = cpu_features().avx512f;
  if (avx512) return add_float_row_to_sums_avx512(sums, row, n);
#endif
  for (int64_t c = 0; c < n; ++c) sums[c] += static_cast<double>(row[c]);
}

}  // namespace detail

void sum_columns(const Tensor& x, const Tensor& out) {
  BRIGADE_DISPATCH_FLOATING(x.dtype(), "sum_columns", [&] {
    sum_columns_typed(static_cast<const scalar_t*>(x.data_ptr()), out.data<scalar_t>(), x.size(0), x.size(1));
  });
}

void reduce_rows(ReduceOp op, const Tensor& x, const Tensor& out) {
  const int64_t rows = x.size(0), cols = x.size(1);
  BRIGADE_DISPATCH_FLOATING(x.dtype(), "reduce_rows", [&] {
    const auto* xp = static_cast<const scalar_t*>(x.data_ptr());
    switch (op) {
      case ReduceOp::Sum:
        sum_rows(xp, out.data<scalar_t>(), rows, cols);
        break;
      case ReduceOp::Max:
        max_rows(xp, out.data<scalar_t>(), rows, cols);
        break;
      case ReduceOp::ArgMax:
        argmax_rows(xp, out.data<int64_t>(), rows, cols);
        break;
    }
  });
}

}  // namespace brigade::kernels::cpu
