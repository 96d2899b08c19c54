// `brigade sample`: loads a checkpoint (model + tokenizer) and prints the prompt followed by the text the
// model generates, token by token, with temperature and top-k sampling (nn/gpt.h GPT::generate). With
// --devices (one per stage) the model is cut into that many stages, each on its device, and every token's
// logits come from the pipeline's forward-only pass (pipeline/run/executor.h Pipeline::forward): a model
// too large for one GPU samples across several, and the text is the one device's.
#include <algorithm>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "apps/commands.h"
#include "nn/checkpoint.h"
#include "pipeline/run/executor.h"
#include "tensor/device.h"
#include "tensor/generator.h"

namespace brigade::apps {

namespace {
struct SampleOptions {
  std::string checkpoint;
  std::string prompt;
  int64_t tokens = 200;
  double temperature = 0.8;
  int64_t top_k = 0;
  uint64_t seed = 1337;
  std::string device = "cpu";
  std::string devices;  // one per stage: sample through a pipeline
};

// "cuda:0,cuda:1" -> the devices; a DeviceError names the entry that is not one.
std::vector<Device> parse_devices(const std::string& list) {
  std::vector<Device> devices;
  size_t begin = 0;
  while (begin <= list.size()) {
    const size_t end = std::min(list.find(',', begin), list.size());
    devices.push_back(Device::parse(list.substr(begin, end - begin)));
    begin = end + 1;
  }
  return devices;
}

// Runs `brigade sample` with the parsed options: exit status 0, or a usage error (2) naming the flag.
int run_sample(const CLI::App& cmd, const SampleOptions& o) {
  Device device;
  try {
    device = Device::parse(o.device);
  } catch (const DeviceError& e) {
    return usage_error(cmd, std::string("--device: ") + e.what());
  }
  std::vector<Device> stage_devices;
  try {
    if (!o.devices.empty()) stage_devices = parse_devices(o.devices);
  } catch (const DeviceError& e) {
    return usage_error(cmd, std::string("--devices '") + o.devices + "': " + e.what());
  }
  if (!stage_devices.empty()) device = stage_devices.front();  // where the prompt goes in
  for (const Device& d : stage_devices.empty() ? std::vector<Device>{device} : stage_devices) {
    const std::string unavailable = unavailable_device(d, d.str());
    if (!unavailable.empty()) return usage_error(cmd, unavailable);
  }
  const nn::Checkpoint checkpoint = nn::load_checkpoint(o.checkpoint);
  const nn::CharTokenizer& tokenizer = checkpoint.info.tokenizer;
  // An empty prompt starts a fresh line (or from token 0 for a vocabulary without newlines).
  std::vector<int64_t> ids;
  if (o.prompt.empty()) {
    const int64_t newline = tokenizer.id_of(U'\n');
    ids.push_back(newline >= 0 ? newline : 0);
  } else {
    try {
      ids = tokenizer.encode(o.prompt);
    } catch (const ValueError& e) {
      return usage_error(cmd, std::string("--prompt: ") + e.what());
    }
  }
  std::unique_ptr<nn::GPT> model = checkpoint.build_model(device);
  std::unique_ptr<pipeline::Pipeline> stages;
  std::function<Tensor(const Tensor&)> forward;  // empty: the model's own forward
  if (stage_devices.size() > 1) {
    if (static_cast<int64_t>(stage_devices.size()) > model->size()) {
      return usage_error(cmd, "--devices names " + std::to_string(stage_devices.size()) +
                                  " stages, but the model has " + std::to_string(model->size()) +
                                  " layers to cut");
    }
    pipeline::PipelineConfig config;
    config.stages = static_cast<int>(stage_devices.size());
    config.devices = stage_devices;
    stages = std::make_unique<pipeline::Pipeline>(*model, config);
    forward = [&stages](const Tensor& x) { return stages->forward(x, 1); };
  }
  Generator generator(o.seed);
  const auto length = static_cast<int64_t>(ids.size());
  Tensor out = model->generate(from_vector(ids, {1, length}, device), o.tokens, o.temperature, o.top_k,
                               &generator, forward);
  std::vector<int64_t> all = out.to_vector<int64_t>();
  if (o.prompt.empty()) all.erase(all.begin());  // the synthetic start token is not part of the output
  std::string text = tokenizer.decode(all);
  std::fputs(text.c_str(), stdout);
  if (text.empty() || text.back() != '\n') std::fputc('\n', stdout);
  return 0;
}
}  // namespace

Command add_sample_command(CLI::App& app) {
  CLI::App* cmd =
      app.add_subcommand("sample", "Generate text from a checkpoint written by `brigade train --save`");
  auto o = std::make_shared<SampleOptions>();
  cmd->add_option("--checkpoint", o->checkpoint,
                  "checkpoint: a safetensors file or a sharded index (.index.json)")
      ->required();
  cmd->add_option("--prompt", o->prompt, "text to continue (default: start of a line)");
  cmd->add_option("--tokens", o->tokens, "characters to generate")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--temperature", o->temperature, "sampling temperature (0: greedy)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--top-k", o->top_k, "sample among the k most likely characters (0: all)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--seed", o->seed, "sampling seed")->capture_default_str();
  cmd->add_option("--device", o->device, "cpu, cuda or cuda:N")->capture_default_str();
  cmd->add_option("--devices", o->devices,
                  "one device per stage (cuda:0,cuda:1): the model is cut into that many stages, and the "
                  "logits come from the pipeline's forward-only pass");

  return {cmd, [cmd, o] { return run_sample(*cmd, *o); }};
}

}  // namespace brigade::apps
