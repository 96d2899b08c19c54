// Reference matmul: the triple loop over the logical values of op(a) [M, K] and op(b) [K, N], batched over
// a leading dim when either operand is 3-d (a 2-d operand is shared by every batch), summed in double in
// order k = 0, 1, ... It also returns sum_k |a_ik b_kj|: a dot product rounded in a type with unit roundoff
// u is off by at most about K u times that, whatever the signs, so it is the scale a test measures a
// kernel's error on (|c_ij| alone may cancel to ~0).
#include <cmath>

#include "kernels/reference/index_math.h"
#include "kernels/reference/reference.h"

namespace brigade::kernels::reference {

MatmulReference matmul(const Tensor& a, const Tensor& b, bool transpose_a, bool transpose_b) {
  BRIGADE_CHECK_SHAPE((a.dim() == 2 || a.dim() == 3) && (b.dim() == 2 || b.dim() == 3),
                      "reference matmul: 2-d or 3-d operands, found ", shape_str(a.shape()), " and ",
                      shape_str(b.shape()));
  const std::vector<double> av = detail::values_of(a), bv = detail::values_of(b);
  // Stored sizes (rows, cols) and the logical M, K, N of op(a) @ op(b).
  const int64_t ar = a.size(-2), ac = a.size(-1), br = b.size(-2), bc = b.size(-1);
  const int64_t m = transpose_a ? ac : ar, k = transpose_a ? ar : ac;
  const int64_t n = transpose_b ? br : bc, kb = transpose_b ? bc : br;
  BRIGADE_CHECK_SHAPE(k == kb, "reference matmul: K = ", k, " vs K = ", kb);
  const bool batched = a.dim() == 3 || b.dim() == 3;
  const int64_t batch = a.dim() == 3 ? a.size(0) : (b.dim() == 3 ? b.size(0) : 1);
  BRIGADE_CHECK_SHAPE(a.dim() == 2 || b.dim() == 2 || a.size(0) == b.size(0), "reference matmul: batch ",
                      a.size(0), " vs ", b.size(0));
  std::vector<double> c(static_cast<size_t>(batch * m * n), 0.0), magnitude(c.size(), 0.0);
  for (int64_t bi = 0; bi < batch; ++bi) {
    const double* ab = av.data() + (a.dim() == 3 ? bi * ar * ac : 0);  // a[bi]: [ar, ac] row-major
    const double* bb = bv.data() + (b.dim() == 3 ? bi * br * bc : 0);
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double sum = 0.0, mag = 0.0;
        for (int64_t p = 0; p < k; ++p) {
          const double x = transpose_a ? ab[p * ac + i] : ab[i * ac + p];  // op(a)_ip
          const double y = transpose_b ? bb[j * bc + p] : bb[p * bc + j];  // op(b)_pj
          sum += x * y;
          mag += std::fabs(x * y);
        }
        c[static_cast<size_t>((bi * m + i) * n + j)] = sum;
        magnitude[static_cast<size_t>((bi * m + i) * n + j)] = mag;
      }
    }
  }
  const Shape shape = batched ? Shape{batch, m, n} : Shape{m, n};
  return {detail::float64_tensor(c, shape), detail::float64_tensor(magnitude, shape)};
}

}  // namespace brigade::kernels::reference
