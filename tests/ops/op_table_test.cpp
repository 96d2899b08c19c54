// Every case of the op table (op_cases.h) on the CPU, by the public op and by every CPU kernel version of its
// family (op_versions.h), against the plain reference of kernels/reference/.
// Checks a table cannot express (finite-difference gradients of the raw backward kernels, dropout
// statistics, thread-count independence, AdamW by hand) are in tests/kernels/op_properties_test.cpp.
//
// Tolerances (|actual - expected| <= atol + rtol * |expected|, per element; integer outputs exactly):
//   float32   rtol 1e-5, atol 1e-6   (math in float, sums in double; a few ulps)
//   bfloat16  rtol 1e-2, atol 1e-2   (outputs rounded to 8 significant bits: a step of 2^-8 = 0.4%)
//   float64   rtol 1e-12, atol 1e-12
//   matmul    on the magnitude-relative error of op_check.h: float32 1e-5, float64 1e-12, bfloat16 1e-2 (the
//             output is rounded to bfloat16, a relative step of 2^-8; the inputs are already bfloat16)
//   layernorm backward, float32 dweight and dbias: on the magnitude-relative error of op_check.h, 1e-6 of
//             sum_r |dy * xhat| and sum_r |dy|. A column's total can be far smaller than its terms (a
//             near-zero dbias of 257 rows), and v2 adds each four rows' terms in float before its double
//             totals: a few float roundings (6e-8) of the terms' scale, ~3.6e-7 at most.
//   attention float64 rtol 1e-11, atol 1e-12; float32 rtol 1e-4, atol 2e-6 (D-long products summed in
//             float; the kernel rescales by 1/l at the end, the reference divides each p first); bfloat16
//             rtol 1e-2, atol 2e-3 (the float32 result rounded once to bfloat16; values are O(1)). lse is
//             float32 for float32 and bfloat16 inputs: the float32 tolerance. The gradients in bfloat16 get
//             twice the forward's (out is rounded to bfloat16 before delta = dout . out).
// The inputs are rounded to the case dtype before the reference sees them, so only the op's own rounding
// counts; a backward case's forward outputs come from the reference, rounded to the forward's dtypes, and
// the kernel and the reference both use them (op_call.h).
#include "tests/ops/op_table.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "tests/ops/op_check.h"
#include "tests/ops/op_versions.h"

namespace brigade::testing {
namespace {

class OpTableTest : public ::testing::TestWithParam<size_t> {};

// Every implementation on the CPU (the public op, then each CPU kernel version: op_versions.h), on fresh
// inputs each, against one reference.
TEST_P(OpTableTest, CpuMatchesReference) {
  const OpCase& c = op_cases()[GetParam()];
  const Device cpu = Device::cpu();
  const std::vector<Expected> expected =
      reference_outputs(c, operands_of(c, make_inputs(c, cpu), ForwardFrom::Reference));
  for (const Implementation& impl : implementations(c, cpu)) {
    SCOPED_TRACE(impl.name);
    const std::vector<Tensor> operands = operands_of(c, make_inputs(c, cpu), ForwardFrom::Reference);
    const std::vector<Tensor> actual = implementation_call(c, impl, operands, cpu)();
    expect_matches_reference(c, actual, expected, cpu,
                             [&c](size_t k, DType dtype) { return cpu_tolerance(c, k, dtype); });
  }
}

INSTANTIATE_TEST_SUITE_P(Table, OpTableTest, ::testing::ValuesIn(kernel_case_indices()),
                         [](const ::testing::TestParamInfo<size_t>& info) {
                           return op_cases()[info.param].name;
                         });

TEST(OpTable, CoversEveryOpAndDtypeWithUniqueNames) {
  std::set<std::string> names;
  std::set<int> ops;
  std::set<DType> dtypes;
  for (const OpCase& c : op_cases()) {
    EXPECT_TRUE(names.insert(c.name).second) << c.name;
    ops.insert(static_cast<int>(c.op));
    dtypes.insert(c.dtype);
    EXPECT_EQ(c.op == Op::Composite, !kernel_call(c, {}, Device::cpu())) << c.name;
  }
  EXPECT_EQ(ops.size(), static_cast<size_t>(kOpCount));
  EXPECT_EQ(dtypes, (std::set<DType>{kFloat32, kBFloat16, kFloat64}));
  EXPECT_GT(op_cases().size(), 700u);
}

}  // namespace
}  // namespace brigade::testing
