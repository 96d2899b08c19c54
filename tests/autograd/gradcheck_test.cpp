// gradcheck itself: it catches a wrong gradient and says where, a gradient of the wrong shape is an error,
// and nothing to check is not a pass. The gradchecks of every differentiable op, view kind, copy and
// composition are cases of the op table (tests/ops/op_cases.h), run by tests/ops/op_gradcheck_test.cpp.
#include "autograd/gradcheck.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "autograd/node.h"
#include "autograd/ops.h"
#include "kernels/kernels.h"
#include "test_support.h"

namespace brigade {
namespace {

using Inputs = std::vector<Tensor>;

/// x^2 with a deliberately wrong backward (g * x instead of 2 g x).
Tensor wrong_square(const Tensor& x) {
  Tensor y = autograd::forward_no_grad([&] { return kernels::binary(kernels::BinaryOp::Mul, x, x); });
  return autograd::record("wrong_square", y, {x},
                          [x = autograd::saved(x)](const Tensor& g, const NeedsGrad&) {
                            return std::vector<Tensor>{kernels::binary(kernels::BinaryOp::Mul, g, x)};
                          });
}

TEST(GradcheckSelf, CatchesAWrongGradientAndSaysWhere) {
  Tensor x = from_vector<double>({1.0, 2.0, -3.0}, {3}).set_requires_grad();
  autograd::GradcheckResult result =
      autograd::gradcheck([](const Inputs& in) { return wrong_square(in[0]); }, {x});
  EXPECT_FALSE(result.ok);
  EXPECT_EQ(result.input, 0);
  EXPECT_EQ(result.element, 2);  // |x| largest there, so the error is largest there
  EXPECT_NEAR(result.numeric / result.analytic, 2.0, 1e-6);
  EXPECT_NE(result.message.find("FAILED"), std::string::npos);
  EXPECT_FALSE(x.grad().defined()) << "gradcheck must work on copies";
}

TEST(GradcheckSelf, AGradientOfTheWrongShapeIsAnError) {
  Tensor x = from_vector<double>({1.0, 2.0}, {2}).set_requires_grad();
  Tensor y = autograd::record("bad_shape", x.detach() * 1.0, {x}, [](const Tensor& g, const NeedsGrad&) {
    return std::vector<Tensor>{g.reshape({1, 2})};
  });
  try {
    sum(y).backward();
    FAIL() << "expected AutogradError";
  } catch (const AutogradError& e) {
    std::string message = e.what();
    EXPECT_NE(message.find("bad_shape"), std::string::npos) << message;
    EXPECT_NE(message.find("[1, 2]"), std::string::npos) << message;
  }
}

TEST(GradcheckSelf, NothingToCheckIsNotAPass) {
  Tensor x = from_vector<double>({1.0}, {1});
  EXPECT_FALSE(autograd::gradcheck([](const Inputs& in) { return in[0] * 2.0; }, {x}).ok);
}

}  // namespace
}  // namespace brigade
