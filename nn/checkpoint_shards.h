// Sharded checkpoints: one safetensors file per pipeline stage and one index, in the convention of sharded
// safetensors models (Hugging Face's "model.safetensors.index.json"), so tools that read those read these.
//
// A sharded checkpoint is named by its index, "<stem>.safetensors.index.json" (any name ending in
// ".index.json"). Beside it:
//   <stem>-step<N>-<k>-of-<S>.safetensors   shard k (1-based, 5 digits) of S, written at step N: the
//       "model.*" tensors of the parameters stage k-1 owns and their "optim.*" state (checkpoint.h), with
//       __metadata__ {"brigade.kind": "checkpoint-shard", "brigade.shard": "<k-1>", "brigade.shards": "<S>",
//       "brigade.step": "<N>"} and safetensors.h's checksums. A parameter used by layers on several stages
//       (a tied embedding) belongs to the lowest-numbered one (parameter_shards).
//   <stem>.safetensors.index.json           the index:
//       {"metadata": {"total_size": <bytes of all tensors>,
//                     every key of a single-file checkpoint's __metadata__ (checkpoint.h: brigade.config,
//                     brigade.step, brigade.generator, brigade.optimizer, brigade.partition, ...), and
//                     "brigade.format_version": "1", "brigade.partition_version": "1",
//                     "brigade.stages": "<S>", "brigade.schedule": "<name>" (from the partition; "none"
//                     for an unpipelined run),
//                     "brigade.shards": JSON text of [{"file", "bytes", "checksum", "tensors"}] per shard,
//                     "brigade.index_checksum": FNV-1a 64 of the index without this key, canonical
//                     (safetensors.h's header checksum, applied to the index)},
//        "weight_map": {"<tensor name>": "<shard file>", ...}}
//
// Commit protocol. Shards are written first (each atomically, nn/atomic_file.h), the index last, atomically:
// the index is the commit point. A save killed before it leaves the previous index, and the shards it names,
// intact (new shards carry the new step in their names, so they never overwrite the committed ones). After
// the commit, shard files of this stem that the new index does not name (an older save's, or a killed
// save's) are removed, and so are temporary files of dead writers. A shard named by the index but written
// by another save (same name, different bytes) is refused on load: the index records each shard's size and
// data checksum.
//
// One process per stage. Each stage's writer calls save_checkpoint_shard for its own shard (in a
// data-parallel layout, replica 0 of each stage); when all are written (a barrier), one process calls
// commit_checkpoint_index with every shard's record: gathered from the writers, or read back from a shared
// file system with read_shard_record. The in-process pipeline does the same in one process
// (save_checkpoint with layer_stages, checkpoint.h).
//
// \code
//   // on the process of stage s (of S), replica 0:
//   auto owners = brigade::nn::parameter_shards(model, layer_stages);
//   auto mine = brigade::nn::shard_tensors(brigade::nn::checkpoint_tensors(model, &opt), owners, s);
//   brigade::nn::save_checkpoint_shard("run.safetensors.index.json", step, s, S, mine);
//   // after a barrier, on one process:
//   std::vector<brigade::nn::ShardRecord> records;
//   for (int k = 0; k < S; ++k) records.push_back(brigade::nn::read_shard_record(index, step, k, S));
//   brigade::nn::commit_checkpoint_index(index, records, brigade::nn::checkpoint_metadata(model, &opt,
//   info));
// \endcode
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "nn/safetensors.h"
#include "nn/sequential.h"
#include "tensor/error.h"
#include "tensor/tensor.h"

namespace brigade::nn {

/// The version of the layout of sharded checkpoints (index keys, shard names, shard metadata) this build
/// writes and the largest one it reads.
inline constexpr int kPartitionFormatVersion = 1;
inline constexpr const char* kPartitionVersionKey = "brigade.partition_version";
inline constexpr const char* kStagesKey = "brigade.stages";
inline constexpr const char* kScheduleKey = "brigade.schedule";
inline constexpr const char* kShardsKey = "brigade.shards";
inline constexpr const char* kIndexChecksumKey = "brigade.index_checksum";

/// A sharded checkpoint (its index or one of its shards) that cannot be used: file() is the file at fault,
/// what() names it and the problem (truncated, corrupt, not an index, a shard from another save, ...).
class CheckpointFileError : public IOError {
 public:
  CheckpointFileError(const std::string& file, const std::string& problem);
  const std::string& file() const { return file_; }
  const std::string& problem() const { return problem_; }

 private:
  std::string file_, problem_;
};

/// Whether `path` names a sharded checkpoint (its index): it ends in ".index.json".
bool is_sharded_checkpoint_path(const std::string& path);

/// The file name (no directory) of shard `shard` (0-based) of `shards` written at `step` for the index
/// `index_path`: "<stem>-step<step>-<shard+1>-of-<shards>.safetensors".
std::string shard_file_name(const std::string& index_path, int64_t step, int shard, int shards);

/// What the index records of one shard.
struct ShardRecord {
  std::string file;                  ///< file name, relative to the index's directory
  uint64_t bytes = 0;                ///< the file's size
  std::string checksum;              ///< its brigade.checksum (FNV-1a 64 of the data, 16 hex digits)
  std::vector<std::string> tensors;  ///< the tensor names it holds, in file order
  uint64_t tensor_bytes = 0;         ///< its data section (the index's total_size sums these; not stored)
};

/// For every parameter of `model` (by its state_dict name), the stage that owns it: the lowest stage among
/// those whose layers use it. layer_stages[i] is the stage of layer i (one entry per layer). ValueError
/// when the sizes differ or a stage is negative.
std::map<std::string, int> parameter_shards(const Sequential& model, const std::vector<int>& layer_stages);

/// The entries of `tensors` ("model.<param>" and "optim.<param>.<state>", checkpoint_tensors) whose
/// parameter `owners` assigns to `shard`. ValueError for a tensor whose parameter `owners` does not know.
std::vector<std::pair<std::string, Tensor>> shard_tensors(
    const std::vector<std::pair<std::string, Tensor>>& tensors, const std::map<std::string, int>& owners,
    int shard);

/// Writes shard `shard` of `shards` at `step` beside `index_path`, atomically, and returns its record.
/// IOError when it cannot be written. Temporary files of dead writers of any shard of this checkpoint are
/// removed first.
ShardRecord save_checkpoint_shard(const std::string& index_path, int64_t step, int shard, int shards,
                                  const std::vector<std::pair<std::string, Tensor>>& tensors);

/// The record of a shard already on disk (its header only is read): for the process that commits the
/// index on a shared file system. CheckpointFileError when the file is missing or is not that shard.
ShardRecord read_shard_record(const std::string& index_path, int64_t step, int shard, int shards);

/// Writes the index atomically (the commit point; see the header comment) with `metadata` (a checkpoint's
/// __metadata__, checkpoint_metadata) and the shards' records, then removes this checkpoint's shard files
/// that the index does not name. ValueError when two shards hold the same tensor or a record is empty of
/// a file name; IOError when the index cannot be written.
void commit_checkpoint_index(const std::string& index_path, const std::vector<ShardRecord>& shards,
                             const std::map<std::string, std::string>& metadata);

/// A parsed index.
struct CheckpointIndex {
  std::map<std::string, std::string> metadata;    ///< the checkpoint's metadata (strings only)
  std::vector<ShardRecord> shards;                ///< in shard order
  std::map<std::string, std::string> weight_map;  ///< tensor name -> shard file
};

/// Parses an index's text. CheckpointFileError naming `index_path`: not JSON (a truncated file), not an
/// index (no weight_map, a wrong type), a failed index checksum, a newer format or partition version, a
/// weight_map that names a file the shard list does not hold or disagrees with the shard list.
CheckpointIndex parse_checkpoint_index(const std::string& text, const std::string& index_path);

/// Reads the index at `index_path` and every shard it names, checked against the index (size, checksum,
/// tensor names), merged into one file: the tensors of every shard (in shard order) and the index's
/// metadata. CheckpointFileError naming the index or the shard and the problem; a shard that
/// load_safetensors refuses (truncated, corrupt) is named with load_safetensors' reason.
SafetensorsFile load_sharded_safetensors(const std::string& index_path);

}  // namespace brigade::nn
