// Per-layer recomputation (schedule/layer_recompute.h): the --recompute forms, the same gradients as no
// recomputation (1e-5, against the unpipelined step) for mixed plans on plain, split-backward, V and
// interleaved schedules, the same dropout masks as no recomputation, and the memory model's prediction of
// each plan against the executor's measured step peaks.
#include "pipeline/schedule/layer_recompute.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "nn/gpt.h"
#include "nn/optim.h"
#include "pipeline/plan/memory_model.h"
#include "pipeline/run/executor.h"
#include "pipeline_fixtures.h"
#include "tensor/error.h"

namespace brigade::pipeline {
namespace {

using ::testing::HasSubstr;

// The tiny GPT's 6 layers: embed, 4 blocks, head.
const std::vector<bool> kAttention = {false, true, true, true, true, false};

std::vector<LayerRecompute> plan_of(const std::string& text) {
  return RecomputeSetting::parse(text).resolve(kAttention);
}

TEST(RecomputeSetting, ReadsThePoliciesSelectiveAndPlans) {
  EXPECT_EQ(RecomputeSetting::parse("never").policy, Recompute::Never);
  EXPECT_TRUE(plan_of("always").empty());  // whole chunks
  EXPECT_EQ(RecomputeSetting::parse("except-last").policy, Recompute::ExceptLast);
  EXPECT_EQ(RecomputeSetting::parse("selective").policy, Recompute::Always);
  EXPECT_EQ(plan_letters(plan_of("selective")), "naaaan");
  EXPECT_EQ(RecomputeSetting::parse("except-last:selective").policy, Recompute::ExceptLast);
  EXPECT_EQ(plan_letters(plan_of("always:fnafan")), "fnafan");
  for (const char* text : {"never", "always", "selective", "except-last:fnafan", "always:selective"})
    EXPECT_EQ(RecomputeSetting::parse(RecomputeSetting::parse(text).str()).str(),
              RecomputeSetting::parse(text).str());
  EXPECT_TRUE(whole_chunk_recomputed({}, 0, 3));
  EXPECT_FALSE(whole_chunk_recomputed(plan_of("always:ffnfff"), 0, 3));
  EXPECT_TRUE(whole_chunk_recomputed(plan_of("always:ffnfff"), 3, 6));
}

TEST(RecomputeSetting, RefusesWhatIsNotAPlan) {
  const auto message = [](const std::string& text) {
    try {
      plan_of(text);
    } catch (const ValueError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_THAT(message("sometimes"), HasSubstr("expected never, always, except-last, selective"));
  EXPECT_THAT(message("never:nnnnnn"), HasSubstr("takes no per-layer plan"));
  EXPECT_THAT(message("always:nnxnnn"), HasSubstr("layer 2 is 'x'"));
  EXPECT_THAT(message("always:nnn"), HasSubstr("the plan has 3 letters; the model has 6 layers"));
  EXPECT_THAT(message("always:annnnn"), HasSubstr("layer 0 has no attention core"));
  EXPECT_THAT(message("always:"), HasSubstr("empty"));
}

struct Case {
  std::string schedule;
  int stages, microbatches;
  std::string recompute;  // a --recompute text
  int virtual_chunks = 1;
};

TEST(LayerRecompute, MixedPlansMatchTheUnpipelinedStep) {
  testing::Watchdog watchdog(120, "per-layer recompute equivalence");
  const std::vector<Case> cases = {
      {"1f1b", 2, 4, "always:fnafan"},       {"1f1b", 3, 4, "selective"},
      {"gpipe", 2, 2, "except-last:nffnaf"}, {"zb-h1", 3, 4, "always:nfaanf"},
      {"zb-v", 2, 4, "always:nfaffn"},       {"interleaved", 2, 4, "except-last:fanfan", 2},
      {"1f1b", 2, 4, "always:nnnnnn"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.schedule + " S=" + std::to_string(c.stages) + " recompute " + c.recompute);
    const RecomputeSetting setting = RecomputeSetting::parse(c.recompute);
    PipelineConfig pc =
        testing::equivalence_config(c.schedule, c.stages, c.microbatches, setting.policy, c.virtual_chunks);
    pc.layer_recompute = setting.resolve(kAttention);
    testing::expect_matches_unpipelined(pc, 4);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

// With dropout the unpipelined model draws other masks, but a recomputing pipeline must draw exactly the
// masks of the same pipeline without recomputation: R replays them from the generator state at F.
TEST(LayerRecompute, DropoutMasksAreReplayedExactly) {
  testing::Watchdog watchdog(60, "per-layer recompute with dropout");
  const nn::GPTConfig config = testing::tiny_config(4, 0.2);
  const testing::Batch batch = testing::make_batch(8, 8, config.vocab_size, 2);
  auto gradients_with = [&](const std::string& recompute, nn::GPT& model) {
    const RecomputeSetting setting = RecomputeSetting::parse(recompute);
    PipelineConfig pc = testing::equivalence_config("zb-h1", 2, 4, setting.policy);
    pc.layer_recompute = setting.resolve(kAttention);
    pc.seed = 5;
    Pipeline pipe(model, pc);
    return pipe.forward_backward(batch.ids, batch.targets).loss;
  };
  nn::GPT plain(config, 3);
  const double loss = gradients_with("never", plain);
  for (const char* recompute : {"selective", "always:fafnaf", "always"}) {
    SCOPED_TRACE(recompute);
    nn::GPT model(config, 3);
    EXPECT_NEAR(gradients_with(recompute, model), loss, 1e-6 * std::fabs(loss));
    testing::expect_same_parameters(model, plain, 1e-5, /*values=*/false);
  }
}

// The memory model against the executor for per-layer plans: each stage's predicted step peak within 5%
// of the measured one (as for the whole-chunk policies), and whole chunks keeping the least. With
// dropout, whose masks the recomputed cores must draw again (inside the fused attention on the CPU).
TEST(LayerRecompute, TheMemoryModelTracksTheMeasuredPeaks) {
  testing::Watchdog watchdog(120, "per-layer recompute memory");
  nn::GPTConfig c = testing::tiny_config(6, 0.1);
  c.block_size = 32;
  constexpr int64_t kMicrobatch = 4, kT = 32;
  nn::GPT profiled(c, 1);
  const testing::Batch mb = testing::make_batch(kMicrobatch, kT, c.vocab_size, 3);
  ProfileOptions po;
  po.repeats = 1;
  po.attention_core = true;
  po.loss = [&](const Tensor& logits) { return nn::GPT::loss(logits, mb.targets); };
  const ModelProfile profile = profile_layers(profiled, mb.ids, po);
  for (int i = 1; i <= 6; ++i) EXPECT_GE(profile.layers[static_cast<size_t>(i)].attention_core_bytes, 0);

  const std::vector<bool> attention = {false, true, true, true, true, true, true, false};
  std::vector<double> stage0;  // predicted activation peak of stage 0, per plan
  for (const char* recompute : {"always", "never", "always:nfnfnfnn", "selective", "except-last:fanfaffn"}) {
    SCOPED_TRACE(recompute);
    const RecomputeSetting setting = RecomputeSetting::parse(recompute);
    MemoryPlan plan;
    plan.schedule = "1f1b";
    plan.stages = 2;
    plan.microbatches = 4;
    plan.recompute = setting.policy;
    plan.layer_recompute = setting.resolve(attention);
    plan.batch_size = kMicrobatch * 4;
    const MemoryPrediction prediction = predict_memory(profile, plan);
    nn::GPT model(c, 1);
    PipelineConfig pc = testing::equivalence_config("1f1b", 2, 4, setting.policy);
    pc.layer_recompute = plan.layer_recompute;
    pc.balance = prediction.partition.layer_counts();
    Pipeline pipe(model, pc);
    const testing::Batch batch = testing::make_batch(plan.batch_size, kT, c.vocab_size, 4);
    const StepResult result = pipe.forward_backward(batch.ids, batch.targets);
    std::vector<int64_t> measured;
    for (int s = 0; s < 2; ++s) {
      const double predicted =
          static_cast<double>(prediction.stages[static_cast<size_t>(s)].step_peak_bytes());
      const double got = static_cast<double>(result.stages[static_cast<size_t>(s)].peak_bytes);
      EXPECT_LE(std::abs(predicted - got) / got, 0.05) << "stage " << s;
      measured.push_back(result.stages[static_cast<size_t>(s)].peak_bytes);
    }
    std::printf("%s", prediction.table(measured).c_str());
    stage0.push_back(static_cast<double>(prediction.stages[0].activation_bytes));
  }
  // Whole chunks keep the least; a plan that keeps some layers keeps more, less than no recomputation.
  for (size_t i = 1; i < stage0.size(); ++i) EXPECT_GT(stage0[i], stage0[0]) << "plan " << i;
  EXPECT_LT(stage0[2], stage0[1]);
}

}  // namespace
}  // namespace brigade::pipeline
