// Graph nodes, the edge helpers, and the installation of the tensor layer's autograd hooks.
#include "autograd/node.h"

#include "autograd/engine.h"
#include "autograd/views.h"
#include "kernels/kernels.h"

namespace brigade {

// ---- Node -------------------------------------------------------------------------------------------------

Node::~Node() {
  // Nodes only this one owns would die inside this destructor, each inside the previous one. Take them
  // over instead and let them die one at a time, after their own edges have been taken over likewise.
  std::vector<std::shared_ptr<Node>> orphans;
  auto adopt = [&orphans](std::vector<Edge>& edges) {
    for (Edge& edge : edges) {
      if (edge.node && edge.node.use_count() == 1) orphans.push_back(std::move(edge.node));
    }
    edges.clear();
  };
  adopt(next_edges);
  while (!orphans.empty()) {
    std::shared_ptr<Node> node = std::move(orphans.back());
    orphans.pop_back();
    adopt(node->next_edges);
  }  // `node` is destroyed here with no edges left
}

// ---- AccumulateGrad ------------------------------------------------------------------------------------

std::vector<Tensor> AccumulateGrad::apply(const Tensor& grad_output) {
  std::lock_guard<std::mutex> lock(mutex_);
  Tensor grad = grad_output;
  AutogradMeta& meta = leaf_.ensure_autograd_meta();
  for (const auto& hook : meta.hooks) {
    Tensor rewritten = hook(grad);
    if (rewritten.defined()) grad = rewritten;
  }
  BRIGADE_CHECK_AS(AutogradError, grad.shape() == leaf_.shape(), "AccumulateGrad: gradient of shape ",
                   shape_str(grad.shape()), " for a leaf of shape ", shape_str(leaf_.shape()));
  BRIGADE_CHECK_AS(AutogradError, grad.device() == leaf_.device(), "AccumulateGrad: gradient on ",
                   grad.device().str(), " for a leaf on ", leaf_.device().str());
  if (grad.dtype() != leaf_.dtype()) grad = grad.to(leaf_.dtype());  // a hook may change the dtype

  Tensor current = leaf_.grad();
  if (!current.defined()) {
    // The same gradient tensor can flow to several places (add passes it to both inputs), so the stored
    // .grad must be our own copy before anyone accumulates into it in place.
    leaf_.set_grad(grad.clone());
  } else {
    kernels::add_(current, grad);
  }
  return {};
}

// ---- FunctionNode --------------------------------------------------------------------------------------

FunctionNode::FunctionNode(const char* name, BackwardFn backward, const std::vector<Tensor>& inputs)
    : name_(name), backward_(std::move(backward)) {
  next_edges.reserve(inputs.size());
  inputs_.reserve(inputs.size());
  for (const Tensor& input : inputs) {
    next_edges.push_back(autograd::gradient_edge(input));
    inputs_.push_back(input.defined() ? InputMeta{input.shape(), input.dtype()} : InputMeta{{}, kFloat32});
  }
}

std::vector<Tensor> FunctionNode::apply(const Tensor& grad_output) {
  BRIGADE_CHECK_AS(AutogradError, backward_ != nullptr, "backward through '", name_,
                   "': its saved tensors were released by an earlier backward; a second backward needs "
                   "retain_graph=true");
  NeedsGrad needs(next_edges.size());
  for (size_t i = 0; i < next_edges.size(); ++i) needs[i] = next_edges[i].node != nullptr;

  std::vector<Tensor> grads = backward_(grad_output, needs);
  BRIGADE_CHECK_AS(AutogradError, grads.size() == next_edges.size(), "backward of '", name_, "' returned ",
                   grads.size(), " gradients for ", next_edges.size(), " inputs");
  for (size_t i = 0; i < grads.size(); ++i) {
    if (!needs[i]) {
      grads[i] = Tensor();
      continue;
    }
    if (!grads[i].defined()) continue;
    BRIGADE_CHECK_AS(AutogradError, grads[i].shape() == inputs_[i].shape, "backward of '", name_,
                     "': gradient for input ", i, " has shape ", shape_str(grads[i].shape()),
                     " but the input has shape ", shape_str(inputs_[i].shape));
    BRIGADE_CHECK_AS(AutogradError, grads[i].dtype() == inputs_[i].dtype, "backward of '", name_,
                     "': gradient for input ", i, " has dtype ", dtype_name(grads[i].dtype()),
                     " but the input has dtype ", dtype_name(inputs_[i].dtype));
  }
  return grads;
}

// ---- helpers -------------------------------------------------------------------------------------------

namespace autograd {

Edge gradient_edge(const Tensor& t) {
  if (!t.defined()) return {};
  if (const auto& fn = t.grad_fn()) return {fn, 0};
  if (!t.requires_grad()) return {};
  // Creating the accumulator must not race when two threads record ops on the same leaf.
  static std::mutex mutex;
  std::lock_guard<std::mutex> lock(mutex);
  AutogradMeta& meta = t.ensure_autograd_meta();
  std::shared_ptr<Node> accumulator = meta.grad_accumulator.lock();
  if (!accumulator) {
    accumulator = std::make_shared<AccumulateGrad>(t);
    meta.grad_accumulator = accumulator;
  }
  return {accumulator, 0};
}

bool any_requires_grad(const std::vector<Tensor>& inputs) {
  if (!GradMode::is_enabled()) return false;
  for (const Tensor& t : inputs) {
    if (t.defined() && t.requires_grad()) return true;
  }
  return false;
}

void set_history(const Tensor& output, std::shared_ptr<Node> node) {
  AutogradMeta& meta = output.ensure_autograd_meta();
  meta.grad_fn = std::move(node);
  meta.requires_grad = true;
}

Tensor record(const char* name, Tensor output, const std::vector<Tensor>& inputs, BackwardFn backward) {
  if (!any_requires_grad(inputs)) return output;
  set_history(output, std::make_shared<FunctionNode>(name, std::move(backward), inputs));
  return output;
}

void register_hook(const Tensor& leaf, std::function<Tensor(const Tensor&)> hook) {
  BRIGADE_CHECK_AS(AutogradError, leaf.is_leaf() && leaf.requires_grad(),
                   "register_hook: expected a leaf that requires grad (hooks run when a gradient is "
                   "accumulated into .grad), found a ",
                   leaf.is_leaf() ? "leaf that does not require grad" : "non-leaf");
  leaf.ensure_autograd_meta().hooks.push_back(std::move(hook));
}

}  // namespace autograd

// ---- the tensor layer's hooks --------------------------------------------------------------------------
// Installed by a static initializer: any program that records a node links this file, so views, copies
// and Tensor::backward find the autograd layer without an explicit init call.
namespace {
[[maybe_unused]] const bool hooks_installed = [] {
  detail::AutogradHooks& hooks = detail::autograd_hooks();
  hooks.record_view = &autograd::record_view;
  hooks.record_copy = &autograd::record_copy;
  hooks.backward = &autograd::backward;
  return true;
}();
}  // namespace

}  // namespace brigade
