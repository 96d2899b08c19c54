// Training checkpoints: a GPT's parameters, its optimizer's state and everything a run needs to resume
// exactly, in one plain safetensors file (nn/safetensors.h: atomic write, checksum, format version), or
// sharded: one safetensors file per pipeline stage and an index written last as the commit point
// (nn/checkpoint_shards.h), when the name ends in ".index.json" ("run.safetensors.index.json").
// Both hold the same tensors and metadata, and either loads into any layout: every tensor is stored whole
// under its model-wide name, whichever stage wrote it.
//
// Tensors (stable dotted names, so other tools can map them):
//   "model.<parameter name>"           every entry of GPT::state_dict(), e.g.
//   "model.blocks.0.attn.qkv.weight" "optim.<parameter name>.<state>"   every optimizer state tensor, e.g.
//   "optim.embed.wte.weight.exp_avg"
// __metadata__ (flat string -> string; JSON values are stored as JSON text):
//   "brigade.format_version", "brigade.checksum"   written by save_safetensors
//   "brigade.kind"        "checkpoint"
//   "brigade.config"      GPTConfig::to_json()
//   "brigade.tokenizer"   CharTokenizer::to_json()
//   "brigade.step"        training steps completed ("1000": the next step to run is 1000)
//   "brigade.generator"   {"seed": S, "offset": O}: the training generator (batches, dropout masks)
//   "brigade.optimizer"   {"type": "AdamW", "step": N}, or absent when the file holds no optimizer state
//   "brigade.train_args"  the run's options as JSON (nn/trainer.h TrainOptions::to_json), or "{}"
//   "brigade.partition"   the pipeline partition that wrote it, {"stages": S, "balance": [...]} over the
//                         model's Sequential layers. A checkpoint is partition-independent (every tensor is
//                         stored whole); the field records provenance.
//   "brigade.engine_state" the step engine's own state (StepRunner::state_json, nn/trainer.h), a JSON object,
//                         absent when the engine has none. The pipeline stores its stages' dropout
//                         generators there, so a pipelined resume draws the uninterrupted run's masks.
//
// A checkpoint saved from any device loads onto any device: the tensors come back on the CPU and
// Module::load_state_dict / Optimizer::load_state copy them into tensors wherever those live.
//
// \code
//   brigade::nn::CheckpointInfo info{.tokenizer = tok, .step = step, .generator = gen.state()};
//   brigade::nn::save_checkpoint("run.safetensors", model, &optimizer, info);
//   brigade::nn::Checkpoint ck = brigade::nn::load_checkpoint("run.safetensors");
//   auto model = ck.build_model(brigade::Device::cuda());    // config + weights, on the device
//   ck.restore_optimizer(optimizer);                          // m, v and the step count
// \endcode
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "nn/gpt.h"
#include "nn/optim.h"
#include "nn/tokenizer.h"
#include "tensor/generator.h"

namespace brigade::nn {

/// Metadata keys of a brigade checkpoint (see the header comment).
inline constexpr const char* kCheckpointKindKey = "brigade.kind";
inline constexpr const char* kConfigKey = "brigade.config";
inline constexpr const char* kTokenizerKey = "brigade.tokenizer";
inline constexpr const char* kStepKey = "brigade.step";
inline constexpr const char* kGeneratorKey = "brigade.generator";
inline constexpr const char* kOptimizerKey = "brigade.optimizer";
inline constexpr const char* kTrainArgsKey = "brigade.train_args";
inline constexpr const char* kPartitionKey = "brigade.partition";
inline constexpr const char* kEngineStateKey = "brigade.engine_state";

/// What a checkpoint records besides the tensors.
struct CheckpointInfo {
  CharTokenizer tokenizer;
  int64_t step = 0;               ///< training steps completed
  GeneratorState generator;       ///< the training generator's state after `step` steps
  std::string train_args = "{}";  ///< JSON object text
  std::string partition;          ///< JSON object text; empty: unpipelined_partition(model)
  std::string engine_state;       ///< JSON object text; empty: the engine keeps no state (key absent)
};

/// {"stages":1,"balance":[L]} for a model whose Sequential has L layers (embedding, blocks..., head).
std::string unpipelined_partition(const GPT& model);

/// The tensors of a checkpoint: "model.<name>" for every entry of model.state_dict(), then
/// "optim.<name>.<state>" for every state tensor of `optimizer` (none when it is null).
std::vector<std::pair<std::string, Tensor>> checkpoint_tensors(const GPT& model, const Optimizer* optimizer);

/// The __metadata__ of a checkpoint (the keys above; brigade.optimizer only with an optimizer).
/// ValueError when the tokenizer's vocabulary is not the model's.
std::map<std::string, std::string> checkpoint_metadata(const GPT& model, const Optimizer* optimizer,
                                                       const CheckpointInfo& info);

/// Writes `model` (and `optimizer`'s state when it is not null) with `info` to `path`, atomically: one
/// safetensors file, or, when `path` ends in ".index.json", a sharded checkpoint with one shard per stage
/// of `layer_stages` (the stage of each layer of the model's Sequential; empty: one shard), written shard by
/// shard and committed by the index (nn/checkpoint_shards.h). Temporary files left beside it by killed
/// writers are removed first. Throws IOError naming the path when a file cannot be written (the previous
/// checkpoint at `path` is left intact and loadable).
void save_checkpoint(const std::string& path, const GPT& model, const Optimizer* optimizer,
                     const CheckpointInfo& info, const std::vector<int>& layer_stages = {});

/// A loaded checkpoint: CPU tensors and parsed metadata.
struct Checkpoint {
  GPTConfig config;
  CheckpointInfo info;
  StateDict model;  ///< parameter name (without "model.") -> CPU tensor
  bool has_optimizer = false;
  std::string optimizer_type;                   ///< "AdamW", "SGD", ... ("" without optimizer state)
  OptimizerState optimizer;                     ///< step and tensors keyed "<parameter name>.<state>" (CPU)
  std::map<std::string, std::string> metadata;  ///< the raw __metadata__

  /// A GPT with this config on `device`, holding the checkpoint's weights (bit-exact).
  std::unique_ptr<GPT> build_model(const Device& device) const;
  /// Copies the optimizer state into `optimizer` (built over the same parameters, on any device).
  /// ValueError when the file has no optimizer state or its type differs from `type_name`.
  void restore_optimizer(Optimizer& optimizer, const std::string& type_name = "AdamW") const;
};

/// Reads a checkpoint, single-file or sharded (a path ending in ".index.json"), after removing temporary
/// files of dead writers beside it. Refusals from load_safetensors (IOError: missing, truncated, checksum,
/// not safetensors, newer format version) are passed on with the path; an index or shard that cannot be
/// used is a CheckpointFileError (an IOError) naming the file and the problem (checkpoint_shards.h); a
/// file that is not a brigade checkpoint (missing or malformed metadata, missing tensors) is an IOError
/// saying which key.
Checkpoint load_checkpoint(const std::string& path);

}  // namespace brigade::nn
