// The float64 finite-difference gradcheck (autograd/gradcheck.h) of every op-table case with a
// differentiable form (op_differentiable.h: gradchecked()): each differentiable op, every view kind of
// tensor.h (as the input of tanh), the copies, and the compositions of op_cases_compositions.h. The leaves
// are the cases' allocated bases in float64; the case's views are applied inside the differentiated
// function, so the gradient flows back through them.
//
// Tolerances (unless a case states its own, OpCase::grad_options): central differences with eps = 1e-6; an
// element passes when |analytic - numeric| <= 1e-5 + 1e-4 * |numeric|. Inputs are random normals (or
// uniform in [0.5, 2) where the op needs a positive input), so the kinks of relu, abs, max and maximum are
// hit with probability ~0.
#include <gtest/gtest.h>

#include <vector>

#include "autograd/gradcheck.h"
#include "tests/ops/op_table.h"

namespace brigade::testing {
namespace {

std::vector<size_t> gradchecked_case_indices() {
  std::vector<size_t> indices;
  for (size_t i = 0; i < op_cases().size(); ++i) {
    if (gradchecked(op_cases()[i])) indices.push_back(i);
  }
  return indices;
}

class OpGradcheck : public ::testing::TestWithParam<size_t> {};

TEST_P(OpGradcheck, MatchesFiniteDifferences) {
  const OpCase& c = op_cases()[GetParam()];
  std::vector<Tensor> leaves;
  for (size_t k = 0; k < c.inputs.size(); ++k) {
    Tensor base = make_base(c, k, resolve_dtype(c.inputs[k], kFloat64));
    if (differentiable(c.inputs[k])) base.set_requires_grad();
    leaves.push_back(base);
  }
  const DifferentiableForm form = differentiable_form(c);
  auto fn = [&c, &form](const std::vector<Tensor>& bases) {
    std::vector<Tensor> viewed;
    for (size_t k = 0; k < bases.size(); ++k) {
      viewed.push_back(c.inputs[k].view ? c.inputs[k].view(bases[k]) : bases[k]);
    }
    return form(viewed);
  };
  autograd::GradcheckResult result = autograd::gradcheck(fn, leaves, c.grad_options);
  EXPECT_TRUE(result.ok) << c.name << ": " << result.message;
  EXPECT_GT(result.checked, 0);
}

INSTANTIATE_TEST_SUITE_P(Table, OpGradcheck, ::testing::ValuesIn(gradchecked_case_indices()),
                         [](const ::testing::TestParamInfo<size_t>& info) {
                           return op_cases()[info.param].name;
                         });

// Every composition is gradchecked (they have no kernel to check otherwise), and so is every float64 case
// of an op with a differentiable form but for the large ones.
TEST(OpGradcheckCoverage, EveryCompositionAndEverySmallDifferentiableCase) {
  int compositions = 0, checked = 0;
  for (const OpCase& c : op_cases()) {
    if (c.op == Op::Composite) {
      ++compositions;
      EXPECT_TRUE(gradchecked(c)) << c.name;
    }
    checked += gradchecked(c);
  }
  EXPECT_GE(compositions, 18);
  EXPECT_GT(checked, 150);
}

}  // namespace
}  // namespace brigade::testing
