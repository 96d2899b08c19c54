// Reference cross-entropy: logits [..., V] as rows, targets [...] one per row. With logp = log_softmax(row)
// and count the rows whose target is not ignore_index:
//   loss = -sum_{counted rows} logp[target] / count (0 when count is 0),
//   grad[row] = (exp(logp) - onehot(target)) / count on counted rows, 0 on ignored rows.
#include <cmath>

#include "kernels/reference/index_math.h"
#include "kernels/reference/reference.h"

namespace brigade::kernels::reference {

CrossEntropyOutput cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index,
                                 bool compute_grad) {
  BRIGADE_CHECK_SHAPE(logits.dim() >= 1, "reference cross_entropy: logits [..., V], found 0-d");
  const int64_t V = logits.size(-1);
  const std::vector<double> logp = detail::values_of(log_softmax(logits));
  const std::vector<int64_t> t = targets.to_vector<int64_t>();
  BRIGADE_CHECK_SHAPE(logp.size() == t.size() * static_cast<size_t>(V), "reference cross_entropy: logits ",
                      shape_str(logits.shape()), " for targets ", shape_str(targets.shape()));
  int64_t count = 0;
  for (int64_t target : t) count += target != ignore_index;
  double total = 0;
  std::vector<double> grad(logp.size(), 0.0);
  for (size_t n = 0; n < t.size(); ++n) {
    if (t[n] == ignore_index) continue;
    BRIGADE_CHECK_VALUE(t[n] >= 0 && t[n] < V, "reference cross_entropy: target ", t[n], " at row ", n,
                        " outside [0, ", V, ")");
    total -= logp[n * V + t[n]];
    for (int64_t j = 0; j < V; ++j) {
      grad[n * V + j] = (std::exp(logp[n * V + j]) - (j == t[n] ? 1.0 : 0.0)) / static_cast<double>(count);
    }
  }
  CrossEntropyOutput out;
  out.loss = detail::float64_tensor({count > 0 ? total / static_cast<double>(count) : 0.0}, {});
  out.count = count;
  if (compute_grad) out.grad_logits = detail::float64_tensor(grad, logits.shape());
  return out;
}

}  // namespace brigade::kernels::reference
