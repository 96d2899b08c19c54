// bfloat16 on the CPU's fast paths: contiguous bfloat16 runs are widened to float a chunk at a time,
// computed and narrowed with the 16-lane casts of tensor/bf16_arrays.h; a strided operand still takes the
// element-by-element loop. Both must give the same bits, over every bfloat16 pattern as the first operand
// (zeros, denormals, ties are in the float -> bfloat16 casts' own test; here NaN, Inf, denormals and
// every exponent as inputs to the math), for every unary op, its backward, every binary op, and the
// float32 <-> bfloat16 casts of Tensor::to.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/elementwise_versions.h"
#include "kernels/kernels.h"
#include "tests/test_support.h"

namespace brigade::testing {
namespace {

using kernels::BinaryOp;
using kernels::ElementwiseKernel;
using kernels::UnaryOp;

constexpr int64_t kPatterns = 0x10000;

/// [n] bfloat16 tensor seen through a step-2 view (the strided loop) and its contiguous copy (the fast path).
struct Bf16Operand {
  Tensor strided, contiguous;
};

Bf16Operand operand(const std::vector<uint16_t>& bits) {
  const int64_t n = static_cast<int64_t>(bits.size());
  std::vector<bfloat16> pairs(2 * bits.size(), bfloat16::from_bits(0x7fc1));
  for (size_t i = 0; i < bits.size(); ++i) pairs[2 * i] = bfloat16::from_bits(bits[i]);
  Tensor strided = from_vector<bfloat16>(pairs, {n, 2}).select(1, 0);
  return {strided, strided.contiguous()};
}

std::vector<uint16_t> every_pattern() {
  std::vector<uint16_t> v(kPatterns);
  for (int64_t b = 0; b < kPatterns; ++b) v[static_cast<size_t>(b)] = static_cast<uint16_t>(b);
  return v;
}

/// Random patterns, one in 16 a NaN, Inf or denormal.
std::vector<uint16_t> random_patterns(uint32_t seed) {
  std::mt19937 rng(seed);
  const uint16_t specials[] = {0x7f80, 0xff80, 0x7fc0, 0xffc1, 0x0001, 0x807f, 0x0000, 0x8000};
  std::vector<uint16_t> v(kPatterns);
  for (auto& b : v) b = (rng() % 16 == 0) ? specials[rng() % 8] : static_cast<uint16_t>(rng());
  return v;
}

bool is_nan(bfloat16 b) {
  return (b.bits & 0x7f80) == 0x7f80 && (b.bits & 0x007f) != 0;
}

/// Number of elements whose bits differ (the first few reported). Two NaNs count as equal: where both
/// operands of a multiply are NaN, x86 returns the first operand's payload, and g++ may order a commutative
/// operation's operands either way in a vectorised loop.
int64_t count_mismatches(const Tensor& fast, const Tensor& reference, const char* what) {
  const std::vector<bfloat16> f = fast.to_vector<bfloat16>(), r = reference.to_vector<bfloat16>();
  int64_t mismatches = 0;
  for (size_t i = 0; i < f.size(); ++i) {
    if (f[i].bits != r[i].bits && !(is_nan(f[i]) && is_nan(r[i])) && ++mismatches <= 3) {
      ADD_FAILURE() << what << " element " << i << ": fast 0x" << std::hex << f[i].bits << ", strided 0x"
                    << r[i].bits;
    }
  }
  return mismatches;
}

std::vector<ElementwiseKernel> cpu_versions() {
  std::vector<ElementwiseKernel> v;
  for (ElementwiseKernel k : kernels::all_elementwise_kernels()) {
    if (kernels::elementwise_kernel_backend(k) == DeviceKind::CPU &&
        kernels::elementwise_kernel_supports(k)) {
      v.push_back(k);
    }
  }
  return v;
}

constexpr UnaryOp kUnaryOps[] = {UnaryOp::Neg,   UnaryOp::Exp,  UnaryOp::Log,     UnaryOp::Sqrt,
                                 UnaryOp::Rsqrt, UnaryOp::Tanh, UnaryOp::Sigmoid, UnaryOp::Relu,
                                 UnaryOp::Gelu,  UnaryOp::Abs};

}  // namespace

TEST(CpuBf16Elementwise, UnaryOpsAndBackwardEqualTheStridedLoopBitForBit) {
  const Bf16Operand x = operand(every_pattern()), g = operand(random_patterns(1));
  for (ElementwiseKernel kernel : cpu_versions()) {
    SCOPED_TRACE(kernels::elementwise_kernel_name(kernel));
    for (UnaryOp op : kUnaryOps) {
      SCOPED_TRACE(kernels::unary_op_name(op));
      Tensor y_fast = empty({kPatterns}, TensorOptions(kBFloat16)), y_ref = empty_like(y_fast);
      kernels::cpu::unary_with(kernel, op, x.contiguous, y_fast);
      kernels::cpu::unary_with(kernel, op, x.strided, y_ref);
      EXPECT_EQ(count_mismatches(y_fast, y_ref, "forward"), 0);
      Tensor dx_fast = empty_like(y_fast), dx_ref = empty_like(y_fast);
      kernels::cpu::unary_backward_with(kernel, op, g.contiguous, x.contiguous, y_ref, dx_fast);
      kernels::cpu::unary_backward_with(kernel, op, g.strided, x.strided, y_ref, dx_ref);
      EXPECT_EQ(count_mismatches(dx_fast, dx_ref, "backward"), 0);
    }
  }
}

TEST(CpuBf16Elementwise, BinaryOpsEqualTheStridedLoopBitForBit) {
  const Bf16Operand a = operand(every_pattern()), b = operand(random_patterns(2));
  const BinaryOp ops[] = {BinaryOp::Add,     BinaryOp::Sub, BinaryOp::Mul, BinaryOp::Div,
                          BinaryOp::Maximum, BinaryOp::Pow, BinaryOp::Eq,  BinaryOp::Ne,
                          BinaryOp::Lt,      BinaryOp::Le,  BinaryOp::Gt,  BinaryOp::Ge};
  for (BinaryOp op : ops) {
    SCOPED_TRACE(kernels::binary_op_name(op));
    EXPECT_EQ(count_mismatches(kernels::binary(op, a.contiguous, b.contiguous),
                               kernels::binary(op, a.strided, b.strided), "a op b"),
              0);
    EXPECT_EQ(count_mismatches(kernels::binary(op, b.contiguous, a.contiguous),
                               kernels::binary(op, b.strided, a.strided), "b op a"),
              0);
  }
  // A bias row broadcast over a matrix: the row runs take the fast path.
  Tensor m = a.contiguous.view({256, 256}), bias = b.contiguous.narrow(0, 0, 256);
  Tensor reference = kernels::binary(BinaryOp::Add, a.strided.view({256, 256}), bias.expand({256, 256}));
  EXPECT_EQ(count_mismatches(kernels::binary(BinaryOp::Add, m, bias), reference, "bias add"), 0);
}

// The fused bias + GELU keeps its casts in registers (kernels/cpu/gelu_avx512.cpp's bfloat16 rows where v3
// runs); it must give the unfused add, GELU and GELU backward's bits over every bfloat16 pattern of x,
// against biases and gradients with NaN, Inf and denormals among them, in rows of whole vectors (256) and
// with a partial last vector (250).
TEST(CpuBf16Elementwise, BiasGeluEqualsTheUnfusedOpsBitForBit) {
  const Tensor every = operand(every_pattern()).contiguous.view({256, 256});
  const Tensor bias_all = operand(random_patterns(4)).contiguous.narrow(0, 0, 256);
  const Tensor dy_all = operand(random_patterns(5)).contiguous.view({256, 256});
  for (int64_t cols : {256, 250}) {
    SCOPED_TRACE(::testing::Message() << "columns " << cols);
    const Tensor x = every.narrow(1, 0, cols).contiguous(), dy = dy_all.narrow(1, 0, cols).contiguous();
    const Tensor bias = bias_all.narrow(0, 0, cols).contiguous();
    const Tensor h = kernels::binary(BinaryOp::Add, x, bias);
    const Tensor y = kernels::unary(UnaryOp::Gelu, h);
    const Tensor dx = kernels::unary_backward(UnaryOp::Gelu, dy, h, y);
    EXPECT_EQ(count_mismatches(kernels::bias_gelu(x, bias), y, "y"), 0);
    const kernels::BiasGeluGrads grads = kernels::bias_gelu_backward(dy, x, bias);
    EXPECT_EQ(count_mismatches(grads.dx, dx, "dx"), 0);
    EXPECT_EQ(count_mismatches(grads.dbias, kernels::sum_to(dx, {cols}), "dbias"), 0);
  }
}

TEST(CpuBf16Elementwise, CastsEqualTheScalarConversionBitForBit) {
  // Every bfloat16 upper half with the lower halves at and around the tie, plus random ones.
  std::mt19937 rng(3);
  std::vector<float> floats;
  for (uint32_t hi = 0; hi < 0x10000; ++hi) {
    for (uint32_t lo : {0x0000u, 0x7fffu, 0x8000u, 0x8001u, static_cast<uint32_t>(rng() & 0xffff)}) {
      const uint32_t u = hi << 16 | lo;
      float f;
      std::memcpy(&f, &u, sizeof f);
      floats.push_back(f);
    }
  }
  const int64_t n = static_cast<int64_t>(floats.size());
  Tensor x = from_vector<float>(floats, {n});
  std::vector<bfloat16> expected(floats.size());
  for (size_t i = 0; i < floats.size(); ++i) expected[i] = bfloat16(floats[i]);
  Tensor low = x.to(kBFloat16);
  EXPECT_EQ(count_mismatches(low, from_vector<bfloat16>(expected, {n}), "float32 -> bfloat16"), 0);
  const std::vector<float> back = low.to(kFloat32).to_vector<float>();
  int64_t widen_mismatches = 0;
  for (size_t i = 0; i < back.size(); ++i) {
    uint32_t got, want = static_cast<uint32_t>(expected[i].bits) << 16;
    std::memcpy(&got, &back[i], sizeof got);
    widen_mismatches += got != want;
  }
  EXPECT_EQ(widen_mismatches, 0);
}

}  // namespace brigade::testing
