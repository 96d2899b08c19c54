// nn::train with the pipeline as its step engine (pipeline/run/train_runner.h): pipelined training follows
// the plain loop loss for loss, a resumed pipelined run is bit-exact, a NaN stops it as it stops the plain
// loop, checkpoints record the real partition, a memory budget below the prediction is refused before any
// step, bad settings are ValueErrors naming the flag, and the reported figures (bubble, memory, traffic,
// trace, timeline) are sane. Tiny models: each test runs in about a second.
#include "pipeline/run/train_runner.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "nn/checkpoint.h"
#include "nn/trainer.h"
#include "pipeline/run/plan_model.h"
#include "pipeline/schedule/validate.h"
#include "tensor/grad_mode.h"
#include "test_support.h"
#include "tiny_train_options.h"

namespace {

using namespace brigade;
namespace fs = std::filesystem;
using brigade::testing::message_of;
using nn::TrainOptions;
using nn::TrainResult;
using pipeline::PipelineRunner;

class TrainRunnerTest : public brigade::testing::TempDirTest {};

// 2 blocks: 4 layers (embed, blocks.0, blocks.1, head) to cut.
TrainOptions tiny(int64_t steps) {
  return brigade::testing::tiny_train_options(steps, /*layers=*/2);
}

TrainOptions pipelined(TrainOptions o, int64_t stages, int64_t microbatches, const std::string& schedule) {
  o.stages = stages;
  o.microbatches = microbatches;
  o.schedule = schedule;
  return o;
}

// A pipelined step equals the unpipelined step on the full batch up to float rounding (the microbatch
// sums add in another order); over 15 AdamW steps the losses are compared with a relative tolerance of
// 1e-5 (measured: at most 3.6e-7 absolute, 1.7e-7 relative, on this machine).
TEST_F(TrainRunnerTest, PipelinedTrainingFollowsThePlainLoopLossForLoss) {
  const TrainOptions plain_options = tiny(15);
  const TrainResult plain = nn::train(plain_options);
  struct Case {
    int64_t stages, microbatches;
    std::string schedule, recompute;
  } cases[] = {{2, 4, "1f1b", "never"}, {3, 2, "gpipe", "always"}, {2, 2, "zb-h1", "except-last"}};
  for (const Case& c : cases) {
    TrainOptions o = pipelined(plain_options, c.stages, c.microbatches, c.schedule);
    o.recompute = c.recompute;
    PipelineRunner runner(o);
    const TrainResult r = nn::train(o, {}, &runner);
    ASSERT_EQ(r.losses.size(), plain.losses.size()) << c.schedule;
    for (size_t i = 0; i < r.losses.size(); ++i) {
      EXPECT_NEAR(r.losses[i], plain.losses[i], 1e-5 * std::abs(plain.losses[i]))
          << c.schedule << " step " << i + 1;
    }
    EXPECT_NEAR(r.val_loss, plain.val_loss, 1e-5 * plain.val_loss) << c.schedule;
    EXPECT_EQ(runner.partition().stages, c.stages);
    EXPECT_EQ(runner.pipeline().schedule().microbatches, c.microbatches);
  }
}

// With dropout the stages draw masks from their own generators: the checkpoint carries their states
// ("brigade.engine_state"), so the resumed run draws the same masks as the uninterrupted one.
TEST_F(TrainRunnerTest, ResumeOfAPipelinedRunIsBitExact) {
  for (double dropout : {0.0, 0.1}) {
    SCOPED_TRACE("dropout " + std::to_string(dropout));
    TrainOptions options = pipelined(tiny(10), 2, 4, "1f1b");
    options.dropout = dropout;
    options.save = file("run" + std::to_string(dropout) + ".safetensors");
    options.save_every = 5;
    nn::TrainHooks hooks;
    hooks.before_step = [&](int64_t step, nn::GPT&) {
      if (step == 5) fs::copy_file(options.save, file("step5_" + std::to_string(dropout) + ".safetensors"));
    };
    PipelineRunner full_runner(options);
    const TrainResult full = nn::train(options, hooks, &full_runner);
    ASSERT_EQ(full.losses.size(), 10u);

    TrainOptions resumed_options = options;
    resumed_options.resume = file("step5_" + std::to_string(dropout) + ".safetensors");
    resumed_options.save = file("resumed" + std::to_string(dropout) + ".safetensors");
    PipelineRunner resumed_runner(resumed_options);
    const TrainResult resumed = nn::train(resumed_options, {}, &resumed_runner);
    EXPECT_EQ(resumed.start_step, 5);
    ASSERT_EQ(resumed.losses.size(), 5u);
    for (size_t i = 0; i < 5; ++i) {
      EXPECT_EQ(resumed.losses[i], full.losses[5 + i]) << "step " << 6 + i << " (must be bit-identical)";
    }
    EXPECT_EQ(resumed.val_loss, full.val_loss);
    nn::Checkpoint a = nn::load_checkpoint(options.save), b = nn::load_checkpoint(resumed_options.save);
    for (auto& [name, tensor] : a.model) {
      EXPECT_TRUE(brigade::testing::allclose(b.model.at(name), tensor, 0.0, 0.0)) << name;
    }
    for (auto& [name, tensor] : a.optimizer.tensors) {
      EXPECT_TRUE(brigade::testing::allclose(b.optimizer.tensors.at(name), tensor, 0.0, 0.0)) << name;
    }
  }
}

TEST_F(TrainRunnerTest, NanStopsAPipelinedRunLikeThePlainLoop) {
  TrainOptions options = pipelined(tiny(8), 2, 4, "1f1b");
  options.save = file("run.safetensors");
  options.save_every = 3;
  nn::TrainHooks hooks;
  hooks.before_step = [&](int64_t step, nn::GPT& model) {
    if (step == 4) {  // the 5th step: the checkpoint of step 3 is on disk
      NoGradGuard no_grad;
      model.state_dict().at("head.ln_f.weight").fill_(std::numeric_limits<double>::quiet_NaN());
    }
  };
  PipelineRunner runner(options);
  const std::string message = message_of<nn::NonFiniteLossError>([&] { nn::train(options, hooks, &runner); });
  EXPECT_NE(message.find("loss is nan at step 5 of 8"), std::string::npos) << message;
  EXPECT_NE(message.find("(step 3), is intact"), std::string::npos) << message;
  EXPECT_EQ(nn::load_checkpoint(options.save).info.step, 3);
}

TEST_F(TrainRunnerTest, CheckpointRecordsTheRealPartition) {
  TrainOptions o = pipelined(tiny(2), 2, 2, "gpipe");
  o.balance = "3,1";
  o.save = file("ck.safetensors");
  PipelineRunner runner(o);
  nn::train(o, {}, &runner);
  const nn::Checkpoint ck = nn::load_checkpoint(o.save);
  const nlohmann::json p = nlohmann::json::parse(ck.metadata.at(nn::kPartitionKey));
  EXPECT_EQ(p["stages"], 2);
  EXPECT_EQ(p["balance"], nlohmann::json::array({3, 1}));
  EXPECT_EQ(p["method"], "balance");
  EXPECT_EQ(p["schedule"], "gpipe");
  // By parameters the 4 layers of the tiny model cut 2,2 (the blocks dominate).
  TrainOptions q = pipelined(tiny(1), 2, 2, "1f1b");
  q.save = file("ck2.safetensors");
  PipelineRunner by_params(q);
  nn::train(q, {}, &by_params);
  EXPECT_EQ(nlohmann::json::parse(nn::load_checkpoint(q.save).metadata.at(nn::kPartitionKey))["balance"],
            nlohmann::json::array({2, 2}));
  // The plain loop records one stage holding every layer.
  TrainOptions plain = tiny(1);
  plain.save = file("ck3.safetensors");
  nn::train(plain);
  EXPECT_EQ(nlohmann::json::parse(nn::load_checkpoint(plain.save).metadata.at(nn::kPartitionKey))["balance"],
            nlohmann::json::array({4}));
}

TEST_F(TrainRunnerTest, ABudgetBelowThePredictionIsRefusedBeforeAnyStep) {
  TrainOptions o = pipelined(tiny(3), 2, 4, "gpipe");
  o.memory_budget = "16KiB";
  o.save = file("never.safetensors");
  int steps = 0;
  nn::TrainHooks hooks;
  hooks.on_step = [&](const nn::StepReport&) { ++steps; };
  PipelineRunner runner(o);
  const std::string message =
      message_of<pipeline::MemoryBudgetExceeded>([&] { nn::train(o, hooks, &runner); });
  EXPECT_NE(message.find("--memory-budget 16KiB"), std::string::npos) << message;
  EXPECT_NE(message.find("stage"), std::string::npos) << message;
  EXPECT_NE(message.find("predicted to peak"), std::string::npos) << message;
  EXPECT_EQ(steps, 0);
  EXPECT_FALSE(fs::exists(o.save));

  // A budget above the prediction runs, and the prediction is what certify compared.
  o.memory_budget = "1GiB";
  PipelineRunner fits(o);
  nn::train(o, hooks, &fits);
  EXPECT_EQ(steps, 3);
  EXPECT_LT(fits.prediction().peak_bytes(), int64_t{1} << 30);
}

TEST_F(TrainRunnerTest, BadSettingsAreValueErrorsNamingTheFlag) {
  struct Case {
    std::function<void(TrainOptions&)> change;
    std::string message;
  } cases[] = {
      {[](TrainOptions& o) { o.schedule = "pipedream"; },
       "--schedule 'pipedream' is not a schedule; expected one of: gpipe, 1f1b, interleaved, zb-h1"},
      {[](TrainOptions& o) { o.recompute = "sometimes"; }, "--recompute 'sometimes'"},
      {[](TrainOptions& o) { o.partition = "luck"; }, "--partition 'luck'"},
      {[](TrainOptions& o) { o.partition = "balance"; }, "--partition balance needs --balance"},
      {[](TrainOptions& o) { o.virtual_chunks = 2; }, "--virtual 2 needs --schedule interleaved"},
      {[](TrainOptions& o) {
         o.schedule = "zb-v";
         o.stages = 3;
       },
       "--schedule zb-v with --stages 3 x 2 chunks needs 6 model chunks"},
      {[](TrainOptions& o) {
         o.schedule = "interleaved";
         o.virtual_chunks = 2;
         o.microbatches = 3;
         o.batch = 12;
       },
       "--schedule 'interleaved'"},
      {[](TrainOptions& o) { o.balance = "2,x"; }, "--balance '2,x'"},
      {[](TrainOptions& o) { o.balance = "1,1,2"; }, "has 3 entries, expected 2"},
      {[](TrainOptions& o) { o.balance = "1,2"; }, "sums to 3 layers, the model has 4"},
      {[](TrainOptions& o) { o.devices = "cpu,tpu"; }, "'tpu' is not a device"},
      {[](TrainOptions& o) { o.devices = "cpu,cpu,cpu"; }, "names 3 devices; expected 1 or 2"},
      {[](TrainOptions& o) { o.memory_budget = "lots"; }, "--memory-budget 'lots'"},
      {[](TrainOptions& o) { o.stages = 5; }, "--stages 5 needs 5 model chunks"},
      {[](TrainOptions& o) { o.microbatches = 3; }, "--batch 16 is not divisible by --microbatches 3"},
  };
  for (const Case& c : cases) {
    TrainOptions o = pipelined(tiny(1), 2, 4, "1f1b");
    c.change(o);
    const std::string message = message_of<ValueError>([&] { pipeline::check_train_options(o); });
    EXPECT_NE(message.find(c.message), std::string::npos) << "expected '" << c.message << "' in: " << message;
  }
  EXPECT_NO_THROW(pipeline::check_train_options(pipelined(tiny(1), 2, 4, "1f1b")));
  TrainOptions interleaved = pipelined(tiny(1), 2, 4, "interleaved");
  interleaved.virtual_chunks = 2;
  EXPECT_NO_THROW(pipeline::check_train_options(interleaved));
  // nn::train alone refuses pipeline settings instead of ignoring them.
  const std::string message = message_of<ValueError>([&] { nn::train(pipelined(tiny(1), 2, 4, "1f1b")); });
  EXPECT_NE(message.find("PipelineRunner"), std::string::npos) << message;
}

TEST_F(TrainRunnerTest, ReportsBubbleMemoryTrafficTraceAndTimeline) {
  TrainOptions o = pipelined(tiny(6), 2, 4, "1f1b");
  PipelineRunner runner(o);
  const TrainResult r = nn::train(o, {}, &runner);
  const nlohmann::json m = nlohmann::json::parse(runner.add_metrics(r.metrics_json(o)));
  EXPECT_EQ(m["schedule"], "1f1b");
  EXPECT_EQ(m["stages"], 2);
  EXPECT_EQ(m["microbatches"], 4);
  for (const char* key : {"bubble_measured", "bubble_simulated", "bubble_simulated_from_trace"}) {
    EXPECT_GE(m[key].get<double>(), 0.0) << key;
    EXPECT_LT(m[key].get<double>(), 1.0) << key;
  }
  // 1F1B, S = 2, M = 4 with equal stages: the textbook bubble is 1/5; the profile's stages are not equal
  // (the embedding and the head differ), so it sits near, not at, 20%.
  EXPECT_NEAR(m["bubble_simulated"].get<double>(), 0.2, 0.15);
  for (const char* key :
       {"peak_activation_bytes", "peak_step_bytes", "predicted_peak_bytes", "predicted_step_peak_bytes"}) {
    ASSERT_TRUE(m[key].is_array()) << key;
    ASSERT_EQ(m[key].size(), 2u) << key;
    for (const auto& bytes : m[key]) EXPECT_GT(bytes.get<int64_t>(), 0) << key;
  }
  // The memory model's step peak is within 25% of the measured one on this small model.
  for (size_t s = 0; s < 2; ++s) {
    const double predicted = m["predicted_step_peak_bytes"][s].get<double>();
    const double measured = m["peak_step_bytes"][s].get<double>();
    EXPECT_NEAR(predicted, measured, 0.25 * measured) << "stage " << s;
  }
  // Traffic: per microbatch one activation [4, 13, 32] floats forward and its gradient back.
  const int64_t boundary = 4 * 13 * 32 * 4;
  EXPECT_EQ(m["traffic"]["activation_bytes"], 4 * boundary);
  EXPECT_EQ(m["traffic"]["gradient_bytes"], 4 * boundary);
  EXPECT_EQ(m["traffic_bytes_per_step"], 8 * boundary);
  EXPECT_EQ(m["partition"]["balance"], nlohmann::json::array({2, 2}));

  const nlohmann::json trace = nlohmann::json::parse(runner.trace_json());
  std::set<std::string> tracks;
  for (const auto& event : trace["traceEvents"]) {
    if (event.value("ph", "") == "M" && event.value("name", "") == "thread_name") {
      tracks.insert(event["args"]["name"].get<std::string>());
    }
  }
  int stage_tracks = 0;
  for (int s = 0; s < 2; ++s) {
    for (const std::string& t : tracks) {
      if (t.find("stage " + std::to_string(s)) != std::string::npos) {
        ++stage_tracks;
        break;
      }
    }
  }
  EXPECT_EQ(stage_tracks, 2) << trace.dump().substr(0, 2000);
  const std::string svg = runner.timeline_svg();
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  // The measured step over its simulated twin: both blocks, one document.
  EXPECT_NE(svg.find("(measured)"), std::string::npos);
  EXPECT_NE(svg.find("(simulated)"), std::string::npos);
  EXPECT_EQ(svg.find("<svg", 1), std::string::npos);
  const std::string summary = runner.summary();
  EXPECT_NE(summary.find("bubble: measured"), std::string::npos) << summary;
  EXPECT_NE(summary.find("imbalance"), std::string::npos) << summary;
}

}  // namespace

namespace {

// --plan auto: the planner's pick replaces the pipeline flags before step 1, the run follows the plain
// loop's loss (any configuration does), and the summary and metrics give the pick's predicted step time
// beside the measured one. A budget nothing fits is refused before any step.
TEST_F(TrainRunnerTest, PlanAutoRunsThePlannersPickAndReportsPredictedAgainstMeasured) {
  const TrainResult plain = nn::train(tiny(6));
  TrainOptions o = tiny(6);
  o.plan = "auto";
  o.plan_devices = 2;
  PipelineRunner runner(o);
  const TrainResult piped = nn::train(o, {}, &runner);
  ASSERT_NE(runner.plan(), nullptr);
  const pipeline::PlanCandidate& pick = runner.plan()->best();
  EXPECT_LE(pick.stages, 2);
  EXPECT_EQ(runner.pipeline().config().stages, pick.stages);
  EXPECT_EQ(runner.pipeline().config().microbatches, pick.microbatches);
  EXPECT_EQ(runner.pipeline().schedule().name, pick.schedule);
  EXPECT_EQ(runner.partition().layer_counts(), pick.balance);
  EXPECT_NEAR(piped.final_loss, plain.final_loss, 1e-5 * std::fabs(plain.final_loss));
  EXPECT_GT(runner.step_ms_measured(), 0.0);
  EXPECT_NE(runner.summary().find("plan auto: step predicted"), std::string::npos);
  const nlohmann::json metrics = nlohmann::json::parse(runner.add_metrics(piped.metrics_json(o)));
  // The pipeline's span, what measured_step_ms measures (the optimizer step is in neither).
  EXPECT_DOUBLE_EQ(metrics["plan"]["predicted_step_ms"].get<double>(), pick.pipeline_ms);

  o.memory_budget = "1KiB";
  PipelineRunner refused(o);
  EXPECT_THROW(nn::train(o, {}, &refused), pipeline::MemoryBudgetExceeded);
}

// The deferred Bw's lists: the one-stage zb-v with every Bw after another action than its own Bi, valid,
// each Bw once and after its Bi.
TEST(DeferredWeight, TheScheduleDefersEveryWeightGradientAndIsValid) {
  for (int m : {2, 3, 8}) {
    const pipeline::Schedule s = pipeline::deferred_weight_schedule(m);
    EXPECT_NO_THROW(pipeline::validate(s)) << m << " microbatches";
    const std::vector<pipeline::Action>& list = s.actions[0];
    int weights = 0;
    for (size_t k = 0; k < list.size(); ++k) {
      if (list[k].kind != pipeline::ActionKind::BackwardWeight) continue;
      ++weights;
      ASSERT_GT(k, 0u);
      const pipeline::Action& before = list[k - 1];
      EXPECT_FALSE(before.kind == pipeline::ActionKind::BackwardInput &&
                   before.microbatch == list[k].microbatch && before.chunk == list[k].chunk)
          << "Bw" << list[k].microbatch << "." << list[k].chunk << " right after its Bi";
    }
    EXPECT_EQ(weights, 2 * m);
  }
}

// Measured on the model (the executor, one stage in two chunks, each Bw right after its Bi and then
// deferred): factors of at least 1, the model's gradients left as they were (here: set, and the same
// values after), and too few microbatches refused with the numbers.
TEST(DeferredWeight, MeasuringLeavesTheGradientsAndRefusesOneMicrobatch) {
  nn::GPTConfig c;
  c.vocab_size = 16, c.block_size = 8, c.n_layer = 2, c.n_head = 2, c.n_embd = 16;
  nn::GPT model(c, 3);
  model.train();
  std::vector<int64_t> tokens(512);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int64_t>((i * 7 + i / 5) % 16);
  Generator generator(5);
  const nn::Batch sample = nn::random_batch(tokens, 8, 8, generator);
  std::vector<Tensor> params = model.parameters();
  const Tensor grad = ones(params.front().shape());
  params.front().set_grad(grad);
  const pipeline::DeferredWeightFactors f = pipeline::measure_deferred_weight(model, sample, 2, 4, 1, 2);
  EXPECT_GE(f.first, 1.0);
  EXPECT_GE(f.split, 1.0);
  EXPECT_TRUE(std::isfinite(f.first) && std::isfinite(f.split));
  // The same gradient tensor is back, untouched; the others are still unset.
  ASSERT_TRUE(params.front().grad().defined());
  EXPECT_EQ(params.front().grad().data_ptr(), grad.data_ptr());
  EXPECT_EQ(grad.data<float>()[0], 1.0f);
  for (size_t i = 1; i < params.size(); ++i) EXPECT_FALSE(params[i].grad().defined()) << i;
  const std::string one_deferred =
      message_of<ValueError>([&] { pipeline::measure_deferred_weight(model, sample, 2, 1, 1); });
  EXPECT_NE(one_deferred.find("2 microbatches"), std::string::npos) << one_deferred;
  // The cold backward's factor, the same way: at least 1, the gradients as they were, one microbatch refused.
  const double cold = pipeline::measure_cold_backward(model, sample, 2, 4, 1, 2);
  EXPECT_GE(cold, 1.0);
  EXPECT_TRUE(std::isfinite(cold));
  EXPECT_EQ(params.front().grad().data_ptr(), grad.data_ptr());
  for (size_t i = 1; i < params.size(); ++i) EXPECT_FALSE(params[i].grad().defined()) << i;
  const std::string one_cold =
      message_of<ValueError>([&] { pipeline::measure_cold_backward(model, sample, 2, 1, 1); });
  EXPECT_NE(one_cold.find("2 microbatches"), std::string::npos) << one_cold;
}

}  // namespace
