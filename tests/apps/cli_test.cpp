// The `brigade` binary as a user meets it: --help, exit status 2 with a usage line for bad flags and flag
// values, a tiny training run that writes its metrics and a checkpoint, sampling from that checkpoint, and
// a corrupted checkpoint refused with exit status 1. Runs the real executable (BRIGADE_CLI_PATH).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#ifndef BRIGADE_CLI_PATH
#error "BRIGADE_CLI_PATH must name the brigade executable (tests/CMakeLists.txt defines it)"
#endif

#include "test_support.h"

namespace {

namespace fs = std::filesystem;
using brigade::testing::read_file_bytes;

struct CliRun {
  int status = -1;
  std::string out, err;
};

class CliTest : public brigade::testing::TempDirTest {
 protected:
  /// Runs `brigade <args>` (args are passed through the shell as written) in the test's directory.
  CliRun brigade(const std::string& args) const {
    const std::string command = "cd '" + dir_.string() + "' && '" BRIGADE_CLI_PATH "' " + args + " >'" +
                                file("stdout.txt") + "' 2>'" + file("stderr.txt") + "'";
    const int raw = std::system(command.c_str());
    CliRun run;
    run.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
    run.out = read_file_bytes(file("stdout.txt"));
    run.err = read_file_bytes(file("stderr.txt"));
    return run;
  }
};

// Flags of a model small enough to train in well under a second.
const std::string kTiny = "--layers 1 --heads 2 --embd 32 --batch 8 --eval-iters 1 --threads 1";

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// `brigade info` says plainly what the CPU gives bfloat16: AVX512-BF16 or not, AMX or not.
TEST_F(CliTest, InfoSaysWhatTheCpuGivesBfloat16) {
  CliRun run = brigade("info");
  EXPECT_EQ(run.status, 0) << run.err;
  EXPECT_TRUE(contains(run.out, "CPU bf16       : ")) << run.out;
  EXPECT_TRUE(contains(run.out, "AVX512-BF16")) << run.out;
  EXPECT_TRUE(contains(run.out, "AMX")) << run.out;
}

TEST_F(CliTest, HelpExitsZeroAndListsEveryFlag) {
  CliRun run = brigade("train --help");
  EXPECT_EQ(run.status, 0) << run.err;
  for (const char* flag :
       {"--data",          "--layers",     "--heads",      "--embd",    "--block",        "--batch",
        "--steps",         "--lr",         "--min-lr",     "--warmup",  "--weight-decay", "--dropout",
        "--grad-clip",     "--eval-every", "--eval-iters", "--device",  "--threads",      "--seed",
        "--save",          "--save-every", "--resume",     "--metrics", "--stages",       "--microbatches",
        "--schedule",      "--virtual",    "--recompute",  "--balance", "--partition",    "--devices",
        "--memory-budget", "--trace",      "--timeline"}) {
    EXPECT_TRUE(contains(run.out, flag)) << flag << " missing from:\n" << run.out;
  }
  run = brigade("sample --help");
  EXPECT_EQ(run.status, 0) << run.err;
  for (const char* flag :
       {"--checkpoint", "--prompt", "--tokens", "--temperature", "--top-k", "--seed", "--device"}) {
    EXPECT_TRUE(contains(run.out, flag)) << flag << " missing from:\n" << run.out;
  }
}

TEST_F(CliTest, UnknownFlagExitsTwoWithTheUsageLine) {
  CliRun run = brigade("train --bogus 3");
  EXPECT_EQ(run.status, 2);
  EXPECT_TRUE(contains(run.err, "--bogus")) << run.err;
  EXPECT_TRUE(contains(run.err, "usage: brigade train")) << run.err;
  run = brigade("train --layers two");
  EXPECT_EQ(run.status, 2);
  EXPECT_TRUE(contains(run.err, "usage: brigade train")) << run.err;
  run = brigade("frobnicate");
  EXPECT_EQ(run.status, 2);
  EXPECT_TRUE(contains(run.err, "usage: brigade")) << run.err;
}

TEST_F(CliTest, BadValuesExitTwoNamingTheFlag) {
  struct Case {
    std::string args, message;
  } cases[] = {
      {"train --layers -1", "--layers must be a positive integer, found -1"},
      {"train --embd -64", "--embd must be a positive integer, found -64"},
      {"train --batch 0", "--batch must be a positive integer, found 0"},
      {"train --heads 3 --embd 64", "--heads 3 does not divide --embd 64"},
      {"train --device tpu", "--device 'tpu' is not a device"},
      {"train --device cuda:9", "--device cuda:9 is not available"},
      {"train --dropout 1.5", "--dropout must be in [0, 1)"},
      {"train --data '" + file("missing.txt") + "'", file("missing.txt")},
      {"sample --checkpoint x.safetensors --device gpu", "unknown device 'gpu'"},
      {"train --microbatches 3", "--batch 128 is not divisible by --microbatches 3"},
      {"train --stages 5", "--stages 5 needs 5 model chunks of at least one layer, but the model has 4"},
      {"train --stages 0", "--stages must be a positive integer"},
      {"train --schedule pipedream", "expected one of: gpipe, 1f1b, interleaved, zb-h1"},
      {"train --virtual 2", "--virtual 2 needs --schedule interleaved"},
      {"train --schedule interleaved --virtual 3", "--stages 2 x --virtual 3 needs 6 model chunks"},
      {"train --schedule zb-v --stages 4", "--schedule zb-v with --stages 4 x 2 chunks needs 8 model chunks"},
      {"train --schedule interleaved --microbatches 3 --batch 129", "--schedule 'interleaved'"},
      {"train --recompute sometimes", "--recompute 'sometimes'"},
      {"train --partition luck", "--partition 'luck'"},
      {"train --balance 3,3", "--balance '3,3' sums to 6 layers, the model has 4"},
      {"train --balance 2,2,0", "--balance '2,2,0'"},
      {"train --devices cpu,tpu", "--devices 'cpu,tpu': 'tpu' is not a device"},
      {"train --devices cuda:0,cuda:99", "is not available"},
      {"train --devices cpu --device cuda:0", "disagree"},
      {"train --memory-budget lots", "--memory-budget 'lots'"},
  };
  for (const Case& c : cases) {
    CliRun run = brigade(c.args);
    EXPECT_EQ(run.status, 2) << c.args << "\n" << run.err;
    EXPECT_TRUE(contains(run.err, c.message)) << c.args << ": expected '" << c.message << "' in:\n"
                                              << run.err;
    EXPECT_TRUE(contains(run.err, "usage: brigade")) << c.args << "\n" << run.err;
  }
}

TEST_F(CliTest, EmptyDataFileExitsTwoNamingThePath) {
  std::ofstream(file("empty.txt")).close();
  CliRun run = brigade("train --data '" + file("empty.txt") + "'");
  EXPECT_EQ(run.status, 2) << run.err;
  EXPECT_TRUE(contains(run.err, file("empty.txt"))) << run.err;
  EXPECT_TRUE(contains(run.err, "empty")) << run.err;
}

TEST_F(CliTest, TinyRunWritesMetricsAndACheckpointThatSamplesAndResumes) {
  CliRun run = brigade("train " + kTiny + " --steps 5 --metrics m.json --save ck.safetensors");
  ASSERT_EQ(run.status, 0) << run.out << run.err;
  EXPECT_TRUE(contains(run.out, "held-out exact-match accuracy")) << run.out;
  // Not a terminal: plain log lines, no carriage-return bar.
  EXPECT_TRUE(contains(run.out, "step 1/5")) << run.out;
  EXPECT_FALSE(contains(run.out, "\r")) << run.out;

  const nlohmann::json m = nlohmann::json::parse(read_file_bytes(file("m.json")));
  for (const char* key : {"final_loss", "val_loss", "tokens_per_s", "ms_per_step", "params", "peak_bytes",
                          "accuracy", "steps", "config", "train_args"}) {
    EXPECT_TRUE(m.contains(key)) << key << " missing from " << m.dump();
  }
  EXPECT_EQ(m["steps"], 5);
  EXPECT_GT(m["params"].get<int64_t>(), 0);
  EXPECT_GT(m["peak_bytes"].get<int64_t>(), 0);
  EXPECT_GT(m["tokens_per_s"].get<double>(), 0.0);
  EXPECT_GE(m["accuracy"].get<double>(), 0.0);
  EXPECT_LE(m["accuracy"].get<double>(), 1.0);
  EXPECT_GT(m["final_loss"].get<double>(), 0.0);
  EXPECT_EQ(m["config"]["n_embd"], 32);
  EXPECT_EQ(m["config"]["block_size"], 13);

  // Sampling prints the prompt and then the continuation.
  run = brigade("sample --checkpoint ck.safetensors --prompt '123+045=' --tokens 5 --temperature 0");
  ASSERT_EQ(run.status, 0) << run.err;
  EXPECT_EQ(run.out.rfind("123+045=", 0), 0u) << run.out;
  EXPECT_GE(run.out.size(), 13u) << run.out;
  // A prompt character outside the vocabulary is a bad flag value.
  run = brigade("sample --checkpoint ck.safetensors --prompt 'hello'");
  EXPECT_EQ(run.status, 2) << run.err;
  EXPECT_TRUE(contains(run.err, "--prompt")) << run.err;

  // Resuming takes the recorded settings; --steps extends the run.
  run = brigade("train --resume ck.safetensors --steps 7 --threads 1 --metrics m2.json");
  ASSERT_EQ(run.status, 0) << run.out << run.err;
  EXPECT_TRUE(contains(run.out, "resumed from 'ck.safetensors' at step 5")) << run.out;
  const nlohmann::json m2 = nlohmann::json::parse(read_file_bytes(file("m2.json")));
  EXPECT_EQ(m2["steps"], 7);
  EXPECT_EQ(m2["start_step"], 5);
  EXPECT_EQ(m2["config"]["n_embd"], 32);
  // A model flag that contradicts the checkpoint is refused.
  run = brigade("train --resume ck.safetensors --embd 64 --heads 2");
  EXPECT_EQ(run.status, 2) << run.err;
  EXPECT_TRUE(contains(run.err, "--embd 64 differs from the checkpoint's model (32)")) << run.err;
}

TEST_F(CliTest, PipelineFlagsWriteTheirFiguresTraceAndTimeline) {
  CliRun run =
      brigade("train " + kTiny +
              " --steps 6 --stages 2 --microbatches 4 --schedule gpipe --recompute except-last "
              "--partition time --memory-budget 64MiB --trace t.json --timeline t.svg --metrics m.json "
              "--save ck.safetensors");
  ASSERT_EQ(run.status, 0) << run.out << run.err;
  EXPECT_TRUE(contains(run.out, "pipeline: gpipe, 2 stages x 4 microbatches of 2")) << run.out;
  EXPECT_TRUE(contains(run.out, "partition by time")) << run.out;
  EXPECT_TRUE(contains(run.out, "bubble: measured")) << run.out;
  EXPECT_TRUE(contains(run.out, "simulated")) << run.out;
  const nlohmann::json m = nlohmann::json::parse(read_file_bytes(file("m.json")));
  EXPECT_EQ(m["schedule"], "gpipe");
  EXPECT_EQ(m["stages"], 2);
  EXPECT_EQ(m["microbatches"], 4);
  EXPECT_EQ(m["recompute"], "except-last");
  for (const char* key : {"bubble_measured", "bubble_simulated"}) {
    EXPECT_GE(m[key].get<double>(), 0.0) << key;
    EXPECT_LT(m[key].get<double>(), 1.0) << key;
  }
  for (const char* key : {"peak_activation_bytes", "predicted_peak_bytes"}) {
    ASSERT_TRUE(m[key].is_array()) << key;
    ASSERT_EQ(m[key].size(), 2u) << key;
    for (const auto& bytes : m[key]) EXPECT_GT(bytes.get<int64_t>(), 0) << key;
    for (const auto& bytes : m[key]) EXPECT_LT(bytes.get<int64_t>(), int64_t{64} << 20) << key;
  }
  EXPECT_GT(m["traffic_bytes_per_step"].get<int64_t>(), 0);
  EXPECT_EQ(m["train_args"]["stages"], 2);
  const nlohmann::json trace = nlohmann::json::parse(read_file_bytes(file("t.json")));
  EXPECT_TRUE(trace.contains("traceEvents"));
  const std::string dumped = trace.dump();
  EXPECT_TRUE(contains(dumped, "stage 0 compute")) << dumped.substr(0, 1000);
  EXPECT_TRUE(contains(dumped, "stage 1 compute")) << dumped.substr(0, 1000);
  EXPECT_TRUE(contains(dumped, "simulated")) << dumped.substr(0, 1000);
  EXPECT_EQ(read_file_bytes(file("t.svg")).rfind("<svg", 0), 0u);

  // --resume inherits the pipeline flags from the checkpoint.
  run = brigade("train --resume ck.safetensors --steps 7 --threads 1 --metrics m2.json");
  ASSERT_EQ(run.status, 0) << run.out << run.err;
  const nlohmann::json m2 = nlohmann::json::parse(read_file_bytes(file("m2.json")));
  EXPECT_EQ(m2["schedule"], "gpipe");
  EXPECT_EQ(m2["recompute"], "except-last");
  EXPECT_EQ(m2["microbatches"], 4);

  // --stages 1 --microbatches 1 is the plain loop: no pipeline figures.
  run = brigade("train " + kTiny + " --steps 2 --stages 1 --microbatches 1 --metrics m3.json");
  ASSERT_EQ(run.status, 0) << run.out << run.err;
  EXPECT_FALSE(contains(run.out, "bubble")) << run.out;
  const nlohmann::json m3 = nlohmann::json::parse(read_file_bytes(file("m3.json")));
  EXPECT_EQ(m3["stages"], 1);
  EXPECT_EQ(m3["microbatches"], 1);
  EXPECT_TRUE(m3["schedule"].is_null());
}

// A name ending in .index.json saves one shard per stage and an index; it resumes into another layout and
// samples like a single file, also through a pipeline (sample --devices).
TEST_F(CliTest, ShardedCheckpointResumesAsAnotherLayoutAndSamples) {
  CliRun run =
      brigade("train " + kTiny + " --steps 2 --stages 2 --microbatches 2 --save ck.safetensors.index.json");
  ASSERT_EQ(run.status, 0) << run.out << run.err;
  EXPECT_TRUE(fs::exists(file("ck-step2-00001-of-00002.safetensors")));
  EXPECT_TRUE(fs::exists(file("ck-step2-00002-of-00002.safetensors")));
  run = brigade(
      "train --resume ck.safetensors.index.json --stages 3 --steps 3 --threads 1 --save ck3.safetensors");
  ASSERT_EQ(run.status, 0) << run.out << run.err;
  EXPECT_TRUE(contains(run.out, "resumed from 'ck.safetensors.index.json' at step 2")) << run.out;
  EXPECT_TRUE(contains(run.out, "3 stages x 2 microbatches")) << run.out;
  run = brigade("sample --checkpoint ck.safetensors.index.json --prompt 1 --tokens 12 --seed 3");
  EXPECT_EQ(run.status, 0) << run.out << run.err;
  // Through a pipeline of two stages (forward-only passes): the same text.
  const CliRun piped = brigade(
      "sample --checkpoint ck.safetensors.index.json --prompt 1 --tokens 12 --seed 3 --devices cpu,cpu");
  EXPECT_EQ(piped.status, 0) << piped.out << piped.err;
  EXPECT_EQ(piped.out, run.out);
  EXPECT_EQ(brigade("sample --checkpoint ck.safetensors.index.json --devices cpu,gpu").status, 2);
  fs::remove(file("ck-step2-00002-of-00002.safetensors"));
  run = brigade("sample --checkpoint ck.safetensors.index.json");
  EXPECT_EQ(run.status, 1) << run.err;
  EXPECT_TRUE(contains(run.err, "ck-step2-00002-of-00002.safetensors")) << run.err;
  EXPECT_TRUE(contains(run.err, "missing")) << run.err;
}

TEST_F(CliTest, ABudgetBelowThePredictionExitsTwoBeforeAnyStep) {
  CliRun run =
      brigade("train " + kTiny +
              " --steps 3 --schedule gpipe --memory-budget 16KiB --metrics m.json --save ck.safetensors");
  EXPECT_EQ(run.status, 2) << run.out << run.err;
  EXPECT_TRUE(contains(run.err, "--memory-budget 16KiB")) << run.err;
  EXPECT_TRUE(contains(run.err, "predicted to peak")) << run.err;
  EXPECT_TRUE(contains(run.err, "usage: brigade train")) << run.err;
  EXPECT_FALSE(contains(run.out, "step 1/3")) << run.out;
  EXPECT_FALSE(fs::exists(file("m.json")));
  EXPECT_FALSE(fs::exists(file("ck.safetensors")));
}

TEST_F(CliTest, CorruptedCheckpointIsRefusedWithExitOne) {
  CliRun run = brigade("train " + kTiny + " --steps 2 --save ck.safetensors");
  ASSERT_EQ(run.status, 0) << run.out << run.err;
  std::string bytes = read_file_bytes(file("ck.safetensors"));
  bytes[bytes.size() - 5] ^= 0x40;
  std::ofstream(file("bad.safetensors"), std::ios::binary) << bytes;
  run = brigade("train --resume bad.safetensors --steps 4");
  EXPECT_EQ(run.status, 1) << run.err;
  EXPECT_TRUE(contains(run.err, "checksum")) << run.err;
  EXPECT_TRUE(contains(run.err, "bad.safetensors")) << run.err;
  run = brigade("sample --checkpoint bad.safetensors");
  EXPECT_EQ(run.status, 1) << run.err;
  EXPECT_TRUE(contains(run.err, "checksum")) << run.err;
  run = brigade("sample --checkpoint nothing.safetensors");
  EXPECT_EQ(run.status, 1) << run.err;
  EXPECT_TRUE(contains(run.err, "nothing.safetensors")) << run.err;
}

}  // namespace

// `brigade schedule --html`: one page that loads nothing and carries the C++ timeline it checks itself
// against (the page in a browser: schedule_page_browser_test.py).
TEST_F(CliTest, ScheduleHtmlWritesOneOfflinePageCarryingTheCppTimeline) {
  const std::string flags = "schedule --schedule zb-h1 --stages 3 --microbatches 6 --stage-costs last=2";
  const CliRun run = brigade(flags + " --html lab.html");
  ASSERT_EQ(run.status, 0) << run.err;
  EXPECT_TRUE(contains(run.out, "wrote lab.html"));
  const std::string page = read_file_bytes(file("lab.html"));
  EXPECT_EQ(page.rfind("<!doctype html>", 0), 0u);
  for (const char* loads : {"<link", " src=", " href=", "@import", "fetch("}) {
    EXPECT_FALSE(contains(page, loads)) << "the page must load nothing, found " << loads;
  }
  size_t http = 0;  // the SVG namespace is the only URL, and it is a name, not a request
  for (size_t at = page.find("http"); at != std::string::npos; at = page.find("http", at + 1), ++http) {
    EXPECT_EQ(page.compare(at, 26, "http://www.w3.org/2000/svg"), 0) << page.substr(at, 40);
  }
  EXPECT_EQ(http, 1u);

  auto script = [&](const std::string& id) {
    const std::string open = "<script id=\"" + id + "\" type=\"application/json\">";
    const size_t begin = page.find(open);
    EXPECT_NE(begin, std::string::npos) << id;
    const size_t from = begin + open.size();
    return nlohmann::json::parse(page.substr(from, page.find("</script>", from) - from));
  };
  const CliRun json = brigade(flags + " --json");
  ASSERT_EQ(json.status, 0) << json.err;
  EXPECT_EQ(script("lab-reference"), nlohmann::json::parse(json.out));
  const nlohmann::json setup = script("lab-setup");
  EXPECT_EQ(setup["schedule"], "zb-h1");
  EXPECT_EQ(setup["stage_factors"], nlohmann::json::parse("[1, 1, 2]"));

  const CliRun both = brigade("schedule --compare gpipe,1f1b --html lab2.html");
  EXPECT_EQ(both.status, 2);
  EXPECT_TRUE(contains(both.err, "--html")) << both.err;
}

// `brigade kernel`: one version of one kernel on a chosen shape, checked against kernels/reference (here a
// CPU version: the CUDA ones need a GPU, or scripts/kernel_lab.sh's emulator).
TEST_F(CliTest, KernelRunsOneVersionChecksItAndPricesIt) {
  const CliRun run = brigade("kernel layernorm --version 1 --device cpu --shape 2x8x64 --iterations 3");
  ASSERT_EQ(run.status, 0) << run.err;
  for (const char* part : {"layernorm_fwd v1-row-loop on cpu, float32", "operand 0 [16, 64] float32",
                           "check against kernels/reference:", "time: ", "median of 3 calls",
                           "napkin: ", "bound on an H200", "PASS"}) {
    EXPECT_TRUE(contains(run.out, part)) << part << "\n" << run.out;
  }
  EXPECT_FALSE(contains(run.out, "WRONG"));
  const CliRun matmul =
      brigade("kernel matmul --version v1-blocked --device cpu --shape 16x8x32 --iterations 1");
  ASSERT_EQ(matmul.status, 0) << matmul.err;
  EXPECT_TRUE(contains(matmul.out, "of sum|a*b|")) << matmul.out;

  const CliRun list = brigade("kernel --list");
  ASSERT_EQ(list.status, 0) << list.err;
  EXPECT_TRUE(contains(list.out, "v2-warp-per-row")) << list.out;

  const CliRun unknown = brigade("kernel layernrom --version 1 --device cpu");
  EXPECT_EQ(unknown.status, 2);
  EXPECT_TRUE(contains(unknown.err, "unknown op 'layernrom'")) << unknown.err;
  EXPECT_TRUE(contains(unknown.err, "layernorm_fwd")) << unknown.err;
  const CliRun version = brigade("kernel layernorm --version 7 --device cpu");
  EXPECT_EQ(version.status, 2);
  EXPECT_TRUE(contains(version.err, "no version '7' on cpu (public, v1-row-loop, v2-avx512)")) << version.err;
  if (!brigade::cuda_available()) {  // a CUDA version where no GPU is usable: where to run it instead
    const CliRun cuda = brigade("kernel layernorm --version v2-warp-per-row --shape 2x8x64");
    EXPECT_EQ(cuda.status, 2);
    EXPECT_TRUE(contains(cuda.err, "v2-warp-per-row is a cuda version")) << cuda.err;
    EXPECT_TRUE(contains(cuda.err, "scripts/kernel_lab.sh")) << cuda.err;
  }
}
