// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11).
//
// A counter-based generator: the random numbers for element i are a pure function of (seed, counter), so
// the CPU loop and a CUDA thread computing element i get the same bits, and any element can be generated
// without generating the ones before it. brigade's convention, used by every random op:
//   key     = seed (64 bits)
//   counter = (element index i as 64 bits, generator offset as 64 bits)
// and element i takes lane 0 of the 4 outputs (uniform) or lanes 0 and 1 (normal, via Box–Muller).
#pragma once

#include <cmath>
#include <cstdint>

#include "tensor/bfloat16.h"  // BRIGADE_HOST_DEVICE

namespace brigade::philox {

struct Uint4 {
  uint32_t x, y, z, w;
};

BRIGADE_HOST_DEVICE inline uint32_t mulhilo(uint32_t a, uint32_t b, uint32_t* hi) {
  uint64_t product = static_cast<uint64_t>(a) * static_cast<uint64_t>(b);
  *hi = static_cast<uint32_t>(product >> 32);
  return static_cast<uint32_t>(product);
}

/// Ten rounds of Philox4x32 on `counter` under the 64-bit `key`.
BRIGADE_HOST_DEVICE inline Uint4 philox4x32_10(Uint4 counter, uint64_t key64) {
  constexpr uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
  constexpr uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;
  uint32_t k0 = static_cast<uint32_t>(key64), k1 = static_cast<uint32_t>(key64 >> 32);
  for (int round = 0; round < 10; ++round) {
    uint32_t hi0, hi1;
    uint32_t lo0 = mulhilo(kMul0, counter.x, &hi0);
    uint32_t lo1 = mulhilo(kMul1, counter.z, &hi1);
    counter = {hi1 ^ counter.y ^ k0, lo1, hi0 ^ counter.w ^ k1, lo0};
    k0 += kWeyl0;
    k1 += kWeyl1;
  }
  return counter;
}

/// The four raw 32-bit outputs for element `index` of a draw at generator `offset`.
BRIGADE_HOST_DEVICE inline Uint4 random_bits(uint64_t seed, uint64_t offset, uint64_t index) {
  Uint4 counter{static_cast<uint32_t>(index), static_cast<uint32_t>(index >> 32),
                static_cast<uint32_t>(offset), static_cast<uint32_t>(offset >> 32)};
  return philox4x32_10(counter, seed);
}

/// Maps 32 random bits to a float in [0, 1) with 24 bits of precision (exact on both devices).
BRIGADE_HOST_DEVICE inline float bits_to_unit(uint32_t bits) {
  return static_cast<float>(bits >> 8) * (1.0f / 16777216.0f);
}

/// Uniform [0, 1) for element `index`.
BRIGADE_HOST_DEVICE inline float uniform(uint64_t seed, uint64_t offset, uint64_t index) {
  return bits_to_unit(random_bits(seed, offset, index).x);
}

/// Dropout's keep rule for element `index`: kept iff uniform >= p, compared in double (the float promoted),
/// so every device and every loop that drops with the same state drops the same elements.
BRIGADE_HOST_DEVICE inline bool keeps(uint64_t seed, uint64_t offset, uint64_t index, double p) {
  return static_cast<double>(uniform(seed, offset, index)) >= p;
}

/// The standard normal that words x and y of a draw make (Box–Muller, computed in double so that the CPU
/// and CUDA math libraries agree to well under a float ulp).
BRIGADE_HOST_DEVICE inline float normal_from_words(uint32_t x, uint32_t y) {
  // u1 in (0, 1]: avoid log(0).
  double u1 = (static_cast<double>(x >> 8) + 1.0) * (1.0 / 16777216.0);
  double u2 = static_cast<double>(y >> 8) * (1.0 / 16777216.0);
  constexpr double kTwoPi = 6.283185307179586;
  return static_cast<float>(sqrt(-2.0 * log(u1)) * cos(kTwoPi * u2));
}

/// Standard normal for element `index` (Box–Muller on lanes 0 and 1).
BRIGADE_HOST_DEVICE inline float normal(uint64_t seed, uint64_t offset, uint64_t index) {
  Uint4 bits = random_bits(seed, offset, index);
  return normal_from_words(bits.x, bits.y);
}

}  // namespace brigade::philox
