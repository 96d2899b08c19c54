// make_crosscheck_input: writes the inputs of the PyTorch cross-check (docs/crosscheck.md).
//
// For each case below it builds a tiny GPT with a fixed seed, draws one fixed batch of token ids and
// targets, and writes <dir>/crosscheck_<case>_input.safetensors holding
//   every state_dict() entry under its own name (float32, a tied weight once, as "embed.wte.weight"),
//   "batch.ids" and "batch.targets" (int64 [B, T]; a target of -100 is ignored by the loss),
//   metadata "crosscheck.case", "crosscheck.config" (GPTConfig JSON), "crosscheck.seed".
// scripts/torch_crosscheck.py reads these files and writes the matching *_expected.safetensors; the test
// tests/nn/torch_crosscheck_test.cpp compares brigade against them. The files are committed, so neither
// this program nor PyTorch is needed to run the test.
//
// Usage: make_crosscheck_input [OUTPUT_DIR]   (default: the source tree's tests/nn/fixtures)
#include <cmath>
#include <cstdint>
#include <exception>
#include <iostream>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "nn/gpt.h"
#include "nn/safetensors.h"
#include "tensor/generator.h"
#include "tensor/grad_mode.h"

namespace nn = brigade::nn;
using brigade::Tensor;

namespace {

struct Case {
  std::string name;
  nn::GPTConfig config;
  uint64_t seed;
  int64_t batch, length;  // B, T (T <= block_size)
  // false: GPT-2's initialisation as GPT(config, seed) draws it. true: every parameter re-drawn wide
  // (Linear/Embedding weights ~ N(0, 0.35), biases ~ N(0, 0.1), LayerNorm weights ~ 1 + N(0, 0.2)) so that
  // attention is far from uniform and GELU works in its curved region: GPT-2's small init leaves
  // q.k ~ 1e-4, where a wrong softmax or scale would barely move the logits.
  bool wide;
  bool ignore_one_target;  // set one target to -100 (the loss must skip it and average over the rest)
};

std::vector<Case> cases() {
  std::vector<Case> out;
  nn::GPTConfig a;
  a.vocab_size = 11;
  a.block_size = 8;
  a.n_layer = 2;
  a.n_head = 2;
  a.n_embd = 16;
  a.dropout = 0.0;
  a.tie_weights = true;
  a.bias = true;
  out.push_back({"gpt2_init", a, 1234, 2, 8, false, false});

  nn::GPTConfig b = a;
  b.tie_weights = false;
  b.bias = false;
  b.n_head = 4;
  out.push_back({"wide_untied_nobias", b, 4321, 3, 6, true, true});
  return out;
}

void widen(nn::GPT& model, uint64_t seed) {
  brigade::Generator generator(seed);
  brigade::NoGradGuard no_grad;
  for (auto& [name, param] : model.named_parameters()) {
    std::vector<float> v = brigade::randn(param.shape(), brigade::kFloat32, &generator).to_vector<float>();
    const bool norm = name.find(".ln") != std::string::npos;  // ln1, ln2, ln_f
    const bool bias = name.size() >= 5 && name.compare(name.size() - 5, 5, ".bias") == 0;
    for (float& x : v) {
      if (norm && !bias) {
        x = 1.0f + 0.2f * x;
      } else if (bias) {
        x = 0.1f * x;
      } else {
        x = 0.35f * x;
      }
    }
    param.detach().copy_(brigade::from_vector(v, param.shape()));
  }
}

std::vector<int64_t> draw_ids(int64_t count, int64_t vocab, brigade::Generator& generator) {
  std::vector<double> u = brigade::rand({count}, brigade::kFloat64, &generator).to_vector<double>();
  std::vector<int64_t> ids;
  for (double x : u) ids.push_back(std::min<int64_t>(static_cast<int64_t>(x * vocab), vocab - 1));
  return ids;
}

void write_case(const Case& c, const std::string& dir) {
  nn::GPT model(c.config, c.seed);
  if (c.wide) widen(model, c.seed + 1);

  brigade::Generator generator(c.seed + 2);
  const int64_t n = c.batch * c.length;
  std::vector<int64_t> ids = draw_ids(n, c.config.vocab_size, generator);
  std::vector<int64_t> targets = draw_ids(n, c.config.vocab_size, generator);
  if (c.ignore_one_target) targets[static_cast<size_t>(c.length + 1)] = -100;

  std::vector<std::pair<std::string, Tensor>> tensors;
  for (auto& [name, param] : model.state_dict()) tensors.emplace_back(name, param.detach());
  tensors.emplace_back("batch.ids", brigade::from_vector(ids, {c.batch, c.length}));
  tensors.emplace_back("batch.targets", brigade::from_vector(targets, {c.batch, c.length}));
  const std::map<std::string, std::string> metadata = {{"crosscheck.case", c.name},
                                                       {"crosscheck.config", c.config.to_json()},
                                                       {"crosscheck.seed", std::to_string(c.seed)}};
  const std::string path = dir + "/crosscheck_" + c.name + "_input.safetensors";
  nn::save_safetensors(path, tensors, metadata);
  std::cout << "wrote " << path << " (" << model.num_parameters() << " parameters, batch " << c.batch << " x "
            << c.length << ")\n";
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (argc > 2) {
      std::cerr << "usage: make_crosscheck_input [OUTPUT_DIR]\n";
      return 2;
    }
    const std::string dir = argc == 2 ? argv[1] : std::string(BRIGADE_TEST_DATA_DIR) + "/nn/fixtures";
    for (const Case& c : cases()) write_case(c, dir);
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "make_crosscheck_input: " << e.what() << "\n";
    return 1;
  }
}
