// Sequential: an ordered list of single-input modules applied one after another.
//
// This is the unit the pipeline partitions: a model expressed as a Sequential of L depth-ordered layers is
// cut into contiguous slices [begin, end), and each stage runs forward_range(x, begin, end) on its slice.
// Layer i is registered as a submodule under its name ("0", "1", ... by default), so parameter names are
// "<layer name>.<path inside the layer>" whichever stage owns the layer: checkpoints are partition-free.
//
// \code
//   auto net = std::make_shared<brigade::nn::Sequential>();
//   net->push_back(std::make_shared<brigade::nn::Linear>(4, 8));
//   net->push_back(std::make_shared<brigade::nn::GELU>());
//   net->push_back("out", std::make_shared<brigade::nn::Linear>(8, 2));
//   brigade::Tensor y = net->forward(x);                 // same as forward_range(x, 0, 3)
//   brigade::Tensor h = net->forward_range(x, 0, 2);     // the first two layers only
// \endcode
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "nn/module.h"

namespace brigade::nn {

class Sequential : public Module {
 public:
  Sequential() : Module("Sequential") {}
  /// Layers named "0", "1", ... in order.
  explicit Sequential(std::vector<std::shared_ptr<Module>> layers);

  /// Appends a layer named after its index.
  void push_back(std::shared_ptr<Module> layer);
  /// Appends a layer under `name` (unique; may be dotted, e.g. "blocks.3").
  void push_back(const std::string& name, std::shared_ptr<Module> layer);

  int64_t size() const { return static_cast<int64_t>(layers_.size()); }
  /// Layer i (ValueError outside [0, size())).
  const std::shared_ptr<Module>& at(int64_t i) const;
  /// The name layer i was registered under.
  const std::string& name_at(int64_t i) const;

  /// All layers in order.
  Tensor forward(const Tensor& input) override;
  /// Layers begin, begin + 1, ..., end - 1 (0 <= begin <= end <= size(); an empty range returns the input).
  Tensor forward_range(const Tensor& input, int64_t begin, int64_t end);
  /// Parameters of layers [begin, end), each distinct tensor once, under the names state_dict() gives them
  /// (a weight tied to a layer outside the range keeps its one model-wide name).
  std::vector<std::pair<std::string, Tensor>> named_parameters_range(int64_t begin, int64_t end) const;

 protected:
  explicit Sequential(std::string type_name) : Module(std::move(type_name)) {}

 private:
  void check_range(int64_t begin, int64_t end, const char* op) const;

  std::vector<std::shared_ptr<Module>> layers_;
  std::vector<std::string> names_;
};

}  // namespace brigade::nn
