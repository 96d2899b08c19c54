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

#include <memory>
#include <unordered_map>
#include <vector>

#include "autograd/node.h"
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

// ---- The engine's parts --------------------------------------------------------------------------------
// backward() is these four pieces in a loop. They are public for other walks over the same graph: the split
// backward of a pipeline stage (pipeline/backward/split_backward.h) runs the graph in two halves with them.

/// Every node reachable from `roots`, each before the nodes its edges point to (reverse post-order of an
/// iterative depth-first search): the order backward() runs them in.
std::vector<std::shared_ptr<Node>> topological_order(const std::vector<std::shared_ptr<Node>>& roots);

/// The gradients sent to each output of each node, summed, until the node runs.
class GradientBuffers {
 public:
  /// Adds `grad` into the slot of `edge` (its node's output edge.output_nr); nothing for an undefined
  /// gradient or a null edge. Out of place: the same tensor may have been sent to several inputs, so a
  /// buffer is never modified through an alias. AutogradError when the shapes differ.
  void add(const Edge& edge, const Tensor& grad);
  /// Removes and returns `node`'s gradients, one per output (undefined where none arrived); empty when
  /// nothing was sent to it.
  std::vector<Tensor> take(const Node* node);

 private:
  std::unordered_map<const Node*, std::vector<Tensor>> slots_;
};

/// One step: `node`'s backward on its output gradients, one gradient per input edge (or none).
/// AutogradError when the node was released by an earlier backward or returns the wrong count.
std::vector<Tensor> apply_node(Node& node, const std::vector<Tensor>& grads);

/// The gradient a backward starts from at `root`: `gradient` checked against the root (shape, device) and
/// converted to its dtype, or 1 for a one-element root. AutogradError for a root that does not require
/// grad, a missing gradient for a larger root, or one that does not match.
Tensor root_gradient(const Tensor& root, const Tensor& gradient);

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
