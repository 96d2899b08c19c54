// Every case of the op table (op_cases.h) on CUDA, by the public op and by every registered CUDA kernel
// version of its family (op_versions.h; cuBLAS too for matmul), against the plain reference of
// kernels/reference/ (the same reference the CPU backend is held to: op_table_test.cpp). Each test skips with
// the reason when no GPU is usable.
//
// Tolerances (|cuda - reference| <= atol + rtol * |reference|, per element; integer outputs exactly):
//   the public op (what every op's case asked of CUDA before the versions axis):
//     float32   rtol 1e-4, atol 1e-5   (CUDA computes in float and sums in another order; its expf/tanhf
//                                       differ from a correctly rounded result by a few ulps)
//     bfloat16  rtol 2e-2, atol 3e-2   (outputs rounded to 8 significant bits from float results a few ulps
//                                       off: a step of 2^-8 each, twice where a rounded output feeds a
//                                       second op)
//     float64 is CPU-only but for matmul: every other float64 case must be refused with a DTypeError.
//   each version, called directly (what its own tests asked of it):
//     elementwise, AdamW, cross-entropy, embedding backward, softmax, layernorm: float32 rtol 1e-5,
//       atol 1e-6 (the same math in float, or double, summed in other orders; libdevice vs libm), float64
//       rtol 1e-12, atol 1e-14, bfloat16 rtol 1e-2, atol 1e-3 (one bf16 rounding of a float result);
//       AdamW's moments by their own dtype; layernorm's mean and rstd rtol 1e-5 (float64 1e-12), atol 1e-6,
//       its dweight and dbias (sums over the rows) atol 1e-4 (bfloat16 1e-2, float64 1e-12); float32
//       embedding backward atol 1e-4 (atomic sums of many O(1) terms in float, in any order)
//   matmul (every implementation): the magnitude-relative error of op_check.h, float32 1e-5, float64 1e-12,
//     bfloat16 1e-2
//   attention (every implementation): out and the gradients float32 rtol 1e-4, atol 1e-5; bfloat16
//     rtol 2e-2, atol 4e-3 (computed in float32 from the bf16 inputs and rounded once); float64 (the
//     versions that run it) rtol 1e-11, atol 1e-12; lse (float32 for float32 and bfloat16) rtol 1e-5,
//     atol 1e-5. The tensor-core versions' gradients atol 1e-2: they round P and dS to bf16 before their
//     products (up to 2^-9 per term) and dS = P (dP - delta) carries dP = dout . v of size ~sqrt(D)
//     (scripts/cuda_emulation/flash_tc_emu.cpp: 1.5x the 4e-3 bound, 0.6x this one).
// The versions' tolerances were set against the CPU backend; the emulated warp-per-row kernels meet them
// against kernels/reference by the same margin (worst 0.4 of the tolerance either way).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/ops/op_check.h"
#include "tests/ops/op_table.h"
#include "tests/ops/op_versions.h"

namespace brigade::testing {
namespace {

bool public_op_runs_float64(Op op) {
  return op == Op::Matmul;
}

class CudaOpTableTest : public ::testing::TestWithParam<size_t> {};

TEST_P(CudaOpTableTest, CudaMatchesReference) {
  BRIGADE_REQUIRE_CUDA();
  const OpCase& c = op_cases()[GetParam()];
  const Device cuda = Device::cuda();
  const std::vector<Expected> expected =
      reference_outputs(c, operands_of(c, make_inputs(c, Device::cpu()), ForwardFrom::Reference));
  for (const Implementation& impl : implementations(c, cuda)) {
    SCOPED_TRACE(impl.name);
    const std::vector<Tensor> operands = operands_of(c, make_inputs(c, cuda), ForwardFrom::Reference);
    const OpCall call = implementation_call(c, impl, operands, cuda);
    if (c.dtype == kFloat64 && impl.version < 0 && !public_op_runs_float64(c.op)) {
      EXPECT_THROW(call(), DTypeError);
      continue;
    }
    expect_matches_reference(c, call(), expected, cuda,
                             [&](size_t k, DType dtype) { return cuda_tolerance(c, impl, k, dtype); });
  }
}

INSTANTIATE_TEST_SUITE_P(Table, CudaOpTableTest, ::testing::ValuesIn(kernel_case_indices()),
                         [](const ::testing::TestParamInfo<size_t>& info) {
                           return op_cases()[info.param].name;
                         });

}  // namespace
}  // namespace brigade::testing
