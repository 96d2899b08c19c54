// Reference AdamW step and global L2 norm, element by element in double. With g the gradient and t the
// 1-based step:
//   m = beta1 m + (1 - beta1) g,   v = beta2 v + (1 - beta2) g^2,
//   mhat = m / (1 - beta1^t),      vhat = v / (1 - beta2^t),
//   p = p - lr (mhat / (sqrt(vhat) + eps) + weight_decay p)   (decoupled weight decay).
#include <cmath>

#include "kernels/reference/index_math.h"
#include "kernels/reference/reference.h"

namespace brigade::kernels::reference {

using detail::values_of;

AdamWResult adamw_update(const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v,
                         const AdamWStep& s) {
  std::vector<double> p = values_of(param), mv = values_of(m), vv = values_of(v);
  const std::vector<double> g = values_of(grad);
  BRIGADE_CHECK_SHAPE(g.size() == p.size() && mv.size() == p.size() && vv.size() == p.size(),
                      "reference adamw_update: param, grad, m, v of one size");
  const double correction1 = 1 - std::pow(s.beta1, static_cast<double>(s.step));
  const double correction2 = 1 - std::pow(s.beta2, static_cast<double>(s.step));
  for (size_t i = 0; i < p.size(); ++i) {
    mv[i] = s.beta1 * mv[i] + (1 - s.beta1) * g[i];
    vv[i] = s.beta2 * vv[i] + (1 - s.beta2) * g[i] * g[i];
    const double mhat = mv[i] / correction1, vhat = vv[i] / correction2;
    p[i] -= s.lr * (mhat / (std::sqrt(vhat) + s.eps) + s.weight_decay * p[i]);
  }
  return {detail::float64_tensor(p, param.shape()), detail::float64_tensor(mv, m.shape()),
          detail::float64_tensor(vv, v.shape())};
}

double global_l2_norm(const std::vector<Tensor>& tensors) {
  double total = 0;
  for (const Tensor& t : tensors) {
    for (double x : values_of(t)) total += x * x;
  }
  return std::sqrt(total);
}

}  // namespace brigade::kernels::reference
