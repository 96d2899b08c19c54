// Dispatch of the fused log-softmax + cross-entropy. logits [..., V] are viewed as [N, V] (contiguous),
// targets [...] as [N]. The backend writes each row's loss; the mean over non-ignored rows is taken here
// (a loss of 0, with a zero gradient, when every target is ignored).
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "kernels/kernels.h"
#include "kernels/op_checks.h"
#include "tensor/grad_mode.h"

namespace brigade::kernels {

CrossEntropyOutput cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index,
                                 bool compute_grad) {
  NoGradGuard no_grad;
  const char* op = "cross_entropy";
  detail::check_defined(op, "logits", logits);
  detail::check_defined(op, "targets", targets);
  detail::check_same_device(op, "logits", logits, "targets", targets);
  detail::check_floating(op, "logits", logits);
  detail::check_index(op, "targets", targets);
  BRIGADE_CHECK_SHAPE(logits.dim() >= 1, op, ": logits must be [N, V], found shape ",
                      shape_str(logits.shape()));
  const Shape expected(logits.shape().begin(), logits.shape().end() - 1);
  BRIGADE_CHECK_SHAPE(targets.shape() == expected, op, ": targets have shape ", shape_str(targets.shape()),
                      " but expected ", shape_str(expected), " (logits have shape ",
                      shape_str(logits.shape()), ")");
  const int64_t V = logits.size(-1), N = targets.numel();
  BRIGADE_CHECK_SHAPE(V > 0 || N == 0, op, ": logits of shape ", shape_str(logits.shape()),
                      " have no classes (V = 0)");
  const DType loss_dtype = logits.dtype() == kFloat64 ? kFloat64 : kFloat32;
  Tensor row_loss = empty({N}, detail::output_options(logits, loss_dtype));
  CrossEntropyOutput out;
  if (compute_grad) out.grad_logits = empty(logits.shape(), detail::output_options(logits));
  if (N > 0) {
    Tensor flat_targets = targets.contiguous().view({N});
    Tensor grad_rows = compute_grad ? out.grad_logits.view({N, V}) : Tensor();
    int64_t count = 0;
    int64_t bad =
        BRIGADE_ON_BACKEND(logits.device(), cross_entropy(logits.contiguous().view({N, V}), flat_targets,
                                                          ignore_index, row_loss, grad_rows, &count));
    if (bad >= 0) {
      auto target = static_cast<int64_t>(flat_targets.narrow(0, bad, 1).item());
      BRIGADE_THROW(ValueError, op, ": target ", target, " at position ", bad, " (row ", bad,
                    " of logits viewed as [", N, ", ", V, "]) is outside [0, ", V, ") (V = ", V,
                    ") and is not ignore_index (", ignore_index, ")");
    }
    out.count = count;
  }
  out.loss = sum(row_loss);
  if (out.count > 0) {
    BRIGADE_ON_BACKEND(
        out.loss.device(),
        binary_scalar(BinaryOp::Mul, out.loss, 1.0 / static_cast<double>(out.count), false, out.loss));
  }
  return out;
}

}  // namespace brigade::kernels
