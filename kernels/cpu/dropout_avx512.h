// Dropout on 16 elements at a time with AVX-512 (kernels/cpu/dropout_avx512.cpp), for float32 tensors that
// are contiguous. Call it only where avx512_rows_run() (exp_rows_avx512.h) says so.
//
// Why: the mask's Philox4x32-10 (tensor/philox.h) is ten rounds of two 32 x 32 -> 64-bit multiplies an
// element, about 80 scalar instructions, against a handful for the multiply by the scale; dropout ran at
// ~1 % of the copy rate. Here the draws are 16 at a time (tensor/philox_avx512.h: ~18 instructions a
// round for 16 elements). The keep rule and every bit of the output are those of the scalar loop.
#pragma once

#include <cstdint>

namespace brigade::kernels::cpu::detail {

/// out[i] = x[i] * scale if philox::uniform(seed, offset, first + i) >= p, else 0, for i < n: the scalar
/// loop's bits (kernels/cpu/random.cpp), 16 elements a step.
void dropout_float_avx512(const float* x, float* out, int64_t n, int64_t first, double p, float scale,
                          uint64_t seed, uint64_t offset);

}  // namespace brigade::kernels::cpu::detail
