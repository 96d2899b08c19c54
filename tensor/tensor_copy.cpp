// Copies and conversions: contiguous, clone, to(device), to(dtype), copy_, fill_, item, to_vector.
// These are the only places the tensor layer moves data; each is explicit (nothing copies implicitly).
#include <cstring>

#include "tensor/device_ops.h"
#include "tensor/grad_mode.h"
#include "tensor/tensor.h"

namespace brigade {

namespace {

/// Reports an identity-like copy (contiguous, clone, to) to autograd when the input takes part in it.
Tensor finish_copy(const Tensor& input, Tensor output) {
  if (input.requires_grad() && GradMode::is_enabled()) {
    auto record = detail::autograd_hooks().record_copy;
    BRIGADE_CHECK(record != nullptr, "a copy of a tensor that requires grad needs the autograd library "
                                     "(brigade_autograd) linked into the program");
    record(input, output);
  }
  return output;
}

void check_in_place_allowed(const Tensor& t, const char* op) {
  BRIGADE_CHECK_AS(AutogradError, !(t.requires_grad() && GradMode::is_enabled()), op,
                   ": in-place operation on a tensor that requires grad (shape ", shape_str(t.shape()),
                   "); wrap it in NoGradGuard (as optimizers do) or work on a detach()ed tensor");
}

/// Moves contiguous `src` to `device` (same dtype).
Tensor move_contiguous(const Tensor& src, const Device& device) {
  Tensor out = empty(src.shape(), TensorOptions().dtype(src.dtype()).device(device));
  if (src.numel() == 0) return out;
#if BRIGADE_WITH_CUDA
  detail::cuda::copy_bytes(out.data_ptr(), device, src.data_ptr(), src.device(), src.nbytes());
#else
  BRIGADE_THROW(DeviceError, "to: brigade was built without CUDA; cannot copy from ", src.device().str(), " to ",
                device.str());
#endif
  return out;
}

}  // namespace

Tensor Tensor::contiguous() const {
  if (is_contiguous()) return *this;
  return clone();
}

Tensor Tensor::clone() const {
  Tensor out = empty(shape(), TensorOptions().dtype(dtype()).device(device()));
  detail::copy_same_device(out, *this);
  return finish_copy(*this, out);
}

Tensor Tensor::to(const Device& target) const {
  if (target == device()) return *this;
  check_device_exists(target, "to");
  Tensor out;
  {
    NoGradGuard no_grad;  // the raw steps below are one differentiable copy, recorded once
    out = move_contiguous(contiguous(), target);
  }
  return finish_copy(*this, out);
}

Tensor Tensor::to(DType target) const {
  if (target == dtype()) return *this;
  Tensor out = empty(shape(), TensorOptions().dtype(target).device(device()));
  detail::copy_same_device(out, *this);
  if (!is_floating(target)) return out;  // integer results are not differentiable
  return finish_copy(*this, out);
}

Tensor& Tensor::copy_(const Tensor& src) {
  check_in_place_allowed(*this, "copy_");
  NoGradGuard no_grad;
  BRIGADE_CHECK(src.defined(), "copy_: source tensor is undefined");
  Tensor source = src;
  if (source.shape() != shape()) {
    broadcast_shapes(shape(), source.shape(), "copy_");  // throws with both shapes when incompatible
    source = source.expand(shape());
    BRIGADE_CHECK_SHAPE(source.shape() == shape(), "copy_: source of shape ", shape_str(src.shape()),
                        " does not broadcast to the destination shape ", shape_str(shape()));
  }
  if (source.device() != device()) {
    BRIGADE_CHECK_DEVICE(source.device().is_cpu() || device().is_cpu(), "copy_: copying ",
                         source.device().str(), " -> ", device().str(), " is not supported; go through the CPU");
    source = move_contiguous(source.contiguous(), device());
  }
  detail::copy_same_device(*this, source);
  return *this;
}

Tensor& Tensor::fill_(double value) {
  check_in_place_allowed(*this, "fill_");
  detail::fill(*this, value);
  return *this;
}

double Tensor::item() const {
  BRIGADE_CHECK_VALUE(numel() == 1, "item: expected a tensor with one element, found shape ", shape_str(shape()));
  return to_vector<double>()[0];
}

template <typename T>
std::vector<T> Tensor::to_vector() const {
  std::vector<T> values(static_cast<size_t>(numel()));
  if (values.empty()) return values;
  Tensor host;
  {
    NoGradGuard no_grad;
    host = to(Device::cpu());
    if (host.dtype() != dtype_of<T>() || !host.is_contiguous()) {
      Tensor converted = empty(shape(), TensorOptions().dtype(dtype_of<T>()));
      detail::copy_same_device(converted, host);
      host = converted;
    }
  }
  std::memcpy(values.data(), host.data_ptr(), values.size() * sizeof(T));
  return values;
}

template std::vector<float> Tensor::to_vector<float>() const;
template std::vector<double> Tensor::to_vector<double>() const;
template std::vector<bfloat16> Tensor::to_vector<bfloat16>() const;
template std::vector<int32_t> Tensor::to_vector<int32_t>() const;
template std::vector<int64_t> Tensor::to_vector<int64_t>() const;

}  // namespace brigade
