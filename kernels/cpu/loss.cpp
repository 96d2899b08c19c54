// CPU backend: cross-entropy fused with log-softmax over the rows of logits [N, V]. Each row's loss is
// logsumexp(x) - x[target] (computed in double with the row max subtracted); its gradient row is
// (softmax(x) - onehot(target)) / count, where count is the number of rows not equal to ignore_index.
// float32 logits run the vector loops of exp_rows.h (the polynomial exp, within 2 ulp, instead of exp in
// double): v1, CrossEntropyKernel::CpuRowLoop. v2 (CpuAvx512) runs them through kernels/cpu/
// exp_rows_avx512.h: the row's max and sum of exps in one read, the gradient in one more pass.
#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "kernels/backend.h"
#include "kernels/cpu/cpu_access.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/exp_rows.h"
#include "kernels/cpu/exp_rows_avx512.h"
#include "kernels/cross_entropy_versions.h"

namespace brigade::kernels::cpu {

using detail::kParallelGrain;

namespace {

/// Validates targets; returns the first bad row (or -1) and sets *count to the rows that take part.
template <typename I>
int64_t count_targets(const I* tp, int64_t N, int64_t V, int64_t ignore_index, int64_t* count) {
  int64_t kept = 0;
  for (int64_t n = 0; n < N; ++n) {
    const auto t = static_cast<int64_t>(tp[n]);
    if (t == ignore_index) continue;
    if (t < 0 || t >= V) {
      *count = kept;
      return n;
    }
    ++kept;
  }
  *count = kept;
  return -1;
}

/// A row whose target is ignore_index: its loss and its gradient row (where there is one) are 0.
template <typename L, typename T>
void zero_ignored_row(L* loss, T* grad_row, int64_t V) {
  *loss = L(0);
  if (grad_row) std::fill(grad_row, grad_row + V, static_cast<T>(0.0f));
}

// float32 logits: the vector loops of exp_rows.h, sums and the gradient's arithmetic in double.
// The exps go into the gradient row (or a per-thread scratch row without one), so the loss is the same
// bits whether or not the gradient is asked for.
template <typename I>
void loss_rows_float32(const Tensor& logits, const I* tp, int64_t ignore_index, int64_t count,
                       const Tensor& row_loss, const Tensor& grad) {
  const int64_t N = logits.size(0), V = logits.size(1);
  const auto* xp = static_cast<const float*>(logits.data_ptr());
  auto* lp = row_loss.data<float>();
  float* gp = grad.defined() ? grad.data<float>() : nullptr;
  const double inv_count = count > 0 ? 1.0 / static_cast<double>(count) : 0.0;
  const detail::ExpRowKernels& k = detail::exp_row_kernels();
#pragma omp parallel for if (N * V >= kParallelGrain) schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    const float* x = xp + n * V;
    float* g = gp ? gp + n * V : nullptr;
    const auto t = static_cast<int64_t>(tp[n]);
    if (t == ignore_index) {
      zero_ignored_row(&lp[n], g, V);
      continue;
    }
    thread_local std::vector<float> scratch;
    float* e = g;
    if (!e) {
      if (scratch.size() < static_cast<size_t>(V)) scratch.resize(static_cast<size_t>(V));
      e = scratch.data();
    }
    const float row_max = k.max(x, V);
    const double total = k.exp_shifted_sum(x, row_max, e, V);
    const double lse = static_cast<double>(row_max) + std::log(total);
    lp[n] = static_cast<float>(lse - static_cast<double>(x[t]));
    if (g) {  // e is g's row: read e[t] before the loop overwrites it
      const double inv_total = 1.0 / total, p_target = static_cast<double>(e[t]) * inv_total;
      k.scale_twice(e, g, V, inv_total, inv_count);
      g[t] = static_cast<float>((p_target - 1.0) * inv_count);
    }
  }
}

#if BRIGADE_CPU_X86
// v2's float32 logits: the loss from one read of the row; the gradient row is (exp(x - max) / (total *
// count)) in float, the target's entry in double. A short row's exps are stored into its gradient row by the
// sums' pass and scaled in place (the same bits: the same exps times the same factor); a longer row's
// gradient recomputes them in its own pass (they would not stay in L1 between the two).
template <typename I>
void loss_rows_float32_avx512(const Tensor& logits, const I* tp, int64_t ignore_index, int64_t count,
                              const Tensor& row_loss, const Tensor& grad) {
  const int64_t N = logits.size(0), V = logits.size(1);
  const auto* xp = static_cast<const float*>(logits.data_ptr());
  auto* lp = row_loss.data<float>();
  float* gp = grad.defined() ? grad.data<float>() : nullptr;
  const double inv_count = count > 0 ? 1.0 / static_cast<double>(count) : 0.0;
  const bool stream = gp != nullptr && detail::output_outgrows_caches(N * V);
  // Short rows go in blocks of kRows: their maxes and sums interleaved (the same bits).
  constexpr int64_t kRows = 8;
  const int64_t block = V <= detail::kShortRow ? kRows : 1;
  const bool keep_exps = gp != nullptr && block > 1 && !stream;
  const int64_t blocks = (N + block - 1) / block;
#pragma omp parallel for if (N * V >= kParallelGrain) schedule(static)
  for (int64_t blk = 0; blk < blocks; ++blk) {
    const int64_t first = blk * block, rows = std::min(N, first + block) - first;
    float maxes[kRows];
    double totals[kRows];
    if (block > 1) {  // short rows (an ignored row's sums cost little and are not used)
      detail::max_exp_sum_rows_avx512(xp + first * V, rows, V, maxes, totals,
                                      keep_exps ? gp + first * V : nullptr);
    } else if (static_cast<int64_t>(tp[first]) != ignore_index) {
      totals[0] = detail::max_exp_sum_avx512(xp + first * V, V, &maxes[0]);
    }
    for (int64_t i = 0; i < rows; ++i) {
      const int64_t n = first + i;
      const float* x = xp + n * V;
      float* g = gp ? gp + n * V : nullptr;
      const auto t = static_cast<int64_t>(tp[n]);
      if (t == ignore_index) {
        zero_ignored_row(&lp[n], g, V);
        continue;
      }
      const double lse = static_cast<double>(maxes[i]) + std::log(totals[i]);
      lp[n] = static_cast<float>(lse - static_cast<double>(x[t]));
      if (g) {
        detail::exps_scaled_avx512(x, g, V, maxes[i], static_cast<float>(inv_count / totals[i]), keep_exps,
                                   stream);
        g[t] = static_cast<float>((std::exp(static_cast<double>(x[t]) - lse) - 1.0) * inv_count);
      }
    }
  }
}
#endif

template <typename I, typename T>
void loss_rows(const Tensor& logits, const I* tp, int64_t ignore_index, int64_t count, const Tensor& row_loss,
               const Tensor& grad) {
  using L = std::conditional_t<std::is_same_v<T, double>, double, float>;  // row_loss dtype
  const int64_t N = logits.size(0), V = logits.size(1);
  const auto* xp = static_cast<const T*>(logits.data_ptr());
  auto* lp = row_loss.data<L>();
  T* gp = grad.defined() ? grad.data<T>() : nullptr;
  const double inv_count = count > 0 ? 1.0 / static_cast<double>(count) : 0.0;
#pragma omp parallel for if (N * V >= kParallelGrain) schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    const T* x = xp + n * V;
    T* g = gp ? gp + n * V : nullptr;
    const auto t = static_cast<int64_t>(tp[n]);
    if (t == ignore_index) {
      zero_ignored_row(&lp[n], g, V);
      continue;
    }
    double row_max = static_cast<double>(x[0]);
    for (int64_t j = 1; j < V; ++j) row_max = std::fmax(row_max, static_cast<double>(x[j]));
    double total = 0.0;
    for (int64_t j = 0; j < V; ++j) total += std::exp(static_cast<double>(x[j]) - row_max);
    const double lse = row_max + std::log(total);
    lp[n] = static_cast<L>(lse - static_cast<double>(x[t]));
    if (g) {
      for (int64_t j = 0; j < V; ++j) {
        const double p = std::exp(static_cast<double>(x[j]) - lse);
        g[j] = static_cast<T>((p - (j == t ? 1.0 : 0.0)) * inv_count);
      }
    }
  }
}

}  // namespace

int64_t cross_entropy_with(CrossEntropyKernel kernel, const Tensor& logits, const Tensor& targets,
                           int64_t ignore_index, const Tensor& row_loss, const Tensor& grad, int64_t* count) {
  const bool fast = kernel == CrossEntropyKernel::CpuAvx512 && detail::avx512_rows_run();
  const int64_t N = logits.size(0), V = logits.size(1);
  int64_t bad = -1;
  BRIGADE_DISPATCH_INDEX(targets.dtype(), "cross_entropy", [&] {
    using id_t = scalar_t;
    const auto* tp = static_cast<const id_t*>(targets.data_ptr());
    bad = count_targets(tp, N, V, ignore_index, count);
    if (bad >= 0) return;
    BRIGADE_DISPATCH_FLOATING(logits.dtype(), "cross_entropy", [&] {
      if constexpr (std::is_same_v<scalar_t, float>) {
#if BRIGADE_CPU_X86
        if (fast) return loss_rows_float32_avx512<id_t>(logits, tp, ignore_index, *count, row_loss, grad);
#endif
        loss_rows_float32<id_t>(logits, tp, ignore_index, *count, row_loss, grad);
      } else {
        loss_rows<id_t, scalar_t>(logits, tp, ignore_index, *count, row_loss, grad);
      }
    });
  });
  (void)fast;
  return bad;
}

int64_t cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index,
                      const Tensor& row_loss, const Tensor& grad, int64_t* count) {
  return cpu::cross_entropy_with(default_cross_entropy_kernel(DeviceKind::CPU), logits, targets, ignore_index,
                                 row_loss, grad, count);
}

}  // namespace brigade::kernels::cpu
