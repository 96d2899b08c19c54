// The CUDA memory-bound kernels beyond the row kernels (row_kernels.h) by version, for tests and benchmarks
// that want one implementation. Plain C++ (no CUDA headers), only linked in CUDA builds: guard uses with
// `#if BRIGADE_WITH_CUDA`. Arguments and preconditions as in kernels/backend.h.
//
//   Elementwise (unary, unary_backward, binary, binary_scalar) and AdamW:
//     v1 Scalar     kernels/cuda/elementwise.cu, optim.cu   one element per thread, any strides
//     v2 Vector128  kernels/cuda/elementwise_vec.cu, optim.cu   16-byte loads and stores (4 float, 8 bf16,
//                   2 double) with a scalar head and tail; contiguous operands, plus broadcast rows (a
//                   bias) for binary; other layouts run v1. The same arithmetic per element as v1: the
//                   default.
//   Cross-entropy:
//     v1 BlockPerRow  kernels/cuda/loss.cu   one block per row, scalar loads; the default
//     v2 VectorRow    kernels/cuda/loss.cu   one block per row, 16-byte loads of the logits and stores of
//                     the gradient (logits and gradient rows must share an alignment, else v1)
//   Embedding backward:
//     v1 Atomic     kernels/cuda/embedding.cu   float atomics: the order of the adds, and so the last bits
//                   of rows hit by several ids, vary from run to run
//     v2 Sorted     kernels/cuda/embedding.cu   positions bucketed by id (integer counts, a prefix sum, a
//                   stable placement), then each (id, 32 columns) summed by one warp in position order:
//                   bitwise the same on every run; the default
//
// The *_with functions run v1 when the chosen version does not support the layout, so every call is valid.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/backend.h"

namespace brigade::kernels::cuda {

enum class ElementwiseKernel {
  Scalar,     ///< v1
  Vector128,  ///< v2, the default
};
const char* elementwise_kernel_name(ElementwiseKernel kernel);
/// Every ElementwiseKernel, v1 first.
const std::vector<ElementwiseKernel>& all_elementwise_kernels();

void unary_with(ElementwiseKernel kernel, UnaryOp op, const Tensor& x, const Tensor& out);
void unary_backward_with(ElementwiseKernel kernel, UnaryOp op, const Tensor& grad_y, const Tensor& x,
                         const Tensor& y, const Tensor& out);
void binary_with(ElementwiseKernel kernel, BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out);
void binary_scalar_with(ElementwiseKernel kernel, BinaryOp op, const Tensor& a, double scalar,
                        bool scalar_first, const Tensor& out);
void adamw_with(ElementwiseKernel kernel, const Tensor& param, const Tensor& grad, const Tensor& m,
                const Tensor& v, const AdamWStep& s);

enum class CrossEntropyKernel {
  BlockPerRow,  ///< v1, the default
  VectorRow,    ///< v2
};
const char* cross_entropy_kernel_name(CrossEntropyKernel kernel);
const std::vector<CrossEntropyKernel>& all_cross_entropy_kernels();
int64_t cross_entropy_with(CrossEntropyKernel kernel, const Tensor& logits, const Tensor& targets,
                           int64_t ignore_index, const Tensor& row_loss, const Tensor& grad, int64_t* count);

enum class EmbeddingBackwardKernel {
  Atomic,  ///< v1
  Sorted,  ///< v2, the default (deterministic)
};
const char* embedding_backward_kernel_name(EmbeddingBackwardKernel kernel);
const std::vector<EmbeddingBackwardKernel>& all_embedding_backward_kernels();
void embedding_backward_with(EmbeddingBackwardKernel kernel, const Tensor& grad_out, const Tensor& ids,
                             const Tensor& grad_weight);

// The v1 entry points the *_with functions fall back to (defined beside their kernels).
void unary_v1(UnaryOp op, const Tensor& x, const Tensor& out);
void unary_backward_v1(UnaryOp op, const Tensor& grad_y, const Tensor& x, const Tensor& y, const Tensor& out);
void binary_v1(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out);
void binary_scalar_v1(BinaryOp op, const Tensor& a, double scalar, bool scalar_first, const Tensor& out);

}  // namespace brigade::kernels::cuda
