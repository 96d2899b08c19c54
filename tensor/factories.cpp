// Tensor factories. Random factories draw one generator offset per call, so the same seed produces the
// same tensors in the same order on CPU and CUDA.
#include <cstring>

#include "tensor/device_ops.h"
#include "tensor/tensor.h"

namespace brigade {

Tensor empty(const Shape& shape, TensorOptions options) {
  for (int64_t s : shape) {
    BRIGADE_CHECK_SHAPE(s >= 0, "empty: negative size in shape ", shape_str(shape));
  }
  check_device_exists(options.device_, "empty");
  size_t nbytes = static_cast<size_t>(shape_numel(shape)) * dtype_size(options.dtype_);
  auto storage = std::make_shared<Storage>(nbytes, options.device_);
  Tensor out(std::move(storage), shape, contiguous_strides(shape), 0, options.dtype_);
  if (options.requires_grad_) out.set_requires_grad(true);
  return out;
}

Tensor full(const Shape& shape, double value, TensorOptions options) {
  bool requires_grad = options.requires_grad_;
  Tensor out = empty(shape, options.requires_grad(false));
  out.fill_(value);
  if (requires_grad) out.set_requires_grad(true);
  return out;
}

Tensor zeros(const Shape& shape, TensorOptions options) { return full(shape, 0.0, options); }
Tensor ones(const Shape& shape, TensorOptions options) { return full(shape, 1.0, options); }

Tensor arange(int64_t start, int64_t end, int64_t step, TensorOptions options) {
  BRIGADE_CHECK_VALUE(step != 0, "arange: step must not be 0");
  int64_t n = step > 0 ? (end > start ? (end - start + step - 1) / step : 0)
                       : (start > end ? (start - end - step - 1) / -step : 0);
  std::vector<int64_t> values(n);
  for (int64_t i = 0; i < n; ++i) values[i] = start + i * step;
  Tensor host = from_vector(values, {n});
  return host.to(options.dtype_).to(options.device_);
}

template <typename T>
Tensor from_vector(const std::vector<T>& values, const Shape& shape, const Device& device) {
  BRIGADE_CHECK_SHAPE(static_cast<int64_t>(values.size()) == shape_numel(shape), "from_vector: ", values.size(),
                      " values do not fill shape ", shape_str(shape), " (", shape_numel(shape), " elements)");
  Tensor host = empty(shape, TensorOptions().dtype(dtype_of<T>()));
  if (!values.empty()) std::memcpy(host.data_ptr(), values.data(), values.size() * sizeof(T));
  return host.to(device);
}

template Tensor from_vector<float>(const std::vector<float>&, const Shape&, const Device&);
template Tensor from_vector<double>(const std::vector<double>&, const Shape&, const Device&);
template Tensor from_vector<bfloat16>(const std::vector<bfloat16>&, const Shape&, const Device&);
template Tensor from_vector<int32_t>(const std::vector<int32_t>&, const Shape&, const Device&);
template Tensor from_vector<int64_t>(const std::vector<int64_t>&, const Shape&, const Device&);

namespace {
Tensor random_tensor(const Shape& shape, TensorOptions options, Generator* generator, detail::RandomKind kind,
                     const char* op) {
  BRIGADE_CHECK_DTYPE(is_floating(options.dtype_), op, ": expected a floating dtype, found ",
                      dtype_name(options.dtype_));
  bool requires_grad = options.requires_grad_;
  Tensor out = empty(shape, options.requires_grad(false));
  Generator& gen = generator ? *generator : default_generator();
  detail::fill_random(out, kind, gen.next_draw());
  if (requires_grad) out.set_requires_grad(true);
  return out;
}
}  // namespace

Tensor randn(const Shape& shape, TensorOptions options, Generator* generator) {
  return random_tensor(shape, options, generator, detail::RandomKind::Normal, "randn");
}

Tensor rand(const Shape& shape, TensorOptions options, Generator* generator) {
  return random_tensor(shape, options, generator, detail::RandomKind::Uniform, "rand");
}

Tensor zeros_like(const Tensor& like) { return zeros(like.shape(), TensorOptions(like.dtype()).device(like.device())); }
Tensor ones_like(const Tensor& like) { return ones(like.shape(), TensorOptions(like.dtype()).device(like.device())); }
Tensor empty_like(const Tensor& like) { return empty(like.shape(), TensorOptions(like.dtype()).device(like.device())); }

}  // namespace brigade
