// Backward of views and copies. A view only re-indexes its input's elements, so its backward puts each
// gradient element back where the view took it from:
//   view / squeeze / unsqueeze  -> reshape to the input shape
//   permute                     -> the inverse permutation
//   narrow / slice / select     -> zeros of the input shape, the gradient copied into the same view
//   expand                      -> sum over the broadcast dims (kernels::sum_to)
#include "autograd/views.h"

#include "autograd/node.h"
#include "kernels/kernels.h"

namespace brigade::autograd {
namespace {

using detail::ViewKind;

const char* view_name(ViewKind kind) {
  switch (kind) {
    case ViewKind::View:
      return "view";
    case ViewKind::Permute:
      return "permute";
    case ViewKind::Narrow:
      return "narrow";
    case ViewKind::Slice:
      return "slice";
    case ViewKind::Select:
      return "select";
    case ViewKind::Expand:
      return "expand";
    case ViewKind::Squeeze:
      return "squeeze";
    case ViewKind::Unsqueeze:
      return "unsqueeze";
  }
  return "view";
}

Tensor zeros_for(const Tensor& grad, const Shape& shape) {
  return zeros(shape, TensorOptions(grad.dtype()).device(grad.device()));
}

BackwardFn view_backward(const detail::ViewInfo& info) {
  const Shape input_shape = info.input_shape;
  switch (info.kind) {
    case ViewKind::View:
    case ViewKind::Squeeze:
    case ViewKind::Unsqueeze:
      return [input_shape](const Tensor& g, const NeedsGrad&) {
        return std::vector<Tensor>{g.reshape(input_shape)};
      };
    case ViewKind::Permute: {
      std::vector<int64_t> inverse(info.dims.size());
      for (size_t i = 0; i < info.dims.size(); ++i)
        inverse[static_cast<size_t>(info.dims[i])] = static_cast<int64_t>(i);
      return [inverse](const Tensor& g, const NeedsGrad&) { return std::vector<Tensor>{g.permute(inverse)}; };
    }
    case ViewKind::Narrow:
      return [input_shape, dim = info.dim, start = info.start, length = info.length](const Tensor& g,
                                                                                     const NeedsGrad&) {
        Tensor dx = zeros_for(g, input_shape);
        dx.narrow(dim, start, length).copy_(g);
        return std::vector<Tensor>{dx};
      };
    case ViewKind::Slice:
      // `length` elements start, start + step, ...: the same slice of the zeros selects the same places.
      return [input_shape, dim = info.dim, start = info.start, length = info.length, step = info.step](
                 const Tensor& g, const NeedsGrad&) {
        Tensor dx = zeros_for(g, input_shape);
        if (length > 0) dx.slice(dim, start, start + (length - 1) * step + 1, step).copy_(g);
        return std::vector<Tensor>{dx};
      };
    case ViewKind::Select:
      return [input_shape, dim = info.dim, index = info.start](const Tensor& g, const NeedsGrad&) {
        Tensor dx = zeros_for(g, input_shape);
        dx.select(dim, index).copy_(g);
        return std::vector<Tensor>{dx};
      };
    case ViewKind::Expand:
      return [input_shape](const Tensor& g, const NeedsGrad&) {
        return std::vector<Tensor>{kernels::sum_to(g, input_shape)};
      };
  }
  BRIGADE_THROW(AutogradError, "record_view: unknown view kind ", static_cast<int>(info.kind));
}

}  // namespace

void record_view(const Tensor& input, Tensor& view, const detail::ViewInfo& info) {
  set_history(view, std::make_shared<FunctionNode>(view_name(info.kind), view_backward(info),
                                                   std::vector<Tensor>{input}));
}

void record_copy(const Tensor& input, Tensor& output) {
  BackwardFn backward = [dtype = input.dtype(), device = input.device()](const Tensor& g, const NeedsGrad&) {
    return std::vector<Tensor>{g.to(dtype).to(device)};
  };
  set_history(output,
              std::make_shared<FunctionNode>("copy", std::move(backward), std::vector<Tensor>{input}));
}

}  // namespace brigade::autograd
