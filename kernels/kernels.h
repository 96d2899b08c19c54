// brigade's raw ops: non-differentiable, dispatched on the device of their inputs.
//
// Each op checks its inputs (same device — never a silent copy —, matching dtypes, compatible shapes) and
// throws a typed error naming the op and what it found, allocates its output on the inputs' device, and
// runs the CPU backend (kernels/cpu/) or the hand-written CUDA kernel (kernels/cuda/) on the device's
// current stream; both are tested against the plain loops of kernels/reference/. The differentiable
// versions live in autograd/ops.h and call these. Where an op has several kernel versions, the banner below
// names each version's file and the kernels/<op>_versions.h that registers them (docs/ops.md lists them
// all); the op runs the default version of its backend.
//
// Conventions
//  - Floating ops accept float32, bfloat16 and float64 (float64 on the CPU only); bfloat16 math and
//    accumulation happen in float32.
//  - Inputs may be any strided view; outputs are new, contiguous tensors.
//  - Comparisons return the input dtype holding 1 or 0; `where`/`masked_fill` treat non-zero as true.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/attention_dropout.h"
#include "tensor/generator.h"
#include "tensor/tensor.h"

namespace brigade::kernels {

// ---- elementwise ------------------------------------------------------------------------------------------
// Dispatch elementwise.cpp. Versions (elementwise_versions.h): CPU v1-v2 cpu/elementwise.cpp (v2: AVX2
// GELU); CUDA v1 cuda/elementwise.cu, v2 cuda/elementwise_vec.cu. Formulas: elementwise_formulas.h.
enum class UnaryOp { Neg, Exp, Log, Sqrt, Rsqrt, Tanh, Sigmoid, Relu, Gelu, Abs };
/// "neg", "exp", ... "gelu" (tanh form), "abs".
const char* unary_op_name(UnaryOp op);
Tensor unary(UnaryOp op, const Tensor& x);
/// dL/dx of y = op(x) given dL/dy, the input x and the output y (each formula uses whichever is cheaper).
Tensor unary_backward(UnaryOp op, const Tensor& grad_y, const Tensor& x, const Tensor& y);

enum class BinaryOp { Add, Sub, Mul, Div, Maximum, Pow, Eq, Ne, Lt, Le, Gt, Ge };
const char* binary_op_name(BinaryOp op);
/// a op b with NumPy broadcasting; a and b must have the same dtype and device.
Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b);
/// a op scalar.
Tensor binary(BinaryOp op, const Tensor& a, double scalar);
/// scalar op b (for 1 - x, 1 / x, 2 ^ x).
Tensor binary(BinaryOp op, double scalar, const Tensor& b);
/// dst += src in place (src broadcast to dst's shape). Used for gradient accumulation.
void add_(const Tensor& dst, const Tensor& src);
/// dst *= scalar in place.
void mul_(const Tensor& dst, double scalar);
/// cond ? a : b, all three broadcast together; cond may have any dtype (non-zero is true).
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
/// x with `value` where mask (broadcast to x) is non-zero.
Tensor masked_fill(const Tensor& x, const Tensor& mask, double value);

// ---- reductions -------------------------------------------------------------------------------------------
// Dispatch reduce.cpp; one version per backend: cpu/reduce.cpp, cuda/reduce.cu.
/// Sum over `dims` (empty: all dims). keepdim leaves size-1 dims in place.
Tensor sum(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false);
Tensor mean(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false);
Tensor max(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false);
/// Index (int64) of the first maximum along `dim`.
Tensor argmax(const Tensor& x, int64_t dim, bool keepdim = false);
/// Sums a broadcast result back to `shape` (the backward of broadcasting).
Tensor sum_to(const Tensor& x, const Shape& shape);

// ---- matmul -----------------------------------------------------------------------------------------------
// Dispatch matmul.cpp. Versions (matmul_versions.h): CPU v1 cpu/matmul.cpp, v2 cpu/matmul_avx2_fma.cpp,
// v3 cpu/matmul_avx512.cpp, v4 cpu/matmul_avx512_bf16.cpp, the OpenBLAS baseline cpu/matmul_openblas.cpp;
// CUDA v1-v2 cuda/matmul.cu, v3-v4 cuda/matmul_sgemm.cu, v5 cuda/matmul_wmma.cu, v6
// cuda/matmul_wmma_async.cu, v7 cuda/matmul_mma.cu, v8 cuda/matmul_wgmma.cu; the cuBLAS baseline
// cuda/matmul_cublas.cu.
/// Which implementation matmuls use: brigade's own kernels (Native), or a vendor library as a baseline to
/// compare against, never substituted silently: Cublas changes what CUDA matmuls run (CPU ones stay
/// native), Blas changes what CPU matmuls run to OpenBLAS (CUDA ones stay native). Initial value from
/// BRIGADE_MATMUL_BACKEND=native|cublas|blas.
enum class MatmulBackend { Native, Cublas, Blas };
/// Throws DeviceError for Blas in a build without OpenBLAS (blas_available()).
void set_matmul_backend(MatmulBackend backend);
MatmulBackend matmul_backend();
/// "native", "cublas", "blas".
const char* matmul_backend_name(MatmulBackend backend);
/// Whether this build links OpenBLAS, so that MatmulBackend::Blas can be selected.
bool blas_available();
/// op(a) @ op(b) where op transposes the last two dims when the flag is set.
/// Shapes: a [M,K] or [B,M,K]; b [K,N] or [B,K,N] (a 2-d operand is broadcast over the batch).
/// Operands whose last two dims are row- or column-major views are used without copying.
Tensor matmul(const Tensor& a, const Tensor& b, bool transpose_a = false, bool transpose_b = false);
/// op(a) @ op(b) + bias, bias [N] added to every row: a Linear's forward. The bits are those of matmul
/// followed by binary(Add) (the product rounded to the dtype, then the add); the CPU GEMMs add the bias as
/// they store each tile, so C is written once. bias has the operands' dtype and device.
Tensor matmul_bias(const Tensor& a, const Tensor& b, const Tensor& bias, bool transpose_a = false,
                   bool transpose_b = false);

// ---- softmax ----------------------------------------------------------------------------------------------
// Dispatch softmax.cpp. Versions (softmax_versions.h): CPU v1 cpu/softmax.cpp; CUDA v1 cuda/softmax.cu,
// v2 cuda/softmax_warp.cu.
/// Softmax over the last dim (numerically stable: subtracts the row max).
Tensor softmax(const Tensor& x);
Tensor log_softmax(const Tensor& x);
/// dx = y * (dy - sum(dy * y)) with y = softmax(x).
Tensor softmax_backward(const Tensor& grad_y, const Tensor& y);
/// dx = dy - softmax(x) * sum(dy) with y = log_softmax(x).
Tensor log_softmax_backward(const Tensor& grad_y, const Tensor& y);

// ---- fused causal attention -------------------------------------------------------------------------------
// Dispatch attention.cpp. Versions (attention_versions.h): CPU v1-v2 cpu/attention.cpp (v2: AVX2);
// CUDA v1 cuda/attention.cu, v2 cuda/attention_flash.cu, v3-v4 cuda/attention_flash_tc.cu.
/// Forward of causal scaled-dot-product attention, per batch b and head h:
///   s_ij = scale * q_i . k_j for j <= i (a query sees itself and the past; later keys are masked out)
///   lse_i = log sum_{j<=i} exp(s_ij),   out_i = sum_{j<=i} exp(s_ij - lse_i) v_j
struct AttentionOutput {
  Tensor out;  ///< [B, H, T, D], q's dtype, contiguous
  Tensor lse;  ///< [B, H, T] log-sum-exp over keys of the scaled scores: float32 (float64 for float64 q)
};
/// q, k, v [B, H, T, D] (float32, bfloat16, float64; one dtype; any strides) -> out, lse. bfloat16 inputs
/// are computed in float32 and rounded once to bfloat16 for `out`. No [T, T] matrix is kept (the CPU
/// backend works row by row; CUDA keeps at most a row per query in shared memory).
/// With `dropout` (p > 0; kernels/attention_dropout.h for the mask), out_i = sum_{j<=i} m_ij exp(s_ij -
/// lse_i) v_j, m_ij the kept weights' 1 / (1 - p) and 0 for the dropped ones; lse stays the undropped
/// softmax's. CPU versions only (attention_kernel_supports_dropout); a CUDA tensor with p > 0 is refused.
AttentionOutput causal_attention(const Tensor& q, const Tensor& k, const Tensor& v, double scale,
                                 const AttentionDropout& dropout = {});
struct AttentionGrads {
  Tensor dq, dk, dv;  ///< [B, H, T, D] each, q's dtype, contiguous
};
/// Gradients of causal_attention given dout [B, H, T, D] and the forward's inputs, out and lse. The
/// probabilities are recomputed from q, k and lse: p_ij = exp(scale * q_i . k_j - lse_i), and with
/// delta_i = dout_i . out_i:  dv_j = sum_i p_ij dout_i,  ds_ij = p_ij (dout_i . v_j - delta_i),
/// dq_i = scale sum_j ds_ij k_j,  dk_j = scale sum_i ds_ij q_i. With the forward's `dropout`, the mask m_ij
/// is drawn again: dv_j = sum_i m_ij p_ij dout_i and ds_ij = p_ij (m_ij dout_i . v_j - delta_i).
AttentionGrads causal_attention_backward(const Tensor& dout, const Tensor& q, const Tensor& k,
                                         const Tensor& v, const Tensor& out, const Tensor& lse, double scale,
                                         const AttentionDropout& dropout = {});
/// The two above writing into the caller's tensors: out, dq, dk, dv are [B, H, T, D] views of q's dtype
/// with stride 1 on D and otherwise any layout, e.g. the heads of a [B, T, C] tensor
/// (y.view({B, T, H, D}).permute({0, 2, 1, 3})) or the q/k/v parts of one [B, T, 3, H, D] gradient, so
/// that a head split and merge cost no copies; lse [B, H, T] contiguous. Outputs must not overlap each
/// other, nor share storage with an input (ValueError: the CPU reads its inputs in place as it writes).
void causal_attention_out(const Tensor& q, const Tensor& k, const Tensor& v, double scale, const Tensor& out,
                          const Tensor& lse, const AttentionDropout& dropout = {});
void causal_attention_backward_out(const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v,
                                   const Tensor& out, const Tensor& lse, double scale, const Tensor& dq,
                                   const Tensor& dk, const Tensor& dv, const AttentionDropout& dropout = {});

// ---- layernorm --------------------------------------------------------------------------------------------
// Dispatch layernorm.cpp. Versions (layernorm_versions.h): CPU v1 cpu/layernorm.cpp; CUDA v1
// cuda/layernorm.cu, v2 cuda/layernorm_warp.cu.
struct LayerNormOutput {
  Tensor y;     ///< same shape as x
  Tensor mean;  ///< x.shape without the last dim, float32 (float64 for float64 input)
  Tensor rstd;  ///< 1 / sqrt(var + eps), same shape as mean
};
/// Normalises over the last dim, then y = xhat * weight + bias (weight/bias [C]; either may be undefined).
LayerNormOutput layernorm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps = 1e-5);
struct LayerNormGrads {
  Tensor dx;
  Tensor dweight;  ///< undefined when weight is
  Tensor dbias;    ///< undefined when bias was (pass has_bias)
};
LayerNormGrads layernorm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& mean,
                                  const Tensor& rstd, bool has_bias);

// ---- fused ops ----------------------------------------------------------------------------------------
// Dispatch bias_gelu.cpp and layernorm.cpp (adamw_update_all: optim.cpp). The CPU backend runs each in one
// pass over its tensors (cpu/bias_gelu.cpp, cpu/layernorm.cpp, cpu/optim.cpp), with the bits of the unfused
// ops it replaces; CUDA runs those unfused kernels in turn (no fused CUDA kernel yet).
/// y = gelu(x + bias) (tanh form): x [..., C], bias [C], one floating dtype and device. The sum is rounded
/// to x's dtype before the GELU, as binary(Add) then unary(Gelu) would round it.
Tensor bias_gelu(const Tensor& x, const Tensor& bias);
struct BiasGeluGrads {
  Tensor dx;     ///< dy * gelu'(x + bias), x's shape, contiguous
  Tensor dbias;  ///< dx summed over the leading dims, [C] (sum_to's bits)
};
/// Gradients of bias_gelu given dy (x's shape) and its inputs: the pre-activation x + bias is recomputed.
BiasGeluGrads bias_gelu_backward(const Tensor& dy, const Tensor& x, const Tensor& bias);
struct AddLayerNormOutput {
  Tensor sum;            ///< x + residual, x's shape and dtype
  LayerNormOutput norm;  ///< layernorm(sum, weight, bias, eps)
};
/// A residual add and the layernorm of its result, one pass over the rows: x and residual have one shape
/// and dtype (no broadcasting), weight and bias [C] or undefined.
AddLayerNormOutput add_layernorm(const Tensor& x, const Tensor& residual, const Tensor& weight,
                                 const Tensor& bias, double eps = 1e-5);

// ---- embedding --------------------------------------------------------------------------------------------
// Dispatch embedding.cpp; the forward has one version per backend (cpu/embedding.cpp,
// cuda/embedding.cu). Backward versions (embedding_backward_versions.h): CPU v1 cpu/embedding.cpp; CUDA
// v1-v2 cuda/embedding.cu.
/// weight [V, C] gathered at ids (int32/int64, any shape) -> [..., C]. Throws ValueError for an id
/// outside [0, V), naming the id and V.
Tensor embedding(const Tensor& weight, const Tensor& ids);
/// Scatter-add of grad_out [..., C] into a [V, C] gradient at ids.
Tensor embedding_backward(const Tensor& grad_out, const Tensor& ids, int64_t num_embeddings);

// ---- loss -------------------------------------------------------------------------------------------------
// Dispatch loss.cpp. Cross-entropy versions (cross_entropy_versions.h): CPU v1 cpu/loss.cpp; CUDA v1-v2
// cuda/loss.cu.
struct CrossEntropyOutput {
  Tensor loss;         ///< 0-d float32 (float64 for float64 logits): mean over non-ignored targets
  Tensor grad_logits;  ///< d(loss)/d(logits), logits' shape and dtype (undefined unless asked for)
  int64_t count = 0;   ///< targets not equal to ignore_index
};
/// Cross-entropy of logits [N, V] against targets [N] (int32/int64), fused with log-softmax. Targets equal
/// to ignore_index contribute nothing; others must lie in [0, V) (ValueError otherwise).
CrossEntropyOutput cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index = -100,
                                 bool compute_grad = true);

// ---- random, masks ----------------------------------------------------------------------------------------
// Dispatch random.cpp; one version per backend: cpu/random.cpp, cuda/random.cu.
/// x * mask / (1 - p) where mask[i] = uniform(state, i) >= p. The same state always gives the same mask,
/// on CPU and CUDA, so backward (and recomputation) regenerates it instead of storing it.
Tensor dropout(const Tensor& x, double p, const GeneratorState& state);
/// [T, T] with 1 above the diagonal (positions a query must not see) and 0 elsewhere.
Tensor causal_mask(int64_t T, TensorOptions options = {});

// ---- optimizer math ---------------------------------------------------------------------------------------
// Dispatch optim.cpp. AdamW versions (adamw_versions.h): CPU v1 cpu/optim.cpp; CUDA v1-v2
// cuda/optim.cu. global_l2_norm: one version per backend (cpu/optim.cpp, cuda/optim.cu).
struct AdamWStep {
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.0;
  int64_t step = 1;  ///< 1-based, for bias correction
};
/// One AdamW update in place: param, m, v (same shape/device; param may be bf16 with float32 m and v).
/// p -= lr * (mhat / (sqrt(vhat) + eps) + weight_decay * p)   (decoupled decay)
void adamw_update(const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v,
                  const AdamWStep& s);
/// One parameter's share of adamw_update_all: its four tensors (as adamw_update asks) and its step (a
/// group's lr and weight_decay; the betas, eps and step count are usually the same for all).
struct AdamWTensors {
  Tensor param, grad, m, v;
  AdamWStep step;
};
/// adamw_update on every entry, with its bits. On the CPU the entries are one flat list of segments updated
/// by one parallel loop (one thread team for all of a model's parameters, instead of one call, and one
/// team or none, per tensor); entries on a CUDA device run adamw_update one by one.
void adamw_update_all(const std::vector<AdamWTensors>& tensors);
/// sqrt(sum over tensors of sum(x^2)), accumulated in double on the host side of the last reduction.
double global_l2_norm(const std::vector<Tensor>& tensors);

}  // namespace brigade::kernels
