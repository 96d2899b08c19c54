#include "nn/layers.h"

#include <cmath>

#include "autograd/autocast.h"
#include "autograd/ops.h"
#include "kernels/kernels.h"
#include "tensor/error.h"
#include "tensor/grad_mode.h"

namespace brigade::nn {

// ---- Linear ---------------------------------------------------------------------------------------------

Linear::Linear(int64_t in_features, int64_t out_features, bool bias, Generator* generator)
    : Module("Linear"), in_(in_features), out_(out_features) {
  BRIGADE_CHECK_VALUE(in_features > 0 && out_features > 0,
                      "Linear: in_features and out_features must be "
                      "positive, found ",
                      in_features, " and ", out_features);
  const double bound = 1.0 / std::sqrt(static_cast<double>(in_features));
  auto uniform = [&](const Shape& shape) {
    Tensor u = rand(shape, {}, generator);  // [0, 1)
    NoGradGuard no_grad;
    return kernels::binary(kernels::BinaryOp::Sub, kernels::binary(kernels::BinaryOp::Mul, u, 2.0 * bound),
                           bound);
  };
  weight_ = &register_parameter("weight", uniform({out_features, in_features}));
  if (bias) bias_ = &register_parameter("bias", uniform({out_features}));
}

Tensor Linear::project(const Tensor& x, bool with_bias) {
  BRIGADE_CHECK_SHAPE(x.dim() >= 1 && x.size(-1) == in_, "Linear: expected input [..., ", in_, "], found ",
                      shape_str(x.shape()));
  // One GEMM over every leading position: [N, in] @ W^T (W stays [out, in]; the flag avoids a transpose).
  // The bias is added by the GEMM as it stores each tile (matmul_bias: the bits of matmul then add). Under
  // autocast it joins the bf16 product in bf16 (as PyTorch's autocast linear); its gradient comes back
  // through the cast in fp32.
  const bool flat = x.dim() == 2;
  Tensor x2 = flat ? x : x.reshape({-1, in_});
  Tensor y = with_bias ? matmul_bias(x2, *weight_, *bias_, false, true) : matmul(x2, *weight_, false, true);
  if (flat) return y;
  Shape out_shape = x.shape();
  out_shape.back() = out_;
  return y.view(out_shape);
}

Tensor Linear::forward_without_bias(const Tensor& x) {
  return project(x, false);
}

Tensor Linear::forward(const Tensor& x) {
  return project(x, bias_ != nullptr);
}

// ---- Embedding ------------------------------------------------------------------------------------------

Embedding::Embedding(int64_t num_embeddings, int64_t dim, Generator* generator)
    : Module("Embedding"), num_(num_embeddings), dim_(dim) {
  BRIGADE_CHECK_VALUE(num_embeddings > 0 && dim > 0,
                      "Embedding: num_embeddings and dim must be positive, "
                      "found ",
                      num_embeddings, " and ", dim);
  weight_ = &register_parameter("weight", randn({num_embeddings, dim}, {}, generator));
}

Tensor Embedding::forward(const Tensor& ids) {
  return embedding(*weight_, ids);
}

// ---- LayerNorm ------------------------------------------------------------------------------------------

LayerNorm::LayerNorm(int64_t dim, double eps, bool bias) : Module("LayerNorm"), eps_(eps) {
  BRIGADE_CHECK_VALUE(dim > 0, "LayerNorm: dim must be positive, found ", dim);
  BRIGADE_CHECK_VALUE(eps > 0.0, "LayerNorm: eps must be positive, found ", eps);
  weight_ = &register_parameter("weight", ones({dim}));
  if (bias) bias_ = &register_parameter("bias", zeros({dim}));
}

Tensor LayerNorm::forward(const Tensor& x) {
  BRIGADE_CHECK_SHAPE(x.dim() >= 1 && x.size(-1) == weight_->size(0), "LayerNorm: expected input [..., ",
                      weight_->size(0), "], found ", shape_str(x.shape()));
  return layer_norm(x, *weight_, bias_ ? *bias_ : Tensor(), eps_);
}

// ---- GELU, Dropout --------------------------------------------------------------------------------------

Tensor GELU::forward(const Tensor& x) {
  return gelu(x);
}

Dropout::Dropout(double p, Generator* generator) : Module("Dropout"), p_(p), generator_(generator) {
  BRIGADE_CHECK_VALUE(p >= 0.0 && p < 1.0, "Dropout: p must lie in [0, 1), found ", p);
}

Tensor Dropout::forward(const Tensor& x) {
  return dropout(x, p_, is_training(), generator_);
}

void set_dropout_generator(Module& root, Generator* generator) {
  root.apply([generator](Module& m) {
    if (auto* d = dynamic_cast<Dropout*>(&m)) d->set_generator(generator);
  });
}

}  // namespace brigade::nn
