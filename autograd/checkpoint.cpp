// checkpoint: a node with several outputs whose backward replays the function it stands for.
//
// Graph shape: output i of the checkpoint has a small CheckpointOutput node as its grad_fn, whose one
// edge points at slot i of the shared CheckpointNode; the engine hands the CheckpointNode the gradients
// of all its outputs together (undefined for outputs that received none).
#include "autograd/checkpoint.h"

#include <mutex>
#include <optional>
#include <unordered_set>

#include "autograd/autocast.h"
#include "autograd/engine.h"
#include "autograd/node.h"

namespace brigade::autograd {
namespace {

class CheckpointNode : public Node {
 public:
  CheckpointNode(CheckpointFn fn, const std::vector<Tensor>& inputs, Generator& generator,
                 GeneratorState rng_state, const std::vector<Tensor>& outputs)
      : fn_(std::move(fn)), generator_(generator), rng_state_(rng_state), autocast_(autocast_dtype()) {
    for (const Tensor& input : inputs) {
      next_edges.push_back(gradient_edge(input));
      inputs_.push_back(saved(input));
      input_requires_grad_.push_back(input.defined() && input.requires_grad());
    }
    for (const Tensor& output : outputs)
      output_shapes_.push_back(output.defined() ? output.shape() : Shape{});
  }

  const char* name() const override { return "checkpoint"; }
  size_t num_outputs() const override { return output_shapes_.size(); }
  std::vector<Tensor> apply(const Tensor& grad_output) override { return apply_all({grad_output}); }

  std::vector<Tensor> apply_all(const std::vector<Tensor>& grad_outputs) override {
    std::lock_guard<std::mutex> lock(mutex_);
    recompute_locked();
    std::vector<Tensor> roots, root_grads;
    for (size_t i = 0; i < grad_outputs.size(); ++i) {
      if (grad_outputs[i].defined() && outputs_[i].defined() && outputs_[i].requires_grad()) {
        roots.push_back(outputs_[i]);
        root_grads.push_back(grad_outputs[i]);
      }
    }
    if (!roots.empty()) backward(roots, root_grads, /*retain_graph=*/false);
    std::vector<Tensor> input_grads(fresh_inputs_.size());
    for (size_t i = 0; i < fresh_inputs_.size(); ++i) {
      if (input_requires_grad_[i]) input_grads[i] = fresh_inputs_[i].grad();
    }
    // The recomputed graph is spent; another backward (retain_graph) would recompute again.
    fresh_inputs_.clear();
    outputs_.clear();
    recomputed_ = false;
    return input_grads;
  }

  void release_saved() override {
    std::lock_guard<std::mutex> lock(mutex_);
    fn_ = nullptr;
    inputs_.clear();
    fresh_inputs_.clear();
    outputs_.clear();
    recomputed_ = false;
  }
  bool released() const override { return !fn_; }

  void recompute() {
    std::lock_guard<std::mutex> lock(mutex_);
    recompute_locked();
  }

 private:
  void recompute_locked() {
    if (recomputed_) return;
    BRIGADE_CHECK_AS(AutogradError, fn_ != nullptr,
                     "recompute of 'checkpoint': its saved inputs were released "
                     "by an earlier backward; a second backward needs retain_graph=true");
    fresh_inputs_.clear();
    for (size_t i = 0; i < inputs_.size(); ++i) {
      Tensor fresh = inputs_[i].defined() ? inputs_[i].detach() : Tensor();
      if (input_requires_grad_[i]) fresh.set_requires_grad(true);
      fresh_inputs_.push_back(fresh);
    }
    // Replay with the generator where it was at the forward, then put it back where it is now.
    const GeneratorState now = generator_.state();
    generator_.set_state(rng_state_);
    try {
      GradModeGuard grad_on(true);
      AutocastGuard autocast(autocast_);  // the forward's precision, whatever thread or scope replays it
      outputs_ = fn_(fresh_inputs_);
    } catch (...) {
      generator_.set_state(now);
      throw;
    }
    generator_.set_state(now);

    BRIGADE_CHECK_AS(AutogradError, outputs_.size() == output_shapes_.size(),
                     "checkpoint: the recompute "
                     "returned ",
                     outputs_.size(), " outputs but the forward returned ", output_shapes_.size(),
                     " (fn must be deterministic)");
    for (size_t i = 0; i < outputs_.size(); ++i) {
      BRIGADE_CHECK_AS(AutogradError, !outputs_[i].defined() || outputs_[i].shape() == output_shapes_[i],
                       "checkpoint: output ", i, " of the recompute has shape ",
                       shape_str(outputs_[i].shape()), " but had shape ", shape_str(output_shapes_[i]),
                       " in the forward (fn must be deterministic)");
    }
    recomputed_ = true;
  }

  std::mutex mutex_;  // recompute_ahead and backward may come from different threads
  CheckpointFn fn_;
  Generator& generator_;
  GeneratorState rng_state_;
  std::optional<DType> autocast_;  // autocast dtype of the forward
  std::vector<Tensor> inputs_;     // detached
  std::vector<bool> input_requires_grad_;
  std::vector<Shape> output_shapes_;
  bool recomputed_ = false;
  std::vector<Tensor> fresh_inputs_;  // leaves of the recomputed graph
  std::vector<Tensor> outputs_;       // its outputs
};

/// grad_fn of checkpoint output `index`: forwards its gradient to that slot of the CheckpointNode.
class CheckpointOutput : public Node {
 public:
  CheckpointOutput(std::shared_ptr<CheckpointNode> node, size_t index) {
    next_edges.push_back({std::move(node), index});
  }
  const char* name() const override { return "checkpoint_output"; }
  std::vector<Tensor> apply(const Tensor& grad_output) override { return {grad_output}; }
  CheckpointNode& checkpoint() const { return static_cast<CheckpointNode&>(*next_edges[0].node); }
};

}  // namespace

std::vector<Tensor> checkpoint(const CheckpointFn& fn, const std::vector<Tensor>& inputs,
                               Generator* generator) {
  if (!GradMode::is_enabled()) return fn(inputs);
  Generator& gen = generator ? *generator : default_generator();
  const GeneratorState rng_state = gen.state();
  std::vector<Tensor> raw;
  {
    NoGradGuard no_grad;
    raw = fn(inputs);
  }
  auto node = std::make_shared<CheckpointNode>(fn, inputs, gen, rng_state, raw);
  std::vector<Tensor> outputs;
  outputs.reserve(raw.size());
  for (size_t i = 0; i < raw.size(); ++i) {
    if (!raw[i].defined()) {
      outputs.emplace_back();
      continue;
    }
    // A new handle even when fn returned an input unchanged: the history must not land on the input.
    Tensor out = raw[i].detach();
    if (is_floating(out.dtype())) set_history(out, std::make_shared<CheckpointOutput>(node, i));
    outputs.push_back(out);
  }
  return outputs;
}

void recompute_ahead(const std::vector<Tensor>& checkpoint_outputs) {
  for (size_t i = 0; i < checkpoint_outputs.size(); ++i) {
    const Tensor& t = checkpoint_outputs[i];
    auto* output = t.defined() ? dynamic_cast<CheckpointOutput*>(t.grad_fn().get()) : nullptr;
    BRIGADE_CHECK_AS(AutogradError, output != nullptr, "recompute_ahead: tensor ", i,
                     " is not an output of checkpoint (its grad_fn is ",
                     t.defined() && t.grad_fn() ? t.grad_fn()->name() : "none", ")");
    output->checkpoint().recompute();
  }
}

int recompute_graph_ahead(const Tensor& root) {
  if (!root.defined() || !root.grad_fn()) return 0;
  std::vector<Node*> stack{root.grad_fn().get()};
  std::unordered_set<const Node*> seen{stack.back()};
  int found = 0;
  while (!stack.empty()) {
    Node* node = stack.back();
    stack.pop_back();
    if (auto* checkpoint = dynamic_cast<CheckpointNode*>(node)) {
      checkpoint->recompute();
      ++found;
    }
    for (const Edge& edge : node->next_edges) {
      if (edge.node && seen.insert(edge.node.get()).second) stack.push_back(edge.node.get());
    }
  }
  return found;
}

}  // namespace brigade::autograd
