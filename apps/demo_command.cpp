// `brigade demo`: autograd in a few lines. Fits y = 3x - 2 (plus noise) with a one-feature linear model
// by plain gradient descent, printing the loss as it falls and the learned parameters. --graph FILE writes
// the autograd graph of the first step's loss (autograd/graph_dump.h): what backward() is about to walk.
#include <cstdio>

#include "apps/commands.h"
#include "autograd/graph_dump.h"
#include "autograd/ops.h"
#include "tensor/grad_mode.h"
#include "tensor/tensor.h"

namespace brigade::apps {

namespace {

/// The graph behind `loss` as Graphviz DOT (a .dot file) or a self-contained SVG (any other name).
void write_graph(const std::string& path, const Tensor& loss, const autograd::NamedTensors& names) {
  const bool dot = path.size() > 4 && path.compare(path.size() - 4, 4, ".dot") == 0;
  write_text_file(path, dot ? autograd::graph_to_dot(loss, names) : autograd::graph_to_svg(loss, names),
                  "graph");
}

}  // namespace

Command add_demo_command(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand("demo", "A short autograd demo: fit a line by gradient descent");
  auto steps = std::make_shared<int>(100);
  auto lr = std::make_shared<double>(0.2);
  auto device_name = std::make_shared<std::string>("cpu");
  auto graph = std::make_shared<std::string>();
  cmd->add_option("--steps", *steps, "gradient-descent steps")->check(CLI::PositiveNumber);
  cmd->add_option("--lr", *lr, "learning rate")->check(CLI::PositiveNumber);
  cmd->add_option("--device", *device_name, "cpu, cuda or cuda:N");
  cmd->add_option("--graph", *graph, "write the first step's autograd graph here (.dot: Graphviz; else SVG)");
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
              Tensor prediction = matmul(x, w) + b;          // [256, 1]
              Tensor loss = mean(pow(prediction - y, 2.0));  // scalar
              if (step == 0 && !graph->empty()) write_graph(*graph, loss, {{"w", w}, {"b", b}});
              loss.backward();  // fills w.grad() and b.grad()
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
