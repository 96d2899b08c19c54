#include "nn/module.h"

#include <algorithm>
#include <sstream>
#include <unordered_map>

#include "tensor/error.h"
#include "tensor/grad_mode.h"

namespace brigade::nn {

namespace {

std::string join_name(const std::string& prefix, const std::string& name) {
  return prefix.empty() ? name : prefix + "." + name;
}

std::string list_str(const std::vector<std::string>& names) {
  std::ostringstream out;
  for (size_t i = 0; i < names.size(); ++i) out << (i ? ", " : "") << "'" << names[i] << "'";
  return out.str();
}

}  // namespace

Module::Module(std::string type_name) : type_name_(std::move(type_name)) {}

Tensor Module::forward(const Tensor&) {
  BRIGADE_THROW(Error, type_name_, ": this module has no single-input forward(); call its own methods");
}

void Module::check_new_name(const std::string& name, const char* what) const {
  BRIGADE_CHECK_VALUE(!name.empty(), type_name_, ": ", what, " name must not be empty");
  for (const auto& slot : parameters_) {
    BRIGADE_CHECK_VALUE(slot.name != name, type_name_, ": ", what, " name '", name,
                        "' is already taken by a parameter");
  }
  for (const auto& [child, module] : children_) {
    BRIGADE_CHECK_VALUE(child != name, type_name_, ": ", what, " name '", name,
                        "' is already taken by a submodule");
  }
}

Tensor& Module::register_parameter(const std::string& name, Tensor tensor, bool requires_grad) {
  check_new_name(name, "parameter");
  BRIGADE_CHECK_VALUE(name.find('.') == std::string::npos, type_name_, ": parameter name '", name,
                      "' must not contain '.' (dots separate module names)");
  BRIGADE_CHECK_VALUE(tensor.defined(), type_name_, ": parameter '", name, "' is an undefined tensor");
  BRIGADE_CHECK_VALUE(tensor.is_leaf(), type_name_, ": parameter '", name,
                      "' must be a leaf tensor (detach() it first)");
  if (requires_grad) tensor.set_requires_grad(true);
  parameters_.push_back({name, std::move(tensor)});
  return parameters_.back().tensor;
}

void Module::add_child(const std::string& name, std::shared_ptr<Module> module) {
  check_new_name(name, "submodule");
  BRIGADE_CHECK_VALUE(module != nullptr, type_name_, ": submodule '", name, "' is null");
  BRIGADE_CHECK_VALUE(name.front() != '.' && name.back() != '.' && name.find("..") == std::string::npos,
                      type_name_, ": submodule name '", name, "' has an empty dotted component");
  children_.emplace_back(name, std::move(module));
}

Tensor& Module::parameter(const std::string& name) {
  for (auto& slot : parameters_) {
    if (slot.name == name) return slot.tensor;
  }
  BRIGADE_THROW(ValueError, type_name_, ": no parameter named '", name, "'");
}

const Tensor& Module::parameter(const std::string& name) const {
  return const_cast<Module*>(this)->parameter(name);
}

void Module::set_parameter(const std::string& name, const Tensor& tensor) {
  Tensor& slot = parameter(name);
  BRIGADE_CHECK_SHAPE(tensor.defined() && tensor.shape() == slot.shape(), type_name_, ": set_parameter('",
                      name, "'): expected shape ", shape_str(slot.shape()), ", found ",
                      tensor.defined() ? shape_str(tensor.shape()) : std::string("an undefined tensor"));
  slot = tensor;
}

// ---- traversal
// ----------------------------------------------------------------------------------------------

void Module::collect_named(const std::string& prefix, bool recurse,
                           std::vector<std::pair<std::string, Tensor>>& out,
                           std::vector<const void*>& seen) const {
  for (const auto& slot : parameters_) {
    const void* id = slot.tensor.unsafe_impl_id();
    if (std::find(seen.begin(), seen.end(), id) != seen.end()) continue;
    seen.push_back(id);
    out.emplace_back(join_name(prefix, slot.name), slot.tensor);
  }
  if (!recurse) return;
  for (const auto& [name, child] : children_) child->collect_named(join_name(prefix, name), true, out, seen);
}

std::vector<std::pair<std::string, Tensor>> Module::named_parameters(bool recurse) const {
  std::vector<std::pair<std::string, Tensor>> out;
  std::vector<const void*> seen;
  collect_named("", recurse, out, seen);
  return out;
}

std::vector<Tensor> Module::parameters(bool recurse) const {
  std::vector<Tensor> out;
  for (auto& [name, tensor] : named_parameters(recurse)) out.push_back(tensor);
  return out;
}

std::vector<std::shared_ptr<Module>> Module::children() const {
  std::vector<std::shared_ptr<Module>> out;
  for (const auto& [name, child] : children_) out.push_back(child);
  return out;
}

std::vector<std::pair<std::string, std::shared_ptr<Module>>> Module::named_children() const {
  return children_;
}

std::vector<std::pair<std::string, Module*>> Module::named_modules() {
  std::vector<std::pair<std::string, Module*>> out;
  // Iterative depth-first walk, parents first, children in registration order.
  std::vector<std::pair<std::string, Module*>> stack{{"", this}};
  while (!stack.empty()) {
    auto [name, module] = stack.back();
    stack.pop_back();
    out.emplace_back(name, module);
    for (auto it = module->children_.rbegin(); it != module->children_.rend(); ++it) {
      stack.emplace_back(join_name(name, it->first), it->second.get());
    }
  }
  return out;
}

void Module::apply(const std::function<void(Module&)>& fn) {
  for (auto& [name, module] : named_modules()) fn(*module);
}

int64_t Module::num_parameters() const {
  int64_t total = 0;
  for (const Tensor& p : parameters()) total += p.numel();
  return total;
}

// ---- modes, devices, gradients
// ------------------------------------------------------------------------------

void Module::train(bool on) {
  apply([on](Module& m) { m.training_ = on; });
}

void Module::collect_slots(const std::string& prefix, std::vector<std::pair<std::string, Tensor*>>& out) {
  for (auto& slot : parameters_) out.emplace_back(join_name(prefix, slot.name), &slot.tensor);
  for (auto& [name, child] : children_) child->collect_slots(join_name(prefix, name), out);
}

void Module::convert_parameters(const std::function<Tensor(const Tensor&)>& convert) {
  std::vector<std::pair<std::string, Tensor*>> slots;
  collect_slots("", slots);
  NoGradGuard no_grad;
  // One converted tensor per distinct old tensor, so tied slots stay tied.
  std::unordered_map<const void*, Tensor> converted;
  for (auto& [name, slot] : slots) {
    const void* id = slot->unsafe_impl_id();
    auto found = converted.find(id);
    if (found == converted.end()) {
      Tensor fresh = convert(slot->detach());
      if (fresh.storage() == slot->storage()) {
        // Nothing to convert: keep the original tensor (and its gradient, hooks) as it is.
        fresh = *slot;
      } else {
        fresh = fresh.detach();  // a fresh leaf over the converted storage
        if (slot->requires_grad()) fresh.set_requires_grad(true);
        Tensor grad = slot->grad();
        if (grad.defined()) fresh.set_grad(convert(grad));
      }
      found = converted.emplace(id, fresh).first;
    }
    *slot = found->second;
  }
}

void Module::to(const Device& device) {
  convert_parameters([&](const Tensor& t) { return t.to(device); });
}

void Module::to(DType dtype) {
  BRIGADE_CHECK_DTYPE(is_floating(dtype), type_name_, ".to(", dtype_name(dtype),
                      "): parameters can only be converted to a floating dtype");
  convert_parameters([&](const Tensor& t) { return is_floating(t.dtype()) ? t.to(dtype) : t; });
}

void Module::zero_grad() {
  std::vector<std::pair<std::string, Tensor*>> slots;
  collect_slots("", slots);
  for (auto& [name, slot] : slots) {
    if (slot->grad().defined()) slot->set_grad(Tensor());
  }
}

// ---- state
// --------------------------------------------------------------------------------------------------

StateDict Module::state_dict() const {
  StateDict out;
  for (auto& [name, tensor] : named_parameters()) out.emplace(name, tensor);
  return out;
}

LoadStateDictResult Module::load_state_dict(const StateDict& state, bool strict) {
  LoadStateDictResult result;
  const auto params = named_parameters();
  for (const auto& [name, param] : params) {
    if (!state.count(name)) result.missing_keys.push_back(name);
  }
  for (const auto& [name, tensor] : state) {
    bool known = std::any_of(params.begin(), params.end(), [&](const auto& p) { return p.first == name; });
    if (!known) result.unexpected_keys.push_back(name);
  }
  if (strict && (!result.missing_keys.empty() || !result.unexpected_keys.empty())) {
    std::ostringstream message;
    message << type_name_ << ".load_state_dict: the state does not match the module's parameters";
    if (!result.missing_keys.empty()) message << "; missing keys: " << list_str(result.missing_keys);
    if (!result.unexpected_keys.empty()) message << "; unexpected keys: " << list_str(result.unexpected_keys);
    BRIGADE_THROW(ValueError, message.str());
  }
  // Check every shape before copying anything, so that a failed load leaves the module unchanged.
  for (const auto& [name, param] : params) {
    auto found = state.find(name);
    if (found == state.end()) continue;
    BRIGADE_CHECK_VALUE(found->second.defined(), type_name_, ".load_state_dict: '", name, "' is undefined");
    BRIGADE_CHECK_SHAPE(found->second.shape() == param.shape(), type_name_, ".load_state_dict: '", name,
                        "' has shape ", shape_str(found->second.shape()), " in the state but ",
                        shape_str(param.shape()), " in the module");
  }
  NoGradGuard no_grad;
  for (const auto& [name, param] : params) {
    auto found = state.find(name);
    if (found == state.end()) continue;
    Tensor source = found->second;
    // copy_ converts dtypes and copies between the CPU and a device; device-to-other-device goes via the CPU.
    if (source.device() != param.device() && !source.device().is_cpu() && !param.device().is_cpu()) {
      source = source.cpu();
    }
    Tensor target = param.detach();
    target.copy_(source);
  }
  return result;
}

}  // namespace brigade::nn
