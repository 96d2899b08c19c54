// Autocast through the pipeline: stage threads inherit the caller's autocast (pipeline/run/executor.cpp), and
// recomputation replays it (autograd/checkpoint.cpp). With one microbatch a pipelined step runs exactly the
// ops of the unpipelined step, so under bf16 autocast the two must agree to fp32 rounding (relative 1e-5,
// the executor tests' tolerance); a stage running in fp32 instead would differ by bf16 rounding, ~1e-3 and
// more, which the first test checks is far outside that tolerance.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>

#include "autograd/autocast.h"
#include "pipeline/run/executor.h"
#include "pipeline_fixtures.h"

namespace brigade::pipeline {
namespace {

using autograd::AutocastGuard;
using testing::Batch;
using testing::make_batch;
using testing::reference_backward;
using testing::relative_error;
using testing::tiny_config;

constexpr double kTolerance = 1e-5;

double step_under(std::optional<DType> autocast, nn::GPT& model, const Batch& batch) {
  AutocastGuard guard(autocast);
  return reference_backward(model, batch);
}

TEST(AutocastPipeline, Bf16AndFp32StepsDifferByFarMoreThanTheTolerance) {
  nn::GPT a(tiny_config(), 7), b(tiny_config(), 7);
  const Batch batch = make_batch(8, 8, 20, 1);
  step_under(std::nullopt, a, batch);
  step_under(kBFloat16, b, batch);
  double largest = 0.0;
  const auto pa = a.named_parameters(), pb = b.named_parameters();
  for (size_t i = 0; i < pa.size(); ++i)
    largest = std::max(largest, relative_error(pb[i].second.grad(), pa[i].second.grad()));
  EXPECT_GT(largest, 100 * kTolerance);
}

TEST(AutocastPipeline, StagesRunUnderTheCallersAutocast) {
  for (Recompute recompute : {Recompute::Never, Recompute::Always}) {
    SCOPED_TRACE(std::string("recompute ") + to_string(recompute));
    nn::GPT reference(tiny_config(), 7), piped(tiny_config(), 7);
    const Batch batch = make_batch(8, 8, 20, 1);
    const double expected = step_under(kBFloat16, reference, batch);

    PipelineConfig pc;
    pc.stages = 2;
    pc.microbatches = 1;
    pc.recompute = recompute;
    pc.recv_timeout_seconds = 60;
    Pipeline pipe(piped, pc);
    AutocastGuard guard(kBFloat16);
    const StepResult r = pipe.forward_backward(batch.ids, batch.targets);
    EXPECT_NEAR(r.loss, expected, kTolerance * std::fabs(expected));
    testing::expect_same_parameters(piped, reference, kTolerance, /*values=*/false);
  }
}

}  // namespace
}  // namespace brigade::pipeline
