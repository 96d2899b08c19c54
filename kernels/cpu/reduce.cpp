// CPU backend: row reductions of x [R, C] (contiguous) into out [R]. Sums accumulate in double in a fixed
// order (see chunked_sum_*), so results do not depend on the thread count. Max and ArgMax propagate NaN
// (a NaN is the maximum, at its first position), as PyTorch does.
#include <omp.h>

#include <cmath>

#include "kernels/backend.h"
#include "kernels/cpu/cpu_access.h"

namespace brigade::kernels::cpu {

using detail::acc_t;
using detail::kParallelGrain;

namespace {

template <typename T>
void sum_rows(const T* x, T* out, int64_t rows, int64_t cols) {
  auto row_sum = [&](int64_t r, bool parallel) {
    const T* row = x + r * cols;
    auto element = [row](int64_t j) { return static_cast<double>(row[j]); };
    return parallel ? detail::chunked_sum_parallel(cols, element) : detail::chunked_sum_serial(cols, element);
  };
  if (rows >= omp_get_max_threads() || rows * cols < kParallelGrain) {
#pragma omp parallel for if (rows * cols >= kParallelGrain) schedule(static)
    for (int64_t r = 0; r < rows; ++r) out[r] = static_cast<T>(row_sum(r, false));
  } else {
    // Few long rows: parallelise inside each row instead.
    for (int64_t r = 0; r < rows; ++r) out[r] = static_cast<T>(row_sum(r, true));
  }
}

template <typename T>
void max_rows(const T* x, T* out, int64_t rows, int64_t cols) {
#pragma omp parallel for if (rows * cols >= kParallelGrain) schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const T* row = x + r * cols;
    acc_t<T> best = static_cast<acc_t<T>>(row[0]);
    for (int64_t j = 1; j < cols && !std::isnan(best); ++j) {
      acc_t<T> v = static_cast<acc_t<T>>(row[j]);
      if (v > best || std::isnan(v)) best = v;
    }
    out[r] = static_cast<T>(best);
  }
}

template <typename T>
void argmax_rows(const T* x, int64_t* out, int64_t rows, int64_t cols) {
#pragma omp parallel for if (rows * cols >= kParallelGrain) schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const T* row = x + r * cols;
    acc_t<T> best = static_cast<acc_t<T>>(row[0]);
    int64_t best_index = 0;
    for (int64_t j = 1; j < cols && !std::isnan(best); ++j) {
      acc_t<T> v = static_cast<acc_t<T>>(row[j]);
      if (v > best || std::isnan(v)) {  // strict: the first maximum wins
        best = v;
        best_index = j;
      }
    }
    out[r] = best_index;
  }
}

}  // namespace

void reduce_rows(ReduceOp op, const Tensor& x, const Tensor& out) {
  const int64_t rows = x.size(0), cols = x.size(1);
  BRIGADE_DISPATCH_FLOATING(x.dtype(), "reduce_rows", [&] {
    const auto* xp = static_cast<const scalar_t*>(x.data_ptr());
    switch (op) {
      case ReduceOp::Sum:
        sum_rows(xp, out.data<scalar_t>(), rows, cols);
        break;
      case ReduceOp::Max:
        max_rows(xp, out.data<scalar_t>(), rows, cols);
        break;
      case ReduceOp::ArgMax:
        argmax_rows(xp, out.data<int64_t>(), rows, cols);
        break;
    }
  });
}

}  // namespace brigade::kernels::cpu
