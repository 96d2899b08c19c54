// The PyTorch cross-check: brigade's GPT forward and backward (float32, CPU) against PyTorch's (float64)
// on the same weights and batch.
//
// Fixtures (tests/nn/fixtures, committed; docs/crosscheck.md says how to regenerate them):
//   crosscheck_<case>_input.safetensors     brigade's weights, "batch.ids", "batch.targets", the config
//   crosscheck_<case>_expected.safetensors  PyTorch's "logits", "loss" and "grad.<parameter>" (float64),
//                                           from scripts/torch_crosscheck.py
// Error measure: relative error in the 2-norm over the whole tensor, ||brigade - torch|| / ||torch||.
// Tolerances: <= 1e-5 on the loss and the logits, <= 1e-4 on every parameter's gradient. Every
// parameter must have an expected gradient and every expected gradient must name a parameter.
#include <gtest/gtest.h>

#include <cmath>
#include <iostream>
#include <set>
#include <string>
#include <vector>

#include "nn/gpt.h"
#include "nn/safetensors.h"
#include "tensor/tensor.h"

namespace nn = brigade::nn;
using brigade::Tensor;

namespace {

constexpr double kForwardTolerance = 1e-5;  // loss, logits
constexpr double kGradTolerance = 1e-4;     // each parameter's gradient

std::string fixture(const std::string& name) {
  return std::string(BRIGADE_TEST_DATA_DIR) + "/nn/fixtures/" + name;
}

/// ||actual - expected||_2 / ||expected||_2, accumulated in double.
double relative_error(const Tensor& actual, const Tensor& expected) {
  EXPECT_EQ(actual.shape(), expected.shape());
  std::vector<double> a = actual.to_vector<double>(), b = expected.to_vector<double>();
  if (a.size() != b.size()) return INFINITY;
  double diff = 0.0, norm = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff += (a[i] - b[i]) * (a[i] - b[i]);
    norm += b[i] * b[i];
  }
  return std::sqrt(diff) / std::sqrt(norm);
}

bool starts_with(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

class TorchCrosscheck : public ::testing::TestWithParam<std::string> {};

TEST_P(TorchCrosscheck, ForwardAndBackwardMatchPyTorch) {
  const std::string name = GetParam();
  const nn::SafetensorsFile input =
      nn::load_safetensors(fixture("crosscheck_" + name + "_input.safetensors"));
  const nn::SafetensorsFile expected =
      nn::load_safetensors(fixture("crosscheck_" + name + "_expected.safetensors"));
  // The expected file must have been computed from this very input (regenerate both together).
  ASSERT_EQ(expected.metadata.at("crosscheck.input_checksum"), input.metadata.at(nn::kChecksumKey))
      << "crosscheck_" << name << "_expected.safetensors was not made from the committed input; rerun "
      << "scripts/torch_crosscheck.py (docs/crosscheck.md)";

  const nn::GPTConfig config = nn::GPTConfig::from_json(input.metadata.at("crosscheck.config"));
  ASSERT_EQ(config.dropout, 0.0);
  nn::GPT model(config, /*seed=*/0);  // every weight is then overwritten from the file
  nn::StateDict weights;
  for (const auto& [key, tensor] : input.tensors) {
    if (!starts_with(key, "batch.")) weights[key] = tensor;
  }
  model.load_state_dict(weights, /*strict=*/true);
  const Tensor ids = input.at("batch.ids");
  const Tensor targets = input.at("batch.targets");

  Tensor logits = model.forward(ids);
  Tensor loss = nn::GPT::loss(logits, targets);
  loss.backward();

  const double loss_error = relative_error(loss, expected.at("loss"));
  const double logits_error = relative_error(logits, expected.at("logits"));
  EXPECT_LE(loss_error, kForwardTolerance) << "loss " << loss.item() << " vs " << expected.at("loss").item();
  EXPECT_LE(logits_error, kForwardTolerance);

  // Every parameter has an expected gradient, and every expected gradient belongs to a parameter.
  std::set<std::string> params;
  double worst_grad_error = 0.0;
  std::string worst_grad;
  for (const auto& [param_name, param] : model.named_parameters()) {
    params.insert(param_name);
    const std::string key = "grad." + param_name;
    ASSERT_TRUE(expected.contains(key)) << "no expected gradient for parameter " << param_name;
    ASSERT_TRUE(param.grad().defined()) << "backward left no gradient on " << param_name;
    const double error = relative_error(param.grad(), expected.at(key));
    EXPECT_LE(error, kGradTolerance) << "gradient of " << param_name;
    if (error > worst_grad_error) {
      worst_grad_error = error;
      worst_grad = param_name;
    }
  }
  for (const auto& [key, tensor] : expected.tensors) {
    if (starts_with(key, "grad.")) {
      EXPECT_TRUE(params.count(key.substr(5)) == 1) << key << " names no parameter of the model";
    }
  }
  ASSERT_GT(params.size(), 0u);
  std::cout << "[crosscheck " << name << "] relative errors: loss " << loss_error << ", logits "
            << logits_error << ", worst gradient " << worst_grad_error << " (" << worst_grad << "), "
            << params.size() << " parameters\n";
}

// gpt2_init: tied weights, biases, GPT-2's initialisation, T == block_size.
// wide_untied_nobias: untied head, no biases, wide weights (sharp attention), T < block_size, one target
// ignored (-100). See tests/nn/crosscheck/make_crosscheck_input.cpp.
INSTANTIATE_TEST_SUITE_P(Cases, TorchCrosscheck, ::testing::Values("gpt2_init", "wide_untied_nobias"),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

}  // namespace
