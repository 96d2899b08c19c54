// CPU backend: softmax / log_softmax of each row of x [R, C] and their backward, one row per OpenMP
// iteration. The row max is subtracted before exp (so exp never overflows); sums accumulate in double.
// float32 rows run the vector loops of exp_rows.h (the polynomial exp, within 2 ulp, instead of exp in
// double; AVX-512, AVX2 or SSE2, the same bits on each).
#include <cmath>
#include <type_traits>

#include "kernels/backend.h"
#include "kernels/cpu/cpu_access.h"
#include "kernels/cpu/exp_rows.h"

namespace brigade::kernels::cpu {

using detail::kParallelGrain;

namespace {

// float32 rows: every pass through the vector loops of exp_rows.h, the sums in double.
void softmax_float32(const Tensor& x, const Tensor& out, bool log) {
  const int64_t rows = x.size(0), cols = x.size(1);
  const auto* xp = static_cast<const float*>(x.data_ptr());
  auto* yp = out.data<float>();
  const detail::ExpRowKernels& k = detail::exp_row_kernels();
#pragma omp parallel for if (rows * cols >= kParallelGrain) schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const float* in = xp + r * cols;
    float* y = yp + r * cols;
    const float row_max = k.max(in, cols);
    const double total = k.exp_shifted_sum(in, row_max, y, cols);
    if (log) {
      k.log_softmax(in, y, cols, row_max, std::log(total));
    } else {
      k.scale(y, cols, static_cast<float>(1.0 / total));
    }
  }
}

// float32 backward rows: as above.
void softmax_backward_float32(const Tensor& dy, const Tensor& y, const Tensor& dx, bool log) {
  const int64_t rows = y.size(0), cols = y.size(1);
  const auto* dyp = static_cast<const float*>(dy.data_ptr());
  const auto* yp = static_cast<const float*>(y.data_ptr());
  auto* dxp = dx.data<float>();
  const detail::ExpRowKernels& k = detail::exp_row_kernels();
#pragma omp parallel for if (rows * cols >= kParallelGrain) schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const float* g = dyp + r * cols;
    const float* yr = yp + r * cols;
    float* out = dxp + r * cols;
    if (log) {
      k.log_softmax_backward(g, yr, out, cols, k.sum(g, cols));
    } else {
      k.softmax_backward(g, yr, out, cols, k.dot(g, yr, cols));
    }
  }
}

template <typename T>
void softmax_impl(const Tensor& x, const Tensor& out, bool log) {
  if constexpr (std::is_same_v<T, float>) {
    return softmax_float32(x, out, log);
  }
  const int64_t rows = x.size(0), cols = x.size(1);
  const auto* xp = static_cast<const T*>(x.data_ptr());
  auto* yp = out.data<T>();
#pragma omp parallel for if (rows * cols >= kParallelGrain) schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const T* in = xp + r * cols;
    T* y = yp + r * cols;
    double row_max = static_cast<double>(in[0]);
    for (int64_t j = 1; j < cols; ++j) row_max = std::fmax(row_max, static_cast<double>(in[j]));
    double total = 0.0;
    for (int64_t j = 0; j < cols; ++j) total += std::exp(static_cast<double>(in[j]) - row_max);
    if (log) {
      const double log_total = std::log(total);
      for (int64_t j = 0; j < cols; ++j)
        y[j] = static_cast<T>(static_cast<double>(in[j]) - row_max - log_total);
    } else {
      const double inv_total = 1.0 / total;
      for (int64_t j = 0; j < cols; ++j) {
        y[j] = static_cast<T>(std::exp(static_cast<double>(in[j]) - row_max) * inv_total);
      }
    }
  }
}

template <typename T>
void softmax_backward_impl(const Tensor& dy, const Tensor& y, const Tensor& dx, bool log) {
  if constexpr (std::is_same_v<T, float>) {
    return softmax_backward_float32(dy, y, dx, log);
  }
  const int64_t rows = y.size(0), cols = y.size(1);
  const auto* dyp = static_cast<const T*>(dy.data_ptr());
  const auto* yp = static_cast<const T*>(y.data_ptr());
  auto* dxp = dx.data<T>();
#pragma omp parallel for if (rows * cols >= kParallelGrain) schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const T* g = dyp + r * cols;
    const T* yr = yp + r * cols;
    T* out = dxp + r * cols;
    if (log) {
      // dx = dy - softmax(x) * sum(dy), with softmax(x) = exp(y)
      double total = 0.0;
      for (int64_t j = 0; j < cols; ++j) total += static_cast<double>(g[j]);
      for (int64_t j = 0; j < cols; ++j) {
        out[j] = static_cast<T>(static_cast<double>(g[j]) - std::exp(static_cast<double>(yr[j])) * total);
      }
    } else {
      // dx = y * (dy - sum(dy * y))
      double dot = 0.0;
      for (int64_t j = 0; j < cols; ++j) dot += static_cast<double>(g[j]) * static_cast<double>(yr[j]);
      for (int64_t j = 0; j < cols; ++j) {
        out[j] = static_cast<T>(static_cast<double>(yr[j]) * (static_cast<double>(g[j]) - dot));
      }
    }
  }
}

}  // namespace

void softmax_rows(const Tensor& x, const Tensor& out, bool log) {
  BRIGADE_DISPATCH_FLOATING(x.dtype(), log ? "log_softmax" : "softmax",
                            [&] { softmax_impl<scalar_t>(x, out, log); });
}

void softmax_backward_rows(const Tensor& dy, const Tensor& y, const Tensor& dx, bool log) {
  BRIGADE_DISPATCH_FLOATING(y.dtype(), log ? "log_softmax_backward" : "softmax_backward",
                            [&] { softmax_backward_impl<scalar_t>(dy, y, dx, log); });
}

}  // namespace brigade::kernels::cpu
