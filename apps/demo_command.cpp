// `brigade demo`: autograd in a few lines. Fits y = 3x - 2 (plus noise) with a one-feature linear model
// by plain gradient descent, printing the loss as it falls and the learned parameters.
#include <cstdio>

#include "apps/commands.h"
#include "autograd/ops.h"
#include "tensor/grad_mode.h"
#include "tensor/tensor.h"

namespace brigade::apps {

Command add_demo_command(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand("demo", "A short autograd demo: fit a line by gradient descent");
  auto steps = std::make_shared<int>(100);
  auto lr = std::make_shared<double>(0.2);
  auto device_name = std::make_shared<std::string>("cpu");
  cmd->add_option("--steps", *steps, "gradient-descent steps")->check(CLI::PositiveNumber);
  cmd->add_option("--lr", *lr, "learning rate")->check(CLI::PositiveNumber);
  cmd->add_option("--device", *device_name, "cpu, cuda or cuda:N");
  return {cmd, [=] {
    Device device = Device::parse(*device_name);
    manual_seed(0);
    // data: x ~ U[-1, 1), y = 3x - 2 + 0.1 * noise            x, y are [256, 1]
    Tensor x = (rand({256, 1}, TensorOptions().device(device)) * 2.0 - 1.0).detach();
    Tensor y = (x * 3.0 - 2.0 + randn({256, 1}, TensorOptions().device(device)) * 0.1).detach();
    // parameters: w [1, 1], b [1], leaves that require grad
    Tensor w = zeros({1, 1}, TensorOptions().device(device).requires_grad());
    Tensor b = zeros({1}, TensorOptions().device(device).requires_grad());
    std::printf("brigade demo: fitting y = 3x - 2 with autograd on %s\n", device.str().c_str());
    for (int step = 0; step <= *steps; ++step) {
      Tensor prediction = matmul(x, w) + b;             // [256, 1]
      Tensor loss = mean(pow(prediction - y, 2.0));     // scalar
      loss.backward();                                  // fills w.grad() and b.grad()
      if (step % 10 == 0 || step == *steps) {
        std::printf("  step %3d  loss %.5f  w %.4f  b %.4f\n", step, loss.item(), w.item(), b.item());
      }
      NoGradGuard no_grad;  // the update itself is not part of the graph
      w.copy_(w - w.grad() * *lr);
      b.copy_(b - b.grad() * *lr);
      w.set_grad(Tensor());
      b.set_grad(Tensor());
    }
    std::printf("learned w = %.3f (true 3), b = %.3f (true -2)\n", w.item(), b.item());
    return 0;
  }};
}

}  // namespace brigade::apps
