// bfloat16: the top 16 bits of an IEEE float32 (8 exponent bits, 7 mantissa bits).
// Conversion from float rounds to nearest even, as CUDA's __float2bfloat16_rn does, so the CPU and CUDA
// backends produce identical bits. Usable in host and device code.
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define BRIGADE_HOST_DEVICE __host__ __device__
#else
#define BRIGADE_HOST_DEVICE
#endif

namespace brigade {

struct bfloat16 {
  uint16_t bits = 0;

  bfloat16() = default;
  BRIGADE_HOST_DEVICE bfloat16(float value) : bits(round_from_float(value)) {}  // NOLINT: implicit by design
  BRIGADE_HOST_DEVICE operator float() const { return to_float(bits); }         // NOLINT

  BRIGADE_HOST_DEVICE static bfloat16 from_bits(uint16_t b) {
    bfloat16 out;
    out.bits = b;
    return out;
  }

  BRIGADE_HOST_DEVICE static uint16_t round_from_float(float value) {
    uint32_t u = float_bits(value);
    if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu) != 0) {
      return static_cast<uint16_t>((u >> 16) | 0x0040u);  // NaN stays a (quiet) NaN
    }
    uint32_t rounding_bias = 0x7fffu + ((u >> 16) & 1u);  // round half to even
    return static_cast<uint16_t>((u + rounding_bias) >> 16);
  }

  BRIGADE_HOST_DEVICE static float to_float(uint16_t b) {
    uint32_t u = static_cast<uint32_t>(b) << 16;
    float f;
#if defined(__CUDA_ARCH__)
    f = __uint_as_float(u);
#else
    std::memcpy(&f, &u, sizeof(f));
#endif
    return f;
  }

 private:
  BRIGADE_HOST_DEVICE static uint32_t float_bits(float f) {
#if defined(__CUDA_ARCH__)
    return __float_as_uint(f);
#else
    uint32_t u;
    std::memcpy(&u, &f, sizeof(u));
    return u;
#endif
  }
};

static_assert(sizeof(bfloat16) == 2, "bfloat16 must be 2 bytes");

}  // namespace brigade
