// Dropout's Philox mask, 16 elements a step (dropout_avx512.h; the draws by tensor/philox_avx512.h).
//
// Napkin math, per 16 elements: 10 rounds x (2 x [2 vpmuludq, 3 shifts, 2 blends] + 4 xors) ~ 180
// instructions, then the keep compare and a masked multiply; about 11 instructions an element against ~80
// for scalar Philox. 4 bytes read and 4 written an element: at ~2 vector instructions a cycle that is
// ~0.4 ns an element on one core, above the copy rate of a cache-resident tensor but not of memory.

// g++ 12 warns "__Y may be used uninitialized" inside its AVX-512 intrinsics (their _mm512_undefined_*
// pass-through operand, fully overwritten under an all-ones mask): a false positive of its headers, as in
// exp_rows_avx512.cpp. Before the includes: the warning points into them.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
// 512-bit vector types pass through this file's inline functions (g++ notes the ABI change otherwise).
#pragma GCC diagnostic ignored "-Wpsabi"

#include "kernels/cpu/dropout_avx512.h"

#include "kernels/cpu/avx512_rows.h"  // BRIGADE_CPU_X86, BRIGADE_AVX512*
#include "tensor/philox_avx512.h"

#if BRIGADE_CPU_X86
#include <algorithm>

namespace brigade::kernels::cpu::detail {

BRIGADE_AVX512 void dropout_float_avx512(const float* x, float* out, int64_t n, int64_t first, double p,
                                         float scale, uint64_t seed, uint64_t offset) {
  const int threshold = philox::keep_threshold(p);
  const __m512 s = _mm512_set1_ps(scale);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 lanes = first_lanes(std::min<int64_t>(16, n - i));
    const __mmask16 keep = philox::keeps16(seed, offset, static_cast<uint64_t>(first + i), threshold);
    const __m512 v = _mm512_maskz_loadu_ps(lanes, x + i);
    _mm512_mask_storeu_ps(out + i, lanes, _mm512_maskz_mul_ps(keep, v, s));
  }
}

}  // namespace brigade::kernels::cpu::detail

#endif
