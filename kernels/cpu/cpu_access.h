// What the CPU backend's loops share: the accumulation type of each dtype and a strided element accessor.
// Internal to kernels/cpu/.
#pragma once

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "tensor/strided_index.h"
#include "tensor/tensor.h"

namespace brigade::kernels::cpu::detail {

/// The type elementwise math runs in: float for float32 and bfloat16, double for float64.
template <typename T>
using acc_t = std::conditional_t<std::is_same_v<T, double>, double, float>;

/// Below this many elements (or rows x cols) a loop stays on one thread: starting the OpenMP team costs
/// more than the work. For loops that do some math per element (a row's softmax, layernorm, exp, tanh).
inline constexpr int64_t kParallelGrain = 1 << 15;
/// The same for memory-bound elementwise loops (add, mul, where, copies): once vectorised they move ~1
/// element per ns per core, so a team (a few us on an idle machine, much more when the cores are shared)
/// pays off only for arrays well beyond the L2 cache.
inline constexpr int64_t kElementwiseGrain = 1 << 18;

/// Element i (row-major) of a tensor of any strides; the contiguous case skips the index arithmetic.
template <typename T>
class StridedAccess {
 public:
  StridedAccess(const Tensor& t, const char* op)
      : base_(static_cast<T*>(t.data_ptr())),
        index_(make_strided_index(t, op)),
        contiguous_(t.is_contiguous()) {}
  T& operator[](int64_t i) const { return contiguous_ ? base_[i] : base_[index_.offset(i)]; }

 private:
  T* base_;
  StridedIndex index_;
  bool contiguous_;
};

/// Reads element i of a contiguous buffer of T as its accumulation type.
template <typename T>
inline acc_t<T> load(const T* p, int64_t i) {
  return static_cast<acc_t<T>>(p[i]);
}

/// Deterministic sums: f(i) for i in [0, n) is summed in double in chunks of kSumChunk, then the chunk
/// sums left to right. A chunk is summed by chunk_sum, one vectorised loop (an `omp simd` reduction: a
/// fixed lane order). The serial and the parallel version both call that one function on the same chunks,
/// so a result never depends on the number of threads or on which version ran.
inline constexpr int64_t kSumChunk = 4096;

// Not inlined, so that both versions run the very same machine code for a chunk.
template <typename F>
__attribute__((noinline)) double chunk_sum(int64_t start, int64_t end, const F& f) {
  double part = 0.0;
#pragma omp simd reduction(+ : part)
  for (int64_t i = start; i < end; ++i) part += f(i);
  return part;
}

template <typename F>
double chunked_sum_serial(int64_t n, F f) {
  double total = 0.0;
  for (int64_t start = 0; start < n; start += kSumChunk)
    total += chunk_sum(start, std::min(n, start + kSumChunk), f);
  return total;
}

template <typename F>
double chunked_sum_parallel(int64_t n, F f) {
  const int64_t chunks = (n + kSumChunk - 1) / kSumChunk;
  if (chunks <= 1) return chunked_sum_serial(n, f);
  std::vector<double> parts(static_cast<size_t>(chunks));
#pragma omp parallel for schedule(static)
  for (int64_t k = 0; k < chunks; ++k) {
    const int64_t start = k * kSumChunk;
    parts[static_cast<size_t>(k)] = chunk_sum(start, std::min(n, start + kSumChunk), f);
  }
  double total = 0.0;
  for (double part : parts) total += part;
  return total;
}

}  // namespace brigade::kernels::cpu::detail
