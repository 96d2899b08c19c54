// float32 <-> bfloat16 arrays (tensor/bf16_arrays.h): the scalar loop and three x86 paths, picked at run
// time.
//
// Napkin math: narrowing reads 4 bytes and writes 2 per element; at ~10 GB/s from L2 on one core that is
// ~0.6 ns an element, while bfloat16(float) one at a time costs ~1.5 ns (a NaN test, an add, a shift and a
// 2-byte store per element). 16 lanes do the rounding in about 6 instructions per 16 elements, so the
// vector paths are bound by memory, not by the arithmetic.
#include "tensor/bf16_arrays.h"

#include <string>

#include "tensor/error.h"

#if defined(__x86_64__) && defined(__GNUC__)
#define BRIGADE_BF16_ARRAYS_X86 1
#include <immintrin.h>

#include "tensor/bf16_lanes_avx512.h"
#else
#define BRIGADE_BF16_ARRAYS_X86 0
#endif

namespace brigade {

namespace {

void narrow_scalar(bfloat16* out, const float* in, int64_t n) {
  for (int64_t k = 0; k < n; ++k) out[k] = bfloat16(in[k]);
}

void widen_scalar(float* out, const bfloat16* in, int64_t n) {
  for (int64_t k = 0; k < n; ++k) out[k] = static_cast<float>(in[k]);
}

#if BRIGADE_BF16_ARRAYS_X86

// g++ 12's AVX-512 headers build some constants from an uninitialised vector (_mm512_undefined), which
// -Wmaybe-uninitialized reports once inlined here.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

// ---- AVX2: 8 lanes ----------------------------------------------------------------------------------------

/// bfloat16.h's round_from_float on 8 lanes, the results in the low 16 bits of each 32-bit lane.
__attribute__((target("avx2"))) inline __m256i round_to_bf16_avx2(__m256i u) {
  const __m256i one = _mm256_set1_epi32(1);
  const __m256i bias =
      _mm256_add_epi32(_mm256_set1_epi32(0x7fff), _mm256_and_si256(_mm256_srli_epi32(u, 16), one));
  const __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(u, bias), 16);
  // NaN: exponent all ones and a non-zero mantissa, i.e. (u & 0x7fffffff) > 0x7f800000 (signed compare is
  // safe: both sides are below 2^31).
  const __m256i magnitude = _mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff));
  const __m256i is_nan = _mm256_cmpgt_epi32(magnitude, _mm256_set1_epi32(0x7f800000));
  const __m256i quiet = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x40));
  return _mm256_blendv_epi8(rounded, quiet, is_nan);
}

__attribute__((target("avx2"))) void narrow_avx2(bfloat16* out, const float* in, int64_t n) {
  int64_t k = 0;
  for (; k + 16 <= n; k += 16) {
    const __m256i lo = round_to_bf16_avx2(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + k)));
    const __m256i hi = round_to_bf16_avx2(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + k + 8)));
    // packus works within 128-bit halves: [lo0 hi0 lo1 hi1] -> reorder the 64-bit quarters to lo0 lo1 hi0
    // hi1.
    const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(lo, hi), 0xd8);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + k), packed);
  }
  narrow_scalar(out + k, in + k, n - k);
}

__attribute__((target("avx2"))) void widen_avx2(float* out, const bfloat16* in, int64_t n) {
  int64_t k = 0;
  for (; k + 8 <= n; k += 8) {
    const __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + k)));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + k), _mm256_slli_epi32(wide, 16));
  }
  widen_scalar(out + k, in + k, n - k);
}

// ---- AVX-512: 16 lanes ------------------------------------------------------------------------------------

/// The 16 lanes' bfloat16, packed (bf16_lanes_avx512.h's rounding, then vpmovdw).
__attribute__((target("avx512f"))) inline __m256i round_to_bf16_avx512(__m512i u) {
  return _mm512_cvtepi32_epi16(bf16_lanes::round_bits(u));
}

__attribute__((target("avx512f"))) void narrow_avx512(bfloat16* out, const float* in, int64_t n) {
  int64_t k = 0;
  for (; k + 16 <= n; k += 16) {
    const __m512i u = _mm512_loadu_si512(in + k);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + k), round_to_bf16_avx512(u));
  }
  narrow_scalar(out + k, in + k, n - k);
}

__attribute__((target("avx512f"))) void widen_avx512(float* out, const bfloat16* in, int64_t n) {
  int64_t k = 0;
  for (; k + 16 <= n; k += 16) _mm512_storeu_ps(out + k, bf16_lanes::load(in + k));
  widen_scalar(out + k, in + k, n - k);
}

// ---- AVX512-BF16: vcvtneps2bf16 ---------------------------------------------------------------------------

__attribute__((target("avx512f,avx512bf16"))) void narrow_avx512_bf16(bfloat16* out, const float* in,
                                                                      int64_t n) {
  const __m512i exponent = _mm512_set1_epi32(0x7f800000);
  const __m512i magnitude_bits = _mm512_set1_epi32(0x7fffffff);
  int64_t k = 0;
  for (; k + 16 <= n; k += 16) {
    const __m512i u = _mm512_loadu_si512(in + k);
    // A denormal input (exponent 0, mantissa non-zero) would become a signed zero here.
    const __mmask16 denormal =
        _mm512_test_epi32_mask(u, magnitude_bits) & ~_mm512_test_epi32_mask(u, exponent);
    const __m256i bits =
        denormal ? round_to_bf16_avx512(u) : (__m256i)_mm512_cvtneps_pbh(_mm512_castsi512_ps(u));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + k), bits);
  }
  narrow_scalar(out + k, in + k, n - k);
}

#pragma GCC diagnostic pop
#endif  // BRIGADE_BF16_ARRAYS_X86

void check_runs(Bf16ArrayPath path) {
  if (!bf16_array_path_runs(path)) {
    throw ValueError(std::string("bfloat16 array path '") + bf16_array_path_name(path) +
                     "' does not run on this CPU; expected one for which bf16_array_path_runs is true");
  }
}

}  // namespace

const char* bf16_array_path_name(Bf16ArrayPath path) {
  switch (path) {
    case Bf16ArrayPath::Scalar:
      return "scalar";
    case Bf16ArrayPath::Avx2:
      return "avx2";
    case Bf16ArrayPath::Avx512:
      return "avx512";
    case Bf16ArrayPath::Avx512Bf16:
      return "avx512_bf16";
  }
  return "unknown";
}

bool bf16_array_path_runs(Bf16ArrayPath path) {
#if BRIGADE_BF16_ARRAYS_X86
  switch (path) {
    case Bf16ArrayPath::Scalar:
      return true;
    case Bf16ArrayPath::Avx2:
      return __builtin_cpu_supports("avx2");
    case Bf16ArrayPath::Avx512:
      return __builtin_cpu_supports("avx512f");
    case Bf16ArrayPath::Avx512Bf16:
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bf16");
  }
  return false;
#else
  return path == Bf16ArrayPath::Scalar;
#endif
}

Bf16ArrayPath default_bf16_array_path() {
  static const Bf16ArrayPath best = [] {
    for (Bf16ArrayPath p : {Bf16ArrayPath::Avx512Bf16, Bf16ArrayPath::Avx512, Bf16ArrayPath::Avx2}) {
      if (bf16_array_path_runs(p)) return p;
    }
    return Bf16ArrayPath::Scalar;
  }();
  return best;
}

void bf16_from_float_array(bfloat16* out, const float* in, int64_t n, Bf16ArrayPath path) {
  if (path != default_bf16_array_path()) check_runs(path);
  switch (path) {
#if BRIGADE_BF16_ARRAYS_X86
    case Bf16ArrayPath::Avx512Bf16:
      return narrow_avx512_bf16(out, in, n);
    case Bf16ArrayPath::Avx512:
      return narrow_avx512(out, in, n);
    case Bf16ArrayPath::Avx2:
      return narrow_avx2(out, in, n);
#endif
    default:
      return narrow_scalar(out, in, n);
  }
}

void float_from_bf16_array(float* out, const bfloat16* in, int64_t n, Bf16ArrayPath path) {
  if (path != default_bf16_array_path()) check_runs(path);
  switch (path) {
#if BRIGADE_BF16_ARRAYS_X86
    case Bf16ArrayPath::Avx512Bf16:
    case Bf16ArrayPath::Avx512:
      return widen_avx512(out, in, n);
    case Bf16ArrayPath::Avx2:
      return widen_avx2(out, in, n);
#endif
    default:
      return widen_scalar(out, in, n);
  }
}

}  // namespace brigade
