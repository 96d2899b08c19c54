// float32 <-> bfloat16 arrays: every path this CPU runs gives the bits of the scalar bfloat16(float), over
// every bfloat16 pattern (widening) and a dense set of float patterns (narrowing) that holds, for each of
// the 65536 upper halves (all signs, exponents, NaN and Inf patterns, denormals), the lower halves at and
// around the rounding tie; plus lengths and offsets that exercise the scalar tails.
#include "tensor/bf16_arrays.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "tensor/error.h"

using namespace brigade;

namespace {

constexpr Bf16ArrayPath kPaths[] = {Bf16ArrayPath::Scalar, Bf16ArrayPath::Avx2, Bf16ArrayPath::Avx512,
                                    Bf16ArrayPath::Avx512Bf16};

float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

/// Upper half x lower halves {0, 1, tie - 1, tie, tie + 1, max} and a few random ones: ~720k floats.
std::vector<float> dense_floats() {
  const uint32_t lows[] = {0x0000, 0x0001, 0x7fff, 0x8000, 0x8001, 0xffff, 0x4000, 0xc000};
  std::vector<float> v;
  std::mt19937 rng(7);
  for (uint32_t hi = 0; hi < 0x10000; ++hi) {
    for (uint32_t lo : lows) v.push_back(from_bits(hi << 16 | lo));
    v.push_back(from_bits(hi << 16 | (rng() & 0xffff)));
  }
  return v;
}

}  // namespace

TEST(Bf16Arrays, NarrowingEqualsScalarBitForBit) {
  const std::vector<float> in = dense_floats();
  std::vector<uint16_t> expected(in.size());
  for (size_t i = 0; i < in.size(); ++i) expected[i] = bfloat16(in[i]).bits;
  for (Bf16ArrayPath path : kPaths) {
    if (!bf16_array_path_runs(path)) continue;
    SCOPED_TRACE(bf16_array_path_name(path));
    std::vector<bfloat16> out(in.size());
    bf16_from_float_array(out.data(), in.data(), static_cast<int64_t>(in.size()), path);
    int64_t mismatches = 0;
    for (size_t i = 0; i < in.size(); ++i) {
      if (out[i].bits != expected[i] && ++mismatches <= 5) {
        uint32_t u;
        std::memcpy(&u, &in[i], sizeof u);
        ADD_FAILURE() << std::hex << "input 0x" << u << ": got 0x" << out[i].bits << ", scalar 0x"
                      << expected[i];
      }
    }
    EXPECT_EQ(mismatches, 0);
  }
}

TEST(Bf16Arrays, KnownRoundings) {
  // Ties go to even, NaN stays a quiet NaN, a denormal stays a denormal, overflow rounds to Inf.
  const uint32_t in[] = {0x3f808000u, 0x3f818000u, 0x7f800001u, 0xff800000u, 0x00018000u, 0x80008000u,
                         0x7f7fffffu, 0x00000000u, 0x80000000u, 0x7fc00000u, 0x3f80c000u, 0x00008001u};
  const uint16_t want[] = {0x3f80, 0x3f82, 0x7fc0, 0xff80, 0x0002, 0x8000,
                           0x7f80, 0x0000, 0x8000, 0x7fc0, 0x3f81, 0x0001};
  constexpr int n = 12;
  std::vector<float> floats(16 * 3);  // three blocks of 16 so the vector paths see every value
  for (int r = 0; r < 3; ++r)
    for (int i = 0; i < 16; ++i) floats[r * 16 + i] = from_bits(in[(r * 16 + i) % n]);
  for (Bf16ArrayPath path : kPaths) {
    if (!bf16_array_path_runs(path)) continue;
    SCOPED_TRACE(bf16_array_path_name(path));
    std::vector<bfloat16> out(floats.size());
    bf16_from_float_array(out.data(), floats.data(), static_cast<int64_t>(floats.size()), path);
    for (size_t i = 0; i < floats.size(); ++i) EXPECT_EQ(out[i].bits, want[i % n]) << "element " << i;
  }
}

TEST(Bf16Arrays, WideningEveryPatternExactly) {
  std::vector<bfloat16> in(0x10000);
  for (uint32_t b = 0; b < 0x10000; ++b) in[b] = bfloat16::from_bits(static_cast<uint16_t>(b));
  for (Bf16ArrayPath path : kPaths) {
    if (!bf16_array_path_runs(path)) continue;
    SCOPED_TRACE(bf16_array_path_name(path));
    std::vector<float> out(in.size());
    float_from_bf16_array(out.data(), in.data(), static_cast<int64_t>(in.size()), path);
    for (uint32_t b = 0; b < 0x10000; ++b) {
      uint32_t u;
      std::memcpy(&u, &out[b], sizeof u);
      ASSERT_EQ(u, b << 16) << "pattern " << b;
    }
  }
}

TEST(Bf16Arrays, TailsAndOffsetsRoundTrip) {
  // Lengths 0..40 at offsets 0..3: the vector bodies and scalar tails cover exactly [0, n), nothing more.
  std::vector<float> src(64);
  for (size_t i = 0; i < src.size(); ++i) src[i] = 0.1f * static_cast<float>(i) - 2.0f;
  for (Bf16ArrayPath path : kPaths) {
    if (!bf16_array_path_runs(path)) continue;
    SCOPED_TRACE(bf16_array_path_name(path));
    for (int64_t offset = 0; offset < 4; ++offset) {
      for (int64_t n = 0; n <= 40; ++n) {
        std::vector<bfloat16> mid(64, bfloat16::from_bits(0x1234));
        std::vector<float> back(64, -7.0f);
        bf16_from_float_array(mid.data() + offset, src.data() + offset, n, path);
        float_from_bf16_array(back.data() + offset, mid.data() + offset, n, path);
        for (int64_t i = 0; i < 64; ++i) {
          const bool inside = i >= offset && i < offset + n;
          EXPECT_EQ(mid[i].bits, inside ? bfloat16(src[i]).bits : 0x1234) << "n " << n << " i " << i;
          EXPECT_EQ(back[i], inside ? static_cast<float>(bfloat16(src[i])) : -7.0f)
              << "n " << n << " i " << i;
        }
      }
    }
  }
}

TEST(Bf16Arrays, APathThisCpuLacksIsAClearError) {
  for (Bf16ArrayPath path : kPaths) {
    if (bf16_array_path_runs(path)) continue;
    float f = 1.0f;
    bfloat16 b;
    EXPECT_THROW(bf16_from_float_array(&b, &f, 1, path), ValueError) << bf16_array_path_name(path);
  }
  EXPECT_TRUE(bf16_array_path_runs(Bf16ArrayPath::Scalar));
  EXPECT_TRUE(bf16_array_path_runs(default_bf16_array_path()));
}
