// Reference embedding: weight [V, C] gathered at ids [...] -> [..., C], and its backward, grad_out [..., C]
// added row by row into a zeroed [V, C] at the same ids, in position order.
#include "kernels/reference/index_math.h"
#include "kernels/reference/reference.h"

namespace brigade::kernels::reference {

using detail::float64_tensor;
using detail::values_of;

Tensor embedding(const Tensor& weight, const Tensor& ids) {
  BRIGADE_CHECK_SHAPE(weight.dim() == 2, "reference embedding: weight [V, C], found ",
                      shape_str(weight.shape()));
  const int64_t V = weight.size(0), C = weight.size(1);
  const std::vector<double> w = values_of(weight);
  const std::vector<int64_t> id = ids.to_vector<int64_t>();
  std::vector<double> out;
  out.reserve(id.size() * static_cast<size_t>(C));
  for (size_t n = 0; n < id.size(); ++n) {
    BRIGADE_CHECK_VALUE(id[n] >= 0 && id[n] < V, "reference embedding: id ", id[n], " at position ", n,
                        " outside [0, ", V, ")");
    for (int64_t j = 0; j < C; ++j) out.push_back(w[static_cast<size_t>(id[n] * C + j)]);
  }
  Shape shape = ids.shape();
  shape.push_back(C);
  return float64_tensor(out, shape);
}

Tensor embedding_backward(const Tensor& grad_out, const Tensor& ids, int64_t num_embeddings) {
  const int64_t C = grad_out.dim() == 0 ? 1 : grad_out.size(-1);
  const std::vector<double> g = values_of(grad_out);
  const std::vector<int64_t> id = ids.to_vector<int64_t>();
  BRIGADE_CHECK_SHAPE(g.size() == id.size() * static_cast<size_t>(C),
                      "reference embedding_backward: grad_out ", shape_str(grad_out.shape()), " for ids ",
                      shape_str(ids.shape()));
  std::vector<double> out(static_cast<size_t>(num_embeddings * C), 0.0);
  for (size_t n = 0; n < id.size(); ++n) {
    BRIGADE_CHECK_VALUE(id[n] >= 0 && id[n] < num_embeddings, "reference embedding_backward: id ", id[n],
                        " outside [0, ", num_embeddings, ")");
    for (int64_t j = 0; j < C; ++j) out[static_cast<size_t>(id[n] * C + j)] += g[n * C + j];
  }
  return float64_tensor(out, {num_embeddings, C});
}

}  // namespace brigade::kernels::reference
