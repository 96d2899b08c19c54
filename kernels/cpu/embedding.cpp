// CPU backend: embedding gather (weight [V, C] at ids [N] -> out [N, C]) and its scatter-add backward.
// The backward groups the positions by id (a stable sort) and sums each group in double, in position order,
// so it is parallel over ids without atomics, deterministic, and rounds a bfloat16 gradient only once.
#include <algorithm>
#include <numeric>
#include <vector>

#include "kernels/backend.h"
#include "kernels/cpu/cpu_access.h"
#include "kernels/cpu/reduce.h"  // add_row_to_sums: AVX-512 for float rows

namespace brigade::kernels::cpu {

using detail::kParallelGrain;

namespace {

/// Returns the first position n whose id is outside [0, V), or N.
template <typename I, typename T>
int64_t gather_rows(const Tensor& weight, const Tensor& ids, const Tensor& out) {
  const int64_t V = weight.size(0), C = weight.size(1), N = ids.size(0);
  const auto* idp = static_cast<const I*>(ids.data_ptr());
  const auto* wp = static_cast<const T*>(weight.data_ptr());
  auto* op = out.data<T>();
  int64_t bad = N;
#pragma omp parallel for if (N * C >= kParallelGrain) schedule(static) reduction(min : bad)
  for (int64_t n = 0; n < N; ++n) {
    const auto id = static_cast<int64_t>(idp[n]);
    if (id < 0 || id >= V) {
      bad = std::min(bad, n);
      continue;
    }
    std::copy(wp + id * C, wp + (id + 1) * C, op + n * C);
  }
  return bad;
}

/// The positions 0..N-1 ordered by id, equal ids in position order (a stable sort). Where the vocabulary
/// is not much larger than N, a counting sort (O(N + V)); otherwise std::stable_sort (O(N log N)): at the
/// baby GPT's 1024 positions and 65 ids the comparison sort took ~15 % of the backward.
template <typename I>
std::vector<int64_t> positions_by_id(const I* idp, int64_t N, int64_t V) {
  std::vector<int64_t> order(static_cast<size_t>(N));
  if (V <= 8 * N) {
    std::vector<int64_t> next(static_cast<size_t>(V) + 1, 0);  // next[id]: where id's next position goes
    for (int64_t n = 0; n < N; ++n) ++next[static_cast<size_t>(idp[n]) + 1];
    for (int64_t v = 0; v < V; ++v) next[static_cast<size_t>(v) + 1] += next[static_cast<size_t>(v)];
    for (int64_t n = 0; n < N; ++n) order[static_cast<size_t>(next[static_cast<size_t>(idp[n])]++)] = n;
  } else {
    std::iota(order.begin(), order.end(), int64_t{0});
    std::stable_sort(order.begin(), order.end(), [idp](int64_t a, int64_t b) { return idp[a] < idp[b]; });
  }
  return order;
}

template <typename I, typename T>
void scatter_add_rows(const Tensor& grad_out, const Tensor& ids, const Tensor& grad_weight) {
  const int64_t C = grad_out.size(1), N = ids.size(0), V = grad_weight.size(0);
  const auto* idp = static_cast<const I*>(ids.data_ptr());
  const auto* gp = static_cast<const T*>(grad_out.data_ptr());
  auto* wp = grad_weight.data<T>();
  // Positions sorted by id (stable: equal ids keep position order), then cut into runs of one id.
  const std::vector<int64_t> order = positions_by_id(idp, N, V);
  std::vector<int64_t> run_starts;
  for (int64_t i = 0; i < N; ++i) {
    if (i == 0 || idp[order[static_cast<size_t>(i)]] != idp[order[static_cast<size_t>(i - 1)]]) {
      run_starts.push_back(i);
    }
  }
  run_starts.push_back(N);
  const auto runs = static_cast<int64_t>(run_starts.size()) - 1;
#pragma omp parallel if (N * C >= kParallelGrain)
  {
    std::vector<double> row(static_cast<size_t>(C));  // one id's sums, a buffer per thread
#pragma omp for schedule(dynamic, 16)
    for (int64_t k = 0; k < runs; ++k) {
      const int64_t begin = run_starts[static_cast<size_t>(k)], end = run_starts[static_cast<size_t>(k + 1)];
      const auto id = static_cast<int64_t>(idp[order[static_cast<size_t>(begin)]]);
      std::fill(row.begin(), row.end(), 0.0);
      for (int64_t i = begin; i < end; ++i)
        detail::add_row_to_sums(row.data(), gp + order[static_cast<size_t>(i)] * C, C);
      T* dst = wp + id * C;
      for (int64_t j = 0; j < C; ++j)
        dst[j] = static_cast<T>(static_cast<double>(dst[j]) + row[static_cast<size_t>(j)]);
    }
  }
}

}  // namespace

int64_t embedding_forward(const Tensor& weight, const Tensor& ids, const Tensor& out) {
  const int64_t N = ids.size(0);
  int64_t bad = N;
  BRIGADE_DISPATCH_INDEX(ids.dtype(), "embedding", [&] {
    using id_t = scalar_t;
    BRIGADE_DISPATCH_FLOATING(weight.dtype(), "embedding",
                              [&] { bad = gather_rows<id_t, scalar_t>(weight, ids, out); });
  });
  return bad == N ? -1 : bad;
}

void embedding_backward(const Tensor& grad_out, const Tensor& ids, const Tensor& grad_weight) {
  BRIGADE_DISPATCH_INDEX(ids.dtype(), "embedding_backward", [&] {
    using id_t = scalar_t;
    BRIGADE_DISPATCH_FLOATING(grad_out.dtype(), "embedding_backward",
                              [&] { scatter_add_rows<id_t, scalar_t>(grad_out, ids, grad_weight); });
  });
}

}  // namespace brigade::kernels::cpu
