// The plain reference of every raw op of kernels/kernels.h: loops over logical indices, in double, with no
// vectorisation, no threads and no blocking, so that each function can be checked against its formula by
// reading it. The optimised CPU backend (kernels/cpu/) and every CUDA kernel version (kernels/cuda/) are
// tested against these (tests/ops/), and a kernel lab can call them directly.
//
// Conventions
//  - Inputs may have any dtype, strides or device: a reference reads their logical (row-major) values as
//    double. Inputs are assumed to satisfy what kernels.h asks of the op (the dispatch layer checks that);
//    a reference checks only what it needs to stay in bounds.
//  - Outputs are new contiguous CPU tensors in float64 (int64 for indices and counts), whatever the op's
//    own output dtype: the test decides how far the op's rounding may move it.
//  - Accumulation is in double in the obvious order (left to right over the reduced index).
//  - Same names and shapes as kernels.h; in-place ops (add_, mul_, adamw_update) return the new values.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/kernels.h"
#include "tensor/tensor.h"

namespace brigade::kernels::reference {

// ---- elementwise (elementwise.cpp) ------------------------------------------------------------------------
/// op(x) by its textbook formula (gelu: the tanh form).
double unary(UnaryOp op, double x);
/// d op(x) / dx as kernels.h documents it: from the output y for exp, sqrt, rsqrt, tanh and sigmoid (so that
/// a backward given a rounded y is checked against that y), from x for the others.
double unary_derivative(UnaryOp op, double x, double y);
double binary(BinaryOp op, double a, double b);

Tensor unary(UnaryOp op, const Tensor& x);
/// grad_y * unary_derivative(op, x, y), elementwise; all three of one shape.
Tensor unary_backward(UnaryOp op, const Tensor& grad_y, const Tensor& x, const Tensor& y);
/// NumPy broadcasting: the shapes are aligned at the last dim and size-1 dims are repeated.
Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b);
Tensor binary(BinaryOp op, const Tensor& a, double scalar);
Tensor binary(BinaryOp op, double scalar, const Tensor& b);
/// cond != 0 ? a : b, all three broadcast together.
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
/// x with `value` where mask (broadcast to x's shape) is non-zero.
Tensor masked_fill(const Tensor& x, const Tensor& mask, double value);

// ---- reductions (reduce.cpp) ------------------------------------------------------------------------------
/// Over `dims` (empty: every dim; negative dims count from the end). Mean of nothing is NaN (0 / 0), max
/// of nothing is -inf.
Tensor sum(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false);
Tensor mean(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false);
Tensor max(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false);
/// int64 index of the first maximum along `dim`.
Tensor argmax(const Tensor& x, int64_t dim, bool keepdim = false);
/// Sums x back to `shape`, a shape x broadcasts from (the backward of broadcasting).
Tensor sum_to(const Tensor& x, const Shape& shape);

// ---- matmul (matmul.cpp) ----------------------------------------------------------------------------------
struct MatmulReference {
  Tensor c;          ///< op(a) @ op(b): [M, N] or [B, M, N]
  Tensor magnitude;  ///< sum_k |op(a)_ik op(b)_kj|, c's shape: the scale of c's rounding error
};
/// The triple loop, with kernels::matmul's shape rules (a 2-d operand is shared by the batch).
MatmulReference matmul(const Tensor& a, const Tensor& b, bool transpose_a = false, bool transpose_b = false);

// ---- softmax (softmax.cpp) --------------------------------------------------------------------------------
/// Over the last dim, with the row max subtracted first.
Tensor softmax(const Tensor& x);
Tensor log_softmax(const Tensor& x);
/// dx = y (dy - sum(dy y)), y = softmax(x).
Tensor softmax_backward(const Tensor& grad_y, const Tensor& y);
/// dx = dy - exp(y) sum(dy), y = log_softmax(x).
Tensor log_softmax_backward(const Tensor& grad_y, const Tensor& y);

// ---- layernorm (layernorm.cpp) ----------------------------------------------------------------------------
/// mean, variance (two passes) and rstd per row of the last dim; y = xhat * weight + bias (either may be
/// undefined). mean and rstd have x's shape without its last dim.
LayerNormOutput layernorm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps = 1e-5);
/// dx, and dweight (when weight is defined) and dbias (when has_bias) summed over the rows.
LayerNormGrads layernorm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& mean,
                                  const Tensor& rstd, bool has_bias);

// ---- fused causal attention (attention.cpp) ---------------------------------------------------------------
/// q, k, v [B, H, T, D]: the [T, T] scores of each (b, h) row by row, as kernels.h writes the formula.
AttentionOutput causal_attention(const Tensor& q, const Tensor& k, const Tensor& v, double scale);
/// The gradients from the probabilities p_ij = exp(s_ij - lse_i) recomputed with the given lse, and
/// delta_i = dout_i . out_i with the given out.
AttentionGrads causal_attention_backward(const Tensor& dout, const Tensor& q, const Tensor& k,
                                         const Tensor& v, const Tensor& out, const Tensor& lse, double scale);

// ---- embedding and loss (embedding.cpp, loss.cpp) ---------------------------------------------------------
/// weight [V, C] rows at ids (any shape) -> [..., C]. Throws ValueError for an id outside [0, V).
Tensor embedding(const Tensor& weight, const Tensor& ids);
/// grad_out [..., C] summed into [num_embeddings, C] at ids, in position order.
Tensor embedding_backward(const Tensor& grad_out, const Tensor& ids, int64_t num_embeddings);
/// logits [..., V], targets [...]: the mean loss over targets != ignore_index (0 when there are none), the
/// count, and (with compute_grad) (softmax - onehot) / count, 0 on ignored rows.
CrossEntropyOutput cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index = -100,
                                 bool compute_grad = true);

// ---- random and masks (random.cpp) ------------------------------------------------------------------------
/// x_i / (1 - p) where philox::uniform(state, i) >= p (i in row-major order), else 0; p = 1 drops all.
Tensor dropout(const Tensor& x, double p, const GeneratorState& state);
/// [T, T]: 1 above the diagonal, 0 elsewhere.
Tensor causal_mask(int64_t T);

// ---- fused ops (fused.cpp): the unfused references in turn --------------------------------------------
/// gelu(h) with h = x + bias rounded to x's dtype first (kernels.h: bias_gelu stores no h, but rounds it).
Tensor bias_gelu(const Tensor& x, const Tensor& bias);
/// dx = dy * gelu'(h) (h as above) and dbias = dx summed over the leading dims (of dx rounded to x's dtype,
/// as the op sums the dx it returns).
BiasGeluGrads bias_gelu_backward(const Tensor& dy, const Tensor& x, const Tensor& bias);
/// sum = x + residual, and layernorm of that sum rounded to x's dtype (the op normalises the sum it stores).
AddLayerNormOutput add_layernorm(const Tensor& x, const Tensor& residual, const Tensor& weight,
                                 const Tensor& bias, double eps = 1e-5);

// ---- optimizer math (optim.cpp) ---------------------------------------------------------------------------
struct AdamWResult {
  Tensor param, m, v;  ///< the values after the step
};
/// One AdamW step (kernels.h: adamw_update) on copies of param, m, v.
AdamWResult adamw_update(const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v,
                         const AdamWStep& step);
/// adamw_update on each entry in turn.
std::vector<AdamWResult> adamw_update_all(const std::vector<AdamWTensors>& tensors);
/// sqrt of the sum of squares of every element of every defined tensor (0 for none).
double global_l2_norm(const std::vector<Tensor>& tensors);

}  // namespace brigade::kernels::reference
