// Packing for the CPU GEMMs (kernels/cpu/matmul*.cpp): op(A) and op(B) copied into contiguous, zero-padded
// micro-panels in the order the micro-kernel reads them, whatever the trans flags and leading dims, and
// widened to the accumulation type (bfloat16 -> float). A micro-kernel then reads both operands with unit
// stride, and edge tiles need no special case inside it.
//
//   A micro-panel (MR rows):    element (i, p) at panel[p * MR + i]   (one column of MR values per k step)
//   B micro-panel (NR columns): element (p, j) at panel[p * NR + j]   (one row of NR values per k step)
//
// Everything here is always inlined, so a caller compiled for AVX2 or AVX-512 (target attribute) gets the
// copies compiled for its ISA.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "kernels/cpu/vector_math.h"

namespace brigade::kernels::cpu::detail {

inline int64_t round_up(int64_t x, int64_t multiple) {
  return (x + multiple - 1) / multiple * multiple;
}

inline int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

/// A 64-byte aligned run of `count` elements inside `buffer`, which grows when it must. The aligned start
/// may sit up to 63 bytes into the buffer, so the buffer always keeps `count` elements plus 64 (>= 64 bytes)
/// of slack: sized for `count` alone, a later larger request could run past its end.
template <typename Acc>
Acc* aligned_run(std::vector<Acc>& buffer, size_t count) {
  const size_t needed = count + 64;
  if (buffer.size() < needed) buffer.resize(needed);
  // 64-byte aligned start: a micro-panel row of 16 floats is then one cache line.
  const uintptr_t address = reinterpret_cast<uintptr_t>(buffer.data());
  return reinterpret_cast<Acc*>((address + 63) & ~uintptr_t{63});
}

// The calling thread's scratch space, kept between calls (OpenMP's pool threads live on): a fresh
// few-hundred-KiB buffer per call would be a malloc/mmap, page faults and a zero fill every time, which
// costs more than a whole small product (measured: ~200 us for a 1 x 1 x 1 product before this).
// One buffer per element type and `slot` (a caller that needs two live buffers uses two slots).
template <typename Acc, int slot = 0>
Acc* thread_workspace(size_t count) {
  thread_local std::vector<Acc> buffer;
  return aligned_run(buffer, count);
}

// The float MR = 6 panel, four columns at a time: six 4-wide row loads, transposed in registers (a 4 x 4
// transpose of rows 0-3 and an interleave of rows 4-5), four 6-value column stores. The same values land in
// the same places as the scalar loop's 24 loads and stores (a copy: bits unchanged). Returns the columns
// done (a multiple of 4); the caller finishes the rest.
BRIGADE_VECTOR_INLINE int64_t pack_six_rows_by_four(const float* src, int64_t lda, int64_t kc, float* panel) {
  int64_t p = 0;
  for (; p + 4 <= kc; p += 4) {
    f32x4 r[6];
    for (int64_t i = 0; i < 6; ++i) r[i] = load4(src + i * lda + p);
    const f32x4 t0 = __builtin_shufflevector(r[0], r[1], 0, 4, 1, 5);  // r0[0] r1[0] r0[1] r1[1]
    const f32x4 t1 = __builtin_shufflevector(r[0], r[1], 2, 6, 3, 7);  // r0[2] r1[2] r0[3] r1[3]
    const f32x4 t2 = __builtin_shufflevector(r[2], r[3], 0, 4, 1, 5);
    const f32x4 t3 = __builtin_shufflevector(r[2], r[3], 2, 6, 3, 7);
    float tail[8];  // rows 4-5: r4[q] r5[q] for q = 0..3
    store4(tail, __builtin_shufflevector(r[4], r[5], 0, 4, 1, 5));
    store4(tail + 4, __builtin_shufflevector(r[4], r[5], 2, 6, 3, 7));
    float* o = panel + p * 6;
    store4(o, __builtin_shufflevector(t0, t2, 0, 1, 4, 5));       // column p: r0..r3
    store4(o + 6, __builtin_shufflevector(t0, t2, 2, 3, 6, 7));   // column p + 1
    store4(o + 12, __builtin_shufflevector(t1, t3, 0, 1, 4, 5));  // column p + 2
    store4(o + 18, __builtin_shufflevector(t1, t3, 2, 3, 6, 7));  // column p + 3
    for (int64_t q = 0; q < 4; ++q) std::memcpy(o + q * 6 + 4, tail + 2 * q, 2 * sizeof(float));
  }
  return p;
}

// A transposing copy, four by four: row r of a row-major source (at src + r * ld, `len` values) becomes
// column r of the panel, panel[p * width + r] = src[r * ld + p], for rows [0, rows), rows a multiple of 4.
// Each 4 x 4 block is four 4-wide loads, eight shuffles and four 4-wide stores, where the scalar loop made
// 16 loads and 16 stores: the A panels of an untransposed A and the B panels of a transposed B (x @ W^T,
// nn::Linear's forward) are both this copy. The values are the panel's type W, any 4 bytes copied as bits:
// floats, or the 32-bit pairs of bfloat16 that the bf16 GEMM packs (matmul_avx512_bf16.cpp), whose source
// is bfloat16 memory (S), read as bytes; ld and p count W's. Bits unchanged.
using u32x4 = uint32_t __attribute__((vector_size(16)));

template <typename W, typename S>
BRIGADE_VECTOR_INLINE void pack_transposed_by_four(const S* src, int64_t ld, int64_t rows, int64_t len,
                                                   W* panel, int64_t width) {
  static_assert(sizeof(W) == 4, "a transposing copy of 4-byte values");
  // Four values: float vectors for floats (the code this copy always had), else four words of bits.
  using w4 = std::conditional_t<std::is_same_v<W, float>, f32x4, u32x4>;
  const auto* bytes = reinterpret_cast<const unsigned char*>(src);
  auto at = [&](int64_t r, int64_t q) { return bytes + (r * ld + q) * int64_t{sizeof(W)}; };
  auto load = [](const unsigned char* from) {
    w4 v;
    std::memcpy(&v, from, sizeof v);
    return v;
  };
  auto store = [](W* to, w4 v) { std::memcpy(to, &v, sizeof v); };
  int64_t p = 0;
  for (; p + 4 <= len; p += 4) {
    for (int64_t r = 0; r < rows; r += 4) {
      const w4 r0 = load(at(r, p)), r1 = load(at(r + 1, p)), r2 = load(at(r + 2, p)), r3 = load(at(r + 3, p));
      const w4 t0 = __builtin_shufflevector(r0, r1, 0, 4, 1, 5);  // r0[0] r1[0] r0[1] r1[1]
      const w4 t1 = __builtin_shufflevector(r0, r1, 2, 6, 3, 7);  // r0[2] r1[2] r0[3] r1[3]
      const w4 t2 = __builtin_shufflevector(r2, r3, 0, 4, 1, 5);
      const w4 t3 = __builtin_shufflevector(r2, r3, 2, 6, 3, 7);
      W* o = panel + p * width + r;
      store(o, __builtin_shufflevector(t0, t2, 0, 1, 4, 5));              // p:     r0..r3
      store(o + width, __builtin_shufflevector(t0, t2, 2, 3, 6, 7));      // p + 1
      store(o + 2 * width, __builtin_shufflevector(t1, t3, 0, 1, 4, 5));  // p + 2
      store(o + 3 * width, __builtin_shufflevector(t1, t3, 2, 3, 6, 7));  // p + 3
    }
  }
  for (; p < len; ++p) {
    for (int64_t r = 0; r < rows; ++r) std::memcpy(panel + p * width + r, at(r, p), sizeof(W));
  }
}

// Packs rows [0, mc) x cols [0, kc) of op(A) (origin at `a`) into micro-panels of MR rows: panel r holds
// element (r*MR + i, p) at out[r*MR*kc + p*MR + i]. Rows beyond mc are zero.
template <typename T, typename Acc, int64_t MR>
BRIGADE_VECTOR_INLINE void pack_a(const T* a, int64_t lda, bool trans, int64_t mc, int64_t kc, Acc* out) {
  for (int64_t r0 = 0; r0 < mc; r0 += MR) {
    const int64_t rows = std::min(MR, mc - r0);
    Acc* panel = out + r0 * kc;
    if (!trans && rows == MR) {  // op(A)(i, p) = a[i * lda + p]: MR row streams, contiguous writes
      const T* src = a + r0 * lda;
      int64_t p = 0;
      if constexpr (std::is_same_v<T, float> && std::is_same_v<Acc, float> && MR == 6) {
        p = pack_six_rows_by_four(src, lda, kc, panel);
      } else if constexpr (std::is_same_v<T, float> && std::is_same_v<Acc, float> && MR % 4 == 0) {
        pack_transposed_by_four(src, lda, MR, kc, panel, MR);
        continue;
      }
      for (; p < kc; ++p) {
#pragma GCC unroll 16
        for (int64_t i = 0; i < MR; ++i) panel[p * MR + i] = static_cast<Acc>(src[i * lda + p]);
      }
    } else if (!trans) {
      for (int64_t i = 0; i < rows; ++i) {
        const T* src = a + (r0 + i) * lda;
        for (int64_t p = 0; p < kc; ++p) panel[p * MR + i] = static_cast<Acc>(src[p]);
      }
    } else if (rows == MR) {  // op(A)(i, p) = a[p * lda + i]: rows of the panel are contiguous in memory
      for (int64_t p = 0; p < kc; ++p) {
        const T* src = a + p * lda + r0;
        if constexpr (std::is_same_v<T, Acc>) {
          // One MR-value copy a k step. Written as the loop below, g++ vectorised it across four k steps
          // instead, out of scalar loads and inserts.
          std::memcpy(panel + p * MR, src, MR * sizeof(Acc));
        } else {
#pragma GCC unroll 32
          for (int64_t i = 0; i < MR; ++i) panel[p * MR + i] = static_cast<Acc>(src[i]);
        }
      }
    } else {
      for (int64_t p = 0; p < kc; ++p) {
        const T* src = a + p * lda + r0;
        for (int64_t i = 0; i < rows; ++i) panel[p * MR + i] = static_cast<Acc>(src[i]);
      }
    }
    for (int64_t i = rows; i < MR; ++i) {
      for (int64_t p = 0; p < kc; ++p) panel[p * MR + i] = Acc(0);
    }
  }
}

// Packs rows [0, kc) x cols [0, nc) of op(B) into micro-panels of NR columns: panel c holds element
// (p, c*NR + j) at out[c*NR*kc + p*NR + j]. Columns beyond nc are zero.
template <typename T, typename Acc, int64_t NR>
BRIGADE_VECTOR_INLINE void pack_b(const T* b, int64_t ldb, bool trans, int64_t kc, int64_t nc, Acc* out) {
  for (int64_t c0 = 0; c0 < nc; c0 += NR) {
    const int64_t cols = std::min(NR, nc - c0);
    Acc* panel = out + c0 * kc;
    if (!trans && cols == NR) {  // op(B)(p, j) = b[p * ldb + j]: a row copy of NR values per k
      for (int64_t p = 0; p < kc; ++p) {
        const T* src = b + p * ldb + c0;
#pragma GCC unroll 32
        for (int64_t j = 0; j < NR; ++j) panel[p * NR + j] = static_cast<Acc>(src[j]);
      }
    } else if (!trans) {
      for (int64_t p = 0; p < kc; ++p) {
        const T* src = b + p * ldb + c0;
        int64_t j = 0;
        for (; j < cols; ++j) panel[p * NR + j] = static_cast<Acc>(src[j]);
        for (; j < NR; ++j) panel[p * NR + j] = Acc(0);
      }
    } else if (cols == NR) {  // op(B)(p, j) = b[j * ldb + p]: NR row streams, contiguous writes
      const T* src = b + c0 * ldb;
      if constexpr (std::is_same_v<T, float> && std::is_same_v<Acc, float> && NR % 4 == 0) {
        pack_transposed_by_four(src, ldb, NR, kc, panel, NR);
        continue;
      }
      for (int64_t p = 0; p < kc; ++p) {
#pragma GCC unroll 16
        for (int64_t j = 0; j < NR; ++j) panel[p * NR + j] = static_cast<Acc>(src[j * ldb + p]);
      }
    } else {
      for (int64_t j = 0; j < cols; ++j) {
        const T* src = b + (c0 + j) * ldb;
        for (int64_t p = 0; p < kc; ++p) panel[p * NR + j] = static_cast<Acc>(src[p]);
      }
      for (int64_t j = cols; j < NR; ++j) {
        for (int64_t p = 0; p < kc; ++p) panel[p * NR + j] = Acc(0);
      }
    }
  }
}

}  // namespace brigade::kernels::cpu::detail
