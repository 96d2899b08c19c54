// A program outside the brigade tree, built against the installed package.
#include <cstdio>

#include "autograd/ops.h"
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
  std::printf("consumer ok\n");
  return 0;
}
