// The engine: a topological sort and a loop over the nodes' backward functions.
#include "autograd/engine.h"

#include <algorithm>
#include <memory>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "autograd/node.h"
#include "kernels/kernels.h"

namespace brigade::autograd {
namespace {

/// Every node reachable from `roots`, each before the nodes its edges point to (reverse post-order of an
/// iterative depth-first search).
std::vector<std::shared_ptr<Node>> topological_order(const std::vector<std::shared_ptr<Node>>& roots) {
  std::vector<std::shared_ptr<Node>> post_order;
  std::unordered_set<Node*> seen;
  std::vector<std::pair<std::shared_ptr<Node>, size_t>> stack;  // node, index of the next edge to visit
  for (const auto& root : roots) {
    if (!seen.insert(root.get()).second) continue;
    stack.emplace_back(root, 0);
    while (!stack.empty()) {
      Node* node = stack.back().first.get();
      size_t next = stack.back().second++;
      if (next < node->next_edges.size()) {
        const std::shared_ptr<Node>& child = node->next_edges[next].node;
        if (child && seen.insert(child.get()).second) stack.emplace_back(child, 0);
      } else {
        post_order.push_back(std::move(stack.back().first));
        stack.pop_back();
      }
    }
  }
  std::reverse(post_order.begin(), post_order.end());
  return post_order;
}

/// Adds `grad` into a gradient buffer slot. Out of place: the same tensor may have been sent to several
/// inputs, so a buffer must never be modified through an alias.
void accumulate(Tensor& slot, const Tensor& grad, const Node& to) {
  if (!grad.defined()) return;
  if (!slot.defined()) {
    slot = grad;
    return;
  }
  BRIGADE_CHECK_AS(AutogradError, slot.shape() == grad.shape(), "backward: gradients of shapes ",
                   shape_str(slot.shape()), " and ", shape_str(grad.shape()), " sent to '", to.name(),
                   "' do not match");
  slot = kernels::binary(kernels::BinaryOp::Add, slot, grad);
}

/// The gradient to start from at `root`: the given one (checked, converted to root's dtype) or 1.
Tensor root_gradient(const Tensor& root, const Tensor& gradient) {
  BRIGADE_CHECK_AS(AutogradError, root.defined(), "backward: the root tensor is undefined");
  BRIGADE_CHECK_AS(AutogradError, root.requires_grad(), "backward: the root of shape ",
                   shape_str(root.shape()),
                   " does not require grad and has no grad_fn (was it computed under NoGradGuard, detached, "
                   "or from tensors that do not require grad?)");
  if (!gradient.defined()) {
    BRIGADE_CHECK_AS(
        AutogradError, root.numel() == 1,
        "backward: a gradient can be implied only for a scalar output, but the output has shape ",
        shape_str(root.shape()), "; pass a gradient of that shape");
    return ones_like(root);
  }
  BRIGADE_CHECK_AS(AutogradError, gradient.shape() == root.shape(), "backward: the gradient has shape ",
                   shape_str(gradient.shape()), " but the output has shape ", shape_str(root.shape()));
  BRIGADE_CHECK_AS(AutogradError, gradient.device() == root.device(), "backward: the gradient is on ",
                   gradient.device().str(), " but the output is on ", root.device().str());
  return gradient.dtype() == root.dtype() ? gradient : gradient.to(root.dtype());
}

}  // namespace

void backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& gradients, bool retain_graph) {
  BRIGADE_CHECK_AS(AutogradError, roots.size() == gradients.size(), "backward: ", roots.size(), " roots but ",
                   gradients.size(), " gradients");
  NoGradGuard no_grad;

  // Gradient buffers: one slot per output of each node that has been sent something.
  std::unordered_map<Node*, std::vector<Tensor>> buffers;
  auto slots_of = [&buffers](Node& node) -> std::vector<Tensor>& {
    auto& slots = buffers[&node];
    if (slots.empty()) slots.resize(node.num_outputs());
    return slots;
  };

  std::vector<std::shared_ptr<Node>> starts;
  for (size_t i = 0; i < roots.size(); ++i) {
    Tensor grad = root_gradient(roots[i], gradients[i]);
    Edge edge = gradient_edge(roots[i]);
    accumulate(slots_of(*edge.node)[edge.output_nr], grad, *edge.node);
    starts.push_back(edge.node);
  }

  for (const std::shared_ptr<Node>& node : topological_order(starts)) {
    auto found = buffers.find(node.get());
    std::vector<Tensor> grads;
    if (found != buffers.end()) {
      grads = std::move(found->second);
      buffers.erase(found);
    }
    bool any_grad = std::any_of(grads.begin(), grads.end(), [](const Tensor& g) { return g.defined(); });
    if (any_grad) {  // a node no gradient reached contributes nothing
      BRIGADE_CHECK_AS(AutogradError, !node->released(), "backward through '", node->name(),
                       "': its saved tensors were released by an earlier backward; a second backward needs "
                       "retain_graph=true");
      std::vector<Tensor> input_grads = node->apply_all(grads);
      grads.clear();  // the output gradient is no longer needed: free it before going on
      BRIGADE_CHECK_AS(AutogradError, input_grads.empty() || input_grads.size() == node->next_edges.size(),
                       "backward of '", node->name(), "' returned ", input_grads.size(), " gradients for ",
                       node->next_edges.size(), " inputs");
      for (size_t i = 0; i < input_grads.size(); ++i) {
        const Edge& edge = node->next_edges[i];
        if (edge.node) accumulate(slots_of(*edge.node)[edge.output_nr], input_grads[i], *edge.node);
      }
    }
    if (!retain_graph) node->release_saved();
  }
}

void backward(const Tensor& root, const Tensor& gradient, bool retain_graph) {
  backward(std::vector<Tensor>{root}, std::vector<Tensor>{gradient}, retain_graph);
}

}  // namespace brigade::autograd
