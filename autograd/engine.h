// The backward engine: reverse-mode autodiff over the graph of Nodes.
//
// backward(root) orders the nodes reachable from the root topologically (an iterative depth-first
// search, so deep graphs cannot overflow the stack), then runs them in that order: each node receives the
// sum of the gradients sent to it, its apply() turns that into gradients for its inputs, and those are
// summed into the buffers of the nodes they point to. A leaf's AccumulateGrad node adds into .grad.
// As soon as a node has run its saved tensors are released (unless retain_graph), which is what keeps the
// memory of a backward pass falling as it proceeds.
//
// All state of one backward lives on the calling thread's stack and the graph it walks: several threads
// may run backward at once on disjoint graphs (one per pipeline stage). Backward runs under NoGradGuard.
//
// \code
//   auto w = brigade::randn({3, 3}).set_requires_grad();
//   auto loss = brigade::sum(brigade::matmul(x, w));
//   brigade::backward(loss);          // same as loss.backward()
//   w.grad();                         // d loss / d w
// \endcode
#pragma once

#include <vector>

#include "tensor/grad_mode.h"
#include "tensor/tensor.h"

namespace brigade::autograd {

/// Backpropagates from `root`. `gradient` (d loss / d root) may be undefined only when root has one
/// element (it is then 1); otherwise it must have root's shape (it is converted to root's dtype).
/// Throws AutogradError when root does not require grad, when the gradient is missing or has the wrong
/// shape, or when the graph was already released by an earlier backward without retain_graph.
void backward(const Tensor& root, const Tensor& gradient = Tensor(), bool retain_graph = false);

/// Backpropagates from several roots at once (one gradient each, same rules as above); a node reached
/// from several roots runs once with the sum of their contributions. Roots that do not require grad are
/// an error.
void backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& gradients,
              bool retain_graph = false);

/// RAII: sets grad mode on this thread to `enabled` for its lifetime (checkpoint re-enables it inside a
/// backward, which otherwise runs under NoGradGuard).
class GradModeGuard {
 public:
  explicit GradModeGuard(bool enabled) : previous_(GradMode::is_enabled()) { GradMode::set_enabled(enabled); }
  ~GradModeGuard() { GradMode::set_enabled(previous_); }
  GradModeGuard(const GradModeGuard&) = delete;
  GradModeGuard& operator=(const GradModeGuard&) = delete;

 private:
  bool previous_;
};

}  // namespace brigade::autograd

namespace brigade {
using autograd::backward;
}  // namespace brigade
