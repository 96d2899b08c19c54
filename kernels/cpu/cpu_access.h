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

/// Threading thresholds. Starting an OpenMP team costs a few microseconds on an idle machine, but on a
/// machine whose cores are shared (other processes runnable) every parallel region waits until all its
/// threads get scheduled: measured on a loaded 2-core box, a training step with ~100 regions ran 20x
/// slower on 2 threads than on 1 (libgomp's default spin-waiting makes it worse; OMP_WAIT_POLICY=passive
/// brings 2 threads back to par). So a loop goes parallel only when one thread would need a few hundred
/// microseconds for it; below, a second thread saves little even on an idle machine.
///
/// Loops that do some math per element (a row's softmax, layernorm, exp, gelu: ~1-3 ns an element).
inline constexpr int64_t kParallelGrain = 1 << 17;
/// Memory-bound elementwise loops (add, mul, where, sums of squares: ~0.3 ns an element once
/// vectorised); copies use the same (tensor/device_ops.cpp).
inline constexpr int64_t kElementwiseGrain = 1 << 20;

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
/// sums left to right. A chunk is summed by chunk_sum in a fixed order: eight running sums (element i goes
/// to sum i mod 8, from the chunk's start; a tail shorter than 8 to sum 0), added pairwise at the end. Eight
/// independent chains keep the adder busy where one chain waits ~4 cycles per element. The serial and the
/// parallel version both call that one function on the same chunks, so a result never depends on the
/// number of threads or on which version ran.
inline constexpr int64_t kSumChunk = 4096;

/// A chunk's eight running sums added pairwise, ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7)): the last
/// step of chunk_sum, and of every loop that keeps its association (the row, column and squared sums, the
/// bias gradients). `sum(l)` gives running sum l (a column's sums in a block of columns: sums[l][c]).
template <typename F>
requires std::is_invocable_r_v<double, const F&, int>
inline double pairwise_sum8(const F& sum) {
  return ((sum(0) + sum(1)) + (sum(2) + sum(3))) + ((sum(4) + sum(5)) + (sum(6) + sum(7)));
}
inline double pairwise_sum8(const double* s) {
  return pairwise_sum8([s](int l) { return s[l]; });
}

// Not inlined, so that both versions run the very same machine code for a chunk.
template <typename F>
__attribute__((noinline)) double chunk_sum(int64_t start, int64_t end, const F& f) {
  double sums[8] = {0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0};
  int64_t i = start;
  for (; i + 8 <= end; i += 8) {
    for (int l = 0; l < 8; ++l) sums[l] += f(i + l);
  }
  for (; i < end; ++i) sums[0] += f(i);
  return pairwise_sum8(sums);
}

template <typename F>
double chunked_sum_serial(int64_t n, F f) {
  double total = 0.0;
  for (int64_t start = 0; start < n; start += kSumChunk)
    total += chunk_sum(start, std::min(n, start + kSumChunk), f);
  return total;
}

/// The chunks' sums in order, each from chunk(start, end): chunk_sum's association computed by other code
/// (an AVX-512 loop, say). Several threads from kElementwiseGrain elements (the same result either way).
template <typename C>
double chunked_sum_of_chunks(int64_t n, const C& chunk) {
  const int64_t chunks = (n + kSumChunk - 1) / kSumChunk;
  if (chunks <= 1 || n < kElementwiseGrain) {
    double total = 0.0;
    for (int64_t start = 0; start < n; start += kSumChunk)
      total += chunk(start, std::min(n, start + kSumChunk));
    return total;
  }
  std::vector<double> parts(static_cast<size_t>(chunks));
#pragma omp parallel for schedule(static)
  for (int64_t k = 0; k < chunks; ++k) {
    const int64_t start = k * kSumChunk;
    parts[static_cast<size_t>(k)] = chunk(start, std::min(n, start + kSumChunk));
  }
  double total = 0.0;
  for (double part : parts) total += part;
  return total;
}

/// Uses several threads from kElementwiseGrain elements (same result either way).
template <typename F>
double chunked_sum_parallel(int64_t n, F f) {
  return chunked_sum_of_chunks(n, [&f](int64_t start, int64_t end) { return chunk_sum(start, end, f); });
}

}  // namespace brigade::kernels::cpu::detail
