// CPU backend: dropout with a Philox mask (element i of x in row-major order keeps its value, scaled by
// 1 / (1 - p), iff philox::uniform(seed, offset, i) >= p: the same rule as the CUDA kernel, so both devices
// drop the same elements), and the causal mask.
#include <type_traits>

#include "kernels/backend.h"
#include "kernels/cpu/cpu_access.h"
#include "kernels/cpu/dropout_avx512.h"
#include "kernels/cpu/exp_rows_avx512.h"  // avx512_rows_run
#include "tensor/philox.h"

namespace brigade::kernels::cpu {

using detail::acc_t;
using detail::kParallelGrain;
using detail::StridedAccess;

namespace {

/// Elements per task of the AVX-512 loop (a multiple of its 16 lanes).
constexpr int64_t kDropoutSpan = 4096;

template <typename T>
void dropout_impl(const Tensor& x, double p, const GeneratorState& state, const Tensor& out) {
  using A = acc_t<T>;
  const A scale = static_cast<A>(1.0 / (1.0 - p));
  const int64_t n = x.numel();
  if constexpr (std::is_same_v<T, float>) {
    if (x.is_contiguous() && out.is_contiguous() && detail::avx512_rows_run()) {
      const float* xp = x.data<float>();
      float* op = out.data<float>();
      const int64_t spans = (n + kDropoutSpan - 1) / kDropoutSpan;
#pragma omp parallel for if (n >= kParallelGrain) schedule(static)
      for (int64_t span = 0; span < spans; ++span) {
        const int64_t first = span * kDropoutSpan;
        detail::dropout_float_avx512(xp + first, op + first, std::min(kDropoutSpan, n - first), first, p,
                                     scale, state.seed, state.offset);
      }
      return;
    }
  }
  StridedAccess<const T> in(x, "dropout");
  StridedAccess<T> result(out, "dropout");
  // Philox costs ~10 rounds per element, so threads pay off earlier than for plain arithmetic.
#pragma omp parallel for if (n >= kParallelGrain / 8) schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const bool keep = philox::keeps(state.seed, state.offset, static_cast<uint64_t>(i), p);
    result[i] = static_cast<T>(keep ? static_cast<A>(in[i]) * scale : A(0));
  }
}

template <typename T>
void causal_mask_impl(const Tensor& out) {
  const int64_t T_len = out.size(0);
  auto* op = out.data<T>();
#pragma omp parallel for if (T_len * T_len >= kParallelGrain) schedule(static)
  for (int64_t r = 0; r < T_len; ++r) {
    for (int64_t c = 0; c < T_len; ++c) op[r * T_len + c] = static_cast<T>(c > r ? 1.0f : 0.0f);
  }
}

}  // namespace

void dropout(const Tensor& x, double p, const GeneratorState& state, const Tensor& out) {
  BRIGADE_DISPATCH_FLOATING(x.dtype(), "dropout", [&] { dropout_impl<scalar_t>(x, p, state, out); });
}

void causal_mask(const Tensor& out) {
  BRIGADE_DISPATCH_ALL(out.dtype(), "causal_mask", [&] { causal_mask_impl<scalar_t>(out); });
}

}  // namespace brigade::kernels::cpu
