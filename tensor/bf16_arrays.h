// float32 <-> bfloat16 over contiguous arrays, many lanes at a time: the casts of autocast (Tensor::to) and
// the widening of bfloat16 operands to float in the CPU kernels. Every path gives the bits of the scalar
// bfloat16(float) of tensor/bfloat16.h: round to nearest even, a NaN stays a quiet NaN with its sign and top
// payload bits, denormals kept.
//
// Narrowing (float -> bfloat16), picked once at run time from what the CPU has:
//   Avx512Bf16  vcvtneps2bf16, 16 lanes. The instruction treats a denormal input as zero, so a block of 16
//               that holds one takes the integer path below instead (never in practice, but bit-exact).
//   Avx512      the integer rounding of bfloat16.h on 16 lanes: u + 0x7fff + ((u >> 16) & 1), then >> 16,
//               NaN lanes replaced by (u >> 16) | 0x40.
//   Avx2        the same on 8 lanes.
//   Scalar      bfloat16(float), one element at a time.
// Widening (bfloat16 -> float) is exact: a 16-bit shift (Avx512 / Avx2 / Scalar; Avx512Bf16 uses Avx512's).
#pragma once

#include <cstdint>

#include "tensor/bfloat16.h"

namespace brigade {

enum class Bf16ArrayPath { Scalar, Avx2, Avx512, Avx512Bf16 };

/// "scalar", "avx2", "avx512", "avx512_bf16".
const char* bf16_array_path_name(Bf16ArrayPath path);
/// Whether `path` runs on this CPU (and build: x86-64 with GCC or Clang).
bool bf16_array_path_runs(Bf16ArrayPath path);
/// The fastest path this CPU runs.
Bf16ArrayPath default_bf16_array_path();

/// out[k] = bfloat16(in[k]) for k in [0, n). `path` must run here (bf16_array_path_runs).
void bf16_from_float_array(bfloat16* out, const float* in, int64_t n,
                           Bf16ArrayPath path = default_bf16_array_path());
/// out[k] = float(in[k]) for k in [0, n).
void float_from_bf16_array(float* out, const bfloat16* in, int64_t n,
                           Bf16ArrayPath path = default_bf16_array_path());

}  // namespace brigade
