// Which shard of a sharded checkpoint each tensor goes to (nn/checkpoint_shards.h). Apart from the shard
// files and the index (checkpoint_shards.cpp), because this part needs the model and that part does not: the
// readers build and fuzz with the tensor library alone.
#include <algorithm>

#include "nn/checkpoint_shards.h"

namespace brigade::nn {

std::map<std::string, int> parameter_shards(const Sequential& model, const std::vector<int>& layer_stages) {
  BRIGADE_CHECK_VALUE(static_cast<int64_t>(layer_stages.size()) == model.size(),
                      "parameter_shards: ", layer_stages.size(), " layer stages for a model of ",
                      model.size(), " layers");
  std::map<std::string, int> owners;
  for (int64_t i = 0; i < model.size(); ++i) {
    const int stage = layer_stages[static_cast<size_t>(i)];
    BRIGADE_CHECK_VALUE(stage >= 0, "parameter_shards: layer ", i, " has stage ", stage);
    for (const auto& [name, tensor] : model.named_parameters_range(i, i + 1)) {
      auto [it, inserted] = owners.emplace(name, stage);
      if (!inserted) it->second = std::min(it->second, stage);
    }
  }
  return owners;
}

std::vector<std::pair<std::string, Tensor>> shard_tensors(
    const std::vector<std::pair<std::string, Tensor>>& tensors, const std::map<std::string, int>& owners,
    int shard) {
  std::vector<std::pair<std::string, Tensor>> out;
  for (const auto& [name, tensor] : tensors) {
    // "model.<param>" or "optim.<param>.<state>": the parameter is the longest known name after the prefix.
    const size_t dot = name.find('.');
    const std::string rest = dot == std::string::npos ? std::string() : name.substr(dot + 1);
    int owner = -1;
    size_t longest = 0;
    for (auto it = owners.begin(); it != owners.end(); ++it) {
      const std::string& param = it->first;
      const bool match = rest == param || (rest.size() > param.size() && rest.rfind(param + ".", 0) == 0);
      if (match && param.size() > longest) {
        longest = param.size();
        owner = it->second;
      }
    }
    BRIGADE_CHECK_VALUE(owner >= 0, "shard_tensors: tensor '", name, "' belongs to no known parameter");
    if (owner == shard) out.emplace_back(name, tensor);
  }
  return out;
}

}  // namespace brigade::nn
