// A program outside the brigade tree, built against the installed package.
#include <cstdio>

#include "autograd/ops.h"
#include "pipeline/plan/simulator.h"
#include "pipeline/schedule/generators.h"
#include "tensor/tensor.h"

int main() {
  brigade::Tensor x = brigade::full({3}, 2.0).set_requires_grad();
  brigade::Tensor y = brigade::sum(brigade::mul(x, x));  // sum(x^2) = 12, dy/dx = 2x = 4
  y.backward();
  double value = y.item();
  double grad0 = x.grad().to_vector<double>()[0];
  if (value != 12.0 || grad0 != 4.0) {
    std::printf("consumer failed: y=%g grad=%g\n", value, grad0);
    return 1;
  }
  // The pipeline's libraries, one per sub-folder, come with the package too: 1F1B on 4 stages x 8
  // microbatches idles (S - 1) / (M + S - 1) = 3 / 11 of the step.
  const auto timeline = brigade::pipeline::simulate(brigade::pipeline::make_schedule("1f1b", 4, 8));
  if (timeline.bubble < 3.0 / 11 - 1e-12 || timeline.bubble > 3.0 / 11 + 1e-12) {
    std::printf("consumer failed: 1f1b bubble %g, expected 3/11\n", timeline.bubble);
    return 1;
  }
  std::printf("consumer ok\n");
  return 0;
}
