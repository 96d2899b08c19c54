// CPU backend: layernorm over the rows of x [R, C], forward and backward, and the residual add fused into
// the forward (add_layernorm: each row of the sum is normalised while it is in L1: one pass, not two).
// Statistics in double, stored as float32 (float64 for float64 x). float32 rows go through the vector row
// loops of layernorm_rows.h (16 double lanes in a fixed order: the same bits on every ISA and for every
// thread count); the other dtypes through the scalar loops here, with `omp simd` sums. The parameter
// gradients sum over rows in fixed blocks of kRowBlock rows and then over the blocks in order, so they are
// parallel and still independent of the thread count. That is v1, LayerNormKernel::CpuRowLoop. v2
// (CpuAvx512) runs float32 rows through kernels/cpu/layernorm_avx512.h instead: float sums with FMAs, a
// forward that takes rows several at a time, and a backward that writes dx and a block's parameter-gradient
// sums in one sweep.
#include <algorithm>
#include <type_traits>
#include <vector>

#include "kernels/backend.h"
#include "kernels/cpu/cpu_access.h"
#include "kernels/cpu/cpu_features.h"     // BRIGADE_CPU_X86
#include "kernels/cpu/exp_rows_avx512.h"  // avx512_rows_run
#include "kernels/cpu/fused.h"
#include "kernels/cpu/layernorm_avx512.h"
#include "kernels/cpu/layernorm_rows.h"
#include "kernels/layernorm_versions.h"

namespace brigade::kernels::cpu {

using detail::kParallelGrain;

namespace {

constexpr int64_t kRowBlock = 64;

template <typename T>
using stat_t = std::conditional_t<std::is_same_v<T, double>, double, float>;

// Optional [C] parameter read as double (the identity value when undefined).
template <typename T>
double param_at(const T* p, int64_t j, double identity) {
  return p ? static_cast<double>(p[j]) : identity;
}

/// One row: y = (x - mu) * inv_std * w + b, with mu and inv_std returned. Not inlined, so that layernorm
/// and the fused add_layernorm run the very same machine code (the `omp simd` sums' lane order) on a row.
/// float32 rows take the vector loop instead.
template <typename T>
__attribute__((noinline)) void normalise_row(const T* in, T* out, int64_t cols, const T* wp, const T* bp,
                                             double eps, double* mu_out, double* inv_std_out) {
  double total = 0.0;
#pragma omp simd reduction(+ : total)
  for (int64_t j = 0; j < cols; ++j) total += static_cast<double>(in[j]);
  const double mu = total / static_cast<double>(cols);
  double squares = 0.0;
#pragma omp simd reduction(+ : squares)
  for (int64_t j = 0; j < cols; ++j) {
    const double d = static_cast<double>(in[j]) - mu;
    squares += d * d;
  }
  const double inv_std = detail::layernorm_inv_std(squares, cols, eps);
  for (int64_t j = 0; j < cols; ++j) {
    const double xhat = (static_cast<double>(in[j]) - mu) * inv_std;
    out[j] = static_cast<T>(xhat * param_at(wp, j, 1.0) + param_at(bp, j, 0.0));
  }
  *mu_out = mu;
  *inv_std_out = inv_std;
}

template <>
void normalise_row<float>(const float* in, float* out, int64_t cols, const float* wp, const float* bp,
                          double eps, double* mu_out, double* inv_std_out) {
  detail::layernorm_row_kernels().forward(in, out, cols, wp, bp, eps, mu_out, inv_std_out);
}

/// out = in + res, rounded to T as binary(Add) rounds it.
template <typename T>
void add_row(const T* in, const T* res, T* out, int64_t cols) {
  using A = detail::acc_t<T>;
  for (int64_t j = 0; j < cols; ++j) out[j] = static_cast<T>(static_cast<A>(in[j]) + static_cast<A>(res[j]));
}

/// layernorm of x's rows; with `residual` defined, of the rows of sum = x + residual (each sum row written,
/// rounded to T as binary(Add) rounds it, then normalised while it is in L1).
template <typename T>
void forward_impl(const Tensor& x, const Tensor& residual, const Tensor& weight, const Tensor& bias,
                  double eps, const Tensor& sum, const Tensor& y, const Tensor& mean, const Tensor& rstd) {
  const int64_t rows = x.size(0), cols = x.size(1);
  using S = stat_t<T>;
  const auto* xp = static_cast<const T*>(x.data_ptr());
  const auto* rsp = residual.defined() ? static_cast<const T*>(residual.data_ptr()) : nullptr;
  auto* sp = sum.defined() ? sum.data<T>() : nullptr;
  const auto* wp = weight.defined() ? static_cast<const T*>(weight.data_ptr()) : nullptr;
  const auto* bp = bias.defined() ? static_cast<const T*>(bias.data_ptr()) : nullptr;
  auto* yp = y.data<T>();
  auto* mp = mean.data<S>();
  auto* rp = rstd.data<S>();
#pragma omp parallel for if (rows * cols >= kParallelGrain) schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const T* in = xp + r * cols;
    if (rsp) {
      add_row(in, rsp + r * cols, sp + r * cols, cols);
      in = sp + r * cols;
    }
    double mu = 0.0, inv_std = 0.0;
    normalise_row(in, yp + r * cols, cols, wp, bp, eps, &mu, &inv_std);
    mp[r] = static_cast<S>(mu);
    rp[r] = static_cast<S>(inv_std);
  }
}

/// dweight[j] and dbias[j] (each where defined) = the sum of the blocks' partial sums of column j, added
/// in block order in double.
template <typename S>
void total_blocks(const std::vector<double>& part_w, const std::vector<double>& part_b, int64_t blocks,
                  int64_t cols, const Tensor& dweight, const Tensor& dbias) {
  S* dw = dweight.defined() ? dweight.data<S>() : nullptr;
  S* db = dbias.defined() ? dbias.data<S>() : nullptr;
#pragma omp parallel for if (blocks * cols >= kParallelGrain) schedule(static)
  for (int64_t j = 0; j < cols; ++j) {
    double w_total = 0.0, b_total = 0.0;
    for (int64_t blk = 0; blk < blocks; ++blk) {
      w_total += part_w[static_cast<size_t>(blk * cols + j)];
      b_total += part_b[static_cast<size_t>(blk * cols + j)];
    }
    if (dw) dw[j] = static_cast<S>(w_total);
    if (db) db[j] = static_cast<S>(b_total);
  }
}

template <typename T>
void backward_impl(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& mean,
                   const Tensor& rstd, const Tensor& dx, const Tensor& dweight, const Tensor& dbias) {
  const int64_t rows = x.size(0), cols = x.size(1);
  using S = stat_t<T>;
  const auto* dyp = static_cast<const T*>(dy.data_ptr());
  const auto* xp = static_cast<const T*>(x.data_ptr());
  const auto* wp = weight.defined() ? static_cast<const T*>(weight.data_ptr()) : nullptr;
  const auto* mp = static_cast<const S*>(mean.data_ptr());
  const auto* rp = static_cast<const S*>(rstd.data_ptr());
  auto* dxp = dx.data<T>();

  // dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)), dxhat = dy * weight.
#pragma omp parallel for if (rows * cols >= kParallelGrain) schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const T* g = dyp + r * cols;
    const T* in = xp + r * cols;
    T* out = dxp + r * cols;
    const double mu = static_cast<double>(mp[r]), inv_std = static_cast<double>(rp[r]);
    if constexpr (std::is_same_v<T, float>) {
      detail::layernorm_row_kernels().backward(g, in, wp, mu, inv_std, out, cols);
      continue;
    }
    double mean_dxhat = 0.0, mean_dxhat_xhat = 0.0;
#pragma omp simd reduction(+ : mean_dxhat, mean_dxhat_xhat)
    for (int64_t j = 0; j < cols; ++j) {
      const double xhat = (static_cast<double>(in[j]) - mu) * inv_std;
      const double dxhat = static_cast<double>(g[j]) * param_at(wp, j, 1.0);
      mean_dxhat += dxhat;
      mean_dxhat_xhat += dxhat * xhat;
    }
    mean_dxhat /= static_cast<double>(cols);
    mean_dxhat_xhat /= static_cast<double>(cols);
    for (int64_t j = 0; j < cols; ++j) {
      const double xhat = (static_cast<double>(in[j]) - mu) * inv_std;
      const double dxhat = static_cast<double>(g[j]) * param_at(wp, j, 1.0);
      out[j] = static_cast<T>(inv_std * (dxhat - mean_dxhat - xhat * mean_dxhat_xhat));
    }
  }

  if (!dweight.defined() && !dbias.defined()) return;
  // dweight = sum_r dy * xhat, dbias = sum_r dy: per-block partial sums, then blocks in order.
  const int64_t blocks = (rows + kRowBlock - 1) / kRowBlock;
  std::vector<double> part_w(static_cast<size_t>(blocks * cols), 0.0);
  std::vector<double> part_b(static_cast<size_t>(blocks * cols), 0.0);
#pragma omp parallel for if (rows * cols >= kParallelGrain) schedule(static)
  for (int64_t blk = 0; blk < blocks; ++blk) {
    double* pw = part_w.data() + blk * cols;
    double* pb = part_b.data() + blk * cols;
    const int64_t end = std::min(rows, (blk + 1) * kRowBlock);
    if constexpr (std::is_same_v<T, float>) {
      const int64_t first = blk * kRowBlock;
      detail::layernorm_row_kernels().param_grads(dyp + first * cols, xp + first * cols, mp + first,
                                                  rp + first, end - first, pw, pb, cols);
      continue;
    }
    for (int64_t r = blk * kRowBlock; r < end; ++r) {
      const double mu = static_cast<double>(mp[r]), inv_std = static_cast<double>(rp[r]);
      for (int64_t j = 0; j < cols; ++j) {
        const double g = static_cast<double>(dyp[r * cols + j]);
        pw[j] += g * (static_cast<double>(xp[r * cols + j]) - mu) * inv_std;
        pb[j] += g;
      }
    }
  }
  total_blocks<S>(part_w, part_b, blocks, cols, dweight, dbias);
}

#if BRIGADE_CPU_X86
/// v2's float32 forward: blocks of rows in parallel, each normalised by the AVX-512 loop (several rows at
/// a time, their serial chains interleaved). With a residual, a block is kFusedRows rows: their sum rows
/// are written, then normalised while they are in L1.
void forward_float32_avx512(const Tensor& x, const Tensor& residual, const Tensor& weight, const Tensor& bias,
                            double eps, const Tensor& sum, const Tensor& y, const Tensor& mean,
                            const Tensor& rstd) {
  constexpr int64_t kFusedRows = 8;
  static_assert(kFusedRows <= kRowBlock, "a block's statistics are held in kRowBlock slots");
  const int64_t rows = x.size(0), cols = x.size(1);
  const auto* xp = static_cast<const float*>(x.data_ptr());
  const auto* rsp = residual.defined() ? static_cast<const float*>(residual.data_ptr()) : nullptr;
  auto* sp = sum.defined() ? sum.data<float>() : nullptr;
  const auto* wp = weight.defined() ? static_cast<const float*>(weight.data_ptr()) : nullptr;
  const auto* bp = bias.defined() ? static_cast<const float*>(bias.data_ptr()) : nullptr;
  auto* yp = y.data<float>();
  auto* mp = mean.data<float>();
  auto* rp = rstd.data<float>();
  const int64_t block = rsp ? kFusedRows : kRowBlock;
  const int64_t blocks = (rows + block - 1) / block;
#pragma omp parallel for if (rows * cols >= kParallelGrain) schedule(static)
  for (int64_t blk = 0; blk < blocks; ++blk) {
    const int64_t first = blk * block, count = std::min(rows, first + block) - first;
    const float* in = xp + first * cols;
    if (rsp) {
      for (int64_t r = first; r < first + count; ++r)
        add_row(xp + r * cols, rsp + r * cols, sp + r * cols, cols);
      in = sp + first * cols;
    }
    double mu[kRowBlock], inv_std[kRowBlock];
    detail::layernorm_forward_rows_avx512(in, yp + first * cols, count, cols, wp, bp, eps, mu, inv_std);
    for (int64_t i = 0; i < count; ++i) {
      mp[first + i] = static_cast<float>(mu[i]);
      rp[first + i] = static_cast<float>(inv_std[i]);
    }
  }
}

/// v2's float32 backward: blocks of kRowBlock rows in parallel, each writing its rows' dx and adding them
/// into its partial sums of dweight and dbias in the same sweep; then the blocks in order, as v1 does.
void backward_float32_avx512(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& mean,
                             const Tensor& rstd, const Tensor& dx, const Tensor& dweight,
                             const Tensor& dbias) {
  const int64_t rows = x.size(0), cols = x.size(1);
  const auto* dyp = static_cast<const float*>(dy.data_ptr());
  const auto* xp = static_cast<const float*>(x.data_ptr());
  const auto* wp = weight.defined() ? static_cast<const float*>(weight.data_ptr()) : nullptr;
  const auto* mp = static_cast<const float*>(mean.data_ptr());
  const auto* rp = static_cast<const float*>(rstd.data_ptr());
  auto* dxp = dx.data<float>();
  const bool params = dweight.defined() || dbias.defined();
  const int64_t blocks = (rows + kRowBlock - 1) / kRowBlock;
  std::vector<double> part_w(params ? static_cast<size_t>(blocks * cols) : 0, 0.0);
  std::vector<double> part_b(part_w.size(), 0.0);
#pragma omp parallel for if (rows * cols >= kParallelGrain) schedule(static)
  for (int64_t blk = 0; blk < blocks; ++blk) {
    const int64_t first = blk * kRowBlock, end = std::min(rows, first + kRowBlock);
    detail::layernorm_backward_rows_avx512(dyp + first * cols, xp + first * cols, wp, mp + first, rp + first,
                                           end - first, cols, dxp + first * cols,
                                           params ? part_w.data() + blk * cols : nullptr,
                                           params ? part_b.data() + blk * cols : nullptr);
  }
  if (params) total_blocks<float>(part_w, part_b, blocks, cols, dweight, dbias);
}
#endif

/// Whether `kernel` runs v2's loops here (else v1's).
bool runs_avx512(LayerNormKernel kernel) {
  return kernel == LayerNormKernel::CpuAvx512 && detail::avx512_rows_run();
}

}  // namespace

void layernorm_forward_with(LayerNormKernel kernel, const Tensor& x, const Tensor& weight, const Tensor& bias,
                            double eps, const Tensor& y, const Tensor& mean, const Tensor& rstd) {
#if BRIGADE_CPU_X86
  if (runs_avx512(kernel) && x.dtype() == kFloat32) {
    return forward_float32_avx512(x, Tensor(), weight, bias, eps, Tensor(), y, mean, rstd);
  }
#endif
  (void)kernel;
  BRIGADE_DISPATCH_FLOATING(x.dtype(), "layernorm", [&] {
    forward_impl<scalar_t>(x, Tensor(), weight, bias, eps, Tensor(), y, mean, rstd);
  });
}

void layernorm_backward_with(LayerNormKernel kernel, const Tensor& dy, const Tensor& x, const Tensor& weight,
                             const Tensor& mean, const Tensor& rstd, const Tensor& dx, const Tensor& dweight,
                             const Tensor& dbias) {
#if BRIGADE_CPU_X86
  if (runs_avx512(kernel) && x.dtype() == kFloat32) {
    return backward_float32_avx512(dy, x, weight, mean, rstd, dx, dweight, dbias);
  }
#endif
  (void)kernel;
  BRIGADE_DISPATCH_FLOATING(x.dtype(), "layernorm_backward",
                            [&] { backward_impl<scalar_t>(dy, x, weight, mean, rstd, dx, dweight, dbias); });
}

void layernorm_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps, const Tensor& y,
                       const Tensor& mean, const Tensor& rstd) {
  cpu::layernorm_forward_with(default_layernorm_kernel(DeviceKind::CPU, x.size(1)), x, weight, bias, eps, y,
                              mean, rstd);
}

void layernorm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& mean,
                        const Tensor& rstd, const Tensor& dx, const Tensor& dweight, const Tensor& dbias) {
  cpu::layernorm_backward_with(default_layernorm_kernel(DeviceKind::CPU, x.size(1)), dy, x, weight, mean,
                               rstd, dx, dweight, dbias);
}

void add_layernorm_forward(const Tensor& x, const Tensor& residual, const Tensor& weight, const Tensor& bias,
                           double eps, const Tensor& sum, const Tensor& y, const Tensor& mean,
                           const Tensor& rstd) {
#if BRIGADE_CPU_X86
  if (runs_avx512(default_layernorm_kernel(DeviceKind::CPU, x.size(1))) && x.dtype() == kFloat32) {
    return forward_float32_avx512(x, residual, weight, bias, eps, sum, y, mean, rstd);
  }
#endif
  BRIGADE_DISPATCH_FLOATING(x.dtype(), "add_layernorm", [&] {
    forward_impl<scalar_t>(x, residual, weight, bias, eps, sum, y, mean, rstd);
  });
}

}  // namespace brigade::kernels::cpu
