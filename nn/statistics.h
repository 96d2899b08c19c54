// The summary statistics of timings: the median, and the median of a run's steady-state steps.
//
// Timings on a shared machine have a long tail (a neighbour takes the core, the allocator grows, a page is
// touched for the first time), so the figure brigade reports is a median, never a mean. The trainer, the
// pipeline's profiler and runner, the benchmarks and the tests all take their medians from here.
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

namespace brigade::nn {

/// The median of `values`: the middle one for an odd count, the mean of the two middle ones for an even
/// count; 0 when `values` is empty.
inline double median(std::vector<double> values) {
  if (values.empty()) return 0.0;
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

/// How many of a run's first steps steady_state_median leaves out: min(3, steps / 2), so that a short run
/// keeps at least half of its steps.
inline size_t warmup_steps_skipped(size_t steps) {
  return std::min<size_t>(3, steps / 2);
}

/// The median of per-step figures after the warm-up steps (warmup_steps_skipped): the first steps of a run
/// pay for allocator growth and first-touch page faults. 0 when `per_step` is empty.
inline double steady_state_median(const std::vector<double>& per_step) {
  const size_t skip = warmup_steps_skipped(per_step.size());
  return median(std::vector<double>(per_step.begin() + static_cast<std::ptrdiff_t>(skip), per_step.end()));
}

}  // namespace brigade::nn
