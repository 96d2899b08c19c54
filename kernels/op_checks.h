// The checks every raw op runs before it dispatches (internal to kernels/). Each throws a typed error whose
// message names the op, the operand and what was expected and found:
//   "add: a is on cpu but b is on cuda:0; brigade never copies between devices implicitly ..."
//   "softmax: x must have a floating dtype (float32, bfloat16, float64), found int64"
#pragma once

#include <cstdint>

#include "tensor/tensor.h"

namespace brigade::kernels::detail {

/// Throws ValueError unless `t` is defined.
inline void check_defined(const char* op, const char* name, const Tensor& t) {
  BRIGADE_CHECK_VALUE(t.defined(), op, ": ", name, " is an undefined tensor");
}

/// Throws DeviceError unless the two devices are equal (brigade never copies between devices silently).
inline void check_same_device(const char* op, const char* name_a, const Device& a, const char* name_b,
                              const Device& b) {
  BRIGADE_CHECK_DEVICE(a == b, op, ": ", name_a, " is on ", a.str(), " but ", name_b, " is on ", b.str(),
                       "; brigade never copies between devices implicitly (move one with .to(device))");
}
inline void check_same_device(const char* op, const char* name_a, const Tensor& a, const char* name_b,
                              const Tensor& b) {
  check_same_device(op, name_a, a.device(), name_b, b.device());
}

/// Throws DTypeError unless `dtype` is a floating dtype usable on `device` (float64 is CPU-only: the
/// CUDA backend implements float32 and bfloat16).
inline void check_floating(const char* op, const char* name, DType dtype, const Device& device) {
  BRIGADE_CHECK_DTYPE(is_floating(dtype), op, ": ", name,
                      " must have a floating dtype (float32, bfloat16, float64), found ", dtype_name(dtype));
  BRIGADE_CHECK_DTYPE(!(dtype == kFloat64 && device.is_cuda()), op, ": float64 is CPU-only, found a float64 ",
                      name, " on ", device.str(), " (use float32 or bfloat16 on CUDA)");
}
inline void check_floating(const char* op, const char* name, const Tensor& t) {
  check_floating(op, name, t.dtype(), t.device());
}

/// Throws DTypeError unless `t` holds integer indices (int32 or int64).
inline void check_index(const char* op, const char* name, const Tensor& t) {
  BRIGADE_CHECK_DTYPE(t.dtype() == kInt32 || t.dtype() == kInt64, op, ": ", name,
                      " must have an integer dtype (int32, int64), found ", dtype_name(t.dtype()));
}

/// Throws DTypeError unless the two tensors share a dtype.
inline void check_same_dtype(const char* op, const char* name_a, const Tensor& a, const char* name_b,
                             const Tensor& b) {
  BRIGADE_CHECK_DTYPE(a.dtype() == b.dtype(), op, ": ", name_a, " has dtype ", dtype_name(a.dtype()), " but ",
                      name_b, " has dtype ", dtype_name(b.dtype()), " (expected the same dtype)");
}

/// Throws ShapeError unless the two tensors have equal shapes.
inline void check_same_shape(const char* op, const char* name_a, const Tensor& a, const char* name_b,
                             const Tensor& b) {
  BRIGADE_CHECK_SHAPE(a.shape() == b.shape(), op, ": ", name_a, " has shape ", shape_str(a.shape()), " but ",
                      name_b, " has shape ", shape_str(b.shape()), " (expected equal shapes)");
}

/// Options for an output like `t` (its device) with `dtype`.
inline TensorOptions output_options(const Tensor& t, DType dtype) {
  return TensorOptions().dtype(dtype).device(t.device());
}
inline TensorOptions output_options(const Tensor& t) {
  return output_options(t, t.dtype());
}

/// Throws ValueError when writing through `t` would write one memory location twice (a broadcast view,
/// stride 0 on a dim of size > 1): in-place ops need distinct elements.
inline void check_writable(const char* op, const char* name, const Tensor& t) {
  for (int64_t d = 0; d < t.dim(); ++d) {
    BRIGADE_CHECK_VALUE(!(t.size(d) > 1 && t.stride(d) == 0), op, ": cannot write in place into ", name,
                        " of shape ", shape_str(t.shape()), ": dim ", d,
                        " is a broadcast (stride 0), so several elements share one memory location");
  }
}

}  // namespace brigade::kernels::detail
