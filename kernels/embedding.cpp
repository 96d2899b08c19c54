// Dispatch of the embedding gather and its scatter-add backward. ids of any shape are flattened to [N];
// weight is [V, C]. An id outside [0, V) is a ValueError naming the id, where it sits in ids, and V.
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "kernels/kernels.h"
#include "kernels/op_checks.h"
#include "tensor/grad_mode.h"

namespace brigade::kernels {

namespace {

/// "[1, 2]": the multi-index of row-major position `flat` in `shape`.
std::string position_str(const Shape& shape, int64_t flat) {
  std::vector<int64_t> coords(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    coords[d] = flat % shape[d];
    flat /= shape[d];
  }
  return shape_str(coords);
}

[[noreturn]] void throw_bad_id(const char* op, const Tensor& ids, int64_t position, int64_t id, int64_t V) {
  BRIGADE_THROW(ValueError, op, ": id ", id, " at position ", position_str(ids.shape(), position),
                " of ids (shape ", shape_str(ids.shape()), ") is outside [0, ", V, ") (V = ", V,
                " embeddings)");
}

void check_ids(const char* op, const Tensor& weight_or_grad, const Tensor& ids) {
  detail::check_defined(op, "ids", ids);
  detail::check_same_device(op, "weight", weight_or_grad, "ids", ids);
  detail::check_index(op, "ids", ids);
}

}  // namespace

Tensor embedding(const Tensor& weight, const Tensor& ids) {
  NoGradGuard no_grad;
  const char* op = "embedding";
  detail::check_defined(op, "weight", weight);
  detail::check_floating(op, "weight", weight);
  check_ids(op, weight, ids);
  BRIGADE_CHECK_SHAPE(weight.dim() == 2, op, ": weight must be [V, C], found shape ",
                      shape_str(weight.shape()));
  const int64_t V = weight.size(0), C = weight.size(1), N = ids.numel();
  Shape out_shape = ids.shape();
  out_shape.push_back(C);
  Tensor out = empty(out_shape, detail::output_options(weight));
  if (N == 0) return out;
  // Called even when C == 0: the ids are still checked.
  Tensor flat_ids = ids.contiguous().view({N});
  int64_t bad =
      BRIGADE_ON_BACKEND(weight.device(), embedding_forward(weight.contiguous(), flat_ids, out.view({N, C})));
  if (bad >= 0) {
    throw_bad_id(op, ids, bad, static_cast<int64_t>(flat_ids.narrow(0, bad, 1).item()), V);
  }
  return out;
}

Tensor embedding_backward(const Tensor& grad_out, const Tensor& ids, int64_t num_embeddings) {
  NoGradGuard no_grad;
  const char* op = "embedding_backward";
  detail::check_defined(op, "grad_out", grad_out);
  detail::check_floating(op, "grad_out", grad_out);
  check_ids(op, grad_out, ids);
  BRIGADE_CHECK_VALUE(num_embeddings >= 0, op, ": num_embeddings must be >= 0, found ", num_embeddings);
  BRIGADE_CHECK_SHAPE(grad_out.dim() == ids.dim() + 1, op,
                      ": grad_out must have shape ids.shape + [C]; ids has ", "shape ",
                      shape_str(ids.shape()), ", grad_out has shape ", shape_str(grad_out.shape()));
  const int64_t C = grad_out.size(-1), N = ids.numel(), V = num_embeddings;
  Shape expected = ids.shape();
  expected.push_back(C);
  BRIGADE_CHECK_SHAPE(grad_out.shape() == expected, op, ": grad_out has shape ", shape_str(grad_out.shape()),
                      " but expected ", shape_str(expected), " (ids' shape + [C])");
  // The backends assume valid ids (a bad one would scatter out of bounds), so check them here. On CUDA this
  // copies the ids to the host; the forward pass synchronises the same way to report a bad id.
  std::vector<int64_t> host_ids = ids.to_vector<int64_t>();
  for (int64_t i = 0; i < N; ++i) {
    if (host_ids[static_cast<size_t>(i)] < 0 || host_ids[static_cast<size_t>(i)] >= V) {
      throw_bad_id(op, ids, i, host_ids[static_cast<size_t>(i)], V);
    }
  }
  Tensor grad_weight = zeros({V, C}, detail::output_options(grad_out));
  if (N > 0 && C > 0) {
    BRIGADE_ON_BACKEND(grad_out.device(), embedding_backward(grad_out.contiguous().view({N, C}),
                                                             ids.contiguous().view({N}), grad_weight));
  }
  return grad_weight;
}

}  // namespace brigade::kernels
