// The split backward: two walks over one graph, each with half of every node's edges masked. The order,
// the gradient buffers and the step that runs one node are the engine's (autograd/engine.h).
#include "pipeline/backward/split_backward.h"

#include <algorithm>
#include <utility>

#include "autograd/engine.h"
#include "tensor/error.h"
#include "tensor/grad_mode.h"

namespace brigade::pipeline {
namespace {

bool any_defined(const std::vector<Tensor>& grads) {
  return std::any_of(grads.begin(), grads.end(), [](const Tensor& g) { return g.defined(); });
}

/// Nulls the edges of `node` for which `masked(child)` holds while alive, and puts them back after (also
/// when the node's backward throws).
class EdgeMask {
 public:
  template <typename Pred>
  EdgeMask(Node& node, Pred masked) : node_(node) {
    for (size_t i = 0; i < node.next_edges.size(); ++i) {
      std::shared_ptr<Node>& child = node.next_edges[i].node;
      if (child && masked(child.get())) saved_.emplace_back(i, std::move(child));
    }
  }
  ~EdgeMask() {
    for (auto& [i, child] : saved_) node_.next_edges[i].node = std::move(child);
  }
  EdgeMask(const EdgeMask&) = delete;
  EdgeMask& operator=(const EdgeMask&) = delete;
  bool any() const { return !saved_.empty(); }

 private:
  Node& node_;
  std::vector<std::pair<size_t, std::shared_ptr<Node>>> saved_;
};

}  // namespace

Tensor SplitBackward::backward_input(const Tensor& root, const Tensor& gradient, const Tensor& input) {
  BRIGADE_CHECK_AS(AutogradError, !pending_,
                   "SplitBackward::backward_input: called twice without backward_weight() in between");
  BRIGADE_CHECK_AS(AutogradError, root.defined() && root.requires_grad(),
                   "SplitBackward::backward_input: the root does not require grad (computed without grad?)");
  NoGradGuard no_grad;
  const Tensor root_grad = autograd::root_gradient(root, gradient);
  const Edge root_edge = autograd::gradient_edge(root);
  const Edge input_edge =
      input.defined() && input.requires_grad() && input.is_leaf() ? autograd::gradient_edge(input) : Edge{};

  order_ = autograd::topological_order({root_edge.node});
  input_side_.clear();
  kept_.clear();
  root_grads_.clear();
  // Reverse topological order visits every node after all the nodes its edges lead to.
  for (auto it = order_.rbegin(); it != order_.rend(); ++it) {
    const Node* node = it->get();
    bool leads_to_input = input_edge.node && node == input_edge.node.get();
    for (const Edge& edge : node->next_edges) {
      if (leads_to_input) break;
      leads_to_input = edge.node && input_side_.count(edge.node.get()) != 0;
    }
    if (leads_to_input) input_side_.insert(node);
  }
  pending_ = true;

  if (!input_side_.count(root_edge.node.get())) {
    // The root does not depend on the input: everything is weight gradient.
    root_grads_.assign(root_edge.node->num_outputs(), Tensor());
    root_grads_[root_edge.output_nr] = root_grad;
    return Tensor();
  }

  autograd::GradientBuffers buffers;
  buffers.add(root_edge, root_grad);
  Tensor input_grad;
  const auto on_weight_side = [this](const Node* child) { return input_side_.count(child) == 0; };
  for (const std::shared_ptr<Node>& node : order_) {
    if (!input_side_.count(node.get())) continue;
    std::vector<Tensor> grads = buffers.take(node.get());
    if (node == input_edge.node) {  // the input leaf: its gradient is the result, .grad is left alone
      if (!grads.empty()) input_grad = grads[0];
      continue;
    }
    if (!any_defined(grads)) continue;
    std::vector<Tensor> input_grads;
    bool has_weight_edges = false;
    {
      EdgeMask mask(*node, on_weight_side);
      has_weight_edges = mask.any();
      input_grads = autograd::apply_node(*node, grads);
    }
    for (size_t i = 0; i < input_grads.size(); ++i) {
      const Edge& edge = node->next_edges[i];
      if (edge.node && input_side_.count(edge.node.get())) buffers.add(edge, input_grads[i]);
    }
    if (has_weight_edges) {
      kept_.push_back({node, std::move(grads)});
    } else {
      node->release_saved();  // only the input gradient needed it
    }
  }
  return input_grad;
}

void SplitBackward::backward_weight() {
  BRIGADE_CHECK_AS(AutogradError, pending_, "SplitBackward::backward_weight: no backward_input() to finish");
  NoGradGuard no_grad;
  autograd::GradientBuffers buffers;
  const auto on_input_side = [this](const Node* child) { return input_side_.count(child) != 0; };
  if (!root_grads_.empty()) {
    for (size_t i = 0; i < root_grads_.size(); ++i) buffers.add({order_.front(), i}, root_grads_[i]);
  }
  for (Kept& kept : kept_) {
    std::vector<Tensor> input_grads;
    {
      EdgeMask mask(*kept.node, on_input_side);
      input_grads = autograd::apply_node(*kept.node, kept.grads);
    }
    kept.grads.clear();
    for (size_t i = 0; i < input_grads.size(); ++i) {
      const Edge& edge = kept.node->next_edges[i];
      if (edge.node && !input_side_.count(edge.node.get())) buffers.add(edge, input_grads[i]);
    }
    kept.node->release_saved();
  }
  for (const std::shared_ptr<Node>& node : order_) {
    if (input_side_.count(node.get())) continue;
    std::vector<Tensor> grads = buffers.take(node.get());
    if (any_defined(grads)) {
      std::vector<Tensor> input_grads = autograd::apply_node(*node, grads);
      grads.clear();
      for (size_t i = 0; i < input_grads.size(); ++i) buffers.add(node->next_edges[i], input_grads[i]);
    }
    node->release_saved();
  }
  kept_.clear();
  order_.clear();
  input_side_.clear();
  root_grads_.clear();
  pending_ = false;
}

}  // namespace brigade::pipeline
