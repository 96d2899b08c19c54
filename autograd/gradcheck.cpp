// gradcheck: analytic gradient from one backward, numeric gradient from central differences.
#include "autograd/gradcheck.h"

#include <cmath>
#include <sstream>

#include "autograd/engine.h"
#include "autograd/ops.h"

namespace brigade::autograd {
namespace {

/// L = sum(f(inputs) * weights) as a double.
double projected(const std::function<Tensor(const std::vector<Tensor>&)>& fn,
                 const std::vector<Tensor>& inputs, const Tensor& weights) {
  NoGradGuard no_grad;
  return brigade::sum(brigade::mul(fn(inputs), weights)).item();
}

}  // namespace

GradcheckResult gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& fn,
                          const std::vector<Tensor>& inputs, const GradcheckOptions& options) {
  // Private leaves: contiguous float64 copies, so that elements can be nudged through data<double>().
  std::vector<Tensor> leaves;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& input = inputs[i];
    if (!input.defined() || !input.requires_grad()) {
      leaves.push_back(input.defined() ? input.detach() : input);
      continue;
    }
    BRIGADE_CHECK_DTYPE(input.dtype() == kFloat64 && input.device().is_cpu(), "gradcheck: input ", i,
                        " requires grad, so it must be a float64 CPU tensor; found ",
                        dtype_name(input.dtype()), " on ", input.device().str());
    leaves.push_back(input.detach().clone().set_requires_grad(true));
  }

  // Analytic: one backward of L.
  Tensor output = fn(leaves);
  BRIGADE_CHECK_DTYPE(output.dtype() == kFloat64, "gradcheck: fn must return float64, found ",
                      dtype_name(output.dtype()));
  Generator generator(options.seed);
  Tensor weights = randn(output.shape(), kFloat64, &generator);
  Tensor loss = brigade::sum(brigade::mul(output, weights));
  if (loss.requires_grad()) backward(loss);  // no input requiring grad: nothing to check (ok = false)

  GradcheckResult result;
  for (size_t i = 0; i < leaves.size(); ++i) {
    Tensor& leaf = leaves[i];
    if (!leaf.defined() || !leaf.requires_grad()) continue;
    Tensor analytic = leaf.grad().defined() ? leaf.grad() : zeros_like(leaf);
    std::vector<double> analytic_values = analytic.to_vector<double>();
    double* data = leaf.data<double>();
    for (int64_t j = 0; j < leaf.numel(); ++j) {
      const double original = data[j];
      data[j] = original + options.eps;
      const double plus = projected(fn, leaves, weights);
      data[j] = original - options.eps;
      const double minus = projected(fn, leaves, weights);
      data[j] = original;
      const double numeric = (plus - minus) / (2.0 * options.eps);
      const double a = analytic_values[static_cast<size_t>(j)];
      double error = std::fabs(a - numeric) / (options.atol + options.rtol * std::fabs(numeric));
      if (std::isnan(error)) error = std::isnan(a) && std::isnan(numeric) ? 0.0 : INFINITY;
      ++result.checked;
      if (error > result.max_error || result.input < 0) {
        result.max_error = error;
        result.input = static_cast<int64_t>(i);
        result.element = j;
        result.analytic = a;
        result.numeric = numeric;
      }
    }
  }
  result.ok = result.checked > 0 && result.max_error <= 1.0;  // checking nothing is not a pass
  std::ostringstream message;
  message << "gradcheck " << (result.ok ? "passed" : "FAILED") << " over " << result.checked
          << " elements: worst ";
  if (result.input >= 0) {
    message << "at input " << result.input << " element " << result.element << ": analytic "
            << result.analytic << " vs numeric " << result.numeric << " (error " << result.max_error
            << " of atol " << options.atol << " + rtol " << options.rtol << " * |numeric|)";
  } else {
    message << "none (no input requires grad)";
  }
  result.message = message.str();
  return result;
}

}  // namespace brigade::autograd
