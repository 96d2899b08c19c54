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

void GradientBuffers::add(const Edge& edge, const Tensor& grad) {
  if (!grad.defined() || !edge.node) return;
  auto& slots = slots_[edge.node.get()];
  if (slots.empty()) slots.resize(edge.node->num_outputs());
  Tensor& slot = slots[edge.output_nr];
  if (!slot.defined()) {
    slot = grad;
    return;
  }
  BRIGADE_CHECK_AS(AutogradError, slot.shape() == grad.shape(), "backward: gradients of shapes ",
                   shape_str(slot.shape()), " and ", shape_str(grad.shape()), " sent to '", edge.node->name(),
                   "' do not match");
  slot = kernels::binary(kernels::BinaryOp::Add, slot, grad);
}

std::vector<Tensor> GradientBuffers::take(const Node* node) {
  auto it = slots_.find(node);
  if (it == slots_.end()) return {};
  std::vector<Tensor> grads = std::move(it->second);
  slots_.erase(it);
  return grads;
}

std::vector<Tensor> apply_node(Node& node, const std::vector<Tensor>& grads) {
  BRIGADE_CHECK_AS(AutogradError, !node.released(), "backward through '", node.name(),
                   "': its saved tensors were released by an earlier backward; a second backward needs "
                   "retain_graph=true");
  std::vector<Tensor> input_grads = node.apply_all(grads);
  BRIGADE_CHECK_AS(AutogradError, input_grads.empty() || input_grads.size() == node.next_edges.size(),
                   "backward of '", node.name(), "' returned ", input_grads.size(), " gradients for ",
                   node.next_edges.size(), " inputs");
  return input_grads;
}

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

void backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& gradients, bool retain_graph) {
  BRIGADE_CHECK_AS(AutogradError, roots.size() == gradients.size(), "backward: ", roots.size(), " roots but ",
                   gradients.size(), " gradients");
  NoGradGuard no_grad;

  GradientBuffers buffers;
  std::vector<std::shared_ptr<Node>> starts;
  for (size_t i = 0; i < roots.size(); ++i) {
    Tensor grad = root_gradient(roots[i], gradients[i]);
    Edge edge = gradient_edge(roots[i]);
    buffers.add(edge, grad);
    starts.push_back(edge.node);
  }

  for (const std::shared_ptr<Node>& node : topological_order(starts)) {
    std::vector<Tensor> grads = buffers.take(node.get());
    bool any_grad = std::any_of(grads.begin(), grads.end(), [](const Tensor& g) { return g.defined(); });
    if (any_grad) {  // a node no gradient reached contributes nothing
      std::vector<Tensor> input_grads = apply_node(*node, grads);
      grads.clear();  // the output gradient is no longer needed: free it before going on
      for (size_t i = 0; i < input_grads.size(); ++i) buffers.add(node->next_edges[i], input_grads[i]);
    }
    if (!retain_graph) node->release_saved();
  }
}

void backward(const Tensor& root, const Tensor& gradient, bool retain_graph) {
  backward(std::vector<Tensor>{root}, std::vector<Tensor>{gradient}, retain_graph);
}

}  // namespace brigade::autograd
