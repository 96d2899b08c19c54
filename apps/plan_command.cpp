// `brigade plan`: the planner (pipeline/plan/planner.h) for a GPT given by flags or a checkpoint, a number
// of devices with their memory, a link and a global batch. It builds the model on --device, profiles it at
// every microbatch size the search needs (pipeline/run/plan_model.h), searches stages x replicas x
// microbatches x chunks x schedule x recomputation x partition, and prints the ranked table with the
// `brigade train` flags of the pick. What the executor pays beside the layers is measured too: the optimizer
// step, and (without --link) one hand-off between two stage threads, the latency of the in-process link.
// `brigade train --plan auto` runs the same search and trains the pick.
#include <cstdio>
#include <memory>
#include <optional>
#include <sstream>
#include <string>

#include "apps/commands.h"
#include "nn/checkpoint.h"
#include "nn/data.h"
#include "nn/train_data.h"
#include "pipeline/plan/memory_model.h"
#include "pipeline/run/plan_model.h"
#include "tensor/generator.h"

namespace brigade::apps {

namespace {

struct PlanFlags {
  nn::TrainOptions model;  // the model, data, batch, device, threads and seed flags of brigade train
  std::string checkpoint;
  int devices = 0;  // 0: as --plan auto (plan_devices_of)
  std::string device_memory;
  std::string link;
  int replicas = 1;
  std::string schedules;
  int max_microbatches = 32;
  int max_virtual = 2;
  int top = 10;
};

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

// The request from the flags (ValueError naming the flag for a bad value); its profile is set later.
pipeline::PlanRequest request_of(const PlanFlags& f) {
  nn::TrainOptions o = f.model;
  o.plan_devices = f.devices;
  pipeline::PlanRequest r = pipeline::plan_request_for(o);
  BRIGADE_CHECK_VALUE(f.devices >= 0, "--devices must be >= 1 (0: automatic), found ", f.devices);
  if (!f.device_memory.empty()) r.device_memory = pipeline::parse_bytes(f.device_memory);
  if (!f.link.empty()) r.link = pipeline::LinkModel::parse(f.link), r.link_origin = "given";
  r.max_replicas = f.replicas;
  r.schedules = split_list(f.schedules);
  r.max_microbatches = f.max_microbatches;
  r.max_virtual = f.max_virtual;
  r.keep = f.top;
  r.validate();
  return r;
}

int run_plan(const CLI::App& cmd, PlanFlags f) {
  std::optional<nn::Checkpoint> checkpoint;
  pipeline::PlanRequest request;
  try {
    if (!f.checkpoint.empty()) {
      checkpoint = nn::load_checkpoint(f.checkpoint);
      f.model.layers = checkpoint->config.n_layer;
      f.model.heads = checkpoint->config.n_head;
      f.model.embd = checkpoint->config.n_embd;
      f.model.block = checkpoint->config.block_size;
    }
    f.model.validate();
    request = request_of(f);
  } catch (const ValueError& e) {
    return usage_error(cmd, e.what());
  }
  const std::string unavailable = unavailable_device(Device::parse(f.model.device), f.model.device);
  if (!unavailable.empty()) return usage_error(cmd, unavailable);

  const int64_t block = f.model.resolved_block();
  const nn::TrainData data =
      nn::load_train_data(f.model, block, checkpoint ? &checkpoint->info.tokenizer : nullptr);
  nn::GPTConfig config = checkpoint ? checkpoint->config : nn::GPTConfig{};
  if (!checkpoint) {
    config.vocab_size = data.tokenizer.vocab_size();
    config.block_size = block;
    config.n_layer = f.model.layers;
    config.n_head = f.model.heads;
    config.n_embd = f.model.embd;
  }
  config.dropout = f.model.dropout;
  const Device device = Device::parse(f.model.device);
  nn::GPT model(config, f.model.seed);
  model.to(device);
  model.train();
  Generator generator(f.model.seed);
  const nn::Batch sample =
      nn::random_batch(data.train, f.model.batch, block, generator, device, data.train_starts);
  request.profile = pipeline::model_profiler(model, sample, f.model.threads);
  pipeline::price_executor(request, model, f.model.threads);
  std::printf(
      "model: %lld blocks, %lld heads, embd %lld, block %lld, vocab %lld, %lld parameters on %s; "
      "layers profiled with %d thread%s per stage\n",
      static_cast<long long>(config.n_layer), static_cast<long long>(config.n_head),
      static_cast<long long>(config.n_embd), static_cast<long long>(config.block_size),
      static_cast<long long>(config.vocab_size), static_cast<long long>(model.num_parameters()),
      device.str().c_str(), f.model.threads, f.model.threads == 1 ? "" : "s");
  const pipeline::Plan plan = pipeline::plan_pipeline(request);
  std::printf("%s", plan.table().c_str());
  return plan.ranked.empty() ? 1 : 0;
}

void add_model_flags(CLI::App& cmd, nn::TrainOptions& o) {
  cmd.add_option("--layers", o.layers, "transformer blocks")->capture_default_str();
  cmd.add_option("--heads", o.heads, "attention heads (must divide --embd)")->capture_default_str();
  cmd.add_option("--embd", o.embd, "embedding width")->capture_default_str();
  cmd.add_option("--block", o.block, "context length (default: as brigade train)");
  cmd.add_option("--data", o.data, "UTF-8 text file (default: the built-in addition task)");
  cmd.add_option("--dropout", o.dropout, "dropout probability")->capture_default_str();
  cmd.add_option("--batch", o.batch, "global batch: sequences per step")->capture_default_str();
  cmd.add_option("--device", o.device, "where to profile and run: cpu, cuda or cuda:N")
      ->capture_default_str();
  cmd.add_option("--threads", o.threads, "CPU threads per stage (OpenMP)")->capture_default_str();
  cmd.add_option("--seed", o.seed, "seed of the weights and the sample batch")->capture_default_str();
}

}  // namespace

Command add_plan_command(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand(
      "plan", "Search pipeline configurations for a GPT and rank them by simulated step time");
  auto f = std::make_shared<PlanFlags>();
  add_model_flags(*cmd, f->model);
  cmd->add_option("--checkpoint", f->checkpoint, "take the model's shape from this checkpoint");
  cmd->add_option("--devices", f->devices, "devices (0: the CPU's cores / --threads, or one GPU)");
  cmd->add_option("--device-memory", f->device_memory,
                  "memory of each device (512MiB, 2GiB; default: no limit)");
  cmd->add_option("--link", f->link,
                  "link between devices: latency=20us,bandwidth=10GB/s (default: stages as threads of one "
                  "process, one hand-off between them measured)");
  cmd->add_option("--replicas", f->replicas,
                  "most data-parallel replicas (processes of mpirun -np S*D brigade train --data-parallel D)")
      ->capture_default_str();
  cmd->add_option("--schedules", f->schedules, "schedules to search, comma-separated (default: all)");
  cmd->add_option("--max-microbatches", f->max_microbatches, "most microbatches")->capture_default_str();
  cmd->add_option("--max-virtual", f->max_virtual, "most chunks per stage for interleaved, looped-bfs")
      ->capture_default_str();
  cmd->add_option("--top", f->top, "candidates to print")->capture_default_str();
  return {cmd, [cmd, f] { return run_plan(*cmd, *f); }};
}

}  // namespace brigade::apps
