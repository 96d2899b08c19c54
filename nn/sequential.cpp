#include "nn/sequential.h"

#include <algorithm>

#include "tensor/error.h"

namespace brigade::nn {

Sequential::Sequential(std::vector<std::shared_ptr<Module>> layers) : Module("Sequential") {
  for (auto& layer : layers) push_back(std::move(layer));
}

void Sequential::push_back(std::shared_ptr<Module> layer) {
  push_back(std::to_string(layers_.size()), std::move(layer));
}

void Sequential::push_back(const std::string& name, std::shared_ptr<Module> layer) {
  add_child(name, layer);
  layers_.push_back(std::move(layer));
  names_.push_back(name);
}

const std::shared_ptr<Module>& Sequential::at(int64_t i) const {
  BRIGADE_CHECK_VALUE(i >= 0 && i < size(), type_name(), ".at(", i, "): index outside [0, ", size(), ")");
  return layers_[static_cast<size_t>(i)];
}

const std::string& Sequential::name_at(int64_t i) const {
  BRIGADE_CHECK_VALUE(i >= 0 && i < size(), type_name(), ".name_at(", i, "): index outside [0, ", size(),
                      ")");
  return names_[static_cast<size_t>(i)];
}

void Sequential::check_range(int64_t begin, int64_t end, const char* op) const {
  BRIGADE_CHECK_VALUE(0 <= begin && begin <= end && end <= size(), type_name(), ".", op, "(", begin, ", ",
                      end, "): need 0 <= begin <= end <= ", size());
}

Tensor Sequential::forward(const Tensor& input) {
  return forward_range(input, 0, size());
}

Tensor Sequential::forward_range(const Tensor& input, int64_t begin, int64_t end) {
  check_range(begin, end, "forward_range");
  Tensor x = input;
  for (int64_t i = begin; i < end; ++i) x = layers_[static_cast<size_t>(i)]->forward(x);
  return x;
}

std::vector<std::pair<std::string, Tensor>> Sequential::named_parameters_range(int64_t begin,
                                                                               int64_t end) const {
  check_range(begin, end, "named_parameters_range");
  // Names come from the whole model, so a tensor shared with a layer outside the range (a tied weight)
  // keeps the one name state_dict() gives it.
  const auto all = named_parameters();
  std::vector<std::pair<std::string, Tensor>> out;
  std::vector<const void*> seen;
  for (int64_t i = begin; i < end; ++i) {
    for (const Tensor& tensor : layers_[static_cast<size_t>(i)]->parameters()) {
      const void* id = tensor.unsafe_impl_id();
      if (std::find(seen.begin(), seen.end(), id) != seen.end()) continue;
      seen.push_back(id);
      auto named = std::find_if(all.begin(), all.end(),
                                [&](const auto& p) { return p.second.unsafe_impl_id() == id; });
      out.emplace_back(named->first, tensor);
    }
  }
  return out;
}

}  // namespace brigade::nn
