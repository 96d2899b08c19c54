// The split backward: two walks over one graph, each with half of every node's edges masked.
#include "pipeline/backward/split_backward.h"

#include <algorithm>
#include <unordered_map>
#include <utility>

#include "kernels/kernels.h"
#include "tensor/error.h"
#include "tensor/grad_mode.h"

namespace brigade::pipeline {
namespace {

/// Every node reachable from `root`, each before the nodes its edges point to (reverse post-order of an
/// iterative depth-first search; the engine's order).
std::vector<std::shared_ptr<Node>> topological_order(const std::shared_ptr<Node>& root) {
  std::vector<std::shared_ptr<Node>> post_order;
  std::unordered_set<const Node*> seen{root.get()};
  std::vector<std::pair<std::shared_ptr<Node>, size_t>> stack{{root, 0}};
  while (!stack.empty()) {
    Node* node = stack.back().first.get();
    const size_t next = stack.back().second++;
    if (next < node->next_edges.size()) {
      const std::shared_ptr<Node>& child = node->next_edges[next].node;
      if (child && seen.insert(child.get()).second) stack.emplace_back(child, 0);
    } else {
      post_order.push_back(std::move(stack.back().first));
      stack.pop_back();
    }
  }
  std::reverse(post_order.begin(), post_order.end());
  return post_order;
}

/// Gradient buffers, one slot per output of each node that has been sent something.
class Buffers {
 public:
  void add(const Edge& edge, const Tensor& grad) {
    if (!grad.defined() || !edge.node) return;
    auto& slots = slots_[edge.node.get()];
    if (slots.empty()) slots.resize(edge.node->num_outputs());
    Tensor& slot = slots[edge.output_nr];
    if (!slot.defined()) {
      slot = grad;
      return;
    }
    BRIGADE_CHECK_AS(AutogradError, slot.shape() == grad.shape(), "split backward: gradients of shapes ",
                     shape_str(slot.shape()), " and ", shape_str(grad.shape()), " sent to '",
                     edge.node->name(), "' do not match");
    // Out of place: the same tensor may have been sent to several inputs.
    slot = kernels::binary(kernels::BinaryOp::Add, slot, grad);
  }
  /// Removes and returns the node's gradients (empty when none arrived).
  std::vector<Tensor> take(const Node* node) {
    auto it = slots_.find(node);
    if (it == slots_.end()) return {};
    std::vector<Tensor> grads = std::move(it->second);
    slots_.erase(it);
    return grads;
  }

 private:
  std::unordered_map<const Node*, std::vector<Tensor>> slots_;
};

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

std::vector<Tensor> run_node(Node& node, const std::vector<Tensor>& grads) {
  BRIGADE_CHECK_AS(AutogradError, !node.released(), "split backward through '", node.name(),
                   "': its saved tensors were already released");
  std::vector<Tensor> input_grads = node.apply_all(grads);
  BRIGADE_CHECK_AS(AutogradError, input_grads.empty() || input_grads.size() == node.next_edges.size(),
                   "backward of '", node.name(), "' returned ", input_grads.size(), " gradients for ",
                   node.next_edges.size(), " inputs");
  return input_grads;
}

Tensor root_gradient(const Tensor& root, const Tensor& gradient) {
  if (!gradient.defined()) {
    BRIGADE_CHECK_AS(AutogradError, root.numel() == 1,
                     "split backward: a gradient can be implied only for a one-element root, found shape ",
                     shape_str(root.shape()));
    return ones_like(root);
  }
  BRIGADE_CHECK_AS(AutogradError, gradient.shape() == root.shape(), "split backward: the gradient has shape ",
                   shape_str(gradient.shape()), " but the root has shape ", shape_str(root.shape()));
  BRIGADE_CHECK_AS(AutogradError, gradient.device() == root.device(), "split backward: the gradient is on ",
                   gradient.device().str(), " but the root is on ", root.device().str());
  return gradient.dtype() == root.dtype() ? gradient : gradient.to(root.dtype());
}

}  // namespace

Tensor SplitBackward::backward_input(const Tensor& root, const Tensor& gradient, const Tensor& input) {
  BRIGADE_CHECK_AS(AutogradError, !pending_,
                   "SplitBackward::backward_input: called twice without backward_weight() in between");
  BRIGADE_CHECK_AS(AutogradError, root.defined() && root.requires_grad(),
                   "SplitBackward::backward_input: the root does not require grad (computed without grad?)");
  NoGradGuard no_grad;
  const Tensor root_grad = root_gradient(root, gradient);
  const Edge root_edge = autograd::gradient_edge(root);
  const Edge input_edge =
      input.defined() && input.requires_grad() && input.is_leaf() ? autograd::gradient_edge(input) : Edge{};

  order_ = topological_order(root_edge.node);
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

  Buffers buffers;
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
      input_grads = run_node(*node, grads);
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
  Buffers buffers;
  const auto on_input_side = [this](const Node* child) { return input_side_.count(child) != 0; };
  if (!root_grads_.empty()) {
    for (size_t i = 0; i < root_grads_.size(); ++i) buffers.add({order_.front(), i}, root_grads_[i]);
  }
  for (Kept& kept : kept_) {
    std::vector<Tensor> input_grads;
    {
      EdgeMask mask(*kept.node, on_input_side);
      input_grads = run_node(*kept.node, kept.grads);
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
      std::vector<Tensor> input_grads = run_node(*node, grads);
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
