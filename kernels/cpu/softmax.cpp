// CPU backend: softmax / log_softmax of each row of x [R, C] and their backward, one row per OpenMP
// iteration. The row max is subtracted before exp (so exp never overflows); sums accumulate in double.
// float32 rows run the vector loops of exp_rows.h (the polynomial exp, within 2 ulp, instead of exp in
// double; AVX-512, AVX2 or SSE2, the same bits on each): v1, SoftmaxKernel::CpuRowLoop. v2 (CpuAvx512) runs
// float32 rows through kernels/cpu/exp_rows_avx512.h instead: max and sum in one pass, then the output.
#include <cmath>
#include <type_traits>

#include "kernels/backend.h"
#include "kernels/cpu/cpu_access.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/exp_rows.h"
#include "kernels/cpu/exp_rows_avx512.h"
#include "kernels/softmax_versions.h"

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

#if BRIGADE_CPU_X86
// v2's float32 rows: one pass for the max and the sum of exps, one for the output. A softmax row that fits
// one chunk (attention scores up to 2048 keys) and is not streamed keeps its exps in the output and scales
// them in place from L1: each exp is computed once, and the same bits come out. Short rows go in blocks of
// kRows, their maxes and sums interleaved (the same bits again).
void softmax_float32_avx512(const Tensor& x, const Tensor& out, bool log) {
  constexpr int64_t kRows = 8;
  const int64_t rows = x.size(0), cols = x.size(1);
  const auto* xp = static_cast<const float*>(x.data_ptr());
  auto* yp = out.data<float>();
  const bool stream = detail::output_outgrows_caches(rows * cols);
  const bool one_chunk = cols <= detail::kExpChunk, keep_exps = one_chunk && !log && !stream;
  const int64_t block = cols <= detail::kShortRow ? kRows : 1;
  const int64_t blocks = (rows + block - 1) / block;
#pragma omp parallel for if (rows * cols >= kParallelGrain) schedule(static)
  for (int64_t blk = 0; blk < blocks; ++blk) {
    const int64_t first = blk * block, count = std::min(rows, first + block) - first;
    float maxes[kRows];
    double totals[kRows];
    if (one_chunk) {
      detail::max_exp_sum_rows_avx512(xp + first * cols, count, cols, maxes, totals,
                                      keep_exps ? yp + first * cols : nullptr);
    } else {
      for (int64_t i = 0; i < count; ++i)
        totals[i] = detail::max_exp_sum_avx512(xp + (first + i) * cols, cols, &maxes[i]);
    }
    for (int64_t i = 0; i < count; ++i) {
      const float* in = xp + (first + i) * cols;
      float* y = yp + (first + i) * cols;
      if (log) {
        detail::log_softmax_avx512(in, y, cols, maxes[i], static_cast<float>(std::log(totals[i])), stream);
      } else {
        detail::exps_scaled_avx512(in, y, cols, maxes[i], static_cast<float>(1.0 / totals[i]), keep_exps,
                                   stream);
      }
    }
  }
}
#endif

// float32 backward rows: v1's loops, or v2's (fast) in blocks of rows.
void softmax_backward_float32(const Tensor& dy, const Tensor& y, const Tensor& dx, bool log, bool fast) {
  const int64_t rows = y.size(0), cols = y.size(1);
  const auto* dyp = static_cast<const float*>(dy.data_ptr());
  const auto* yp = static_cast<const float*>(y.data_ptr());
  auto* dxp = dx.data<float>();
#if BRIGADE_CPU_X86
  if (fast) {
    constexpr int64_t kBlock = 64;
    const int64_t blocks = (rows + kBlock - 1) / kBlock;
#pragma omp parallel for if (rows * cols >= kParallelGrain) schedule(static)
    for (int64_t blk = 0; blk < blocks; ++blk) {
      const int64_t first = blk * kBlock, count = std::min(rows, first + kBlock) - first;
      detail::softmax_backward_rows_avx512(dyp + first * cols, yp + first * cols, dxp + first * cols, count,
                                           cols, log);
    }
    return;
  }
#endif
  (void)fast;
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
void softmax_impl(const Tensor& x, const Tensor& out, bool log, bool fast) {
  if constexpr (std::is_same_v<T, float>) {
#if BRIGADE_CPU_X86
    if (fast) return softmax_float32_avx512(x, out, log);
#endif
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
void softmax_backward_impl(const Tensor& dy, const Tensor& y, const Tensor& dx, bool log, bool fast) {
  if constexpr (std::is_same_v<T, float>) {
    return softmax_backward_float32(dy, y, dx, log, fast);
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

/// Whether `kernel` runs v2's loops here (else v1's).
bool runs_avx512(SoftmaxKernel kernel) {
  return kernel == SoftmaxKernel::CpuAvx512 && detail::avx512_rows_run();
}

}  // namespace

void softmax_rows_with(SoftmaxKernel kernel, const Tensor& x, const Tensor& out, bool log) {
  const bool fast = runs_avx512(kernel);
  BRIGADE_DISPATCH_FLOATING(x.dtype(), log ? "log_softmax" : "softmax",
                            [&] { softmax_impl<scalar_t>(x, out, log, fast); });
}

void softmax_backward_rows_with(SoftmaxKernel kernel, const Tensor& dy, const Tensor& y, const Tensor& dx,
                                bool log) {
  const bool fast = runs_avx512(kernel);
  BRIGADE_DISPATCH_FLOATING(y.dtype(), log ? "log_softmax_backward" : "softmax_backward",
                            [&] { softmax_backward_impl<scalar_t>(dy, y, dx, log, fast); });
}

void softmax_rows(const Tensor& x, const Tensor& out, bool log) {
  cpu::softmax_rows_with(default_softmax_kernel(DeviceKind::CPU, x.size(1)), x, out, log);
}

void softmax_backward_rows(const Tensor& dy, const Tensor& y, const Tensor& dx, bool log) {
  cpu::softmax_backward_rows_with(default_softmax_kernel(DeviceKind::CPU, y.size(1)), dy, y, dx, log);
}

}  // namespace brigade::kernels::cpu
