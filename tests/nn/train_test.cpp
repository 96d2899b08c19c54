// The training loop (nn/trainer.h): it learns on the default corpus, a resumed run reproduces the
// uninterrupted run's losses bit for bit, a NaN stops the run naming the step and leaves the last checkpoint
// intact, options validate and round-trip, data files are checked. Tiny models keep this under a few seconds.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <numeric>
#include <set>
#include <variant>
#include <vector>

#include "nn/trainer.h"
#include "tensor/grad_mode.h"
#include "test_support.h"
#include "tiny_train_options.h"

namespace {

using namespace brigade;
using namespace brigade::nn;
namespace fs = std::filesystem;
using brigade::testing::message_of;
using brigade::testing::read_file_bytes;

class TrainTest : public brigade::testing::TempDirTest {};

TrainOptions tiny(int64_t steps) {
  return brigade::testing::tiny_train_options(steps);
}

double mean(const std::vector<double>& v, size_t begin, size_t end) {
  return std::accumulate(v.begin() + static_cast<std::ptrdiff_t>(begin),
                         v.begin() + static_cast<std::ptrdiff_t>(end), 0.0) /
         static_cast<double>(end - begin);
}

TEST_F(TrainTest, LossDecreasesOnTheDefaultCorpus) {
  TrainResult r = train(tiny(80));
  ASSERT_EQ(r.losses.size(), 80u);
  // Uniform guessing over the 13 tokens costs ln 13 = 2.565 nats; the model starts there.
  EXPECT_NEAR(mean(r.losses, 0, 3), std::log(13.0), 0.15);
  // Learning the fixed characters ('+', '=', '\n') and the digit positions alone takes it below 1.9.
  EXPECT_LT(mean(r.losses, 70, 80), 1.9);
  EXPECT_LT(mean(r.losses, 70, 80), mean(r.losses, 0, 10) - 0.5);
  EXPECT_EQ(r.steps, 80);
  EXPECT_EQ(r.final_loss, r.losses.back());
  EXPECT_TRUE(std::isfinite(r.val_loss));
  EXPECT_LT(r.val_loss, 2.0);
  ASSERT_TRUE(r.accuracy.has_value());
  EXPECT_EQ(r.total, 1000);  // every held-out problem is scored at the end
  EXPECT_GE(*r.accuracy, 0.0);
  EXPECT_GT(r.params, 0);
  EXPECT_GT(r.peak_bytes, 0);
  EXPECT_GT(r.ms_per_step, 0.0);
  EXPECT_NEAR(r.tokens_per_s, 16 * 13 * 1e3 / r.ms_per_step, 1e-6 * r.tokens_per_s);
}

TEST_F(TrainTest, ResumeReproducesTheLossesBitForBit) {
  // Dropout on, so that the restored generator must also reproduce the masks, not just the batches.
  TrainOptions options = tiny(12);
  options.dropout = 0.1;
  options.save = file("run.safetensors");
  options.save_every = 6;
  TrainHooks hooks;
  hooks.before_step = [&](int64_t step, GPT&) {
    if (step == 6) fs::copy_file(options.save, file("step6.safetensors"));  // saved after step 6 completed
  };
  TrainResult full = train(options, hooks);
  ASSERT_EQ(full.losses.size(), 12u);

  TrainOptions resumed_options = options;
  resumed_options.resume = file("step6.safetensors");
  resumed_options.save = file("resumed.safetensors");
  TrainResult resumed = train(resumed_options);
  EXPECT_EQ(resumed.start_step, 6);
  ASSERT_EQ(resumed.losses.size(), 6u);
  for (size_t i = 0; i < 6; ++i) {
    EXPECT_EQ(resumed.losses[i], full.losses[6 + i]) << "step " << 7 + i << " (must be bit-identical)";
  }
  EXPECT_EQ(resumed.val_loss, full.val_loss);
  // Both runs end in the same state: the final checkpoints hold the same tensors.
  Checkpoint a = load_checkpoint(options.save), b = load_checkpoint(resumed_options.save);
  EXPECT_EQ(a.info.step, 12);
  EXPECT_EQ(b.info.step, 12);
  EXPECT_EQ(a.info.generator, b.info.generator);
  for (auto& [name, tensor] : a.model) {
    EXPECT_TRUE(brigade::testing::allclose(b.model.at(name), tensor, 0.0, 0.0)) << name;
  }
  for (auto& [name, tensor] : a.optimizer.tensors) {
    EXPECT_TRUE(brigade::testing::allclose(b.optimizer.tensors.at(name), tensor, 0.0, 0.0)) << name;
  }
}

TEST_F(TrainTest, NanStopsTheRunNamingTheStepAndKeepsTheLastCheckpoint) {
  TrainOptions options = tiny(10);
  options.save = file("run.safetensors");
  options.save_every = 3;
  std::string saved_bytes;
  TrainHooks hooks;
  hooks.before_step = [&](int64_t step, GPT& model) {
    if (step == 5) {  // the 6th step: the checkpoint of step 3 is on disk
      saved_bytes = read_file_bytes(options.save);
      NoGradGuard no_grad;
      model.state_dict().at("head.ln_f.weight").fill_(std::numeric_limits<double>::quiet_NaN());
    }
  };
  std::string message = message_of<NonFiniteLossError>([&] { train(options, hooks); });
  EXPECT_NE(message.find("loss is nan at step 6 of 10"), std::string::npos) << message;
  EXPECT_NE(message.find(options.save), std::string::npos) << message;
  EXPECT_NE(message.find("(step 3), is intact"), std::string::npos) << message;
  ASSERT_FALSE(saved_bytes.empty());
  EXPECT_EQ(read_file_bytes(options.save), saved_bytes);
  Checkpoint ck = load_checkpoint(options.save);  // still valid: checksum, step 3
  EXPECT_EQ(ck.info.step, 3);
}

TEST_F(TrainTest, ASessionDrivenPartByPartIsTheOneCallRun) {
  TrainOptions options = tiny(8);
  options.eval_every = 3;
  options.save = file("run.safetensors");
  options.save_every = 4;
  std::vector<int64_t> evaluated;
  TrainHooks hooks;
  hooks.on_eval = [&](const EvalReport& r) { evaluated.push_back(r.step); };
  const TrainResult whole = train(options, hooks);
  EXPECT_EQ(evaluated, (std::vector<int64_t>{3, 6, 8}));  // every 3 steps, and the final one

  options.save = file("session.safetensors");
  TrainSession session(options);
  EXPECT_EQ(session.steps_completed(), 0);
  EXPECT_FALSE(session.save_due());
  EXPECT_FALSE(session.evaluation_due());
  std::vector<int64_t> saved, evaluations;
  while (!session.done()) {
    const StepReport report = session.step();
    EXPECT_EQ(report.step, session.steps_completed());
    if (session.save_due()) {
      session.save();
      saved.push_back(report.step);
      EXPECT_FALSE(session.save_due());  // once per step
    }
    if (session.evaluation_due()) {
      evaluations.push_back(session.evaluate().step);
      EXPECT_FALSE(session.evaluation_due());
    }
  }
  EXPECT_EQ(saved, (std::vector<int64_t>{4, 8}));
  EXPECT_EQ(evaluations, (std::vector<int64_t>{3, 6}));
  std::string message = message_of<ValueError>([&] { session.step(); });
  EXPECT_NE(message.find("steps are done"), std::string::npos) << message;
  const TrainResult parts = session.finish();
  EXPECT_EQ(parts.losses, whole.losses);  // bit for bit: evaluations and saves leave the stream alone
  EXPECT_EQ(parts.val_loss, whole.val_loss);
  EXPECT_EQ(parts.steps, 8);
  EXPECT_EQ(parts.accuracy, whole.accuracy);
  message = message_of<ValueError>([&] { session.finish(); });
  EXPECT_NE(message.find("finished already"), std::string::npos) << message;
  EXPECT_EQ(load_checkpoint(file("session.safetensors")).info.step, 8);
}

TEST(TrainOptions, TheTableNamesEverySettingOnceAndSaysWhatResumeInherits) {
  std::set<std::string> names, per_invocation;
  for_each_train_option([&](const auto& option) {
    EXPECT_TRUE(names.insert(option.name).second) << option.name << " twice";
    EXPECT_NE(std::string(option.help), "") << option.name;
    if (option.on_resume == OnResume::PerInvocation) per_invocation.insert(option.flag());
  });
  // to_json writes exactly the table's names.
  std::set<std::string> keys;
  const nlohmann::json json = nlohmann::json::parse(TrainOptions().to_json());
  for (const auto& [key, value] : json.items()) keys.insert(key);
  EXPECT_EQ(keys, names);
  EXPECT_EQ(names.size(), 42u);  // every member of TrainOptions
  // Where and how this process runs, and what it writes besides the checkpoint.
  EXPECT_EQ(per_invocation,
            (std::set<std::string>{"--device", "--threads", "--resume", "--metrics", "--devices",
                                   "--memory-budget", "--trace", "--timeline", "--data-parallel", "--timeout",
                                   "--bucket-mb", "--fail-at", "--transport", "--plan", "--plan-devices"}));
  // The flag is the name with dashes.
  const auto& min_lr = std::get<TrainOption<double>>(train_option_table()[8]);
  EXPECT_STREQ(min_lr.name, "min_lr");
  EXPECT_EQ(min_lr.flag(), "--min-lr");
}

TEST(TrainOptions, ValidationNamesTheFlag) {
  auto message_for = [](const std::function<void(TrainOptions&)>& change) {
    TrainOptions o;
    change(o);
    return message_of<ValueError>([&] { o.validate(); });
  };
  EXPECT_NE(message_for([](TrainOptions& o) {
              o.layers = -1;
            }).find("--layers must be a positive integer, found -1"),
            std::string::npos);
  EXPECT_NE(message_for([](TrainOptions& o) { o.batch = 0; }).find("--batch"), std::string::npos);
  EXPECT_NE(message_for([](TrainOptions& o) { o.block = -5; }).find("--block"), std::string::npos);
  EXPECT_NE(message_for([](TrainOptions& o) { o.heads = 3; }).find("--heads 3 does not divide --embd 64"),
            std::string::npos);
  EXPECT_NE(message_for([](TrainOptions& o) { o.device = "tpu"; }).find("--device 'tpu'"), std::string::npos);
  EXPECT_NE(message_for([](TrainOptions& o) { o.dropout = 1.0; }).find("--dropout"), std::string::npos);
  EXPECT_NE(message_for([](TrainOptions& o) { o.min_lr = 1.0; }).find("--min-lr"), std::string::npos);
  EXPECT_NE(message_for([](TrainOptions& o) { o.save_every = 5; }).find("needs --save"), std::string::npos);
  EXPECT_NE(message_for([](TrainOptions& o) { o.stages = 0; }).find("--stages must be a positive integer"),
            std::string::npos);
  EXPECT_NE(message_for([](TrainOptions& o) {
              o.microbatches = 5;
            }).find("--batch 128 is not divisible by --microbatches 5"),
            std::string::npos);
  EXPECT_NE(message_for([](TrainOptions& o) {
              o.stages = 5;
            }).find("--stages 5 needs 5 model chunks of at least one layer, but the model has 4 layers"),
            std::string::npos);
  EXPECT_NE(message_for([](TrainOptions& o) { o.virtual_chunks = 0; }).find("--virtual"), std::string::npos);
  TrainOptions fine;
  fine.device = "cuda:3";  // a valid name; whether it exists is checked when training starts
  EXPECT_NO_THROW(fine.validate());
}

TEST(TrainOptions, JsonRoundTripAndAutomaticBlock) {
  TrainOptions o;
  o.data = "input.txt";
  o.layers = 3;
  o.lr = 1.5e-3;
  o.seed = 18446744073709551615ull;  // uint64 max survives
  o.save = "x.safetensors";
  TrainOptions back = TrainOptions::from_json(o.to_json());
  EXPECT_EQ(back.to_json(), o.to_json());
  EXPECT_EQ(back.seed, o.seed);
  EXPECT_EQ(back.lr, 1.5e-3);
  EXPECT_EQ(TrainOptions::from_json(R"({"steps": 7, "future_field": 1})").steps, 7);
  EXPECT_THROW(TrainOptions::from_json(R"({"steps": "seven"})"), ValueError);
  EXPECT_EQ(TrainOptions().resolved_block(), 13);  // one line of the default corpus
  // The pipeline settings travel too (checkpoints' train_args; --resume inherits them).
  o.stages = 3;
  o.microbatches = 8;
  o.schedule = "interleaved";
  o.virtual_chunks = 2;
  o.recompute = "except-last";
  o.balance = "1,2,1,1,2,1";
  o.memory_budget = "64MiB";
  back = TrainOptions::from_json(o.to_json());
  EXPECT_EQ(back.to_json(), o.to_json());
  EXPECT_EQ(back.virtual_chunks, 2);
  EXPECT_EQ(nlohmann::json::parse(o.to_json())["virtual"], 2);
  EXPECT_TRUE(back.uses_pipeline());
  EXPECT_FALSE(TrainOptions().uses_pipeline());  // the library's default is the plain loop
  // Options from before the pipeline flags existed resume as what wrote them: unpipelined.
  EXPECT_EQ(TrainOptions::from_json(R"({"steps": 7})").stages, 1);
  EXPECT_EQ(back.resolved_block(), 64);
}

TEST_F(TrainTest, DataFilesAreCheckedAndSplit) {
  TrainOptions o = tiny(1);
  o.data = file("missing.txt");
  std::string message = message_of<IOError>([&] { load_train_data(o, 8); });
  EXPECT_NE(message.find(o.data), std::string::npos) << message;

  std::ofstream(file("empty.txt")).close();
  o.data = file("empty.txt");
  message = message_of<IOError>([&] { load_train_data(o, 8); });
  EXPECT_NE(message.find("empty"), std::string::npos) << message;

  std::ofstream(file("short.txt")) << "hello";
  o.data = file("short.txt");
  message = message_of<ValueError>([&] { load_train_data(o, 8); });
  EXPECT_NE(message.find("too few for --block 8"), std::string::npos) << message;

  std::string text;
  for (int i = 0; i < 50; ++i) text += "to be or not to be\n";
  std::ofstream(file("text.txt")) << text;
  o.data = file("text.txt");
  TrainData data = load_train_data(o, 8);
  EXPECT_EQ(data.tokenizer.decode(data.train) + data.tokenizer.decode(data.val), text);
  EXPECT_EQ(data.train.size(), 855u);  // 90% of 950
  EXPECT_EQ(data.task, nullptr);
  EXPECT_TRUE(data.train_starts.empty());
}

TEST_F(TrainTest, TrainsOnATextFileAndMetricsJsonHasTheFigures) {
  std::string text;
  for (int i = 0; i < 40; ++i) text += "the quick brown fox jumps over the lazy dog\n";
  std::ofstream(file("fox.txt")) << text;
  TrainOptions o = tiny(30);
  o.data = file("fox.txt");
  o.block = 16;
  TrainResult r = train(o);
  EXPECT_FALSE(r.accuracy.has_value());
  EXPECT_LT(mean(r.losses, 25, 30), mean(r.losses, 0, 5) - 0.5);
  nlohmann::json j = nlohmann::json::parse(r.metrics_json(o));
  for (const char* key : {"final_loss", "val_loss", "tokens_per_s", "ms_per_step", "params", "peak_bytes",
                          "accuracy", "steps", "config", "train_args"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  EXPECT_TRUE(j["accuracy"].is_null());
  EXPECT_EQ(j["steps"], 30);
  EXPECT_EQ(j["params"], r.params);
  EXPECT_EQ(j["config"]["block_size"], 16);
  EXPECT_EQ(j["train_args"]["data"], o.data);
}

TEST_F(TrainTest, ResumeRefusesADifferentModelShape) {
  TrainOptions o = tiny(2);
  o.save = file("a.safetensors");
  train(o);
  o.resume = o.save;
  o.embd = 64;
  std::string message = message_of<ValueError>([&] { train(o); });
  EXPECT_NE(message.find("--embd 64 differs from the checkpoint's model (32)"), std::string::npos) << message;
}

TEST_F(TrainTest, PipelineSettingsWithoutAnEngineAreRefused) {
  // nn::train cannot build a pipeline (nn does not depend on pipeline/): it refuses rather than ignore them.
  for (const std::function<void(TrainOptions&)>& change : std::vector<std::function<void(TrainOptions&)>>{
           [](TrainOptions& o) { o.stages = 2; }, [](TrainOptions& o) { o.microbatches = 2; },
           [](TrainOptions& o) { o.recompute = "always"; }, [](TrainOptions& o) { o.trace = "t.json"; }}) {
    TrainOptions o = tiny(1);
    change(o);
    std::string message = message_of<ValueError>([&] { train(o); });
    EXPECT_NE(message.find("pipeline::PipelineRunner"), std::string::npos) << message;
  }
}

TEST_F(TrainTest, UnavailableCudaDeviceIsADeviceError) {
  if (cuda_device_count() > 7) GTEST_SKIP() << "this machine has a cuda:7";
  TrainOptions o = tiny(1);
  o.device = "cuda:7";
  std::string message = message_of<DeviceError>([&] { train(o); });
  EXPECT_NE(message.find("cuda:7 is not available"), std::string::npos) << message;
}

}  // namespace
