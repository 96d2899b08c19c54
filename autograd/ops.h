// Differentiable ops: the functions models are written with.
//
// Each op computes its result with the raw kernels (kernels/kernels.h) and, when grad mode is on and an
// input requires grad, records a node whose backward sits next to the forward in ops.cpp. Shapes follow
// NumPy broadcasting; the gradient of a broadcast input is summed back to its shape. Views (reshape,
// permute, narrow, expand, ...) are Tensor methods and are differentiable too.
//
// \code
//   auto w = brigade::randn({4, 3}).set_requires_grad();
//   auto x = brigade::randn({8, 4});
//   auto loss = brigade::mean(brigade::relu(brigade::matmul(x, w)) * 2.0);
//   loss.backward();  // w.grad() is [4, 3]
// \endcode
#pragma once

#include <cstdint>
#include <vector>

#include "autograd/engine.h"
#include "tensor/generator.h"
#include "tensor/tensor.h"

namespace brigade {

// ---- unary -----------------------------------------------------------------------------------------------
Tensor neg(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor rsqrt(const Tensor& x);
Tensor tanh(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor relu(const Tensor& x);
/// GELU, tanh approximation (as GPT-2).
Tensor gelu(const Tensor& x);
/// |x|; its gradient at 0 is 0.
Tensor abs(const Tensor& x);

// ---- binary (broadcasting) -------------------------------------------------------------------------------
Tensor add(const Tensor& a, const Tensor& b);
Tensor add(const Tensor& a, double b);
Tensor add(double a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, double b);
Tensor sub(double a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, double b);
Tensor mul(double a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, double b);
Tensor div(double a, const Tensor& b);
/// Elementwise maximum. Where a == b the gradient is split equally between the two.
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor maximum(const Tensor& a, double b);
Tensor maximum(double a, const Tensor& b);
/// a ^ b. The gradient w.r.t. the exponent, y * log(a), is 0 where a == 0 and NaN where a < 0.
Tensor pow(const Tensor& a, const Tensor& b);
Tensor pow(const Tensor& a, double b);
Tensor pow(double a, const Tensor& b);

Tensor operator-(const Tensor& x);
Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator+(const Tensor& a, double b);
Tensor operator+(double a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, double b);
Tensor operator-(double a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, double b);
Tensor operator*(double a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, double b);
Tensor operator/(double a, const Tensor& b);

// ---- comparisons (not differentiable: the result holds 1 or 0 in the input dtype, never requires grad) --
Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
Tensor eq(const Tensor& a, double b);
Tensor ne(const Tensor& a, double b);
Tensor lt(const Tensor& a, double b);
Tensor le(const Tensor& a, double b);
Tensor gt(const Tensor& a, double b);
Tensor ge(const Tensor& a, double b);

// ---- selection --------------------------------------------------------------------------------------------
/// cond ? a : b, broadcast together; cond (any dtype, non-zero is true) gets no gradient.
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
/// x with `value` where mask (broadcast to x) is non-zero; those positions get no gradient.
Tensor masked_fill(const Tensor& x, const Tensor& mask, double value);

// ---- reductions -------------------------------------------------------------------------------------------
/// Sum over `dims` (empty: every dim).
Tensor sum(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false);
Tensor mean(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false);
/// Maximum over `dims` (empty: every dim). The gradient goes to the first position (row-major order over
/// the reduced dims) that holds the maximum; other ties get 0.
Tensor max(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false);

// ---- linear algebra ---------------------------------------------------------------------------------------
/// op(a) @ op(b), op transposing the last two dims when its flag is set; a [M,K] or [B,M,K], b [K,N] or
/// [B,K,N] (a 2-d operand is shared by the whole batch). The backward uses the flags too, so no
/// transposed copy is ever made.
Tensor matmul(const Tensor& a, const Tensor& b, bool transpose_a = false, bool transpose_b = false);
/// op(a) @ op(b) + bias, bias [N] on every row: a Linear with its bias, one node. The values and the
/// gradients are those of matmul() then add() (the bias's gradient is g summed over the rows); on the CPU
/// the GEMM adds the bias as it stores C, where the add would read and write C once more.
Tensor matmul_bias(const Tensor& a, const Tensor& b, const Tensor& bias, bool transpose_a = false,
                   bool transpose_b = false);

// ---- normalisation, activations over a row ----------------------------------------------------------------
/// Softmax over the last dim.
Tensor softmax(const Tensor& x);
/// log(softmax(x)) over the last dim, computed stably.
Tensor log_softmax(const Tensor& x);
/// Normalises over the last dim, then scales by weight and shifts by bias ([C] each; either may be an
/// undefined Tensor).
Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps = 1e-5);

// ---- fused ops (kernels.h: one pass on the CPU, the bits of the unfused ops) -----------------------------
/// gelu(x + bias): x [..., C], bias [C]. What an MLP's first Linear and its GELU compute (the Linear run
/// without its bias); saves x and bias (as the unfused add + gelu save h = x + bias) and recomputes the sum
/// in backward, which writes dx and the bias gradient in one pass.
Tensor bias_gelu(const Tensor& x, const Tensor& bias);
/// x + residual and the layer norm of that sum, computed in one pass: a transformer block's second residual
/// add and the norm that follows it. The gradients are those of add() then layer_norm() (two nodes).
struct AddLayerNorm {
  Tensor sum;   ///< x + residual
  Tensor norm;  ///< layer_norm(sum, weight, bias, eps)
};
AddLayerNorm add_layer_norm(const Tensor& x, const Tensor& residual, const Tensor& weight, const Tensor& bias,
                            double eps = 1e-5);

// ---- embedding, loss, dropout -----------------------------------------------------------------------------
/// Rows of weight [V, C] at ids (int32/int64, any shape) -> [..., C]. Only weight gets a gradient.
Tensor embedding(const Tensor& weight, const Tensor& ids);
/// Mean cross-entropy of logits [N, V] against targets [N], over targets != ignore_index (a 0-d tensor,
/// float32 for bfloat16 logits). The gradient w.r.t. the logits is computed in the forward (fused with
/// log-softmax) and scaled by the incoming gradient in backward.
Tensor cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index = -100);
/// In training, zeroes each element with probability p and scales the rest by 1 / (1 - p); otherwise (or
/// with p == 0) returns x itself. Only the generator state of the draw is saved: backward regenerates the
/// same mask. `generator` defaults to the process-wide one.
Tensor dropout(const Tensor& x, double p, bool training, Generator* generator = nullptr);

}  // namespace brigade
