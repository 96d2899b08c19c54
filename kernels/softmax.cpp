// Dispatch of softmax / log_softmax over the last dim and their backward: x is viewed as [R, C]
// (contiguous) with C the last dim; a 0-d x is one row of one element.
#include "kernels/backend.h"
#include "kernels/kernels.h"
#include "kernels/op_checks.h"
#include "tensor/grad_mode.h"

namespace brigade::kernels {

namespace {

int64_t last_dim(const Tensor& x) {
  return x.dim() == 0 ? 1 : x.size(-1);
}

/// x viewed as [R, C] (contiguous); only called with x.numel() > 0.
Tensor rows_of(const Tensor& x) {
  int64_t cols = last_dim(x);
  return x.contiguous().view({x.numel() / cols, cols});
}

Tensor softmax_forward(const char* op, const Tensor& x, bool log) {
  NoGradGuard no_grad;
  detail::check_defined(op, "x", x);
  detail::check_floating(op, "x", x);
  Tensor out = empty(x.shape(), detail::output_options(x));
  if (x.numel() > 0) {
    Tensor rows = rows_of(x);
    BRIGADE_ON_BACKEND(x.device(), softmax_rows(rows, out.view(rows.shape()), log));
  }
  return out;
}

Tensor softmax_backward_impl(const char* op, const Tensor& grad_y, const Tensor& y, bool log) {
  NoGradGuard no_grad;
  detail::check_defined(op, "grad_y", grad_y);
  detail::check_defined(op, "y", y);
  detail::check_same_device(op, "grad_y", grad_y, "y", y);
  detail::check_floating(op, "grad_y", grad_y);
  detail::check_same_dtype(op, "grad_y", grad_y, "y", y);
  detail::check_same_shape(op, "grad_y", grad_y, "y", y);
  Tensor dx = empty(y.shape(), detail::output_options(y));
  if (y.numel() > 0) {
    Tensor dy_rows = rows_of(grad_y);
    Tensor y_rows = rows_of(y);
    BRIGADE_ON_BACKEND(y.device(), softmax_backward_rows(dy_rows, y_rows, dx.view(y_rows.shape()), log));
  }
  return dx;
}

}  // namespace

Tensor softmax(const Tensor& x) {
  return softmax_forward("softmax", x, false);
}

Tensor log_softmax(const Tensor& x) {
  return softmax_forward("log_softmax", x, true);
}

Tensor softmax_backward(const Tensor& grad_y, const Tensor& y) {
  return softmax_backward_impl("softmax_backward", grad_y, y, false);
}

Tensor log_softmax_backward(const Tensor& grad_y, const Tensor& y) {
  return softmax_backward_impl("log_softmax_backward", grad_y, y, true);
}

}  // namespace brigade::kernels
