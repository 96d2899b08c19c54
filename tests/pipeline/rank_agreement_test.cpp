// Kendall's tau-b and the tie groups of predictions (plan/rank_agreement.h), counted by hand on small lists
// (the tied cases are also what scipy.stats.kendalltau, variant 'b', gives).
#include "pipeline/plan/rank_agreement.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "tensor/error.h"

namespace brigade::pipeline {
namespace {

TEST(RankAgreement, TauBIsOneForTheSameOrderAndMinusOneReversed) {
  const std::vector<double> x = {1, 2, 3, 4, 5};
  EXPECT_DOUBLE_EQ(kendall_tau_b(x, {10, 20, 30, 40, 50}), 1.0);
  EXPECT_DOUBLE_EQ(kendall_tau_b(x, {50, 40, 30, 20, 10}), -1.0);
  // One swapped neighbour pair of 10: (9 - 1) / 10.
  EXPECT_DOUBLE_EQ(kendall_tau_b(x, {10, 30, 20, 40, 50}), 0.8);
}

TEST(RankAgreement, TauBCountsTiedPairsForNeither) {
  // x = [1, 1, 2, 3], y = [1, 2, 3, 4]: 6 pairs, 1 tied in x, 5 concordant: 5 / sqrt(5 * 6) (scipy: 0.9129).
  EXPECT_NEAR(kendall_tau_b({1, 1, 2, 3}, {1, 2, 3, 4}), 5.0 / std::sqrt(30.0), 1e-12);
  EXPECT_NEAR(kendall_tau_b({1, 1, 2, 3}, {1, 2, 3, 4}), 0.9129, 1e-4);
  // Ties on both sides: x = [1, 1, 2, 2], y = [1, 1, 1, 2]: 6 pairs, tied in x (0,1) (2,3), tied in y
  // (0,1) (0,2) (1,2), concordant (0,3) (1,3): 2 / sqrt((6 - 2)(6 - 3)) (scipy: 0.5774).
  EXPECT_NEAR(kendall_tau_b({1, 1, 2, 2}, {1, 1, 1, 2}), 2.0 / std::sqrt(12.0), 1e-12);
  EXPECT_DOUBLE_EQ(kendall_tau_b({1, 1, 1}, {1, 2, 3}), 0.0);  // nothing ordered in x
  EXPECT_DOUBLE_EQ(kendall_tau_b({}, {}), 0.0);
  EXPECT_THROW((void)kendall_tau_b({1, 2}, {1}), ValueError);
}

TEST(RankAgreement, PredictionsWithinTheToleranceOfTheirGroupsFirstTie) {
  // 10 and 10.05 tie at 1 %; 10.2 is 2 % above the group's first and starts a group; 10.25 joins it.
  EXPECT_EQ(tie_groups({10.2, 10.0, 10.25, 10.05, 12.0}, 0.01), (std::vector<int>{1, 0, 1, 0, 2}));
  // Groups do not drift along a chain: each step is under 1 %, but 10.18 is 1.8 % above 10.
  EXPECT_EQ(tie_groups({10.0, 10.09, 10.18, 10.27}, 0.01), (std::vector<int>{0, 0, 1, 1}));
  // Exact ties share a group at tolerance 0.
  EXPECT_EQ(tie_groups({3.0, 3.0, 2.0}, 0.0), (std::vector<int>{1, 1, 0}));
  EXPECT_THROW((void)tie_groups({1.0}, -0.1), ValueError);
  EXPECT_THROW((void)tie_groups({1.0, NAN}, 0.01), ValueError);
}

TEST(RankAgreement, OverAllAndOverDistinctPredictions) {
  // The header's example: 10 and 10.05 tie, measured in the opposite order; 11 is slower, and measured so.
  const RankAgreement a = rank_agreement({10.0, 10.05, 11.0}, {30.1, 29.8, 33.0}, 0.01);
  EXPECT_EQ(a.groups, (std::vector<int>{0, 0, 1}));
  EXPECT_EQ(a.group_count, 2);
  EXPECT_NEAR(a.tau_all, 2.0 / std::sqrt(6.0), 1e-12);
  EXPECT_NEAR(a.tau_all_ceiling, 2.0 / std::sqrt(6.0), 1e-12);
  EXPECT_DOUBLE_EQ(a.tau_distinct, 1.0);
  // Without the tolerance the tied pair is discordant: (2 - 1) / 3.
  EXPECT_NEAR(rank_agreement({10.0, 10.05, 11.0}, {30.1, 29.8, 33.0}, 0.0).tau_all, 1.0 / 3.0, 1e-12);
  // Distinct groups compare their members' mean: group 0's mean 31 is above group 1's 30.5.
  const RankAgreement b = rank_agreement({1.0, 1.0, 2.0}, {30.0, 32.0, 30.5}, 0.0);
  EXPECT_DOUBLE_EQ(b.tau_distinct, -1.0);
  EXPECT_THROW((void)rank_agreement({1.0}, {1.0, 2.0}, 0.01), ValueError);
}

TEST(RankAgreement, TauResolvedCountsOnlyPairsWhoseMeasuredRangesDoNotOverlap) {
  // Predicted 1 < 2 < 3 < 4. Medians 10, 12, 11, 20 with ranges [9, 11], [11.5, 13], [10.5, 14], [19, 21]:
  // (0,1) disjoint and concordant, (0,2) overlap, (1,2) overlap (the discordant pair is noise), every pair
  // with 3 disjoint and concordant. 6 pairs, 2 tied in the measurement, 4 concordant: 4 / sqrt(6 * 4).
  const std::vector<double> predicted = {1, 2, 3, 4}, median = {10, 12, 11, 20};
  const RankAgreement a = rank_agreement(predicted, median, {9, 11.5, 10.5, 19}, {11, 13, 14, 21}, 0.0);
  EXPECT_NEAR(a.tau_resolved, 4.0 / std::sqrt(24.0), 1e-12);
  EXPECT_EQ(a.resolved_pairs, 4);
  EXPECT_NEAR(a.tau_all, 4.0 / 6.0, 1e-12);  // the plain tau-b counts the noisy pair as discordant
  // Ranges that never overlap give the plain tau-b; ranges that all overlap resolve nothing.
  const RankAgreement b = rank_agreement(predicted, median, median, median, 0.0);
  EXPECT_DOUBLE_EQ(b.tau_resolved, b.tau_all);
  EXPECT_EQ(b.resolved_pairs, 6);
  const RankAgreement c = rank_agreement(predicted, median, {0, 0, 0, 0}, {30, 30, 30, 30}, 0.0);
  EXPECT_DOUBLE_EQ(c.tau_resolved, 0.0);
  EXPECT_EQ(c.resolved_pairs, 0);
  EXPECT_THROW((void)rank_agreement(predicted, median, {11, 0, 0, 0}, {30, 30, 30, 30}, 0.0), ValueError);
  EXPECT_THROW((void)rank_agreement(predicted, median, {0}, {30}, 0.0), ValueError);
}

}  // namespace
}  // namespace brigade::pipeline
