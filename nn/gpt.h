// GPT: a GPT-2-style decoder-only transformer, built as a Sequential of depth-ordered layers.
//
//   layer 0            "embed"     Embeddings: ids [B, T] (int64/int32) -> wte[ids] + wpe[0..T) -> dropout
//   layers 1 .. N      "blocks.i"  Block (pre-norm attention + MLP), [B, T, C] -> [B, T, C]
//   layer N + 1        "head"      Head: final LayerNorm, then the LM head Linear (no bias) -> logits [B, T,
//   V]
//
// The pipeline cuts exactly this list into stages (Sequential::forward_range). Parameter names are
//   embed.wte.weight [V, C], embed.wpe.weight [block_size, C],
//   blocks.i.ln1.{weight,bias}, blocks.i.attn.qkv.{weight [3C, C], bias}, blocks.i.attn.proj.{weight, bias},
//   blocks.i.ln2.{weight,bias}, blocks.i.mlp.fc.{weight [4C, C], bias}, blocks.i.mlp.proj.{weight, bias},
//   head.ln_f.{weight,bias}, head.lm_head.weight [V, C]
// (no biases anywhere with config.bias == false). With tie_weights the LM head's weight IS the token
// embedding tensor: it appears once, as "embed.wte.weight", and "head.lm_head.weight" is not a key of
// state_dict(); its gradient is the sum of both uses.
//
// Initialisation (GPT-2, as nanoGPT): every Linear and Embedding weight ~ N(0, 0.02), the residual
// projections (attn.proj, mlp.proj) ~ N(0, 0.02 / sqrt(2 * n_layer)), biases 0, LayerNorm weights 1.
// The draws come from a Generator seeded with `seed`, one draw per tensor in named_parameters() order, so
// a seed gives the same weights every time and on every device.
//
// \code
//   brigade::nn::GPTConfig config;
//   config.vocab_size = 65; config.block_size = 128; config.n_layer = 4; config.n_head = 4; config.n_embd =
//   128; brigade::nn::GPT model(config, /*seed=*/1337); model.to(brigade::Device::cuda()); brigade::Tensor
//   logits = model.forward(ids);               // [B, T, V] brigade::Tensor loss =
//   brigade::nn::GPT::loss(logits, targets); loss.backward();
// \endcode
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "nn/block.h"
#include "nn/layers.h"
#include "nn/sequential.h"
#include "tensor/generator.h"

namespace brigade::nn {

struct GPTConfig {
  int64_t vocab_size = 0;   ///< must be set (the tokenizer's vocabulary size)
  int64_t block_size = 64;  ///< longest context (number of learned positions)
  int64_t n_layer = 4;
  int64_t n_head = 4;
  int64_t n_embd = 128;     ///< C; n_head must divide it
  double dropout = 0.0;     ///< in [0, 1): embeddings, attention weights, residual outputs
  bool tie_weights = true;  ///< LM head shares the token embedding
  bool bias = true;         ///< biases in Linear and LayerNorm layers

  /// Throws ValueError naming the first field that is out of range and its value.
  void validate() const;
  /// One JSON object with every field, e.g. {"bias":true,"block_size":64,...}.
  std::string to_json() const;
  /// Parses to_json()'s output. Missing fields keep their defaults; unknown fields, wrong types and
  /// invalid values are ValueErrors naming the field. The result is validated.
  static GPTConfig from_json(const std::string& text);

  friend bool operator==(const GPTConfig&, const GPTConfig&) = default;
};

/// Layer 0: token + learned position embedding, then dropout. ids [B, T] with T <= block_size.
class Embeddings : public Module {
 public:
  Embeddings(int64_t vocab_size, int64_t block_size, int64_t embd, double dropout,
             Generator* generator = nullptr);
  Tensor forward(const Tensor& ids) override;

  const std::shared_ptr<Embedding>& wte() const { return wte_; }
  const std::shared_ptr<Embedding>& wpe() const { return wpe_; }

 private:
  std::shared_ptr<Embedding> wte_, wpe_;
  std::shared_ptr<Dropout> drop_;
};

/// Last layer: final LayerNorm and the LM head (a Linear without bias) -> logits [B, T, V].
class Head : public Module {
 public:
  Head(int64_t embd, int64_t vocab_size, bool bias, Generator* generator = nullptr);
  Tensor forward(const Tensor& x) override;

  const std::shared_ptr<LayerNorm>& ln_f() const { return ln_f_; }
  const std::shared_ptr<Linear>& lm_head() const { return lm_head_; }

 private:
  std::shared_ptr<LayerNorm> ln_f_;
  std::shared_ptr<Linear> lm_head_;
};

class GPT : public Sequential {
 public:
  /// Builds the model on the CPU in float32 (move it with to()) and initialises it from `seed`.
  explicit GPT(const GPTConfig& config, uint64_t seed = 0);

  const GPTConfig& config() const { return config_; }
  Embeddings& embeddings() { return *embed_; }
  Block& block(int64_t i);
  Head& head() { return *head_; }

  /// Re-draws every parameter with GPT-2's initialisation (see the header comment) from `seed`, on the
  /// parameters' current device.
  void init_weights(uint64_t seed);

  /// Mean cross-entropy of logits [B, T, V] against targets [B, T] (int64/int32; -100 is ignored).
  static Tensor loss(const Tensor& logits, const Tensor& targets);

  /// Extends each row of ids [B, T] (int64, T >= 1) by max_new_tokens sampled tokens -> [B, T + new]
  /// (int64, on ids' device). Each step feeds the last block_size tokens and samples on the CPU from the
  /// last position's logits: temperature 0 picks the argmax (greedy); otherwise softmax(logits /
  /// temperature) restricted to the top_k most likely tokens (top_k 0: all). Runs without grad and in
  /// eval mode (the previous mode is restored). `generator` (default: the process-wide one) draws one
  /// uniform per row per step.
  /// `forward` computes the logits of a window (default: this model's forward); a pipeline passes its
  /// forward-only pass (pipeline/run/executor.h: Pipeline::forward) for a model spread over devices.
  Tensor generate(const Tensor& ids, int64_t max_new_tokens, double temperature = 1.0, int64_t top_k = 0,
                  Generator* generator = nullptr,
                  const std::function<Tensor(const Tensor& ids)>& forward = {});

 private:
  GPTConfig config_;
  std::shared_ptr<Embeddings> embed_;
  std::vector<std::shared_ptr<Block>> blocks_;
  std::shared_ptr<Head> head_;
};

/// Samples one token id from a row of logits (the rule GPT::generate uses): temperature 0 -> argmax;
/// otherwise softmax(logits / temperature) over the top_k largest (0: all; ties at the k-th value are
/// kept), inverted at `uniform` in [0, 1).
int64_t sample_token(const std::vector<float>& logits, double temperature, int64_t top_k, double uniform);

}  // namespace brigade::nn
