// Every case of the op table (op_cases.h) on CUDA against the plain reference of kernels/reference/, the
// same reference the CPU backend is held to (op_table_test.cpp). Each test skips with the reason when no GPU
// is usable.
//
// Tolerances (|cuda - reference| <= atol + rtol * |reference|, per element; integer outputs exactly):
//   float32   rtol 1e-4, atol 1e-5   (CUDA computes in float and sums in another order; its expf/tanhf differ
//                                     from a correctly rounded result by a few ulps)
//   bfloat16  rtol 2e-2, atol 3e-2   (outputs rounded to 8 significant bits from float results a few ulps
//                                     off: a step of 2^-8 each, twice where a rounded output feeds a second
//                                     op)
//   matmul    the magnitude-relative error of op_check.h, as on the CPU: float32 1e-5, float64 1e-12,
//             bfloat16 1e-2
//   attention out and the gradients float32 rtol 1e-4, atol 1e-5; bfloat16 rtol 2e-2, atol 4e-3 (computed
//             in float32 from the bf16 inputs and rounded once); lse (float32 for both) rtol 1e-5, atol 1e-5
// float64 is CPU-only but for matmul: on CUDA every other float64 case must be refused with a DTypeError.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/ops/op_check.h"
#include "tests/ops/op_table.h"

namespace brigade::testing {
namespace {

Tolerance cuda_tolerance(const OpCase& c, size_t output, DType output_dtype) {
  if (!is_floating(output_dtype)) return {};
  const bool bf16 = c.dtype == kBFloat16;
  switch (c.op) {
    case Op::Matmul:
      return {0, 0, c.dtype == kFloat64 ? 1e-12 : (bf16 ? 1e-2 : 1e-5)};
    case Op::Attention:
      if (output == 1) return {1e-5, 1e-5};
      [[fallthrough]];
    case Op::AttentionBackward:
      return bf16 ? Tolerance{2e-2, 4e-3} : Tolerance{1e-4, 1e-5};
    default:
      return bf16 ? Tolerance{2e-2, 3e-2} : Tolerance{1e-4, 1e-5};
  }
}

bool cuda_runs_float64(Op op) {
  return op == Op::Matmul;
}

class CudaOpTableTest : public ::testing::TestWithParam<size_t> {};

TEST_P(CudaOpTableTest, CudaMatchesReference) {
  BRIGADE_REQUIRE_CUDA();
  const OpCase& c = op_cases()[GetParam()];
  const Device cuda = Device::cuda();
  if (c.dtype == kFloat64 && !cuda_runs_float64(c.op)) {
    EXPECT_THROW(kernel_call(c, operands_of(c, make_inputs(c, cuda), ForwardFrom::Reference), cuda)(),
                 DTypeError);
    return;
  }
  const std::vector<Expected> expected =
      reference_outputs(c, operands_of(c, make_inputs(c, Device::cpu()), ForwardFrom::Reference));
  const std::vector<Tensor> actual =
      kernel_call(c, operands_of(c, make_inputs(c, cuda), ForwardFrom::Reference), cuda)();
  expect_matches_reference(c, actual, expected, cuda,
                           [&c](size_t k, DType dtype) { return cuda_tolerance(c, k, dtype); });
}

INSTANTIATE_TEST_SUITE_P(Table, CudaOpTableTest, ::testing::ValuesIn(kernel_case_indices()),
                         [](const ::testing::TestParamInfo<size_t>& info) {
                           return op_cases()[info.param].name;
                         });

}  // namespace
}  // namespace brigade::testing
