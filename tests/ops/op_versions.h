// The versions axis of the op table: the implementations of a case's op on one backend. First the public op
// of kernels.h (what a user calls: the dispatch with its checks, layouts and default version), then every
// registered kernel version of the op's family on that backend (kernels/<op>_versions.h), each run directly
// through its <op>_with function on outputs allocated here, with the operands in the layout
// kernels/backend.h asks of it (contiguous rows, unit stride on the head dim, operands expanded to the
// result). A version that does not run a case itself hands it to v1 of its backend (the registry's rule), so
// every (version, case) pair is run and checked; `runs_itself` says which is which. Matmul also has its
// baselines: cuBLAS on CUDA and OpenBLAS on the CPU (the public op under MatmulBackend::Cublas / Blas;
// OpenBLAS for float32 and float64, in builds that link it). Cases with no elements run the public op only
// (the dispatch returns before any kernel).
#pragma once

#include <string>
#include <vector>

#include "kernels/adamw_versions.h"
#include "kernels/attention_versions.h"
#include "kernels/backend.h"
#include "kernels/cross_entropy_versions.h"
#include "kernels/elementwise_versions.h"
#include "kernels/embedding_backward_versions.h"
#include "kernels/kernels.h"
#include "kernels/layernorm_versions.h"
#include "kernels/matmul_versions.h"
#include "kernels/softmax_versions.h"
#include "tests/ops/op_call.h"
#include "tests/ops/op_case.h"

namespace brigade::testing {

/// The op families with registered versions.
enum class Family {
  None,
  Elementwise,
  AdamW,
  CrossEntropy,
  EmbeddingBackward,
  Softmax,
  LayerNorm,
  Attention,
  Matmul
};

inline Family family_of(Op op) {
  switch (op) {
    case Op::Unary:
    case Op::UnaryBackward:
    case Op::Binary:
    case Op::BinaryScalar:
    case Op::ScalarBinary:
    case Op::AddInPlace:
    case Op::MulInPlace:
      return Family::Elementwise;
    case Op::AdamW:
      return Family::AdamW;
    case Op::CrossEntropy:
      return Family::CrossEntropy;
    case Op::EmbeddingBackward:
      return Family::EmbeddingBackward;
    case Op::Softmax:
    case Op::LogSoftmax:
    case Op::SoftmaxBackward:
    case Op::LogSoftmaxBackward:
      return Family::Softmax;
    case Op::LayerNorm:
    case Op::LayerNormBackward:
      return Family::LayerNorm;
    case Op::Attention:
    case Op::AttentionBackward:
      return Family::Attention;
    case Op::Matmul:
      return Family::Matmul;
    default:
      return Family::None;
  }
}

struct Implementation {
  std::string name = "public";  ///< "public", "cublas", "openblas", or the version's name ("v2-warp-per-row")
  Family family = Family::None;
  int version = -1;         ///< the version's enumerator (as an int); -1: the public op or a baseline
  bool runs_itself = true;  ///< false: the version hands this case to v1 of its backend
  bool baseline = false;    ///< the public op under `baseline_backend` (a vendor library)
  kernels::MatmulBackend baseline_backend = kernels::MatmulBackend::Native;
};

/// Every implementation of case c's op on `device`, the public op first.
inline std::vector<Implementation> implementations(const OpCase& c, const Device& device) {
  std::vector<Implementation> list = {Implementation{}};
  const DeviceKind backend = device.kind;
  const Family family = family_of(c.op);
  if (c.op == Op::Matmul && device.is_cuda())
    list.push_back(Implementation{"cublas", family, -1, true, true, kernels::MatmulBackend::Cublas});
  if (c.op == Op::Matmul && device.is_cpu() && kernels::blas_available() &&
      (c.dtype == kFloat32 || c.dtype == kFloat64))
    list.push_back(Implementation{"openblas", family, -1, true, true, kernels::MatmulBackend::Blas});
  // Empty cases: the dispatch returns before any kernel runs, and the versions may assume elements.
  for (const InputSpec& s : c.inputs) {
    if (shape_numel(s.base) == 0) return list;
  }
  const Shape& x = c.inputs.empty() ? Shape{} : c.inputs[0].base;
  const int64_t cols = x.empty() ? 1 : x.back();
  auto add = [&](auto kernel, const char* name, DeviceKind kind, bool itself) {
    if (kind == backend)
      list.push_back(Implementation{name, family, static_cast<int>(kernel), itself, false});
  };
  switch (family) {
    case Family::Elementwise:
      for (kernels::ElementwiseKernel k : kernels::all_elementwise_kernels()) {
        add(k, kernels::elementwise_kernel_name(k), kernels::elementwise_kernel_backend(k),
            kernels::elementwise_kernel_supports(k));
      }
      break;
    case Family::AdamW:
      for (kernels::AdamWKernel k : kernels::all_adamw_kernels()) {
        add(k, kernels::adamw_kernel_name(k), kernels::adamw_kernel_backend(k),
            kernels::adamw_kernel_supports(k));
      }
      break;
    case Family::CrossEntropy:
      for (kernels::CrossEntropyKernel k : kernels::all_cross_entropy_kernels()) {
        add(k, kernels::cross_entropy_kernel_name(k), kernels::cross_entropy_kernel_backend(k),
            kernels::cross_entropy_kernel_supports(k));
      }
      break;
    case Family::EmbeddingBackward:
      for (kernels::EmbeddingBackwardKernel k : kernels::all_embedding_backward_kernels()) {
        add(k, kernels::embedding_backward_kernel_name(k), kernels::embedding_backward_kernel_backend(k),
            kernels::embedding_backward_kernel_supports(k));
      }
      break;
    case Family::Softmax:
      for (kernels::SoftmaxKernel k : kernels::all_softmax_kernels()) {
        add(k, kernels::softmax_kernel_name(k), kernels::softmax_kernel_backend(k),
            kernels::softmax_kernel_supports(k, cols));
      }
      break;
    case Family::LayerNorm:
      for (kernels::LayerNormKernel k : kernels::all_layernorm_kernels()) {
        add(k, kernels::layernorm_kernel_name(k), kernels::layernorm_kernel_backend(k),
            kernels::layernorm_kernel_supports(k, cols));
      }
      break;
    case Family::Attention:
      for (kernels::AttentionKernel k : kernels::all_attention_kernels()) {
        add(k, kernels::attention_kernel_name(k), kernels::attention_kernel_backend(k),
            kernels::attention_kernel_supports(k, c.dtype, cols));
      }
      break;
    case Family::Matmul:
      // A (version, dtype) pair a GEMM version does not implement is a DTypeError, not a fallback: skipped.
      for (kernels::MatmulKernel k : kernels::all_matmul_kernels()) {
        if (kernels::matmul_kernel_supports(k, c.dtype)) {
          add(k, kernels::matmul_kernel_name(k), kernels::matmul_kernel_backend(k), true);
        }
      }
      break;
    case Family::None:
      break;
  }
  return list;
}

namespace version_detail {

/// A [R, C] contiguous view of t's values (R rows of its last dim), for the row kernels.
inline Tensor as_rows(const Tensor& t) {
  const int64_t C = t.dim() == 0 ? 1 : t.size(-1);
  return t.contiguous().view({t.numel() / C, C});
}

/// t with stride 1 on its last dim (a copy where it has another).
inline Tensor unit_last_stride(const Tensor& t) {
  return t.dim() > 0 && t.stride(-1) != 1 ? t.contiguous() : t;
}

inline Tensor empty_on(const Shape& shape, DType dtype, const Device& device) {
  return empty(shape, TensorOptions().dtype(dtype).device(device));
}

/// GemmArgs for C = op(a) @ op(b) on contiguous a, b (layouts are the public op's business) and c
/// [batch, M, N] or [M, N]: a 2-d operand is shared by the batch through a batch stride of 0.
inline kernels::GemmArgs gemm_args(const OpCase& c, const Tensor& a, const Tensor& b, const Tensor& out) {
  kernels::GemmArgs args;
  args.a = a.data_ptr();
  args.b = b.data_ptr();
  args.c = out.data_ptr();
  args.dtype = c.dtype;
  args.m = out.size(-2), args.n = out.size(-1), args.k = c.transpose_a ? a.size(-2) : a.size(-1);
  args.lda = a.size(-1), args.ldb = b.size(-1), args.ldc = out.size(-1);
  args.trans_a = c.transpose_a, args.trans_b = c.transpose_b;
  args.batch = out.dim() == 3 ? out.size(0) : 1;
  args.stride_a = a.dim() == 3 ? a.size(1) * a.size(2) : 0;
  args.stride_b = b.dim() == 3 ? b.size(1) * b.size(2) : 0;
  args.stride_c = args.m * args.n;
  return args;
}

/// Elementwise versions: the output of the result's shape, operands expanded to it.
inline OpCall elementwise_call(const OpCase& c, kernels::ElementwiseKernel kernel,
                               const std::vector<Tensor>& x, const Device& device) {
  namespace k = brigade::kernels;
  switch (c.op) {
    case Op::Unary:
    case Op::UnaryBackward: {  // x (, dy, y)
      const Tensor out = empty_on(x[0].shape(), c.dtype, device);
      if (c.op == Op::Unary) {
        return [&c, kernel, x, out] {
          k::unary_with(kernel, c.unary_op, x[0], out);
          return std::vector<Tensor>{out};
        };
      }
      return [&c, kernel, x, out] {
        k::unary_backward_with(kernel, c.unary_op, x[1], x[0], x[2], out);
        return std::vector<Tensor>{out};
      };
    }
    case Op::Binary: {
      const Shape shape = broadcast_shapes(x[0].shape(), x[1].shape(), "op table");
      const Tensor a = x[0].expand(shape), b = x[1].expand(shape), out = empty_on(shape, c.dtype, device);
      return [&c, kernel, a, b, out] {
        k::binary_with(kernel, c.binary_op, a, b, out);
        return std::vector<Tensor>{out};
      };
    }
    case Op::BinaryScalar:
    case Op::ScalarBinary: {
      const Tensor out = empty_on(x[0].shape(), c.dtype, device);
      return [&c, kernel, x, out] {
        k::binary_scalar_with(kernel, c.binary_op, x[0], c.scalar, c.op == Op::ScalarBinary, out);
        return std::vector<Tensor>{out};
      };
    }
    case Op::AddInPlace: {
      const Tensor src = x[1].expand(x[0].shape());
      return [kernel, x, src] {
        k::binary_with(kernel, k::BinaryOp::Add, x[0], src, x[0]);
        return std::vector<Tensor>{x[0]};
      };
    }
    default:  // MulInPlace
      return [&c, kernel, x] {
        k::binary_scalar_with(kernel, k::BinaryOp::Mul, x[0], c.scalar, false, x[0]);
        return std::vector<Tensor>{x[0]};
      };
  }
}

/// Layernorm versions on [R, C] rows; the backward's dweight and dbias (in the statistics' dtype) are
/// returned in x's dtype, as the public op returns them.
inline OpCall layernorm_call(const OpCase& c, kernels::LayerNormKernel kernel, const std::vector<Tensor>& x,
                             const Device& device) {
  namespace k = brigade::kernels;
  const DType dt = c.dtype, stats = stat_dtype(c.dtype);
  const Tensor rows = as_rows(x[0]);
  const int64_t R = rows.size(0), C = rows.size(1);
  const Tensor w = layernorm_weight(c, x).defined() ? layernorm_weight(c, x).contiguous() : Tensor();
  const Shape shape = x[0].shape(), stat_shape(shape.begin(), shape.end() - 1);
  if (c.op == Op::LayerNorm) {
    const Tensor b = layernorm_bias(c, x).defined() ? layernorm_bias(c, x).contiguous() : Tensor();
    const Tensor y = empty_on({R, C}, dt, device), mean = empty_on({R}, stats, device),
                 rstd = empty_on({R}, stats, device);
    return [&c, kernel, rows, w, b, y, mean, rstd, shape, stat_shape] {
      k::layernorm_forward_with(kernel, rows, w, b, c.scalar, y, mean, rstd);
      return std::vector<Tensor>{y.view(shape), mean.view(stat_shape), rstd.view(stat_shape)};
    };
  }
  const size_t s = x.size() - 2;  // x, dy, [weight], mean, rstd
  const Tensor dy = as_rows(x[1]), mean = x[s].contiguous().view({R}), rstd = x[s + 1].contiguous().view({R});
  const Tensor dx = empty_on({R, C}, dt, device);
  const Tensor dweight = c.has_weight ? empty_on({C}, stats, device) : Tensor();
  const Tensor dbias = c.has_bias ? empty_on({C}, stats, device) : Tensor();
  return [kernel, dy, rows, w, mean, rstd, dx, dweight, dbias, shape, dt] {
    k::layernorm_backward_with(kernel, dy, rows, w, mean, rstd, dx, dweight, dbias);
    std::vector<Tensor> out = {dx.view(shape)};
    if (dweight.defined()) out.push_back(dweight.to(dt));
    if (dbias.defined()) out.push_back(dbias.to(dt));
    return out;
  };
}

/// Attention versions: every [B, H, T, D] operand with stride 1 on D (a copy where not), lse contiguous.
inline OpCall attention_call(const OpCase& c, kernels::AttentionKernel kernel, const std::vector<Tensor>& x,
                             const Device& device) {
  namespace k = brigade::kernels;
  const Tensor q = unit_last_stride(x[0]), kk = unit_last_stride(x[1]), v = unit_last_stride(x[2]);
  const Shape shape = q.shape(), lse_shape(shape.begin(), shape.end() - 1);
  if (c.op == Op::Attention) {
    const Tensor out = empty_on(shape, c.dtype, device),
                 lse = empty_on(lse_shape, stat_dtype(c.dtype), device);
    return [&c, kernel, q, kk, v, out, lse] {
      k::causal_attention_forward_with(kernel, q, kk, v, c.scalar, out, lse);
      return std::vector<Tensor>{out, lse};
    };
  }
  // q, k, v, dout, out, lse
  const Tensor dout = unit_last_stride(x[3]), out = unit_last_stride(x[4]), lse = x[5].contiguous();
  const Tensor dq = empty_on(shape, c.dtype, device), dk = empty_on(shape, c.dtype, device),
               dv = empty_on(shape, c.dtype, device);
  return [&c, kernel, q, kk, v, dout, out, lse, dq, dk, dv] {
    k::causal_attention_backward_with(kernel, dout, q, kk, v, out, lse, c.scalar, dq, dk, dv);
    return std::vector<Tensor>{dq, dk, dv};
  };
}

}  // namespace version_detail

/// The call of case c's op by `impl` on the operands x (operands_of(), on `device`). Outputs are allocated
/// here, once, and the call only runs the kernel (what the perf mode times); `c` must outlive it.
inline OpCall implementation_call(const OpCase& c, const Implementation& impl, const std::vector<Tensor>& x,
                                  const Device& device) {
  namespace k = brigade::kernels;
  using namespace version_detail;
  if (impl.baseline) {
    return [&c, x, backend = impl.baseline_backend] {
      const k::MatmulBackend saved = k::matmul_backend();
      k::set_matmul_backend(backend);
      std::vector<Tensor> out = {k::matmul(x[0], x[1], c.transpose_a, c.transpose_b)};
      k::set_matmul_backend(saved);
      return out;
    };
  }
  if (impl.version < 0) return kernel_call(c, x, device);
  const DType dt = c.dtype, stats = stat_dtype(c.dtype);
  switch (impl.family) {
    case Family::Elementwise:
      return elementwise_call(c, static_cast<k::ElementwiseKernel>(impl.version), x, device);
    case Family::AdamW:
      return [&c, kernel = static_cast<k::AdamWKernel>(impl.version), x, grad = x[1].contiguous()] {
        k::adamw_with(kernel, x[0], grad, x[2], x[3], c.adamw);
        return std::vector<Tensor>{x[0], x[2], x[3]};
      };
    case Family::CrossEntropy: {
      const Tensor logits = as_rows(x[0]), targets = x[1].contiguous().view({logits.size(0)});
      const Tensor row_loss = empty_on({logits.size(0)}, stats, device);
      const Tensor grad = c.compute_grad ? empty_on(x[0].shape(), dt, device) : Tensor();
      return
          [&c, kernel = static_cast<k::CrossEntropyKernel>(impl.version), logits, targets, row_loss, grad] {
            int64_t count = 0;
            k::cross_entropy_with(kernel, logits, targets, c.index, row_loss,
                                  grad.defined() ? grad.view(logits.shape()) : grad, &count);
            // The mean over the counted rows, as the public op reduces it (float64 on the host: the CUDA
            // versions compute float64 rows, but the CUDA sum is float32 and bfloat16 only).
            const bool on_host = row_loss.dtype() == kFloat64;
            Tensor loss = k::sum(on_host ? row_loss.to(Device::cpu()) : row_loss);
            if (count > 0) loss = k::binary(k::BinaryOp::Mul, loss, 1.0 / static_cast<double>(count));
            if (on_host) loss = loss.to(row_loss.device());
            std::vector<Tensor> out = {loss, from_vector<int64_t>({count}, {})};
            if (c.compute_grad) out.push_back(grad);
            return out;
          };
    }
    case Family::EmbeddingBackward: {
      const int64_t N = x[1].numel(), C = x[0].size(-1);
      const Tensor grad = x[0].contiguous().view({N, C}), ids = x[1].contiguous().view({N});
      Tensor grad_weight = empty_on({c.index, C}, dt, device);
      return
          [kernel = static_cast<k::EmbeddingBackwardKernel>(impl.version), grad, ids, grad_weight]() mutable {
            grad_weight.zero_();  // the scatter adds into zeros, as kernels::embedding_backward does
            k::embedding_backward_with(kernel, grad, ids, grad_weight);
            return std::vector<Tensor>{grad_weight};
          };
    }
    case Family::Softmax: {
      const bool log = c.op == Op::LogSoftmax || c.op == Op::LogSoftmaxBackward;
      const bool backward = c.op == Op::SoftmaxBackward || c.op == Op::LogSoftmaxBackward;
      const Tensor rows = as_rows(x[0]), out = empty_on(rows.shape(), dt, device);
      const Tensor dy = backward ? as_rows(x[1]) : Tensor(),
                   y = backward ? as_rows(x[2]) : Tensor();  // x, dy, y
      const Shape shape = x[0].shape();
      return [kernel = static_cast<k::SoftmaxKernel>(impl.version), rows, out, dy, y, log, backward, shape] {
        if (backward) {
          k::softmax_backward_rows_with(kernel, dy, y, out, log);
        } else {
          k::softmax_rows_with(kernel, rows, out, log);
        }
        return std::vector<Tensor>{out.view(shape)};
      };
    }
    case Family::LayerNorm:
      return layernorm_call(c, static_cast<k::LayerNormKernel>(impl.version), x, device);
    case Family::Attention:
      return attention_call(c, static_cast<k::AttentionKernel>(impl.version), x, device);
    case Family::Matmul: {
      const Tensor a = x[0].contiguous(), b = x[1].contiguous();
      const int64_t m = c.transpose_a ? a.size(-1) : a.size(-2), n = c.transpose_b ? b.size(-2) : b.size(-1);
      const bool batched = a.dim() == 3 || b.dim() == 3;
      const int64_t batch = a.dim() == 3 ? a.size(0) : (b.dim() == 3 ? b.size(0) : 1);
      const Tensor out = empty_on(batched ? Shape{batch, m, n} : Shape{m, n}, dt, device);
      return
          [kernel = static_cast<k::MatmulKernel>(impl.version), args = gemm_args(c, a, b, out), a, b, out] {
            k::gemm_with(kernel, args);  // a and b are captured so that args' pointers stay valid
            return std::vector<Tensor>{out};
          };
    }
    case Family::None:
      break;
  }
  return kernel_call(c, x, device);
}

}  // namespace brigade::testing
