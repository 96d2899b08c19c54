// `brigade sample`: loads a checkpoint (model + tokenizer) and prints the prompt followed by the text the
// model generates, token by token, with temperature and top-k sampling (nn/gpt.h GPT::generate).
#include <cstdio>
#include <memory>
#include <string>

#include "apps/commands.h"
#include "nn/checkpoint.h"
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
};
}  // namespace

Command add_sample_command(CLI::App& app) {
  CLI::App* cmd =
      app.add_subcommand("sample", "Generate text from a checkpoint written by `brigade train --save`");
  auto o = std::make_shared<SampleOptions>();
  cmd->add_option("--checkpoint", o->checkpoint, "checkpoint file (safetensors)")->required();
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

  return {cmd, [cmd, o] {
            Device device;
            try {
              device = Device::parse(o->device);
            } catch (const DeviceError& e) {
              return usage_error(*cmd, std::string("--device: ") + e.what());
            }
            const std::string unavailable = unavailable_device(device, o->device);
            if (!unavailable.empty()) return usage_error(*cmd, unavailable);
            const nn::Checkpoint checkpoint = nn::load_checkpoint(o->checkpoint);
            const nn::CharTokenizer& tokenizer = checkpoint.info.tokenizer;
            // An empty prompt starts a fresh line (or from token 0 for a vocabulary without newlines).
            std::vector<int64_t> ids;
            if (o->prompt.empty()) {
              const int64_t newline = tokenizer.id_of(U'\n');
              ids.push_back(newline >= 0 ? newline : 0);
            } else {
              try {
                ids = tokenizer.encode(o->prompt);
              } catch (const ValueError& e) {
                return usage_error(*cmd, std::string("--prompt: ") + e.what());
              }
            }
            std::unique_ptr<nn::GPT> model = checkpoint.build_model(device);
            Generator generator(o->seed);
            const auto length = static_cast<int64_t>(ids.size());
            Tensor out = model->generate(from_vector(ids, {1, length}, device), o->tokens, o->temperature,
                                         o->top_k, &generator);
            std::vector<int64_t> all = out.to_vector<int64_t>();
            if (o->prompt.empty())
              all.erase(all.begin());  // the synthetic start token is not part of the output
            std::string text = tokenizer.decode(all);
            std::fputs(text.c_str(), stdout);
            if (text.empty() || text.back() != '\n') std::fputc('\n', stdout);
            return 0;
          }};
}

}  // namespace brigade::apps
