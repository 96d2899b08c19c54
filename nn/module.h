// Module: the base of every layer and model, shaped like the libtorch frontend.
//
// A module owns named parameters (leaf tensors that require grad) and named submodules. Names compose into
// stable dotted paths, "blocks.3.attn.qkv.weight", which are the keys of state_dict() and of checkpoints.
//
// \code
//   struct TwoLayer : brigade::nn::Module {
//     TwoLayer() : Module("TwoLayer") {
//       fc1 = register_module("fc1", std::make_shared<brigade::nn::Linear>(4, 8));
//       fc2 = register_module("fc2", std::make_shared<brigade::nn::Linear>(8, 2));
//     }
//     brigade::Tensor forward(const brigade::Tensor& x) override { return (*fc2)(brigade::relu((*fc1)(x))); }
//     std::shared_ptr<brigade::nn::Linear> fc1, fc2;
//   };
// \endcode
//
// Parameter slots and to(device)
//   register_parameter() stores the tensor in a slot owned by the module and returns a reference to that
//   slot; the reference stays valid for the module's lifetime. to(device) / to(dtype) put a converted
//   tensor into every slot (a new leaf with the same requires_grad and the gradient converted too), so code
//   that reads its parameters through the slot (every brigade layer does: Linear::weight() returns the
//   slot) sees the moved tensors. Tensor handles copied out *before* the move — parameters() results, an
//   optimizer's parameter list — still point at the old tensors: create optimizers after to(). Slots that
//   hold the same tensor (tied weights) still share one tensor after the move.
//
// Shared parameters (weight tying) are listed once by parameters()/named_parameters()/state_dict(),
// under the name of their first occurrence in registration order.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tensor/device.h"
#include "tensor/dtype.h"
#include "tensor/tensor.h"

namespace brigade::nn {

/// Parameter name -> tensor. Checkpoints store exactly this map.
using StateDict = std::map<std::string, Tensor>;

/// What load_state_dict(…, strict = false) skipped.
struct LoadStateDictResult {
  std::vector<std::string> missing_keys;  ///< parameters of the module absent from the map (left unchanged)
  std::vector<std::string> unexpected_keys;  ///< map entries the module has no parameter for (ignored)
};

class Module {
 public:
  /// @param type_name what error messages and summaries call this module ("Linear", "Block", ...).
  explicit Module(std::string type_name = "Module");
  virtual ~Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  const std::string& type_name() const { return type_name_; }

  /// The computation of a single-input module. The base class throws (a module without one, e.g. a
  /// container of heterogeneous parts, is called through its own methods).
  virtual Tensor forward(const Tensor& input);
  Tensor operator()(const Tensor& input) { return forward(input); }

  // ---- registration -----------------------------------------------------------------------------------
  /// Stores `tensor` as parameter `name` (no dots; unique among this module's parameters and children)
  /// and marks it requires_grad (it must be a floating leaf). Returns the slot (valid for the module's
  /// lifetime; see the header comment about to()).
  Tensor& register_parameter(const std::string& name, Tensor tensor, bool requires_grad = true);
  /// Adds a submodule. The name must be unique; it may contain dots (Sequential names its blocks
  /// "blocks.0", "blocks.1", ...: the dots only shape the dotted paths, they do not nest modules).
  template <typename M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> module) {
    add_child(name, module);
    return module;
  }
  /// Replaces the tensor in this module's existing parameter slot `name` (same shape required). This is
  /// how weights are tied: head->set_parameter("weight", embedding->weight()).
  void set_parameter(const std::string& name, const Tensor& tensor);
  /// The slot of this module's own parameter `name` (ValueError if there is none).
  Tensor& parameter(const std::string& name);
  const Tensor& parameter(const std::string& name) const;

  // ---- traversal --------------------------------------------------------------------------------------
  /// Every parameter (recursively: this module's first, then each child's in registration order), each
  /// distinct tensor once.
  std::vector<Tensor> parameters(bool recurse = true) const;
  /// The same, with dotted names.
  std::vector<std::pair<std::string, Tensor>> named_parameters(bool recurse = true) const;
  /// Direct submodules in registration order.
  std::vector<std::shared_ptr<Module>> children() const;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> named_children() const;
  /// This module (named "") and every descendant, depth-first in registration order, with dotted names.
  std::vector<std::pair<std::string, Module*>> named_modules();
  /// Calls fn on this module and every descendant (depth-first, parents first).
  void apply(const std::function<void(Module&)>& fn);
  /// Total number of elements over parameters() (shared tensors counted once).
  int64_t num_parameters() const;

  // ---- modes, devices, gradients ------------------------------------------------------------------------
  /// Sets the training flag of this module and all descendants (Dropout reads it).
  void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }
  /// Moves every parameter (and its gradient) to `device`. See the header comment: slots are updated,
  /// handles taken earlier are not.
  void to(const Device& device);
  /// Converts every floating parameter (and its gradient) to `dtype`.
  void to(DType dtype);
  /// Drops every parameter's gradient (sets it undefined, so the next backward allocates it fresh and
  /// the memory of the old one is freed now).
  void zero_grad();

  // ---- state ------------------------------------------------------------------------------------------
  /// Dotted name -> parameter (the live tensors, not copies; a checkpoint writer copies them out).
  StateDict state_dict() const;
  /// Copies the map's tensors into the parameters in place (any device or dtype in the map; values are
  /// converted). A shape mismatch is a ShapeError. With strict, a missing or unexpected key is a
  /// ValueError listing every such key; without, they are returned.
  LoadStateDictResult load_state_dict(const StateDict& state, bool strict = true);

 protected:
  void add_child(const std::string& name, std::shared_ptr<Module> module);

 private:
  struct ParameterSlot {
    std::string name;
    Tensor tensor;
  };
  // Slots live in a deque so that references returned by register_parameter stay valid.
  void collect_slots(const std::string& prefix, std::vector<std::pair<std::string, Tensor*>>& out);
  void collect_named(const std::string& prefix, bool recurse,
                     std::vector<std::pair<std::string, Tensor>>& out, std::vector<const void*>& seen) const;
  void convert_parameters(const std::function<Tensor(const Tensor&)>& convert);
  void check_new_name(const std::string& name, const char* what) const;

  std::string type_name_;
  bool training_ = true;
  std::deque<ParameterSlot> parameters_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
};

}  // namespace brigade::nn
