// Optimizers (SGD with momentum, AdamW), gradient clipping by global norm, and the warmup + cosine
// learning-rate schedule.
//
// An optimizer holds parameter groups, each with its own lr and weight_decay, and per-parameter state
// tensors (created at construction, on each parameter's device). It keeps the tensor handles it was given:
// build it after Module::to() (see nn/module.h). Updates run under NoGradGuard through the raw kernels.
//
// \code
//   brigade::nn::AdamW opt(brigade::nn::decay_groups(model, /*weight_decay=*/0.1),
//                          brigade::nn::AdamWOptions{.lr = 1e-3, .beta2 = 0.95});
//   brigade::nn::CosineSchedule schedule{.max_lr = 1e-3, .min_lr = 1e-4, .warmup_steps = 100,
//                                        .decay_steps = 5000};
//   for (int64_t step = 0; step < 5000; ++step) {
//     opt.set_lr(schedule.lr_at(step));
//     opt.zero_grad();
//     brigade::nn::GPT::loss(model.forward(x), y).backward();
//     brigade::nn::clip_grad_norm(model.parameters(), 1.0);
//     opt.step();
//   }
// \endcode
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "nn/module.h"
#include "tensor/tensor.h"

namespace brigade::nn {

/// Parameters that share hyperparameters. Unset lr / weight_decay take the optimizer's options.
struct ParamGroup {
  std::vector<Tensor> params;
  /// Optional, one per parameter: names the state tensors ("<name>.exp_avg"); default "group<g>.<i>".
  std::vector<std::string> names;
  std::optional<double> lr;
  std::optional<double> weight_decay;
};

/// Every parameter of `model` in one group, with names.
ParamGroup all_parameters(const Module& model);
/// nanoGPT's split: group 0 holds parameters with dim >= 2 (matmul weights, embeddings) and decays them
/// by `weight_decay`; group 1 holds the rest (biases, LayerNorm weights) with weight_decay 0.
std::vector<ParamGroup> decay_groups(const Module& model, double weight_decay);

/// What an optimizer checkpoints: its step count and its named state tensors.
struct OptimizerState {
  int64_t step = 0;
  std::map<std::string, Tensor> tensors;
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  /// One update of every parameter that has a gradient (parameters without one are skipped).
  virtual void step() = 0;
  /// Drops every parameter's gradient (sets it undefined).
  void zero_grad();

  std::vector<ParamGroup>& param_groups() { return groups_; }
  const std::vector<ParamGroup>& param_groups() const { return groups_; }
  /// Sets the lr of every group (what a schedule does each step).
  void set_lr(double lr);
  /// Updates made so far.
  int64_t step_count() const { return step_; }

  /// The step count and the live state tensors, keyed "<param name>.<state name>".
  OptimizerState state() const;
  /// Copies a state() taken from an optimizer over the same parameters into this one. Missing or
  /// unexpected keys are a ValueError listing them, a shape mismatch a ShapeError; nothing is changed then.
  void load_state(const OptimizerState& state);

 protected:
  /// @param state_names the per-parameter state tensors this optimizer keeps (zeros like the parameter).
  Optimizer(std::string type_name, std::vector<ParamGroup> groups, double default_lr,
            double default_weight_decay, std::vector<std::string> state_names);
  /// state_[g][i][s]: state tensor s of parameter i of group g.
  std::vector<std::vector<std::vector<Tensor>>> state_;
  std::vector<ParamGroup> groups_;
  std::string type_name_;
  int64_t step_ = 0;

 private:
  std::vector<std::string> state_names_;
};

struct SGDOptions {
  double lr = 1e-2;
  double momentum = 0.0;
  bool nesterov = false;
  /// Classic (coupled) L2: weight_decay * p is added to the gradient.
  double weight_decay = 0.0;
};

/// PyTorch's SGD (dampening 0): d = g + wd p; buf = momentum buf + d; d = nesterov ? d + momentum buf : buf;
/// p -= lr d. State: "momentum_buffer" when momentum != 0.
class SGD : public Optimizer {
 public:
  SGD(std::vector<ParamGroup> groups, SGDOptions options = {});
  SGD(const std::vector<Tensor>& params, SGDOptions options = {});
  void step() override;

 private:
  SGDOptions options_;
};

struct AdamWOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.01;
};

/// AdamW (Loshchilov & Hutter) via kernels::adamw_update_all (every parameter in one pass): decoupled decay
/// p -= lr * wd * p, then the Adam step with bias correction. State: "exp_avg", "exp_avg_sq" (float32 for
/// bf16 parameters).
class AdamW : public Optimizer {
 public:
  AdamW(std::vector<ParamGroup> groups, AdamWOptions options = {});
  AdamW(const std::vector<Tensor>& params, AdamWOptions options = {});
  void step() override;

 private:
  AdamWOptions options_;
};

/// Scales the gradients of `params` in place so that their global L2 norm is at most max_norm (factor
/// max_norm / (norm + 1e-6), as PyTorch), and returns the norm before clipping. Undefined gradients are
/// skipped. A non-finite norm is returned without touching the gradients (the caller decides to stop).
double clip_grad_norm(const std::vector<Tensor>& params, double max_norm);

/// Linear warmup then cosine decay (nanoGPT's schedule), for 0-based step s:
///   s < warmup_steps:          max_lr * (s + 1) / warmup_steps
///   warmup_steps <= s < decay: min_lr + (max_lr - min_lr) * (1 + cos(pi * (s - warmup) / (decay - warmup)))
///   / 2 s >= decay_steps:          min_lr
struct CosineSchedule {
  double max_lr = 1e-3;
  double min_lr = 1e-4;
  int64_t warmup_steps = 0;
  int64_t decay_steps = 1;  ///< the step at which min_lr is reached (usually the total number of steps)

  /// ValueError unless 0 <= min_lr <= max_lr, warmup_steps >= 0 and decay_steps >= warmup_steps.
  void validate() const;
  /// The lr for step s (a pure function of the fields and s; validates).
  double lr_at(int64_t step) const;
};

}  // namespace brigade::nn
