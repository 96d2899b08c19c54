// The backend interface: what each device implements. kernels/*.cpp (the dispatch layer) validates inputs,
// allocates outputs and normalises layouts, then calls cpu::NAME or cuda::NAME with the same signature.
// Backends may assume the preconditions written beside each function; they run on the current stream.
//
// Naming of shapes in comments: R rows, C columns (the last dim), N items, V vocabulary.
#pragma once

#include <cstdint>

#include "kernels/kernels.h"

namespace brigade::kernels {

/// A (batched) GEMM in BLAS terms, row-major: C[b] = op(A[b]) @ op(B[b]), C is [M, N] row-major with
/// leading dimension ldc. op(A) is [M, K]: A is stored [M, K] with leading dim lda (trans_a false) or
/// [K, M] (trans_a true); likewise B. A batch stride of 0 broadcasts that operand. All three share a dtype.
struct GemmArgs {
  const void* a = nullptr;
  const void* b = nullptr;
  void* c = nullptr;
  DType dtype = kFloat32;
  int64_t m = 0, n = 0, k = 0;
  int64_t lda = 0, ldb = 0, ldc = 0;
  bool trans_a = false, trans_b = false;
  int64_t batch = 1;
  int64_t stride_a = 0, stride_b = 0, stride_c = 0;  // elements between batches
  // Optional [N] row in C's dtype, added to every row of every C[b] after its product is rounded to C's
  // dtype: C = op(A) op(B) + bias, with the bits of the product followed by binary(Add). The CPU versions
  // v2-v4 add it as they store a tile's last K slice; the others in a pass of their own afterwards.
  const void* bias = nullptr;
};

enum class ReduceOp { Sum, Max, ArgMax };

#define BRIGADE_KERNEL_BACKEND_DECLARATIONS                                                                  \
  /* out = op(x); x and out have the same shape, any strides. */                                             \
  void unary(UnaryOp op, const Tensor& x, const Tensor& out);                                                \
  /* out = dL/dx; all four have the same shape (any strides). */                                             \
  void unary_backward(UnaryOp op, const Tensor& grad_y, const Tensor& x, const Tensor& y,                    \
                      const Tensor& out);                                                                    \
  /* out = a op b; a and b are already expanded to out's shape (stride 0 where broadcast). out may alias a   \
   */                                                                                                        \
  /* element for element (in-place accumulation). */                                                         \
  void binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out);                             \
  /* out = a op s (scalar_first: s op a); same shape, any strides; out may alias a. */                       \
  void binary_scalar(BinaryOp op, const Tensor& a, double scalar, bool scalar_first, const Tensor& out);     \
  /* out = cond != 0 ? a : b; all expanded to out's shape; cond may have any dtype. */                       \
  void where(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out);                       \
  /* Reduces each row of x [R, C] (contiguous) into out [R] (contiguous; int64 for ArgMax). Sum of an empty  \
   */                                                                                                        \
  /* row is 0; Max/ArgMax of an empty row is rejected before this is called. */                              \
  void reduce_rows(ReduceOp op, const Tensor& x, const Tensor& out);                                         \
  /* Column sums: out [C] = the sum of x [R, C] over its rows, both contiguous, R >= 0, C >= 1 (a bias */    \
  /* gradient: the sum over the leading dims). */                                                            \
  void sum_columns(const Tensor& x, const Tensor& out);                                                      \
  void gemm(const GemmArgs& args);                                                                           \
  /* x, out [R, C] contiguous; softmax (or log_softmax when log) of each row. */                             \
  void softmax_rows(const Tensor& x, const Tensor& out, bool log);                                           \
  /* dy, y, dx [R, C] contiguous; y is the forward output (softmax, or log_softmax when log). */             \
  void softmax_backward_rows(const Tensor& dy, const Tensor& y, const Tensor& dx, bool log);                 \
  /* Fused causal attention (kernels.h). q, k, v, out [B, H, T, D] share a dtype; every [B, H, T, D] */      \
  /* tensor has stride 1 on D (other strides arbitrary; outputs do not overlap anything); lse [B, H, T] */   \
  /* contiguous, float32 (float64 for float64). T >= 1, D >= 1, B * H >= 1. */                               \
  void causal_attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, double scale,             \
                                const Tensor& out, const Tensor& lse);                                       \
  /* The same layouts; dq, dk, dv are overwritten (not accumulated). */                                      \
  void causal_attention_backward(const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v,      \
                                 const Tensor& out, const Tensor& lse, double scale, const Tensor& dq,       \
                                 const Tensor& dk, const Tensor& dv);                                        \
  /* x, y [R, C] contiguous; weight, bias [C] contiguous or undefined; mean, rstd [R] float32 (float64). */  \
  void layernorm_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps,              \
                         const Tensor& y, const Tensor& mean, const Tensor& rstd);                           \
  /* dx [R, C]; dweight, dbias [C] (float32/float64 like mean) or undefined; all contiguous; dweight and */  \
  /* dbias are overwritten (not accumulated). */                                                             \
  void layernorm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& mean,       \
                          const Tensor& rstd, const Tensor& dx, const Tensor& dweight, const Tensor& dbias); \
  /* weight [V, C] contiguous, ids [N] contiguous int32/int64, out [N, C]. Returns the position of the */    \
  /* first id outside [0, V), or -1 (out's rows for bad ids are unspecified). */                             \
  int64_t embedding_forward(const Tensor& weight, const Tensor& ids, const Tensor& out);                     \
  /* grad_out [N, C], ids [N] (all valid), grad_weight [V, C] zero-filled by the caller; scatter-adds. */    \
  void embedding_backward(const Tensor& grad_out, const Tensor& ids, const Tensor& grad_weight);             \
  /* logits [N, V] contiguous, targets [N] contiguous int32/int64. Writes row_loss [N] (float32, or */       \
  /* float64 for float64 logits; 0 for ignored rows) and, when defined, grad [N, V] = (softmax - onehot) */  \
  /* / count (0 for ignored rows). Sets *count to the number of non-ignored rows. Returns the first row */   \
  /* whose target is outside [0, V) and not ignore_index, or -1. */                                          \
  int64_t cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index,                   \
                        const Tensor& row_loss, const Tensor& grad, int64_t* count);                         \
  /* out = x * (uniform(state, i) >= p) / (1 - p) for element i in row-major order of x (any strides). */    \
  void dropout(const Tensor& x, double p, const GeneratorState& state, const Tensor& out);                   \
  /* out [T, T] contiguous: 1 where col > row, else 0. */                                                    \
  void causal_mask(const Tensor& out);                                                                       \
  /* All contiguous, same numel. param/grad share a dtype; m and v are float32 (float64 for float64). */     \
  void adamw(const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v, const AdamWStep& s); \
  /* Sum of squares of all elements of x (contiguous), accumulated in double. */                             \
  double sum_squares(const Tensor& x);

namespace cpu {
BRIGADE_KERNEL_BACKEND_DECLARATIONS
}  // namespace cpu

namespace cuda {
BRIGADE_KERNEL_BACKEND_DECLARATIONS
}  // namespace cuda

}  // namespace brigade::kernels

/// Runs `call` on the backend of `device`: BRIGADE_ON_BACKEND(x.device(), unary(op, x, out)).
#if BRIGADE_WITH_CUDA
#define BRIGADE_ON_BACKEND(device, call) \
  ((device).is_cpu() ? ::brigade::kernels::cpu::call : ::brigade::kernels::cuda::call)
#else
#define BRIGADE_ON_BACKEND(device, call)                                                                     \
  ((device).is_cpu() ? ::brigade::kernels::cpu::call                                                         \
                     : (BRIGADE_THROW(::brigade::DeviceError, "brigade was built without CUDA; cannot run ", \
                                      #call, " on ", (device).str()),                                        \
                        ::brigade::kernels::cpu::call))
#endif
