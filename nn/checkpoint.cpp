// Training checkpoints on top of nn/safetensors; the layout is described in nn/checkpoint.h.
#include "nn/checkpoint.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <utility>
#include <vector>

#include "nn/atomic_file.h"
#include "nn/checkpoint_shards.h"
#include "nn/safetensors.h"
#include "tensor/error.h"

namespace brigade::nn {
namespace {

using Json = nlohmann::json;

constexpr const char* kModelPrefix = "model.";
constexpr const char* kOptimPrefix = "optim.";

std::string optimizer_type(const Optimizer& optimizer) {
  if (dynamic_cast<const AdamW*>(&optimizer) != nullptr) return "AdamW";
  if (dynamic_cast<const SGD*>(&optimizer) != nullptr) return "SGD";
  return "Optimizer";
}

bool starts_with(const std::string& text, const std::string& prefix) {
  return text.rfind(prefix, 0) == 0;
}

// The metadata value at `key`, or an IOError saying this is not a brigade checkpoint.
const std::string& required(const std::map<std::string, std::string>& metadata, const std::string& path,
                            const char* key) {
  auto it = metadata.find(key);
  if (it == metadata.end()) {
    BRIGADE_THROW(IOError, "load_checkpoint: '", path,
                  "' is a safetensors file but not a brigade checkpoint (no '", key, "' in its metadata)");
  }
  return it->second;
}

Json parse_json(const std::string& text, const std::string& path, const char* key) {
  try {
    return Json::parse(text);
  } catch (const Json::exception& e) {
    BRIGADE_THROW(IOError, "load_checkpoint: '", path, "': metadata '", key, "' is not valid JSON (",
                  e.what(), ")");
  }
}

int64_t parse_count(const std::string& text, const std::string& path, const char* key) {
  size_t used = 0;
  int64_t value = -1;
  try {
    value = std::stoll(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || value < 0) {
    BRIGADE_THROW(IOError, "load_checkpoint: '", path, "': metadata '", key,
                  "' must be a non-negative integer, found '", text, "'");
  }
  return value;
}

// The index's own summary of the layout (nn/checkpoint_shards.h): stages and schedule from the partition.
void add_layout_metadata(std::map<std::string, std::string>& metadata, int shards) {
  const Json partition = Json::parse(metadata.at(kPartitionKey), nullptr, /*allow_exceptions=*/false);
  const bool known = partition.is_object();
  metadata[kStagesKey] = known && partition.contains("stages") && partition["stages"].is_number_integer()
                             ? std::to_string(partition["stages"].get<int64_t>())
                             : std::to_string(shards);
  metadata[kScheduleKey] = known && partition.contains("schedule") && partition["schedule"].is_string()
                               ? partition["schedule"].get<std::string>()
                               : "none";
}

}  // namespace

std::string unpipelined_partition(const GPT& model) {
  Json partition = {{"stages", 1}, {"balance", Json::array({model.size()})}};
  return partition.dump();
}

std::vector<std::pair<std::string, Tensor>> checkpoint_tensors(const GPT& model, const Optimizer* optimizer) {
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (auto& [name, tensor] : model.state_dict()) tensors.emplace_back(kModelPrefix + name, tensor);
  if (optimizer != nullptr) {
    for (auto& [name, tensor] : optimizer->state().tensors) tensors.emplace_back(kOptimPrefix + name, tensor);
  }
  return tensors;
}

std::map<std::string, std::string> checkpoint_metadata(const GPT& model, const Optimizer* optimizer,
                                                       const CheckpointInfo& info) {
  BRIGADE_CHECK_VALUE(info.tokenizer.vocab_size() == model.config().vocab_size,
                      "save_checkpoint: the tokenizer has ", info.tokenizer.vocab_size(),
                      " tokens but the model's vocab_size is ", model.config().vocab_size);
  std::map<std::string, std::string> metadata = {
      {kCheckpointKindKey, "checkpoint"},
      {kConfigKey, model.config().to_json()},
      {kTokenizerKey, info.tokenizer.to_json()},
      {kStepKey, std::to_string(info.step)},
      {kGeneratorKey, Json{{"seed", info.generator.seed}, {"offset", info.generator.offset}}.dump()},
      {kTrainArgsKey, info.train_args.empty() ? "{}" : info.train_args},
      {kPartitionKey, info.partition.empty() ? unpipelined_partition(model) : info.partition},
  };
  if (!info.engine_state.empty()) metadata[kEngineStateKey] = info.engine_state;
  if (optimizer != nullptr) {
    metadata[kOptimizerKey] =
        Json{{"type", optimizer_type(*optimizer)}, {"step", optimizer->step_count()}}.dump();
  }
  return metadata;
}

void save_checkpoint(const std::string& path, const GPT& model, const Optimizer* optimizer,
                     const CheckpointInfo& info, const std::vector<int>& layer_stages) {
  std::map<std::string, std::string> metadata = checkpoint_metadata(model, optimizer, info);
  const std::vector<std::pair<std::string, Tensor>> tensors = checkpoint_tensors(model, optimizer);
  if (!is_sharded_checkpoint_path(path)) {
    save_safetensors(path, tensors, metadata);
    return;
  }
  const std::vector<int> stages =
      layer_stages.empty() ? std::vector<int>(static_cast<size_t>(model.size()), 0) : layer_stages;
  const std::map<std::string, int> owners = parameter_shards(model, stages);
  const int shards = *std::max_element(stages.begin(), stages.end()) + 1;
  std::vector<ShardRecord> records;
  for (int shard = 0; shard < shards; ++shard) {
    records.push_back(
        save_checkpoint_shard(path, info.step, shard, shards, shard_tensors(tensors, owners, shard)));
  }
  add_layout_metadata(metadata, shards);
  commit_checkpoint_index(path, records, metadata);
}

Checkpoint load_checkpoint(const std::string& path) {
  remove_stale_temp_files(path);
  // Both refuse truncated, corrupt, foreign and newer files, naming the file at fault.
  SafetensorsFile file =
      is_sharded_checkpoint_path(path) ? load_sharded_safetensors(path) : load_safetensors(path);
  Checkpoint ck;
  ck.metadata = file.metadata;
  const auto& meta = file.metadata;

  try {
    ck.config = GPTConfig::from_json(required(meta, path, kConfigKey));
  } catch (const ValueError& e) {
    BRIGADE_THROW(IOError, "load_checkpoint: '", path, "': bad model config: ", e.what());
  }
  try {
    ck.info.tokenizer = CharTokenizer::from_json(required(meta, path, kTokenizerKey));
  } catch (const ValueError& e) {
    BRIGADE_THROW(IOError, "load_checkpoint: '", path, "': bad tokenizer: ", e.what());
  }
  if (ck.info.tokenizer.vocab_size() != ck.config.vocab_size) {
    BRIGADE_THROW(IOError, "load_checkpoint: '", path, "': the tokenizer has ",
                  ck.info.tokenizer.vocab_size(), " tokens but the config's vocab_size is ",
                  ck.config.vocab_size);
  }
  ck.info.step = parse_count(required(meta, path, kStepKey), path, kStepKey);
  const Json generator = parse_json(required(meta, path, kGeneratorKey), path, kGeneratorKey);
  if (!generator.is_object() || !generator.contains("seed") || !generator.contains("offset") ||
      !generator["seed"].is_number_unsigned() || !generator["offset"].is_number_unsigned()) {
    BRIGADE_THROW(IOError, "load_checkpoint: '", path, "': metadata '", kGeneratorKey,
                  "' must be {\"seed\": uint, \"offset\": uint}, found ", generator.dump());
  }
  ck.info.generator = {generator["seed"].get<uint64_t>(), generator["offset"].get<uint64_t>()};
  ck.info.train_args = meta.count(kTrainArgsKey) ? meta.at(kTrainArgsKey) : "{}";
  ck.info.partition = meta.count(kPartitionKey) ? meta.at(kPartitionKey) : "";
  if (meta.count(kEngineStateKey)) {
    const Json engine = parse_json(meta.at(kEngineStateKey), path, kEngineStateKey);
    if (!engine.is_object()) {
      BRIGADE_THROW(IOError, "load_checkpoint: '", path, "': metadata '", kEngineStateKey,
                    "' must be a JSON object, found ", engine.dump());
    }
    ck.info.engine_state = meta.at(kEngineStateKey);
  }

  for (auto& [name, tensor] : file.tensors) {
    if (starts_with(name, kModelPrefix)) {
      ck.model.emplace(name.substr(std::string(kModelPrefix).size()), tensor);
    } else if (starts_with(name, kOptimPrefix)) {
      ck.optimizer.tensors.emplace(name.substr(std::string(kOptimPrefix).size()), tensor);
    } else {
      BRIGADE_THROW(IOError, "load_checkpoint: '", path, "': unexpected tensor '", name,
                    "' (a checkpoint holds only 'model.*' and 'optim.*')");
    }
  }
  if (ck.model.empty()) {
    BRIGADE_THROW(IOError, "load_checkpoint: '", path, "' holds no 'model.*' tensors");
  }
  if (meta.count(kOptimizerKey)) {
    const Json optimizer = parse_json(meta.at(kOptimizerKey), path, kOptimizerKey);
    if (!optimizer.is_object() || !optimizer.contains("type") || !optimizer["type"].is_string() ||
        !optimizer.contains("step") || !optimizer["step"].is_number_integer() ||
        optimizer["step"].get<int64_t>() < 0) {
      BRIGADE_THROW(IOError, "load_checkpoint: '", path, "': metadata '", kOptimizerKey,
                    "' must be {\"type\": string, \"step\": uint}, found ", optimizer.dump());
    }
    ck.has_optimizer = true;
    ck.optimizer_type = optimizer["type"].get<std::string>();
    ck.optimizer.step = optimizer["step"].get<int64_t>();
  } else if (!ck.optimizer.tensors.empty()) {
    BRIGADE_THROW(IOError, "load_checkpoint: '", path, "' has 'optim.*' tensors but no '", kOptimizerKey,
                  "' metadata");
  }
  return ck;
}

std::unique_ptr<GPT> Checkpoint::build_model(const Device& device) const {
  auto gpt = std::make_unique<GPT>(config, /*seed=*/0);
  gpt->to(device);
  gpt->load_state_dict(model, /*strict=*/true);
  return gpt;
}

void Checkpoint::restore_optimizer(Optimizer& target, const std::string& type_name) const {
  BRIGADE_CHECK_VALUE(has_optimizer,
                      "Checkpoint::restore_optimizer: the checkpoint holds no optimizer state");
  BRIGADE_CHECK_VALUE(optimizer_type == type_name, "Checkpoint::restore_optimizer: the checkpoint holds ",
                      optimizer_type, " state, expected ", type_name);
  target.load_state(optimizer);
}

}  // namespace brigade::nn
