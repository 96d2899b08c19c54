// Reference dropout and causal mask. Dropout's mask is defined by the Philox stream (tensor/philox.h):
// element i (row-major) is kept when uniform(seed, offset, i) >= p, and a kept value is scaled by
// 1 / (1 - p). The causal mask [T, T] marks with 1 the keys a query must not see (col > row).
#include "kernels/reference/index_math.h"
#include "kernels/reference/reference.h"
#include "tensor/philox.h"

namespace brigade::kernels::reference {

Tensor dropout(const Tensor& x, double p, const GeneratorState& state) {
  std::vector<double> v = detail::values_of(x);
  for (size_t i = 0; i < v.size(); ++i) {
    const bool keep = philox::uniform(state.seed, state.offset, i) >= p;
    v[i] = keep && p < 1.0 ? v[i] / (1.0 - p) : 0.0;
  }
  return detail::float64_tensor(v, x.shape());
}

Tensor causal_mask(int64_t T) {
  std::vector<double> mask;
  for (int64_t row = 0; row < T; ++row) {
    for (int64_t col = 0; col < T; ++col) mask.push_back(col > row ? 1.0 : 0.0);
  }
  return detail::float64_tensor(mask, {T, T});
}

}  // namespace brigade::kernels::reference
