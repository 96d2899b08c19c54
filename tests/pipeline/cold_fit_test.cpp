// The cold backward's line through the profiled sizes (plan/cold_fit.h): Theil-Sen recovers an exact line
// and is not moved by one point far off it; fit_cold_backward prices every size from the line, at least 1;
// the planner fits before it searches, and a GPipe candidate, every backward cold, then costs more than
// its 1F1B twin of the same microbatches.
#include "pipeline/plan/cold_fit.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <vector>

#include "pipeline/plan/planner.h"

namespace brigade::pipeline {
namespace {

using ::testing::HasSubstr;

TEST(ColdFit, TheilSenRecoversAnExactLine) {
  const std::vector<double> x = {0.5, 1, 2, 4, 8}, y = {1.25, 1.5, 2, 3, 5};  // y = 1 + x / 2
  const Line line = theil_sen(x, y);
  EXPECT_DOUBLE_EQ(line.slope, 0.5);
  EXPECT_DOUBLE_EQ(line.intercept, 1.0);
}

TEST(ColdFit, OnePointFarOffTheLineMovesNeitherSlopeNorIntercept) {
  // Six sizes on y = 0.01 + 0.1 x, the fourth measured 0.5 too high (a factor of 1.5 where 1.0 was due).
  std::vector<double> x = {0.02, 0.05, 0.1, 0.2, 0.4, 0.7}, y;
  for (double v : x) y.push_back(0.01 + 0.1 * v);
  y[3] += 0.5;
  const Line line = theil_sen(x, y);
  EXPECT_NEAR(line.slope, 0.1, 1e-12);
  EXPECT_NEAR(line.intercept, 0.01, 1e-12);
}

TEST(ColdFit, NoPairGivesTheMedianAsTheIntercept) {
  const Line line = theil_sen({2, 2, 2}, {1, 3, 7});
  EXPECT_EQ(line.slope, 0.0);
  EXPECT_EQ(line.intercept, 3.0);
}

ModelProfile profile_of(int64_t samples, double backward_ms, double cold) {
  ModelProfile p;
  p.measured = true;
  p.microbatch_size = samples;
  LayerProfile l;
  l.forward_ms = backward_ms / 2;
  l.backward_ms = backward_ms;
  p.layers = {l, l};  // the model's backward: 2 * backward_ms
  p.cold_backward_factor = cold;
  return p;
}

TEST(ColdFit, EverySizeIsPricedFromTheLineAtLeastOne) {
  // factor = 1 + 0.02 + 0.2 ms / B, B the model's backward; the size of 4 samples measured 1.0 by chance.
  std::map<int64_t, ModelProfile> profiles;
  for (int64_t s : {1, 2, 4, 8}) {
    const double b = 2.0 * static_cast<double>(s);  // the model's backward, ms
    profiles[s] = profile_of(s, b / 2, s == 4 ? 1.0 : 1.02 + 0.2 / b);
  }
  const ColdFit fit = fit_cold_backward(profiles);
  ASSERT_TRUE(fit.fitted_any());
  EXPECT_NEAR(fit.base, 0.02, 1e-12);
  EXPECT_NEAR(fit.per_ms, 0.2, 1e-12);
  for (int64_t s : {1, 2, 4, 8})
    EXPECT_NEAR(profiles.at(s).cold_backward_factor, 1.02 + 0.2 / (2.0 * static_cast<double>(s)), 1e-12) << s;
  EXPECT_THAT(fit.describe(), HasSubstr("4: x1.000 -> x1.045"));

  // A line that falls below 1 at some size prices that size at 1.
  std::map<int64_t, ModelProfile> falling = {{1, profile_of(1, 1, 1.0)}, {8, profile_of(8, 8, 1.1)}};
  fit_cold_backward(falling);
  EXPECT_EQ(falling.at(1).cold_backward_factor, 1.0);
  EXPECT_NEAR(falling.at(8).cold_backward_factor, 1.1, 1e-12);
}

TEST(ColdFit, OneSizeKeepsItsMeasuredFactorAndNothingColdSaysNothing) {
  std::map<int64_t, ModelProfile> one = {{4, profile_of(4, 3, 1.07)}};
  const ColdFit fit = fit_cold_backward(one);
  EXPECT_FALSE(fit.fitted_any());
  EXPECT_EQ(one.at(4).cold_backward_factor, 1.07);
  std::map<int64_t, ModelProfile> warm = {{1, profile_of(1, 1, 1.0)}, {2, profile_of(2, 2, 1.0)}};
  EXPECT_EQ(fit_cold_backward(warm).describe(), "");
}

TEST(ColdFit, ThePlannerPricesGPipeAboveItsOneFOneBTwinWhenBackwardsRunCold) {
  // Two devices, 4 layers; the cold factor measured 1.10 at every size. On the last stage 1F1B runs each
  // backward right after its own forward and GPipe none, so GPipe's step is the longer one.
  PlanRequest r;
  r.profile = [](int64_t samples) {
    ModelProfile p = profile_of(samples, 2.0 * static_cast<double>(samples), 1.10);
    p.layers.resize(4, p.layers.front());
    for (size_t i = 0; i < p.layers.size(); ++i) {
      p.layers[i].name = "layer" + std::to_string(i);
      p.layers[i].type = "Hand";
      p.layers[i].activation_bytes = 1 << 20;
      p.layers[i].output_bytes = p.layers[i].input_bytes = 65536;
    }
    return p;
  };
  r.devices = 2;
  r.batch = 8;
  r.schedules = {"1f1b", "gpipe"};
  r.keep = 40;
  const Plan plan = plan_pipeline(r);
  EXPECT_THAT(plan.table(), HasSubstr("cold backward"));
  double one_f_one_b = 0, gpipe = 0;
  for (const PlanCandidate& c : plan.ranked) {
    if (c.stages != 2 || c.microbatches != 4 || c.policy != Recompute::Never) continue;
    (c.schedule == "gpipe" ? gpipe : one_f_one_b) = c.step_ms;
  }
  ASSERT_GT(one_f_one_b, 0);
  ASSERT_GT(gpipe, 0);
  EXPECT_GT(gpipe, one_f_one_b * 1.02);
}

}  // namespace
}  // namespace brigade::pipeline
