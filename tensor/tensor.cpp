// Tensor geometry and views. Every view shares the storage and only computes new shape/strides/offset;
// when the input takes part in autograd the view is reported to the autograd layer, which records its
// backward (autograd/views.cpp).
#include "tensor/tensor.h"

#include <algorithm>
#include <optional>

#include "tensor/grad_mode.h"
#include "tensor/tensor_impl.h"

namespace brigade {

namespace detail {
AutogradHooks& autograd_hooks() {
  static AutogradHooks hooks;
  return hooks;
}
}  // namespace detail

namespace {

/// Attaches the view's backward when autograd is watching the input.
Tensor finish_view(const Tensor& input, Tensor view, detail::ViewInfo info) {
  if (input.requires_grad() && GradMode::is_enabled()) {
    auto record = detail::autograd_hooks().record_view;
    BRIGADE_CHECK(record != nullptr, "a view of a tensor that requires grad needs the autograd library "
                                     "(brigade_autograd) linked into the program");
    info.input_shape = input.shape();
    record(input, view, info);
  }
  return view;
}

/// Strides that let `new_shape` view data laid out as (old_shape, old_strides), if any exist.
/// Dims are grouped into chunks that are contiguous in memory; a new dim may not straddle two chunks.
std::optional<Strides> view_strides(const Shape& old_shape, const Strides& old_strides, const Shape& new_shape) {
  Strides new_strides(new_shape.size());
  if (shape_numel(old_shape) == 0 || old_shape.empty()) return contiguous_strides(new_shape);
  int64_t view_d = static_cast<int64_t>(new_shape.size()) - 1;
  int64_t chunk_base_stride = old_strides.back();
  int64_t tensor_numel = 1, view_numel = 1;
  for (int64_t tensor_d = static_cast<int64_t>(old_shape.size()) - 1; tensor_d >= 0; --tensor_d) {
    tensor_numel *= old_shape[tensor_d];
    bool chunk_ends = tensor_d == 0 || (old_shape[tensor_d - 1] != 1 &&
                                        old_strides[tensor_d - 1] != tensor_numel * chunk_base_stride);
    if (!chunk_ends) continue;
    while (view_d >= 0 && (view_numel < tensor_numel || new_shape[view_d] == 1)) {
      new_strides[view_d] = view_numel * chunk_base_stride;
      view_numel *= new_shape[view_d];
      --view_d;
    }
    if (view_numel != tensor_numel) return std::nullopt;
    if (tensor_d > 0) {
      chunk_base_stride = old_strides[tensor_d - 1];
      tensor_numel = 1;
      view_numel = 1;
    }
  }
  if (view_d != -1) return std::nullopt;
  return new_strides;
}

/// Resolves one -1 in `shape` against `numel`; throws ShapeError on a count mismatch.
Shape infer_shape(const Shape& shape, int64_t numel, const char* op, const Shape& from) {
  Shape out = shape;
  int64_t known = 1;
  int infer_at = -1;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == -1) {
      BRIGADE_CHECK_SHAPE(infer_at < 0, op, ": only one dim can be -1, found ", shape_str(shape));
      infer_at = static_cast<int>(i);
    } else {
      BRIGADE_CHECK_SHAPE(out[i] >= 0, op, ": negative size in ", shape_str(shape));
      known *= out[i];
    }
  }
  if (infer_at >= 0) {
    BRIGADE_CHECK_SHAPE(known != 0 && numel % known == 0, op, ": cannot infer -1 in ", shape_str(shape),
                        " for a tensor of shape ", shape_str(from), " (", numel, " elements)");
    out[infer_at] = numel / known;
    known *= out[infer_at];
  }
  BRIGADE_CHECK_SHAPE(known == numel, op, ": shape ", shape_str(shape), " has ", known,
                      " elements but the tensor of shape ", shape_str(from), " has ", numel);
  return out;
}

}  // namespace

Tensor::Tensor(std::shared_ptr<Storage> storage, Shape shape, Strides strides, int64_t offset, DType dtype)
    : impl_(std::make_shared<TensorImpl>()) {
  BRIGADE_CHECK_SHAPE(shape.size() == strides.size(), "Tensor: shape ", shape_str(shape), " and strides ",
                      shape_str(strides), " differ in length");
  int64_t max_offset = offset;
  for (size_t d = 0; d < shape.size(); ++d) {
    BRIGADE_CHECK_SHAPE(shape[d] >= 0, "Tensor: negative size in shape ", shape_str(shape));
    if (shape[d] > 0) max_offset += (shape[d] - 1) * std::max<int64_t>(strides[d], 0);
  }
  if (shape_numel(shape) > 0) {
    BRIGADE_CHECK_SHAPE(storage != nullptr && offset >= 0 &&
                            static_cast<size_t>(max_offset + 1) * dtype_size(dtype) <= storage->nbytes(),
                        "Tensor: geometry ", shape_str(shape), " strides ", shape_str(strides), " offset ", offset,
                        " does not fit in a storage of ", storage ? storage->nbytes() : 0, " bytes");
  }
  impl_->storage = std::move(storage);
  impl_->shape = std::move(shape);
  impl_->strides = std::move(strides);
  impl_->offset = offset;
  impl_->dtype = dtype;
}

#define BRIGADE_REQUIRE_DEFINED(op) BRIGADE_CHECK(impl_ != nullptr, op, ": the tensor is undefined")

const Shape& Tensor::shape() const { BRIGADE_REQUIRE_DEFINED("shape"); return impl_->shape; }
const Strides& Tensor::strides() const { BRIGADE_REQUIRE_DEFINED("strides"); return impl_->strides; }
int64_t Tensor::dim() const { return static_cast<int64_t>(shape().size()); }
int64_t Tensor::size(int64_t d) const { return shape()[wrap_dim(d, dim(), "size")]; }
int64_t Tensor::stride(int64_t d) const { return strides()[wrap_dim(d, dim(), "stride")]; }
int64_t Tensor::numel() const { return shape_numel(shape()); }
int64_t Tensor::offset() const { BRIGADE_REQUIRE_DEFINED("offset"); return impl_->offset; }
DType Tensor::dtype() const { BRIGADE_REQUIRE_DEFINED("dtype"); return impl_->dtype; }
Device Tensor::device() const { BRIGADE_REQUIRE_DEFINED("device"); return impl_->storage->device(); }
const std::shared_ptr<Storage>& Tensor::storage() const { BRIGADE_REQUIRE_DEFINED("storage"); return impl_->storage; }

bool Tensor::is_contiguous() const {
  const Shape& s = shape();
  const Strides& st = strides();
  int64_t expected = 1;
  for (size_t i = s.size(); i-- > 0;) {
    if (s[i] == 1) continue;
    if (s[i] == 0) return true;
    if (st[i] != expected) return false;
    expected *= s[i];
  }
  return true;
}

void* Tensor::data_ptr() const {
  BRIGADE_REQUIRE_DEFINED("data_ptr");
  auto* base = static_cast<char*>(impl_->storage->data());
  if (base == nullptr) return nullptr;
  return base + impl_->offset * static_cast<int64_t>(dtype_size(impl_->dtype));
}

// ---- views -------------------------------------------------------------------------------------------------

Tensor Tensor::view(const Shape& new_shape_in) const {
  Shape new_shape = infer_shape(new_shape_in, numel(), "view", shape());
  auto strides_opt = view_strides(shape(), strides(), new_shape);
  BRIGADE_CHECK_SHAPE(strides_opt.has_value(), "view: a tensor of shape ", shape_str(shape()), " with strides ",
                      shape_str(strides()), " cannot be viewed as ", shape_str(new_shape),
                      " without copying; use reshape()");
  Tensor out(storage(), new_shape, *strides_opt, offset(), dtype());
  detail::ViewInfo info{detail::ViewKind::View, {}, {}, 0, 0, 0, 1};
  return finish_view(*this, out, info);
}

Tensor Tensor::reshape(const Shape& new_shape_in) const {
  Shape new_shape = infer_shape(new_shape_in, numel(), "reshape", shape());
  if (view_strides(shape(), strides(), new_shape).has_value()) return view(new_shape);
  return contiguous().view(new_shape);
}

Tensor Tensor::permute(const std::vector<int64_t>& dims) const {
  int64_t n = dim();
  BRIGADE_CHECK_SHAPE(static_cast<int64_t>(dims.size()) == n, "permute: expected ", n, " dims for a tensor of shape ",
                      shape_str(shape()), ", found ", shape_str(dims));
  std::vector<int64_t> wrapped(n);
  std::vector<bool> seen(n, false);
  Shape new_shape(n);
  Strides new_strides(n);
  for (int64_t i = 0; i < n; ++i) {
    int64_t d = wrap_dim(dims[i], n, "permute");
    BRIGADE_CHECK_VALUE(!seen[d], "permute: dim ", d, " repeated in ", shape_str(dims));
    seen[d] = true;
    wrapped[i] = d;
    new_shape[i] = shape()[d];
    new_strides[i] = strides()[d];
  }
  Tensor out(storage(), new_shape, new_strides, offset(), dtype());
  detail::ViewInfo info{detail::ViewKind::Permute, {}, wrapped, 0, 0, 0, 1};
  return finish_view(*this, out, info);
}

Tensor Tensor::transpose(int64_t dim0, int64_t dim1) const {
  int64_t n = dim();
  std::vector<int64_t> order(n);
  for (int64_t i = 0; i < n; ++i) order[i] = i;
  if (n == 0) return permute(order);
  std::swap(order[wrap_dim(dim0, n, "transpose")], order[wrap_dim(dim1, n, "transpose")]);
  return permute(order);
}

Tensor Tensor::t() const {
  BRIGADE_CHECK_SHAPE(dim() == 2, "t: expected a 2-d tensor, found shape ", shape_str(shape()));
  return transpose(0, 1);
}

Tensor Tensor::narrow(int64_t d, int64_t start, int64_t length) const {
  d = wrap_dim(d, dim(), "narrow");
  int64_t size = shape()[d];
  if (start < 0) start += size;
  BRIGADE_CHECK_VALUE(start >= 0 && length >= 0 && start + length <= size, "narrow: range [", start, ", ",
                      start + length, ") out of bounds for dim ", d, " of size ", size, " (shape ",
                      shape_str(shape()), ")");
  Shape new_shape = shape();
  new_shape[d] = length;
  Tensor out(storage(), new_shape, strides(), offset() + start * strides()[d], dtype());
  detail::ViewInfo info{detail::ViewKind::Narrow, {}, {}, d, start, length, 1};
  return finish_view(*this, out, info);
}

Tensor Tensor::slice(int64_t d, int64_t start, int64_t end, int64_t step) const {
  d = wrap_dim(d, dim(), "slice");
  BRIGADE_CHECK_VALUE(step > 0, "slice: step must be positive, found ", step);
  int64_t size = shape()[d];
  auto clamp = [size](int64_t i) { return std::clamp<int64_t>(i < 0 ? i + size : i, 0, size); };
  start = clamp(start);
  end = std::max(clamp(end), start);
  int64_t length = (end - start + step - 1) / step;
  Shape new_shape = shape();
  Strides new_strides = strides();
  new_shape[d] = length;
  new_strides[d] *= step;
  Tensor out(storage(), new_shape, new_strides, offset() + start * strides()[d], dtype());
  detail::ViewInfo info{detail::ViewKind::Slice, {}, {}, d, start, length, step};
  return finish_view(*this, out, info);
}

Tensor Tensor::select(int64_t d, int64_t index) const {
  d = wrap_dim(d, dim(), "select");
  int64_t size = shape()[d];
  BRIGADE_CHECK_VALUE(index >= -size && index < size, "select: index ", index, " out of range for dim ", d,
                      " of size ", size);
  if (index < 0) index += size;
  Shape new_shape = shape();
  Strides new_strides = strides();
  int64_t new_offset = offset() + index * strides()[d];
  new_shape.erase(new_shape.begin() + d);
  new_strides.erase(new_strides.begin() + d);
  Tensor out(storage(), new_shape, new_strides, new_offset, dtype());
  detail::ViewInfo info{detail::ViewKind::Select, {}, {}, d, index, 1, 1};
  return finish_view(*this, out, info);
}

Tensor Tensor::expand(const Shape& target) const {
  int64_t n = static_cast<int64_t>(target.size()), old_n = dim();
  BRIGADE_CHECK_SHAPE(n >= old_n, "expand: cannot expand shape ", shape_str(shape()), " to fewer dims ",
                      shape_str(target));
  Shape new_shape(n);
  Strides new_strides(n);
  for (int64_t i = n - 1; i >= 0; --i) {
    int64_t old_i = i - (n - old_n);
    int64_t want = target[i];
    if (old_i < 0) {
      BRIGADE_CHECK_SHAPE(want >= 0, "expand: new leading dim ", i, " cannot be ", want, " (shape ",
                          shape_str(target), ")");
      new_shape[i] = want;
      new_strides[i] = 0;
      continue;
    }
    int64_t have = shape()[old_i];
    if (want == -1) want = have;
    BRIGADE_CHECK_SHAPE(want == have || have == 1, "expand: shape ", shape_str(shape()), " cannot be expanded to ",
                        shape_str(target), " (dim ", i, ": ", have, " -> ", want, "; only size-1 dims expand)");
    new_shape[i] = want;
    new_strides[i] = (have == 1 && want != 1) ? 0 : strides()[old_i];
  }
  Tensor out(storage(), new_shape, new_strides, offset(), dtype());
  detail::ViewInfo info{detail::ViewKind::Expand, {}, {}, 0, 0, 0, 1};
  return finish_view(*this, out, info);
}

Tensor Tensor::squeeze(int64_t d) const {
  d = wrap_dim(d, dim(), "squeeze");
  Shape new_shape = shape();
  Strides new_strides = strides();
  if (new_shape[d] == 1) {  // like PyTorch, squeezing a dim whose size is not 1 leaves the shape as it is
    new_shape.erase(new_shape.begin() + d);
    new_strides.erase(new_strides.begin() + d);
  }
  Tensor out(storage(), new_shape, new_strides, offset(), dtype());
  detail::ViewInfo info{detail::ViewKind::Squeeze, {}, {}, d, 0, 0, 1};
  return finish_view(*this, out, info);
}

Tensor Tensor::unsqueeze(int64_t d) const {
  d = wrap_dim(d, dim() + 1, "unsqueeze");
  Shape new_shape = shape();
  Strides new_strides = strides();
  int64_t stride = d < dim() ? strides()[d] * shape()[d] : 1;
  new_shape.insert(new_shape.begin() + d, 1);
  new_strides.insert(new_strides.begin() + d, stride);
  Tensor out(storage(), new_shape, new_strides, offset(), dtype());
  detail::ViewInfo info{detail::ViewKind::Unsqueeze, {}, {}, d, 0, 0, 1};
  return finish_view(*this, out, info);
}

// ---- autograd slot -----------------------------------------------------------------------------------------

AutogradMeta* Tensor::autograd_meta() const { return impl_ ? impl_->autograd.get() : nullptr; }

AutogradMeta& Tensor::ensure_autograd_meta() const {
  BRIGADE_REQUIRE_DEFINED("autograd");
  if (!impl_->autograd) impl_->autograd = std::make_unique<AutogradMeta>();
  return *impl_->autograd;
}

bool Tensor::requires_grad() const {
  const AutogradMeta* meta = autograd_meta();
  return meta != nullptr && (meta->requires_grad || meta->grad_fn != nullptr);
}

Tensor& Tensor::set_requires_grad(bool requires_grad) {
  BRIGADE_REQUIRE_DEFINED("set_requires_grad");
  BRIGADE_CHECK_AS(AutogradError, is_leaf(), "set_requires_grad: only leaf tensors can be marked; this tensor "
                                             "was produced by ", "an operation (use detach() first)");
  BRIGADE_CHECK_DTYPE(!requires_grad || is_floating(dtype()), "set_requires_grad: only floating tensors can "
                      "require grad, found ", dtype_name(dtype()));
  ensure_autograd_meta().requires_grad = requires_grad;
  return *this;
}

Tensor Tensor::grad() const {
  const AutogradMeta* meta = autograd_meta();
  return meta ? meta->grad : Tensor();
}

void Tensor::set_grad(const Tensor& grad) { ensure_autograd_meta().grad = grad; }

bool Tensor::is_leaf() const {
  const AutogradMeta* meta = autograd_meta();
  return meta == nullptr || meta->grad_fn == nullptr;
}

const std::shared_ptr<Node>& Tensor::grad_fn() const {
  static const std::shared_ptr<Node> none;
  const AutogradMeta* meta = autograd_meta();
  return meta ? meta->grad_fn : none;
}

Tensor Tensor::detach() const {
  BRIGADE_REQUIRE_DEFINED("detach");
  return Tensor(storage(), shape(), strides(), offset(), dtype());
}

void Tensor::backward(const Tensor& gradient, bool retain_graph) const {
  auto run = detail::autograd_hooks().backward;
  BRIGADE_CHECK(run != nullptr, "backward: the autograd library (brigade_autograd) is not linked");
  run(*this, gradient, retain_graph);
}

}  // namespace brigade
