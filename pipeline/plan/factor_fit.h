// One line through each of the profile's factors measured at every profiled microbatch size.
//
// The profiler prices what timing the layers one at a time misses with factors measured at each microbatch
// size (profile.h): the executor's actions over their layers (F, B), a deferred Bw over one right after
// its Bi, and a backward run after other microbatches' forwards over one right after its own (cold). Each is
// measured on one stage in a few passes, and a single size's figure is noisy: on a 2-core CPU one size's
// cold factor measured anywhere from 1.00 to 1.50 between runs, and one run priced the executor's actions
// 1.20-1.25x at 8 samples between neighbours at 1.02-1.07. Priced as measured, every candidate of that
// microbatch size comes out dearer than its neighbours by chance, and six candidates that lie within a few
// percent are reordered.
//
// Under the noise the factors have a shape: they shrink as the microbatch grows (the executor's actions:
// about a tenth at one sample of a GPT of width 128, nothing measurable from four samples; the cold
// backward: 1.08-1.12 at one sample, 1.00-1.02 at 32). A fixed cost per action plus a part that grows with
// the work gives that shape: extra = a * T + c, so the factor is
//
//     factor(T) = 1 + a + c / T          (T: the whole model's forward, or backward, at that size, ms)
//
// fitted by Theil-Sen (the slope the median of the pairwise slopes, the intercept the median of what is
// left): one size measured far off moves them little, where a least-squares line would follow it.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "pipeline/plan/profile.h"

namespace brigade::pipeline {

/// Theil-Sen line y = intercept + slope * x through the points (at least one; the slope 0 where every x
/// is the same).
struct Line {
  double intercept = 0.0, slope = 0.0;
};
Line theil_sen(const std::vector<double>& x, const std::vector<double>& y);

/// One factor's line and what it was fitted on.
struct FactorFit {
  std::string name;                      ///< "F", "B", "deferred Bw", "deferred first Bw", "cold B"
  double base = 0.0;                     ///< a: the factor's part that does not depend on the size
  double per_ms = 0.0;                   ///< c, ms: the fixed cost per action, over the action's time
  std::vector<int64_t> samples;          ///< the profiled sizes, ascending
  std::vector<double> time_ms;           ///< the whole model's forward (F) or backward at each
  std::vector<double> measured, priced;  ///< the factor measured, and priced: max(1, 1 + a + c / T)
  bool fitted = false;                   ///< false: fewer than two sizes, or fitting off (priced as measured)
  /// "cold B x1.041 -> x1.035 at 2, ..." for the plan's table; "" where no size was measured above 1.
  std::string describe() const;
};

/// Fits every factor of the profiles (FactorFit::name lists them) across their sizes and sets each
/// profile's factor to the priced value. With fewer than two sizes whose layers take time, or `fit` false,
/// the measured factors stay as they are (and are reported as priced).
std::vector<FactorFit> fit_profile_factors(std::map<int64_t, ModelProfile>& profiles, bool fit = true);

}  // namespace brigade::pipeline
