// CPU backend: the AdamW update (in place, in double, stored back to the parameter's and the moments'
// dtypes) and the sum of squares behind global_l2_norm (deterministic chunked double sum).
#include <cmath>
#include <type_traits>

#include "kernels/backend.h"
#include "kernels/cpu/cpu_access.h"

namespace brigade::kernels::cpu {

using detail::kParallelGrain;

namespace {

template <typename T>
void adamw_impl(const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v,
                const AdamWStep& s) {
  using S = std::conditional_t<std::is_same_v<T, double>, double, float>;  // the moments' dtype
  auto* pp = param.data<T>();
  const auto* gp = static_cast<const T*>(grad.data_ptr());
  auto* mp = m.data<S>();
  auto* vp = v.data<S>();
  const double step = static_cast<double>(s.step);
  // Loop constants in locals (a store through pp may alias a double field of `s` for float64), and the
  // bias corrections as reciprocals: one division per element (the adaptive step) instead of three;
  // division and sqrt throughput are what this loop waits on.
  const double beta1 = s.beta1, beta2 = s.beta2, lr = s.lr, eps = s.eps, weight_decay = s.weight_decay;
  const double inv_bias1 = 1.0 / (1.0 - std::pow(beta1, step));
  const double inv_bias2 = 1.0 / (1.0 - std::pow(beta2, step));
  const int64_t n = param.numel();
#pragma omp parallel for if (n >= kParallelGrain) schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const double g = static_cast<double>(gp[i]);
    const double m_new = beta1 * static_cast<double>(mp[i]) + (1.0 - beta1) * g;
    const double v_new = beta2 * static_cast<double>(vp[i]) + (1.0 - beta2) * g * g;
    mp[i] = static_cast<S>(m_new);
    vp[i] = static_cast<S>(v_new);
    const double m_hat = m_new * inv_bias1, v_hat = v_new * inv_bias2;
    const double p = static_cast<double>(pp[i]);
    // Decoupled weight decay: the decay term is not divided by the adaptive denominator.
    pp[i] = static_cast<T>(p - lr * (m_hat / (std::sqrt(v_hat) + eps) + weight_decay * p));
  }
}

template <typename T>
double sum_squares_impl(const Tensor& x) {
  const auto* xp = static_cast<const T*>(x.data_ptr());
  return detail::chunked_sum_parallel(x.numel(), [xp](int64_t i) {
    const double v = static_cast<double>(xp[i]);
    return v * v;
  });
}

}  // namespace

void adamw(const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v, const AdamWStep& s) {
  BRIGADE_DISPATCH_FLOATING(param.dtype(), "adamw_update",
                            [&] { adamw_impl<scalar_t>(param, grad, m, v, s); });
}

double sum_squares(const Tensor& x) {
  double total = 0.0;
  BRIGADE_DISPATCH_FLOATING(x.dtype(), "global_l2_norm", [&] { total = sum_squares_impl<scalar_t>(x); });
  return total;
}

}  // namespace brigade::kernels::cpu
