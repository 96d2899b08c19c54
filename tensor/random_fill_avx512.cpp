// The float random fills with their Philox draws 16 at a time (random_fill_avx512.h).
//
// Napkin math: a normal is a Philox draw (~80 scalar instructions; ~11 an element here), then libm's log
// and cos in double (~40-60 cycles together, unchanged): for the ~124 M weights of a GPT-2-small model the
// draws went from about half of the fill to a small share of it. A uniform is the draw alone.

// g++ 12 warns "__Y may be used uninitialized" inside its AVX-512 intrinsics (their _mm512_undefined_*
// pass-through operand, fully overwritten under an all-ones mask): a false positive of its headers.
// Before the includes: the warning points into them.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
// 512-bit vector types pass through the inline functions of philox_avx512.h (g++ notes the ABI change).
#pragma GCC diagnostic ignored "-Wpsabi"

#include "tensor/random_fill_avx512.h"

#include <algorithm>

#include "tensor/philox.h"
#include "tensor/philox_avx512.h"

#if defined(__x86_64__) && defined(__GNUC__)

namespace brigade::detail {

__attribute__((target("avx512f"))) void fill_random_float_avx512(float* out, int64_t first, int64_t n,
                                                                 bool normal, uint64_t seed,
                                                                 uint64_t offset) {
  alignas(64) uint32_t x[16], y[16];
  for (int64_t i = 0; i < n; i += 16) {
    const philox::Words16 w = philox::random_words16(seed, offset, static_cast<uint64_t>(first + i));
    _mm512_store_si512(x, w.x);
    _mm512_store_si512(y, w.y);
    const int64_t m = std::min<int64_t>(16, n - i);
    for (int64_t l = 0; l < m; ++l) {
      out[first + i + l] = normal ? philox::normal_from_words(x[l], y[l]) : philox::bits_to_unit(x[l]);
    }
  }
}

}  // namespace brigade::detail

#endif
