// The basic layers: Linear, Embedding, LayerNorm, GELU, Dropout.
//
// Each layer reads its parameters through its slots (weight(), bias()), so it keeps working after
// Module::to(). Default initialisations follow PyTorch (Linear: U(-1/sqrt(in), 1/sqrt(in)); Embedding:
// N(0, 1); LayerNorm: weight 1, bias 0); models re-initialise as they need (GPT uses GPT-2's scheme). The
// optional generator only feeds the initial draw; nullptr uses the process-wide default generator.
//
// \code
//   brigade::nn::Linear fc(768, 3072);          // weight [3072, 768], bias [3072]
//   brigade::Tensor y = fc(x);                  // x [B, T, 768] -> y [B, T, 3072]
// \endcode
#pragma once

#include <cstdint>

#include "nn/module.h"
#include "tensor/generator.h"
#include "tensor/tensor.h"

namespace brigade::nn {

/// y = x W^T + b over the last dim of x (any rank >= 1); W is [out, in], b is [out].
class Linear : public Module {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias = true, Generator* generator = nullptr);
  Tensor forward(const Tensor& x) override;
  /// x W^T alone, without the bias: for a caller that fuses the bias into the op that follows
  /// (MLP: bias_gelu).
  Tensor forward_without_bias(const Tensor& x);

  Tensor& weight() { return *weight_; }
  /// An undefined tensor when built without bias.
  const Tensor& bias() const { return bias_ ? *bias_ : none_; }
  bool has_bias() const { return bias_ != nullptr; }
  int64_t in_features() const { return in_; }
  int64_t out_features() const { return out_; }

 private:
  int64_t in_, out_;
  Tensor* weight_ = nullptr;
  Tensor* bias_ = nullptr;
  Tensor none_;

  /// x W^T, plus the bias when with_bias.
  Tensor project(const Tensor& x, bool with_bias);
};

/// Rows of a [num_embeddings, dim] table at int32/int64 ids of any shape -> [..., dim].
class Embedding : public Module {
 public:
  Embedding(int64_t num_embeddings, int64_t dim, Generator* generator = nullptr);
  Tensor forward(const Tensor& ids) override;

  Tensor& weight() { return *weight_; }
  int64_t num_embeddings() const { return num_; }
  int64_t dim() const { return dim_; }

 private:
  int64_t num_, dim_;
  Tensor* weight_ = nullptr;
};

/// Normalises over the last dim (size `dim`), then scales by weight and (optionally) shifts by bias.
class LayerNorm : public Module {
 public:
  explicit LayerNorm(int64_t dim, double eps = 1e-5, bool bias = true);
  Tensor forward(const Tensor& x) override;

  Tensor& weight() { return *weight_; }
  const Tensor& bias() const { return bias_ ? *bias_ : none_; }
  bool has_bias() const { return bias_ != nullptr; }
  double eps() const { return eps_; }

 private:
  double eps_;
  Tensor* weight_ = nullptr;
  Tensor* bias_ = nullptr;
  Tensor none_;
};

/// GELU, tanh approximation (GPT-2's).
class GELU : public Module {
 public:
  GELU() : Module("GELU") {}
  Tensor forward(const Tensor& x) override;
};

/// In training mode zeroes each element with probability p and scales the rest by 1 / (1 - p); in eval
/// mode (or with p == 0) it returns its input unchanged and draws nothing from the generator.
class Dropout : public Module {
 public:
  /// @param p in [0, 1).
  /// @param generator the generator masks are drawn from (nullptr: the process-wide default). Give each
  ///        pipeline stage its own; see set_dropout_generator.
  explicit Dropout(double p = 0.0, Generator* generator = nullptr);
  Tensor forward(const Tensor& x) override;

  double p() const { return p_; }
  Generator* generator() const { return generator_; }
  void set_generator(Generator* generator) { generator_ = generator; }

 private:
  double p_;
  Generator* generator_;
};

/// Points every Dropout in `root` (recursively) at `generator` (nullptr: the default generator).
void set_dropout_generator(Module& root, Generator* generator);

}  // namespace brigade::nn
