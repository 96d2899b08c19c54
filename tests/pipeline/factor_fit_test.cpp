// The profile's factors priced from a line through the profiled sizes (plan/factor_fit.h): Theil-Sen
// recovers an exact line and is not moved by one point far off it; fit_profile_factors prices every size
// from the line, at least 1, each factor against its own time (F against the forward); the planner fits
// before it searches (a size measured off the line is priced as its neighbours), and a GPipe candidate,
// every backward cold, then costs more than its 1F1B twin.
#include "pipeline/plan/factor_fit.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "pipeline/plan/planner.h"

namespace brigade::pipeline {
namespace {

using ::testing::HasSubstr;

TEST(FactorFit, TheilSenRecoversAnExactLine) {
  const std::vector<double> x = {0.5, 1, 2, 4, 8}, y = {1.25, 1.5, 2, 3, 5};  // y = 1 + x / 2
  const Line line = theil_sen(x, y);
  EXPECT_DOUBLE_EQ(line.slope, 0.5);
  EXPECT_DOUBLE_EQ(line.intercept, 1.0);
}

TEST(FactorFit, OnePointFarOffTheLineMovesNeitherSlopeNorIntercept) {
  // Six sizes on y = 0.01 + 0.1 x, the fourth measured 0.5 too high (a factor of 1.5 where 1.0 was due).
  std::vector<double> x = {0.02, 0.05, 0.1, 0.2, 0.4, 0.7}, y;
  for (double v : x) y.push_back(0.01 + 0.1 * v);
  y[3] += 0.5;
  const Line line = theil_sen(x, y);
  EXPECT_NEAR(line.slope, 0.1, 1e-12);
  EXPECT_NEAR(line.intercept, 0.01, 1e-12);
}

TEST(FactorFit, NoPairGivesTheMedianAsTheIntercept) {
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
  p.layers = {l, l};  // the model's backward: 2 * backward_ms, its forward backward_ms
  p.cold_backward_factor = cold;
  return p;
}

const FactorFit& fit_named(const std::vector<FactorFit>& fits, const std::string& name) {
  for (const FactorFit& f : fits)
    if (f.name == name) return f;
  throw std::runtime_error("no factor " + name);
}

TEST(FactorFit, EverySizeIsPricedFromTheLineAtLeastOne) {
  // cold = 1 + 0.02 + 0.2 ms / B, B the model's backward; the size of 4 samples measured 1.0 by chance.
  // The executor's F factor = 1 + 0.1 ms / F, F the model's forward (half of B here).
  std::map<int64_t, ModelProfile> profiles;
  for (int64_t s : {1, 2, 4, 8}) {
    const double b = 2.0 * static_cast<double>(s);  // the model's backward, ms
    profiles[s] = profile_of(s, b / 2, s == 4 ? 1.0 : 1.02 + 0.2 / b);
    profiles[s].action_forward_factor = 1.0 + 0.1 / (b / 2);
  }
  const std::vector<FactorFit> fits = fit_profile_factors(profiles);
  const FactorFit& cold = fit_named(fits, "cold B");
  ASSERT_TRUE(cold.fitted);
  EXPECT_NEAR(cold.base, 0.02, 1e-12);
  EXPECT_NEAR(cold.per_ms, 0.2, 1e-12);
  const FactorFit& forward = fit_named(fits, "F");
  EXPECT_NEAR(forward.base, 0.0, 1e-12);
  EXPECT_NEAR(forward.per_ms, 0.1, 1e-12);
  for (int64_t s : {1, 2, 4, 8}) {
    const double b = 2.0 * static_cast<double>(s);
    EXPECT_NEAR(profiles.at(s).cold_backward_factor, 1.02 + 0.2 / b, 1e-12) << s;
    EXPECT_NEAR(profiles.at(s).action_forward_factor, 1.0 + 0.1 / (b / 2), 1e-12) << s;
    EXPECT_EQ(profiles.at(s).action_backward_factor, 1.0) << s;  // measured 1 everywhere: stays 1
  }
  EXPECT_THAT(cold.describe(), HasSubstr("x1.000 -> x1.045 at 4"));
  EXPECT_EQ(fit_named(fits, "B").describe(), "");

  // A line that falls below 1 at some size prices that size at 1: 1 + 0.1 - 0.3 ms / B through the
  // three sizes (0.95 at B = 2 ms, 1.025 at 4, 1.0625 at 8).
  std::map<int64_t, ModelProfile> falling;
  for (int64_t s : {1, 2, 4}) {
    const double b = 2.0 * static_cast<double>(s);
    falling[s] = profile_of(s, b / 2, 1.1 - 0.3 / b);
  }
  fit_profile_factors(falling);
  EXPECT_EQ(falling.at(1).cold_backward_factor, 1.0);
  EXPECT_NEAR(falling.at(2).cold_backward_factor, 1.025, 1e-12);
  EXPECT_NEAR(falling.at(4).cold_backward_factor, 1.0625, 1e-12);
}

TEST(FactorFit, OneSizeOrFittingOffKeepsTheMeasuredFactors) {
  std::map<int64_t, ModelProfile> one = {{4, profile_of(4, 3, 1.07)}};
  EXPECT_FALSE(fit_named(fit_profile_factors(one), "cold B").fitted);
  EXPECT_EQ(one.at(4).cold_backward_factor, 1.07);
  std::map<int64_t, ModelProfile> three = {
      {1, profile_of(1, 1, 1.2)}, {2, profile_of(2, 2, 1.0)}, {4, profile_of(4, 4, 1.05)}};
  const std::vector<FactorFit> off = fit_profile_factors(three, false);
  EXPECT_FALSE(fit_named(off, "cold B").fitted);
  EXPECT_EQ(three.at(1).cold_backward_factor, 1.2);
  EXPECT_EQ(three.at(2).cold_backward_factor, 1.0);
  EXPECT_THAT(fit_named(off, "cold B").describe(), HasSubstr("x1.200 -> x1.200 at 1"));
}

// Four hand-made layers at `samples` samples, the model's backward 8 ms a sample, and a cold factor.
ModelProfile four_layers(int64_t samples, double cold) {
  ModelProfile p = profile_of(samples, 2.0 * static_cast<double>(samples), cold);
  p.layers.resize(4, p.layers.front());
  for (size_t i = 0; i < p.layers.size(); ++i) {
    p.layers[i].name = "layer" + std::to_string(i);
    p.layers[i].type = "Hand";
    p.layers[i].activation_bytes = 1 << 20;
    p.layers[i].output_bytes = p.layers[i].input_bytes = 65536;
  }
  return p;
}

std::vector<double> steps_of(const Plan& plan) {
  std::vector<double> steps;
  for (const PlanCandidate& c : plan.ranked) steps.push_back(c.step_ms);
  return steps;
}

TEST(FactorFit, ThePlannerPricesASizeMeasuredOffTheLineAsItsNeighbours) {
  // The cold factor measured 1.10 at every size but 2 samples, where it came out 1.5. Priced from the
  // line, the plan is the one of 1.10 everywhere; priced as measured, the candidates of 2 samples differ.
  PlanRequest r;
  r.devices = 2;
  r.batch = 16;
  r.schedules = {"1f1b", "gpipe"};
  r.keep = 40;
  r.profile = [](int64_t samples) { return four_layers(samples, 1.10); };
  const Plan even = plan_pipeline(r);
  r.profile = [](int64_t samples) { return four_layers(samples, samples == 2 ? 1.5 : 1.10); };
  const Plan fitted = plan_pipeline(r);
  EXPECT_THAT(fitted.table(), HasSubstr("x1.500 -> x1.100 at 2,"));
  EXPECT_EQ(steps_of(fitted), steps_of(even));
  r.fit_factors = false;
  const Plan as_measured = plan_pipeline(r);
  EXPECT_NE(steps_of(as_measured), steps_of(even));
}

TEST(FactorFit, ThePlannerPricesGPipeAboveItsOneFOneBTwinWhenBackwardsRunCold) {
  // Two devices, 4 layers; the cold factor measured 1.10 at every size. On the last stage 1F1B runs each
  // backward right after its own forward and GPipe none, so GPipe's step is the longer one.
  PlanRequest r;
  r.profile = [](int64_t samples) { return four_layers(samples, 1.10); };
  r.devices = 2;
  r.batch = 8;
  r.schedules = {"1f1b", "gpipe"};
  r.keep = 40;
  const Plan plan = plan_pipeline(r);
  EXPECT_THAT(plan.table(), HasSubstr("  cold B x1.100 -> x1.100 at 1,"));
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
