// Finite-difference gradient checks: the test every differentiable op passes.
//
// For a function f of several float64 CPU tensors, gradcheck compares the analytic gradient (one backward
// of L = sum(f(inputs) * W) with a fixed random W, so that every output element matters and errors cannot
// cancel) with central differences (L(x + eps) - L(x - eps)) / (2 eps), element by element, for each
// input that requires grad.
//
// \code
//   auto a = brigade::randn({3, 4}, brigade::kFloat64).set_requires_grad();
//   auto r = brigade::autograd::gradcheck([](const auto& in) { return brigade::tanh(in[0]); }, {a});
//   EXPECT_TRUE(r.ok) << r.message;
// \endcode
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "tensor/tensor.h"

namespace brigade::autograd {

struct GradcheckOptions {
  double eps = 1e-6;   ///< finite-difference step
  double atol = 1e-5;  ///< an element passes when |analytic - numeric| <= atol + rtol * |numeric|
  double rtol = 1e-4;
  uint64_t seed = 1234;  ///< for the projection weights W
};

struct GradcheckResult {
  bool ok = true;
  /// Largest |analytic - numeric| / (atol + rtol * |numeric|) over all checked elements (<= 1 passes).
  double max_error = 0.0;
  /// Where it happened: input index, row-major element index, and the two values.
  int64_t input = -1;
  int64_t element = -1;
  double analytic = 0.0;
  double numeric = 0.0;
  int64_t checked = 0;  ///< number of elements compared
  /// A sentence describing the worst element (for test failure messages).
  std::string message;
};

/// Checks the gradients of `fn` w.r.t. every input that requires grad. Inputs must be float64 CPU
/// tensors where they require grad (others, e.g. int64 ids, are passed through unchanged). `fn` may return
/// any shape. The caller's tensors are not modified: gradcheck works on copies.
GradcheckResult gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& fn,
                          const std::vector<Tensor>& inputs, const GradcheckOptions& options = {});

}  // namespace brigade::autograd
