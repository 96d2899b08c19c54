#include "nn/optim.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <sstream>

#include "kernels/kernels.h"
#include "tensor/error.h"
#include "tensor/grad_mode.h"

namespace brigade::nn {

namespace {

std::string list_str(const std::vector<std::string>& names) {
  std::ostringstream out;
  for (size_t i = 0; i < names.size(); ++i) out << (i ? ", " : "") << "'" << names[i] << "'";
  return out.str();
}

std::vector<ParamGroup> one_group(const std::vector<Tensor>& params) {
  ParamGroup group;
  group.params = params;
  return {group};
}

}  // namespace

ParamGroup all_parameters(const Module& model) {
  ParamGroup group;
  for (auto& [name, tensor] : model.named_parameters()) {
    group.params.push_back(tensor);
    group.names.push_back(name);
  }
  return group;
}

std::vector<ParamGroup> decay_groups(const Module& model, double weight_decay) {
  ParamGroup decay, no_decay;
  decay.weight_decay = weight_decay;
  no_decay.weight_decay = 0.0;
  for (auto& [name, tensor] : model.named_parameters()) {
    ParamGroup& group = tensor.dim() >= 2 ? decay : no_decay;
    group.params.push_back(tensor);
    group.names.push_back(name);
  }
  return {decay, no_decay};
}

// ---- Optimizer --------------------------------------------------------------------------------------------

Optimizer::Optimizer(std::string type_name, std::vector<ParamGroup> groups, double default_lr,
                     double default_weight_decay, std::vector<std::string> state_names)
    : groups_(std::move(groups)), type_name_(std::move(type_name)), state_names_(std::move(state_names)) {
  BRIGADE_CHECK_VALUE(default_lr >= 0.0, type_name_, ": lr must be >= 0, found ", default_lr);
  BRIGADE_CHECK_VALUE(default_weight_decay >= 0.0, type_name_, ": weight_decay must be >= 0, found ",
                      default_weight_decay);
  std::vector<const void*> seen;
  for (size_t g = 0; g < groups_.size(); ++g) {
    ParamGroup& group = groups_[g];
    if (!group.lr) group.lr = default_lr;
    if (!group.weight_decay) group.weight_decay = default_weight_decay;
    BRIGADE_CHECK_VALUE(*group.lr >= 0.0 && *group.weight_decay >= 0.0, type_name_, ": group ", g,
                        " has a negative lr (", *group.lr, ") or weight_decay (", *group.weight_decay, ")");
    BRIGADE_CHECK_VALUE(group.names.empty() || group.names.size() == group.params.size(), type_name_,
                        ": group ", g, " has ", group.params.size(), " parameters but ", group.names.size(),
                        " names");
    if (group.names.empty()) {
      for (size_t i = 0; i < group.params.size(); ++i) {
        group.names.push_back("group" + std::to_string(g) + "." + std::to_string(i));
      }
    }
    auto& group_state = state_.emplace_back();
    for (size_t i = 0; i < group.params.size(); ++i) {
      const Tensor& p = group.params[i];
      BRIGADE_CHECK_VALUE(p.defined() && p.is_leaf() && p.requires_grad(), type_name_, ": parameter '",
                          group.names[i], "' must be a leaf tensor that requires grad");
      const void* id = p.unsafe_impl_id();
      BRIGADE_CHECK_VALUE(std::find(seen.begin(), seen.end(), id) == seen.end(), type_name_, ": parameter '",
                          group.names[i], "' appears more than once");
      seen.push_back(id);
      // State in float32 for a bfloat16 parameter (the kernels keep moments in float32 there).
      const DType state_dtype = p.dtype() == kBFloat16 ? kFloat32 : p.dtype();
      auto& slots = group_state.emplace_back();
      for (size_t s = 0; s < state_names_.size(); ++s) {
        slots.push_back(zeros(p.shape(), TensorOptions(state_dtype).device(p.device())));
      }
    }
  }
}

void Optimizer::zero_grad() {
  for (auto& group : groups_) {
    for (auto& p : group.params) {
      if (p.grad().defined()) p.set_grad(Tensor());
    }
  }
}

void Optimizer::set_lr(double lr) {
  BRIGADE_CHECK_VALUE(lr >= 0.0 && std::isfinite(lr), type_name_,
                      ".set_lr: lr must be finite and >= 0, found ", lr);
  for (auto& group : groups_) group.lr = lr;
}

OptimizerState Optimizer::state() const {
  OptimizerState out;
  out.step = step_;
  for (size_t g = 0; g < groups_.size(); ++g) {
    for (size_t i = 0; i < groups_[g].params.size(); ++i) {
      for (size_t s = 0; s < state_names_.size(); ++s) {
        out.tensors.emplace(groups_[g].names[i] + "." + state_names_[s], state_[g][i][s]);
      }
    }
  }
  return out;
}

void Optimizer::load_state(const OptimizerState& state) {
  BRIGADE_CHECK_VALUE(state.step >= 0, type_name_, ".load_state: step must be >= 0, found ", state.step);
  const OptimizerState mine = this->state();
  std::vector<std::string> missing, unexpected;
  for (const auto& [name, tensor] : mine.tensors) {
    if (!state.tensors.count(name)) missing.push_back(name);
  }
  for (const auto& [name, tensor] : state.tensors) {
    if (!mine.tensors.count(name)) unexpected.push_back(name);
  }
  if (!missing.empty() || !unexpected.empty()) {
    std::ostringstream message;
    message << type_name_ << ".load_state: the state does not match this optimizer's parameters";
    if (!missing.empty()) message << "; missing keys: " << list_str(missing);
    if (!unexpected.empty()) message << "; unexpected keys: " << list_str(unexpected);
    BRIGADE_THROW(ValueError, message.str());
  }
  for (const auto& [name, tensor] : mine.tensors) {
    const Tensor& source = state.tensors.at(name);
    BRIGADE_CHECK_SHAPE(source.defined() && source.shape() == tensor.shape(), type_name_, ".load_state: '",
                        name, "' has shape ",
                        source.defined() ? shape_str(source.shape()) : std::string("(undefined)"),
                        " in the state but ", shape_str(tensor.shape()), " here");
  }
  NoGradGuard no_grad;
  for (const auto& [name, tensor] : mine.tensors) {
    Tensor source = state.tensors.at(name);
    if (source.device() != tensor.device() && !source.device().is_cpu() && !tensor.device().is_cpu()) {
      source = source.cpu();
    }
    Tensor target = tensor;
    target.copy_(source);
  }
  step_ = state.step;
}

// ---- SGD --------------------------------------------------------------------------------------------------

SGD::SGD(std::vector<ParamGroup> groups, SGDOptions options)
    : Optimizer(
          "SGD", std::move(groups), options.lr, options.weight_decay,
          options.momentum != 0.0 ? std::vector<std::string>{"momentum_buffer"} : std::vector<std::string>{}),
      options_(options) {
  BRIGADE_CHECK_VALUE(options.momentum >= 0.0, "SGD: momentum must be >= 0, found ", options.momentum);
  BRIGADE_CHECK_VALUE(!options.nesterov || options.momentum > 0.0, "SGD: nesterov needs a momentum > 0");
}

SGD::SGD(const std::vector<Tensor>& params, SGDOptions options) : SGD(one_group(params), options) {}

void SGD::step() {
  NoGradGuard no_grad;
  ++step_;
  using kernels::BinaryOp;
  for (size_t g = 0; g < groups_.size(); ++g) {
    const double lr = *groups_[g].lr, wd = *groups_[g].weight_decay;
    for (size_t i = 0; i < groups_[g].params.size(); ++i) {
      Tensor p = groups_[g].params[i];
      Tensor grad = p.grad();
      if (!grad.defined()) continue;
      Tensor d =
          wd != 0.0 ? kernels::binary(BinaryOp::Add, grad, kernels::binary(BinaryOp::Mul, p, wd)) : grad;
      if (options_.momentum != 0.0) {
        Tensor& buf = state_[g][i][0];
        kernels::mul_(buf, options_.momentum);
        kernels::add_(buf, d);
        d = options_.nesterov
                ? kernels::binary(BinaryOp::Add, d, kernels::binary(BinaryOp::Mul, buf, options_.momentum))
                : buf;
      }
      kernels::add_(p, kernels::binary(BinaryOp::Mul, d, -lr));
    }
  }
}

// ---- AdamW ------------------------------------------------------------------------------------------------

AdamW::AdamW(std::vector<ParamGroup> groups, AdamWOptions options)
    : Optimizer("AdamW", std::move(groups), options.lr, options.weight_decay, {"exp_avg", "exp_avg_sq"}),
      options_(options) {
  BRIGADE_CHECK_VALUE(
      options.beta1 >= 0.0 && options.beta1 < 1.0 && options.beta2 >= 0.0 && options.beta2 < 1.0,
      "AdamW: betas must lie in [0, 1), found (", options.beta1, ", ", options.beta2, ")");
  BRIGADE_CHECK_VALUE(options.eps > 0.0, "AdamW: eps must be positive, found ", options.eps);
}

AdamW::AdamW(const std::vector<Tensor>& params, AdamWOptions options) : AdamW(one_group(params), options) {}

void AdamW::step() {
  NoGradGuard no_grad;
  ++step_;
  // Every parameter of every group in one call: on the CPU one parallel pass over all of them (a
  // multi-tensor step), each element updated as a call per tensor would update it.
  std::vector<kernels::AdamWTensors> tensors;
  for (size_t g = 0; g < groups_.size(); ++g) {
    kernels::AdamWStep s;
    s.lr = *groups_[g].lr;
    s.beta1 = options_.beta1;
    s.beta2 = options_.beta2;
    s.eps = options_.eps;
    s.weight_decay = *groups_[g].weight_decay;
    s.step = step_;
    for (size_t i = 0; i < groups_[g].params.size(); ++i) {
      const Tensor& p = groups_[g].params[i];
      Tensor grad = p.grad();
      if (!grad.defined()) continue;
      tensors.push_back({p, grad, state_[g][i][0], state_[g][i][1], s});
    }
  }
  kernels::adamw_update_all(tensors);
}

// ---- clipping, schedule -----------------------------------------------------------------------------------

double clip_grad_norm(const std::vector<Tensor>& params, double max_norm) {
  BRIGADE_CHECK_VALUE(max_norm > 0.0, "clip_grad_norm: max_norm must be positive, found ", max_norm);
  std::vector<Tensor> grads;
  for (const Tensor& p : params) {
    if (p.grad().defined()) grads.push_back(p.grad());
  }
  if (grads.empty()) return 0.0;
  const double norm = kernels::global_l2_norm(grads);
  if (!std::isfinite(norm)) return norm;
  const double scale = max_norm / (norm + 1e-6);
  if (scale < 1.0) {
    NoGradGuard no_grad;
    for (const Tensor& g : grads) kernels::mul_(g, scale);
  }
  return norm;
}

void CosineSchedule::validate() const {
  BRIGADE_CHECK_VALUE(min_lr >= 0.0 && min_lr <= max_lr,
                      "CosineSchedule: need 0 <= min_lr <= max_lr, found min_lr ", min_lr, " and max_lr ",
                      max_lr);
  BRIGADE_CHECK_VALUE(warmup_steps >= 0, "CosineSchedule: warmup_steps must be >= 0, found ", warmup_steps);
  BRIGADE_CHECK_VALUE(decay_steps >= warmup_steps, "CosineSchedule: decay_steps (", decay_steps,
                      ") must be >= warmup_steps (", warmup_steps, ")");
}

double CosineSchedule::lr_at(int64_t step) const {
  validate();
  BRIGADE_CHECK_VALUE(step >= 0, "CosineSchedule.lr_at: step must be >= 0, found ", step);
  if (step < warmup_steps) {
    return max_lr * static_cast<double>(step + 1) / static_cast<double>(warmup_steps);
  }
  if (step >= decay_steps) return min_lr;
  const double ratio =
      static_cast<double>(step - warmup_steps) / static_cast<double>(decay_steps - warmup_steps);
  return min_lr + 0.5 * (1.0 + std::cos(std::numbers::pi * ratio)) * (max_lr - min_lr);
}

}  // namespace brigade::nn
