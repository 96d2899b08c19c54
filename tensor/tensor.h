// Tensor: a strided view of a Storage.
//
//   Tensor = shared Storage + shape + strides (in elements) + offset + dtype + device + autograd slot.
//
// Copying a Tensor copies a handle (like torch::Tensor): both refer to the same data. View methods
// (view/reshape, permute/transpose, narrow/slice/select, expand, squeeze/unsqueeze) return a new Tensor
// over the same storage, so writes through a view are visible in the base. contiguous() copies only when
// the layout is not already row-major. Nothing here copies across devices implicitly: to(device) is the
// one explicit way to move data.
//
// Views are differentiable: when the input requires grad and grad mode is on, the autograd layer
// (autograd/views.cpp) records the view's backward. Everything else differentiable lives in
// autograd/ops.h as free functions (brigade::matmul, brigade::add, a + b, ...).
//
// \code
//   auto x = brigade::randn({2, 3});                    // float32, CPU
//   auto y = x.transpose(0, 1).contiguous();            // [3, 2], copied once
//   auto g = x.to(brigade::Device::cuda()).to(brigade::kBFloat16);
// \endcode
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "tensor/device.h"
#include "tensor/dtype.h"
#include "tensor/generator.h"
#include "tensor/shape.h"
#include "tensor/storage.h"

namespace brigade {

class Node;  // autograd/node.h
struct AutogradMeta;
struct TensorImpl;

/// Options for factories: dtype, device and whether the result is a leaf that requires grad.
struct TensorOptions {
  DType dtype_ = kFloat32;
  Device device_ = Device::cpu();
  bool requires_grad_ = false;

  TensorOptions() = default;
  TensorOptions(DType d) : dtype_(d) {}   // NOLINT: lets factories take a bare dtype
  TensorOptions(Device d) : device_(d) {} // NOLINT: or a bare device
  TensorOptions dtype(DType d) const { auto o = *this; o.dtype_ = d; return o; }
  TensorOptions device(Device d) const { auto o = *this; o.device_ = d; return o; }
  TensorOptions requires_grad(bool r = true) const { auto o = *this; o.requires_grad_ = r; return o; }
};

class Tensor {
 public:
  /// An undefined tensor (defined() == false), as returned for "no gradient".
  Tensor() = default;
  /// A tensor over `storage` with the given geometry (checked to fit inside the storage).
  Tensor(std::shared_ptr<Storage> storage, Shape shape, Strides strides, int64_t offset, DType dtype);

  bool defined() const { return impl_ != nullptr; }

  // ---- geometry -------------------------------------------------------------------------------------
  const Shape& shape() const;
  const Strides& strides() const;
  /// Size of dim `d` (negative counts from the end).
  int64_t size(int64_t d) const;
  int64_t stride(int64_t d) const;
  int64_t dim() const;
  int64_t numel() const;
  /// Element offset of element [0, 0, ...] into the storage.
  int64_t offset() const;
  DType dtype() const;
  Device device() const;
  size_t element_size() const { return dtype_size(dtype()); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * element_size(); }
  bool is_contiguous() const;
  const std::shared_ptr<Storage>& storage() const;

  /// Address of element [0, 0, ...].
  void* data_ptr() const;
  /// Typed address of element [0, 0, ...]; throws DTypeError if T does not match dtype().
  template <typename T>
  T* data() const {
    BRIGADE_CHECK_DTYPE(dtype_of<T>() == dtype(), "Tensor::data<", dtype_name(dtype_of<T>()),
                        ">: tensor has dtype ", dtype_name(dtype()));
    return static_cast<T*>(data_ptr());
  }

  // ---- views (share storage) ------------------------------------------------------------------------
  /// Same data, new shape; one dim may be -1. Throws ShapeError if the strides do not allow a view.
  Tensor view(const Shape& shape) const;
  /// Like view, but copies (contiguous()) when a view is impossible.
  Tensor reshape(const Shape& shape) const;
  Tensor flatten() const { return reshape({numel()}); }
  Tensor permute(const std::vector<int64_t>& dims) const;
  Tensor transpose(int64_t dim0, int64_t dim1) const;
  /// Transpose of a 2-d tensor.
  Tensor t() const;
  /// Elements [start, start + length) of `dim`.
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const;
  /// Elements start, start+step, ... < end of `dim` (Python slice semantics for non-negative step).
  Tensor slice(int64_t dim, int64_t start, int64_t end, int64_t step = 1) const;
  /// Index `index` of `dim`, removing that dim.
  Tensor select(int64_t dim, int64_t index) const;
  /// Broadcasts size-1 dims (stride 0) and prepends dims; -1 keeps a size.
  Tensor expand(const Shape& shape) const;
  Tensor squeeze(int64_t dim) const;
  Tensor unsqueeze(int64_t dim) const;

  // ---- copies and conversions -------------------------------------------------------------------------
  /// This tensor if already row-major, else a row-major copy.
  Tensor contiguous() const;
  /// A row-major copy that does not share storage.
  Tensor clone() const;
  /// A copy on `device` (this tensor if already there). Never implicit anywhere else.
  Tensor to(const Device& device) const;
  /// A copy converted to `dtype` (this tensor if already that dtype).
  Tensor to(DType dtype) const;
  Tensor cpu() const { return to(Device::cpu()); }
  /// Copies `src` into this tensor's elements (same shape, or broadcastable; any dtype; same device, or
  /// either side on the CPU). In place: throws if this tensor requires grad while grad mode is on.
  Tensor& copy_(const Tensor& src);
  Tensor& fill_(double value);
  Tensor& zero_() { return fill_(0.0); }

  /// The single element's value as double (throws ValueError unless numel() == 1).
  double item() const;
  /// All elements, row-major, converted to T, copied to the host.
  template <typename T>
  std::vector<T> to_vector() const;

  /// Readable, PyTorch-style printing (summarised beyond 1000 elements).
  std::string str() const;

  // ---- autograd -----------------------------------------------------------------------------------------
  bool requires_grad() const;
  /// Marks a leaf as requiring grad (throws on a non-leaf, or on a non-floating dtype).
  Tensor& set_requires_grad(bool requires_grad = true);
  /// Accumulated gradient of a leaf (undefined until a backward reaches it).
  Tensor grad() const;
  void set_grad(const Tensor& grad);
  /// True for tensors not produced by a recorded op.
  bool is_leaf() const;
  /// The node that produced this tensor (null for leaves).
  const std::shared_ptr<Node>& grad_fn() const;
  /// Same data, cut from the graph (requires_grad false).
  Tensor detach() const;
  /// Runs reverse-mode autodiff from this tensor (autograd/engine.h). `gradient` may be undefined only
  /// for a scalar (it is then 1). Without retain_graph the graph's saved tensors are released.
  void backward(const Tensor& gradient = Tensor(), bool retain_graph = false) const;

  /// The autograd slot (null until something sets it). For the autograd layer.
  AutogradMeta* autograd_meta() const;
  AutogradMeta& ensure_autograd_meta() const;
  /// Identity of the underlying TensorImpl (two handles to one tensor compare equal).
  const void* unsafe_impl_id() const { return impl_.get(); }

 private:
  std::shared_ptr<TensorImpl> impl_;
};

std::ostream& operator<<(std::ostream& out, const Tensor& tensor);

/// The autograd slot of a tensor. Node is defined by the autograd layer.
struct AutogradMeta {
  bool requires_grad = false;
  Tensor grad;                                  // accumulated gradient (leaves)
  std::shared_ptr<Node> grad_fn;                // producer (non-leaves)
  std::weak_ptr<Node> grad_accumulator;         // cached AccumulateGrad node (leaves)
  std::vector<std::function<Tensor(const Tensor&)>> hooks;  // leaf gradient hooks (may rewrite the grad)
};

// ---- factories ------------------------------------------------------------------------------------------
/// Uninitialised memory.
Tensor empty(const Shape& shape, TensorOptions options = {});
Tensor zeros(const Shape& shape, TensorOptions options = {});
Tensor ones(const Shape& shape, TensorOptions options = {});
Tensor full(const Shape& shape, double value, TensorOptions options = {});
/// [start, end) stepping by `step` (1-d). Default dtype int64 unless options say otherwise.
Tensor arange(int64_t start, int64_t end, int64_t step = 1, TensorOptions options = TensorOptions(kInt64));
/// Copies `values` (row-major) into a tensor of `shape` (numel must match) with T's dtype, then converts
/// to options' device; options' dtype is ignored (use .to(dtype)).
template <typename T>
Tensor from_vector(const std::vector<T>& values, const Shape& shape, const Device& device = Device::cpu());
/// Standard normal / uniform [0,1) from `generator` (default: the process-wide one). The same seed gives
/// the same numbers on CPU and CUDA.
Tensor randn(const Shape& shape, TensorOptions options = {}, Generator* generator = nullptr);
Tensor rand(const Shape& shape, TensorOptions options = {}, Generator* generator = nullptr);
Tensor zeros_like(const Tensor& like);
Tensor ones_like(const Tensor& like);
Tensor empty_like(const Tensor& like);

// ---- hooks the autograd layer installs -----------------------------------------------------------------
namespace detail {
enum class ViewKind { View, Permute, Narrow, Slice, Select, Expand, Squeeze, Unsqueeze };
/// What a view did, so that autograd can build its backward.
struct ViewInfo {
  ViewKind kind;
  Shape input_shape;
  std::vector<int64_t> dims;  // permutation (Permute)
  int64_t dim = 0, start = 0, length = 0, step = 1;
};
struct AutogradHooks {
  /// Attaches a backward node to `view` (called only when input requires grad and grad mode is on).
  void (*record_view)(const Tensor& input, Tensor& view, const ViewInfo& info) = nullptr;
  /// Records an identity-like copy (contiguous(), to(device), to(dtype)) of `input` into `output`.
  void (*record_copy)(const Tensor& input, Tensor& output) = nullptr;
  /// Runs the engine (Tensor::backward).
  void (*backward)(const Tensor& root, const Tensor& gradient, bool retain_graph) = nullptr;
};
AutogradHooks& autograd_hooks();
}  // namespace detail

}  // namespace brigade
