#include "nn/gpt.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "autograd/ops.h"
#include "kernels/kernels.h"
#include "tensor/error.h"
#include "tensor/grad_mode.h"

namespace brigade::nn {

// ---- GPTConfig
// ----------------------------------------------------------------------------------------------

void GPTConfig::validate() const {
  auto positive = [](const char* field, int64_t value) {
    BRIGADE_CHECK_VALUE(value > 0, "GPTConfig: ", field, " must be positive, found ", value);
  };
  positive("vocab_size", vocab_size);
  positive("block_size", block_size);
  positive("n_layer", n_layer);
  positive("n_head", n_head);
  positive("n_embd", n_embd);
  BRIGADE_CHECK_VALUE(n_embd % n_head == 0, "GPTConfig: n_head (", n_head, ") must divide n_embd (", n_embd,
                      ")");
  BRIGADE_CHECK_VALUE(dropout >= 0.0 && dropout < 1.0, "GPTConfig: dropout must lie in [0, 1), found ",
                      dropout);
}

std::string GPTConfig::to_json() const {
  nlohmann::json j = {{"vocab_size", vocab_size},   {"block_size", block_size},
                      {"n_layer", n_layer},         {"n_head", n_head},
                      {"n_embd", n_embd},           {"dropout", dropout},
                      {"tie_weights", tie_weights}, {"bias", bias}};
  return j.dump();
}

GPTConfig GPTConfig::from_json(const std::string& text) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    BRIGADE_THROW(ValueError, "GPTConfig.from_json: not valid JSON (", e.what(), ")");
  }
  BRIGADE_CHECK_VALUE(j.is_object(), "GPTConfig.from_json: expected a JSON object, found ", j.type_name());
  GPTConfig c;
  const std::vector<std::pair<const char*, int64_t*>> integers = {{"vocab_size", &c.vocab_size},
                                                                  {"block_size", &c.block_size},
                                                                  {"n_layer", &c.n_layer},
                                                                  {"n_head", &c.n_head},
                                                                  {"n_embd", &c.n_embd}};
  const std::vector<std::pair<const char*, bool*>> flags = {{"tie_weights", &c.tie_weights},
                                                            {"bias", &c.bias}};
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& key = it.key();
    const nlohmann::json& value = it.value();
    auto expect = [&](bool ok, const char* kind) {
      BRIGADE_CHECK_VALUE(ok, "GPTConfig.from_json: '", key, "' must be ", kind, ", found ", value.dump());
    };
    auto integer =
        std::find_if(integers.begin(), integers.end(), [&](const auto& f) { return key == f.first; });
    auto flag = std::find_if(flags.begin(), flags.end(), [&](const auto& f) { return key == f.first; });
    if (integer != integers.end()) {
      expect(value.is_number_integer(), "an integer");
      *integer->second = value.get<int64_t>();
    } else if (flag != flags.end()) {
      expect(value.is_boolean(), "true or false");
      *flag->second = value.get<bool>();
    } else if (key == "dropout") {
      expect(value.is_number(), "a number");
      c.dropout = value.get<double>();
    } else {
      BRIGADE_THROW(ValueError, "GPTConfig.from_json: unknown field '", key, "'");
    }
  }
  c.validate();
  return c;
}

// ---- Embeddings, Head -------------------------------------------------------------------------------------

Embeddings::Embeddings(int64_t vocab_size, int64_t block_size, int64_t embd, double dropout,
                       Generator* generator)
    : Module("Embeddings") {
  wte_ = register_module("wte", std::make_shared<Embedding>(vocab_size, embd, generator));
  wpe_ = register_module("wpe", std::make_shared<Embedding>(block_size, embd, generator));
  drop_ = register_module("drop", std::make_shared<Dropout>(dropout));
}

Tensor Embeddings::forward(const Tensor& ids) {
  BRIGADE_CHECK_SHAPE(ids.dim() == 2, "Embeddings: expected token ids [B, T], found ",
                      shape_str(ids.shape()));
  BRIGADE_CHECK_DTYPE(ids.dtype() == kInt64 || ids.dtype() == kInt32,
                      "Embeddings: token ids must be int64 or "
                      "int32, found ",
                      dtype_name(ids.dtype()));
  const int64_t T = ids.size(1);
  BRIGADE_CHECK_VALUE(T <= wpe_->num_embeddings(), "Embeddings: sequence length ", T, " exceeds block_size ",
                      wpe_->num_embeddings());
  Tensor positions = arange(0, T, 1, TensorOptions(kInt64).device(ids.device()));
  // [B, T, C] + [T, C] (broadcast over the batch)
  return (*drop_)((*wte_)(ids) + (*wpe_)(positions));
}

Head::Head(int64_t embd, int64_t vocab_size, bool bias, Generator* generator) : Module("Head") {
  ln_f_ = register_module("ln_f", std::make_shared<LayerNorm>(embd, 1e-5, bias));
  lm_head_ = register_module("lm_head", std::make_shared<Linear>(embd, vocab_size, false, generator));
}

Tensor Head::forward(const Tensor& x) {
  return (*lm_head_)((*ln_f_)(x));
}

// ---- GPT
// ----------------------------------------------------------------------------------------------------

GPT::GPT(const GPTConfig& config, uint64_t seed) : Sequential("GPT"), config_(config) {
  config_.validate();
  // The layers' own default initialisation draws from a private generator (not the process-wide one, so
  // building a model does not shift anybody's random numbers); init_weights then replaces it all.
  Generator scratch(seed);
  const GPTConfig& c = config_;
  embed_ = std::make_shared<Embeddings>(c.vocab_size, c.block_size, c.n_embd, c.dropout, &scratch);
  push_back("embed", embed_);
  for (int64_t i = 0; i < c.n_layer; ++i) {
    blocks_.push_back(std::make_shared<Block>(c.n_embd, c.n_head, c.dropout, c.bias, &scratch));
    push_back("blocks." + std::to_string(i), blocks_.back());
  }
  head_ = std::make_shared<Head>(c.n_embd, c.vocab_size, c.bias, &scratch);
  push_back("head", head_);
  if (c.tie_weights) head_->lm_head()->set_parameter("weight", embed_->wte()->weight());
  init_weights(seed);
}

Block& GPT::block(int64_t i) {
  BRIGADE_CHECK_VALUE(i >= 0 && i < config_.n_layer, "GPT::block(", i, "): index outside [0, ",
                      config_.n_layer, ")");
  return *blocks_[static_cast<size_t>(i)];
}

void GPT::init_weights(uint64_t seed) {
  Generator generator(seed);
  const double std = 0.02;
  const double residual_std = 0.02 / std::sqrt(2.0 * static_cast<double>(config_.n_layer));
  auto ends_with = [](const std::string& s, const std::string& suffix) {
    return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  // Walk the parameters in named_parameters() order (each distinct tensor once: a tied weight is drawn
  // once, as the token embedding) and decide each one's rule by the module that owns it.
  std::vector<std::pair<std::string, Module*>> modules = named_modules();
  NoGradGuard no_grad;
  for (auto& [name, param] : named_parameters()) {
    const size_t dot = name.rfind('.');
    const std::string owner = name.substr(0, dot), leaf = name.substr(dot + 1);
    Module* module = nullptr;
    for (auto& [module_name, m] : modules) {
      if (module_name == owner) module = m;
    }
    Tensor target = param.detach();
    if (dynamic_cast<LayerNorm*>(module) != nullptr) {
      target.fill_(leaf == "weight" ? 1.0 : 0.0);
    } else if (leaf == "bias") {
      target.zero_();
    } else {
      const bool residual = ends_with(owner, "attn.proj") || ends_with(owner, "mlp.proj");
      Tensor draw = randn(param.shape(), TensorOptions(param.dtype()).device(param.device()), &generator);
      kernels::mul_(draw, residual ? residual_std : std);
      target.copy_(draw);
    }
  }
}

Tensor GPT::loss(const Tensor& logits, const Tensor& targets) {
  BRIGADE_CHECK_SHAPE(logits.dim() == 3 && targets.dim() == 2 && logits.size(0) == targets.size(0) &&
                          logits.size(1) == targets.size(1),
                      "GPT::loss: expected logits [B, T, V] and targets [B, T], found ",
                      shape_str(logits.shape()), " and ", shape_str(targets.shape()));
  const int64_t V = logits.size(2);
  return cross_entropy(logits.reshape({-1, V}), targets.reshape({-1}));
}

int64_t sample_token(const std::vector<float>& logits, double temperature, int64_t top_k, double uniform) {
  BRIGADE_CHECK_VALUE(!logits.empty(), "sample_token: empty logits");
  BRIGADE_CHECK_VALUE(temperature >= 0.0, "sample_token: temperature must be >= 0, found ", temperature);
  BRIGADE_CHECK_VALUE(top_k >= 0, "sample_token: top_k must be >= 0, found ", top_k);
  const int64_t V = static_cast<int64_t>(logits.size());
  if (temperature == 0.0) {
    return static_cast<int64_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
  }
  float threshold = -std::numeric_limits<float>::infinity();
  if (top_k > 0 && top_k < V) {
    std::vector<float> sorted = logits;
    std::nth_element(sorted.begin(), sorted.begin() + (top_k - 1), sorted.end(), std::greater<float>());
    threshold = sorted[static_cast<size_t>(top_k - 1)];
  }
  const float top = *std::max_element(logits.begin(), logits.end());
  std::vector<double> weights(logits.size(), 0.0);
  double total = 0.0;
  for (size_t i = 0; i < logits.size(); ++i) {
    if (logits[i] >= threshold) {
      weights[i] = std::exp((static_cast<double>(logits[i]) - top) / temperature);
      total += weights[i];
    }
  }
  const double target = uniform * total;
  double cumulative = 0.0;
  int64_t last = 0;
  for (size_t i = 0; i < weights.size(); ++i) {
    if (weights[i] <= 0.0) continue;
    cumulative += weights[i];
    last = static_cast<int64_t>(i);
    if (target < cumulative) return last;
  }
  return last;  // uniform * total rounded up to the total: the last candidate
}

Tensor GPT::generate(const Tensor& ids, int64_t max_new_tokens, double temperature, int64_t top_k,
                     Generator* generator, const std::function<Tensor(const Tensor& ids)>& forward_fn) {
  BRIGADE_CHECK_SHAPE(ids.dim() == 2 && ids.size(0) > 0 && ids.size(1) > 0,
                      "GPT::generate: expected ids [B, T] with B, T >= 1, found ", shape_str(ids.shape()));
  BRIGADE_CHECK_DTYPE(ids.dtype() == kInt64 || ids.dtype() == kInt32,
                      "GPT::generate: ids must be int64 or int32, "
                      "found ",
                      dtype_name(ids.dtype()));
  BRIGADE_CHECK_VALUE(max_new_tokens >= 0, "GPT::generate: max_new_tokens must be >= 0, found ",
                      max_new_tokens);
  BRIGADE_CHECK_VALUE(temperature >= 0.0, "GPT::generate: temperature must be >= 0, found ", temperature);
  BRIGADE_CHECK_VALUE(top_k >= 0, "GPT::generate: top_k must be >= 0, found ", top_k);

  struct ModeRestore {
    Module& m;
    bool training;
    ~ModeRestore() { m.train(training); }
  } restore{*this, is_training()};
  eval();
  NoGradGuard no_grad;

  const Device device = ids.device();
  const int64_t B = ids.size(0);
  int64_t length = ids.size(1);
  const int64_t total = length + max_new_tokens;
  std::vector<int64_t> host = ids.to(kInt64).to_vector<int64_t>();  // [B, length], grows to [B, total]
  std::vector<int64_t> tokens(static_cast<size_t>(B * total));
  for (int64_t b = 0; b < B; ++b) {
    std::copy_n(host.begin() + b * length, length, tokens.begin() + b * total);
  }
  for (; length < total; ++length) {
    const int64_t context = std::min(length, config_.block_size);
    std::vector<int64_t> window(static_cast<size_t>(B * context));
    for (int64_t b = 0; b < B; ++b) {
      std::copy_n(tokens.begin() + b * total + (length - context), context, window.begin() + b * context);
    }
    const Tensor window_ids = from_vector(window, {B, context}, device);
    Tensor logits = forward_fn ? forward_fn(window_ids) : forward(window_ids);  // [B, context, V]
    // [B, V]; float32 also when autocast made the logits bf16
    std::vector<float> last = logits.select(1, context - 1).to(kFloat32).to_vector<float>();
    std::vector<double> uniforms = rand({B}, TensorOptions(kFloat64), generator).to_vector<double>();
    const int64_t V = logits.size(2);
    for (int64_t b = 0; b < B; ++b) {
      std::vector<float> row(last.begin() + b * V, last.begin() + (b + 1) * V);
      tokens[static_cast<size_t>(b * total + length)] = sample_token(row, temperature, top_k, uniforms[b]);
    }
  }
  return from_vector(tokens, {B, total}, device);
}

}  // namespace brigade::nn
