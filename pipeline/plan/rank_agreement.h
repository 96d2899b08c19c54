// Does a predicted order hold when the candidates run? Kendall's tau-b between predicted and measured
// step times, with predictions that the simulator cannot tell apart counted as ties (what bench/planner_bench
// reports about the planner).
//
// Tie groups. Predictions come from a profile whose medians move a little from one profiling to the next,
// so two candidates predicted within a relative `tolerance` of each other are not ordered by the
// prediction. Sorted ascending, the predictions are cut into groups: a prediction joins the current group
// when it is at most (1 + tolerance) times the group's first (fastest) one, else it starts the next
// group. Every member of a group gets the group's index (0: the fastest) as its predicted rank; exact ties
// (two schedules the simulator times alike) always share a group.
//
// Kendall's tau-b. Over every pair (i, j): concordant when both orders agree, discordant when they differ,
// tied in x or in y when one of them has a tie, neither when both do:
//   tau_b = (concordant - discordant) / sqrt((pairs - ties_x) (pairs - ties_y))
// with pairs = n (n - 1) / 2 and ties_x, ties_y counting every pair tied in x (in y), both-tied pairs
// included. 1: the same order; -1: reversed; pairs the prediction ties count for neither, so a prediction
// that ties honestly is not punished for the order noise puts between its equals.
//
// Two figures per benchmark:
//   over all    tau_b(group index, measured) over every measured candidate. Measured times are never
//               exactly equal, so with tied predictions even a perfect order stays below 1: its ceiling
//               is sqrt((pairs - ties_x) / pairs), reported beside it;
//   distinct    one point per tie group, its measured value the mean of its members': does the order of
//               the predictions that differ hold? (undefined with fewer than two groups: 0 is returned).
//
// Beyond the noise. A measured difference smaller than the measurement's own spread says nothing about
// the order. Given each candidate's lowest and highest measurement (over a benchmark's rounds), a pair
// whose two ranges overlap counts as tied in the measurement, and tau_resolved is tau_b over the group
// indices and the medians with those ties: only the pairs that both the prediction and the measurement
// order count (resolved_pairs of them), so it tests the model where the measurement can.
//
// \code
//   brigade::pipeline::RankAgreement a =
//       brigade::pipeline::rank_agreement({10.0, 10.05, 11.0}, {30.1, 29.8, 33.0}, 0.01);
//   // a.group_count == 2 (10 and 10.05 tie); a.tau_all == 2 / sqrt(6) = 0.82, its ceiling (the one tied
//   // pair of 3 counts for neither); a.tau_distinct == 1
// \endcode
#pragma once

#include <vector>

namespace brigade::pipeline {

/// The tie group of every prediction (0 = the fastest group; see above). ValueError for a negative
/// tolerance or a prediction that is not finite.
std::vector<int> tie_groups(const std::vector<double>& predicted, double tolerance);

/// Kendall's tau-b of two lists of the same length (ValueError otherwise); 0 when every pair is tied in one
/// of them (fewer than two values included).
double kendall_tau_b(const std::vector<double>& x, const std::vector<double>& y);

struct RankAgreement {
  std::vector<int> groups;       ///< per candidate, as tie_groups
  int group_count = 0;           ///< distinct predictions
  double tau_all = 0.0;          ///< over every candidate, tied predictions as ties
  double tau_all_ceiling = 0.0;  ///< what tau_all would be with the measured order perfect and untied
  double tau_distinct = 0.0;     ///< over the groups (their members' mean measured value)
  /// With measured ranges (the overload below): tau_b with overlapping ranges as measured ties, and how
  /// many pairs both orders resolve (neither tied); 0 and 0 without ranges.
  double tau_resolved = 0.0;
  int resolved_pairs = 0;
};

/// Both figures above. ValueError when the lists differ in length.
RankAgreement rank_agreement(const std::vector<double>& predicted, const std::vector<double>& measured,
                             double tolerance);

/// The same with each candidate's measured range [low, high] (e.g. the lowest and highest of its rounds,
/// around `measured`, its median): also tau_resolved and resolved_pairs. ValueError when the lists differ in
/// length or a range does not hold its median.
RankAgreement rank_agreement(const std::vector<double>& predicted, const std::vector<double>& measured,
                             const std::vector<double>& low, const std::vector<double>& high,
                             double tolerance);

}  // namespace brigade::pipeline
