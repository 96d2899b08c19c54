// Kendall's tau-b with tied predictions (see rank_agreement.h).
#include "pipeline/plan/rank_agreement.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "tensor/error.h"

namespace brigade::pipeline {

std::vector<int> tie_groups(const std::vector<double>& predicted, double tolerance) {
  BRIGADE_CHECK_VALUE(tolerance >= 0, "tie_groups: the tolerance must be >= 0, got ", tolerance);
  for (double p : predicted)
    BRIGADE_CHECK_VALUE(std::isfinite(p), "tie_groups: a prediction is not finite (", p, ")");
  std::vector<size_t> order(predicted.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return predicted[a] < predicted[b]; });
  std::vector<int> groups(predicted.size(), 0);
  int group = -1;
  double first = 0.0;
  for (size_t i : order) {
    if (group < 0 || predicted[i] > first * (1.0 + tolerance)) {
      ++group;
      first = predicted[i];
    }
    groups[i] = group;
  }
  return groups;
}

namespace {

// tau_b of x and y where a pair (i, j) with y_tied(i, j) counts as tied in y (equal values always do);
// `resolved` gets the pairs tied in neither.
template <typename YTied>
double tau_b_with(const std::vector<double>& x, const std::vector<double>& y, YTied y_tied, int* resolved) {
  double concordant = 0, discordant = 0, pairs = 0, ties_x = 0, ties_y = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    for (size_t j = i + 1; j < x.size(); ++j) {
      const double a = x[i] - x[j];
      const double b = y_tied(i, j) ? 0.0 : y[i] - y[j];
      ++pairs;
      if (a == 0) ++ties_x;
      if (b == 0) ++ties_y;
      if (a != 0 && b != 0) (a * b > 0 ? concordant : discordant) += 1;
    }
  }
  if (resolved) *resolved = static_cast<int>(concordant + discordant);
  const double denominator = std::sqrt((pairs - ties_x) * (pairs - ties_y));
  return denominator > 0 ? (concordant - discordant) / denominator : 0.0;
}

}  // namespace

double kendall_tau_b(const std::vector<double>& x, const std::vector<double>& y) {
  BRIGADE_CHECK_VALUE(x.size() == y.size(), "kendall_tau_b: lists of ", x.size(), " and ", y.size(),
                      " values");
  return tau_b_with(
      x, y, [](size_t, size_t) { return false; }, nullptr);
}

namespace {

// 0, 1, 2, ... in the order of `rank` (stable): a measured order that agrees with every untied pair.
std::vector<double> rank_with_ties_broken(const std::vector<double>& rank) {
  std::vector<size_t> order(rank.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return rank[a] < rank[b]; });
  std::vector<double> out(rank.size());
  for (size_t k = 0; k < order.size(); ++k) out[order[k]] = static_cast<double>(k);
  return out;
}

}  // namespace

RankAgreement rank_agreement(const std::vector<double>& predicted, const std::vector<double>& measured,
                             double tolerance) {
  BRIGADE_CHECK_VALUE(predicted.size() == measured.size(), "rank_agreement: ", predicted.size(),
                      " predictions and ", measured.size(), " measurements");
  RankAgreement a;
  a.groups = tie_groups(predicted, tolerance);
  a.group_count = a.groups.empty() ? 0 : *std::max_element(a.groups.begin(), a.groups.end()) + 1;
  const std::vector<double> rank(a.groups.begin(), a.groups.end());
  a.tau_all = kendall_tau_b(rank, measured);
  a.tau_all_ceiling = kendall_tau_b(rank, rank_with_ties_broken(rank));
  std::vector<double> sum(static_cast<size_t>(a.group_count), 0.0), count(sum.size(), 0.0);
  for (size_t i = 0; i < measured.size(); ++i) {
    sum[static_cast<size_t>(a.groups[i])] += measured[i];
    count[static_cast<size_t>(a.groups[i])] += 1;
  }
  std::vector<double> index(sum.size()), mean(sum.size());
  for (size_t g = 0; g < sum.size(); ++g) index[g] = static_cast<double>(g), mean[g] = sum[g] / count[g];
  a.tau_distinct = kendall_tau_b(index, mean);
  return a;
}

RankAgreement rank_agreement(const std::vector<double>& predicted, const std::vector<double>& measured,
                             const std::vector<double>& low, const std::vector<double>& high,
                             double tolerance) {
  BRIGADE_CHECK_VALUE(low.size() == measured.size() && high.size() == measured.size(),
                      "rank_agreement: ", measured.size(), " measurements with ", low.size(), " lows and ",
                      high.size(), " highs");
  for (size_t i = 0; i < measured.size(); ++i)
    BRIGADE_CHECK_VALUE(low[i] <= measured[i] && measured[i] <= high[i], "rank_agreement: candidate ", i,
                        "'s range [", low[i], ", ", high[i], "] does not hold its median ", measured[i]);
  RankAgreement a = rank_agreement(predicted, measured, tolerance);
  const std::vector<double> rank(a.groups.begin(), a.groups.end());
  const auto overlap = [&](size_t i, size_t j) { return low[i] <= high[j] && low[j] <= high[i]; };
  a.tau_resolved = tau_b_with(rank, measured, overlap, &a.resolved_pairs);
  return a;
}

}  // namespace brigade::pipeline
