// Every case of the op table (op_cases.h) on CUDA against the same case on the CPU reference backend.
// Each test skips with the reason when no GPU is usable.
//
// Tolerances (|cuda - cpu| <= atol + rtol * |cpu|, per element):
//   float32   rtol 1e-4, atol 1e-5   (the CPU sums in double, CUDA in float and in another order; CUDA's
//                                     expf/tanhf differ from the host libm by a few ulps)
//   bfloat16  rtol 2e-2, atol 3e-2   (both round to 8 significant bits, but float results a few ulps apart
//                                     may round to neighbouring bfloat16 values: 2^-8 each; ops that feed a
//                                     rounded output into a second op (x -> softmax -> backward) double it)
//   integer outputs (argmax, counts) exactly.
// float64 is CPU-only: on CUDA every float64 case must be refused with a DTypeError.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kernels/kernels.h"
#include "tests/kernels/op_cases.h"
#include "tests/test_support.h"

namespace brigade::testing {
namespace {

struct Tolerance {
  double rtol, atol;
};

Tolerance cuda_tolerance(DType case_dtype, DType output_dtype) {
  if (!is_floating(output_dtype)) return {0.0, 0.0};
  return case_dtype == kBFloat16 ? Tolerance{2e-2, 3e-2} : Tolerance{1e-4, 1e-5};
}

/// Outputs that run_case builds on the host (a count, a norm returned as a double).
bool host_output(const OpCase& c, size_t k) {
  return c.op == Op::GlobalL2Norm || (c.op == Op::CrossEntropy && k == 1);
}

class CudaOpTableTest : public ::testing::TestWithParam<size_t> {};

TEST_P(CudaOpTableTest, CudaMatchesCpu) {
  BRIGADE_REQUIRE_CUDA();
  const OpCase& c = op_cases()[GetParam()];
  const Device cuda = Device::cuda();
  if (c.dtype == kFloat64) {
    EXPECT_THROW(
        {
          std::vector<Tensor> inputs = make_inputs(c, cuda);
          run_case(c, inputs, cuda);
        },
        DTypeError);
    return;
  }
  std::vector<Tensor> cpu_inputs = make_inputs(c, Device::cpu());
  std::vector<Tensor> cuda_inputs = make_inputs(c, cuda);
  std::vector<Tensor> expected = run_case(c, cpu_inputs, Device::cpu());
  std::vector<Tensor> actual = run_case(c, cuda_inputs, cuda);
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t k = 0; k < actual.size(); ++k) {
    SCOPED_TRACE("output " + std::to_string(k));
    ASSERT_TRUE(actual[k].defined());
    EXPECT_EQ(actual[k].dtype(), expected[k].dtype());
    if (!host_output(c, k)) {
      EXPECT_TRUE(actual[k].device().is_cuda()) << actual[k].device();
    }
    const Tolerance tol = cuda_tolerance(c.dtype, actual[k].dtype());
    EXPECT_TRUE(allclose(actual[k].cpu(), expected[k], tol.rtol, tol.atol));
  }
}

INSTANTIATE_TEST_SUITE_P(Table, CudaOpTableTest, ::testing::Range<size_t>(0, op_cases().size()),
                         [](const ::testing::TestParamInfo<size_t>& info) {
                           return op_cases()[info.param].name;
                         });

TEST(CudaOps, DropoutMaskIsTheCpuMaskBitForBit) {
  BRIGADE_REQUIRE_CUDA();
  // Philox gives element i the same uniform on both devices, so the kept positions must agree exactly.
  Tensor x = ones({513, 257});
  for (double p : {0.1, 0.5, 0.9}) {
    Tensor cpu = kernels::dropout(x, p, {77, 3});
    Tensor gpu = kernels::dropout(x.to(Device::cuda()), p, {77, 3}).cpu();
    EXPECT_TRUE(allclose(kernels::binary(kernels::BinaryOp::Ne, gpu, 0.0),
                         kernels::binary(kernels::BinaryOp::Ne, cpu, 0.0), 0, 0))
        << "p = " << p;
  }
}

TEST(CudaOps, EmbeddingAndCrossEntropyReportBadIndicesLikeTheCpu) {
  BRIGADE_REQUIRE_CUDA();
  const Device cuda = Device::cuda();
  EXPECT_THROW(kernels::embedding(zeros({5, 2}, cuda), from_vector<int64_t>({1, 5}, {2}, cuda)), ValueError);
  EXPECT_THROW(kernels::cross_entropy(zeros({2, 3}, cuda), from_vector<int64_t>({0, 3}, {2}, cuda)),
               ValueError);
  EXPECT_THROW(kernels::embedding_backward(zeros({2, 2}, cuda), from_vector<int64_t>({-1, 0}, {2}, cuda), 4),
               ValueError);
}

}  // namespace
}  // namespace brigade::testing
