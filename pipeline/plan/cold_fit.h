// One line through the cold backward's factors measured at each profiled microbatch size.
//
// A backward that runs after other microbatches' forwards reads its activations from a farther cache than
// one right after its own forward (simulator.h: is_cold_backward). The profiler measures that factor at
// each microbatch size on one stage (run/plan_model.h: measure_cold_backward), but a single size's figure
// is noisy: on a 2-core CPU the same size measured anywhere from 1.00 to 1.50 between runs. Priced as
// measured, a candidate of one microbatch size came out 10 % dearer than its neighbour of another by chance,
// and six candidates that lie within a few percent were reordered.
//
// Under the noise the factors have a shape: they grow as the microbatch shrinks (a GPT of 2 blocks x 128:
// 1.00-1.02 at 32 samples, 1.08-1.12 at one). That is what a fixed cost per cold start plus a part that
// grows with the work gives: extra = a * B + c, so the factor is
//
//     factor(B) = 1 + a + c / B          (B: the whole model's backward at that size, ms)
//
// fitted by Theil-Sen (the slope the median of the pairwise slopes, the intercept the median of what is
// left): one size measured far off moves neither, where a least-squares line would follow it.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "pipeline/plan/profile.h"

namespace brigade::pipeline {

/// The fitted line and what it was fitted on.
struct ColdFit {
  double base = 0.0;             ///< a: the factor's part that does not depend on the size
  double per_ms = 0.0;           ///< c, ms: the fixed cost of a cold start, over the backward's time
  std::vector<int64_t> samples;  ///< the profiled sizes, ascending
  std::vector<double> backward_ms, measured;  ///< the whole model's backward and the measured factor at each
  std::vector<double> fitted;                 ///< max(1, 1 + base + per_ms / backward_ms) at each
  bool fitted_any() const { return samples.size() >= 2; }
  /// One line for the plan's table: the measured and fitted factor at each size; "" where no size was
  /// measured above 1.
  std::string describe() const;
};

/// Theil-Sen line y = intercept + slope * x through the points (at least one; the slope 0 where every x
/// is the same).
struct Line {
  double intercept = 0.0, slope = 0.0;
};
Line theil_sen(const std::vector<double>& x, const std::vector<double>& y);

/// Fits factor(B) = 1 + a + c / B through the profiles' measured cold_backward_factor (B: the sum of their
/// layers' backward_ms) and sets each profile's cold_backward_factor to the fitted value, at least 1. With
/// fewer than two sizes whose backward takes time, the measured factors stay as they are.
ColdFit fit_cold_backward(std::map<int64_t, ModelProfile>& profiles);

}  // namespace brigade::pipeline
