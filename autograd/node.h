// The autograd graph: nodes, the edges between them, and the two node kinds every graph uses.
//
// Each differentiable op that records itself creates one Node for its output. The node's next_edges point
// at the nodes of the op's inputs (their grad_fn, or the AccumulateGrad node of a leaf), in input order;
// apply() turns the gradient of the output into one gradient per input edge. The engine (engine.h) walks
// these edges from the root in topological order.
//
// Ops are written flashlight-style: the forward and a lambda holding its backward side by side
// (ops.cpp):
// \code
//   Tensor y = forward_no_grad([&] { return kernels::binary(BinaryOp::Mul, a, b); });
//   return record("mul", y, {a, b}, [a = saved(a), b = saved(b)](const Tensor& g, const NeedsGrad& needs) {
//     return std::vector<Tensor>{needs[0] ? kernels::sum_to(g * b, a.shape()) : Tensor(), ...};
//   });
// \endcode
// The lambda's captures are the op's saved tensors: the engine drops the lambda right after the node has
// run (unless retain_graph), which frees them.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "tensor/grad_mode.h"
#include "tensor/tensor.h"

namespace brigade {

/// Where a gradient goes: output `output_nr` of `node` (null node: the input needs no gradient).
/// output_nr is 0 except for nodes with several outputs (CheckpointNode).
struct Edge {
  std::shared_ptr<Node> node;
  size_t output_nr = 0;
};

class Node {
 public:
  /// Releases the graph behind this node iteratively: a long chain (a loop of 100k ops) would otherwise
  /// be destroyed by recursion deep enough to overflow the stack.
  virtual ~Node();

  /// Gradients w.r.t. each input edge given the gradient of the output, one per next_edges entry
  /// (an undefined tensor means "no gradient"). Runs under NoGradGuard (the engine sets it).
  virtual std::vector<Tensor> apply(const Tensor& grad_output) = 0;
  /// Short name for messages ("mul", "matmul", "AccumulateGrad").
  virtual const char* name() const = 0;
  /// Drops the saved tensors (called by the engine once the node has run, unless retain_graph).
  virtual void release_saved() {}
  /// True once release_saved() has made apply() impossible.
  virtual bool released() const { return false; }

  /// Nodes with several outputs override these two; the engine calls apply_all with one gradient per
  /// output (undefined where none arrived, at least one defined).
  virtual size_t num_outputs() const { return 1; }
  virtual std::vector<Tensor> apply_all(const std::vector<Tensor>& grad_outputs) {
    return apply(grad_outputs[0]);
  }

  std::vector<Edge> next_edges;
};

/// The sink of a leaf that requires grad: runs the leaf's hooks, then accumulates into leaf.grad().
/// The first gradient is stored as a fresh contiguous tensor (never aliasing a gradient that flows
/// elsewhere in the graph); later ones are added in place. One AccumulateGrad per leaf, cached weakly in
/// the leaf's AutogradMeta, so every graph that uses the leaf sums into the same .grad.
class AccumulateGrad : public Node {
 public:
  explicit AccumulateGrad(Tensor leaf) : leaf_(std::move(leaf)) {}
  std::vector<Tensor> apply(const Tensor& grad_output) override;
  const char* name() const override { return "AccumulateGrad"; }
  const Tensor& leaf() const { return leaf_; }

 private:
  Tensor leaf_;
  std::mutex mutex_;  // two graphs on two threads may share a leaf
};

/// needs[i]: whether input i of the op wants a gradient (its edge has a node). Backward lambdas skip the
/// work for the others.
using NeedsGrad = std::vector<bool>;
/// A backward lambda: gradients of the inputs given the gradient of the output.
using BackwardFn = std::function<std::vector<Tensor>(const Tensor& grad_output, const NeedsGrad& needs)>;

/// A node whose backward is a lambda. Checks what the lambda returns against the inputs' shapes and
/// dtypes, so that a wrong formula fails loudly with the op's name instead of corrupting a gradient.
class FunctionNode : public Node {
 public:
  FunctionNode(const char* name, BackwardFn backward, const std::vector<Tensor>& inputs);
  std::vector<Tensor> apply(const Tensor& grad_output) override;
  const char* name() const override { return name_; }
  void release_saved() override { backward_ = nullptr; }
  bool released() const override { return !backward_; }

  /// The shape and dtype of each input as recorded, in next_edges order (graph pictures label edges with it).
  struct InputMeta {
    Shape shape;
    DType dtype;
  };
  const std::vector<InputMeta>& recorded_inputs() const { return inputs_; }

 private:
  const char* name_;
  BackwardFn backward_;
  std::vector<InputMeta> inputs_;
};

namespace autograd {

/// The edge a gradient for `t` must follow: t's grad_fn, the AccumulateGrad of a leaf that requires
/// grad (created and cached on first use), or an empty edge.
Edge gradient_edge(const Tensor& t);
/// True when grad mode is on and one of `inputs` requires grad: the op must record a node.
bool any_requires_grad(const std::vector<Tensor>& inputs);
/// Makes `node` the producer of `output` (output becomes a non-leaf that requires grad).
void set_history(const Tensor& output, std::shared_ptr<Node> node);
/// What a backward lambda should capture of a tensor: the same data, cut from the graph, so that a saved
/// output does not keep its own node alive (a reference cycle).
inline Tensor saved(const Tensor& t) {
  return t.defined() ? t.detach() : Tensor();
}

/// Runs `forward` under NoGradGuard (kernels may make internal views of inputs that require grad; those
/// must not be recorded).
template <typename F>
auto forward_no_grad(F&& forward) {
  NoGradGuard no_grad;
  return forward();
}

/// Records `backward` as the producer of `output` when any input requires grad and grad mode is on;
/// returns `output` either way. `inputs` are the op's differentiable inputs in the order the lambda
/// returns their gradients.
Tensor record(const char* name, Tensor output, const std::vector<Tensor>& inputs, BackwardFn backward);

/// Adds a hook to a leaf: it sees (and may replace) each gradient before it is accumulated into .grad.
/// Throws AutogradError on a non-leaf.
void register_hook(const Tensor& leaf, std::function<Tensor(const Tensor&)> hook);

}  // namespace autograd
}  // namespace brigade
