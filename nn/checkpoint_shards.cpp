// Sharded checkpoints: shard files, the index (the commit point), and reading them back; the layout is
// described in nn/checkpoint_shards.h.
#include "nn/checkpoint_shards.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "nn/atomic_file.h"

namespace brigade::nn {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;  // sorted keys: the index's canonical form is its dump()

constexpr const char* kIndexSuffix = ".index.json";
constexpr const char* kSafetensorsSuffix = ".safetensors";
constexpr const char* kShardKindKey = "brigade.kind";
constexpr const char* kShardKind = "checkpoint-shard";
constexpr const char* kShardKey = "brigade.shard";
constexpr const char* kShardCountKey = "brigade.shards";
constexpr const char* kShardStepKey = "brigade.step";

bool ends_with(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// "run" for ".../run.safetensors.index.json" (or ".../run.index.json").
std::string stem_of(const std::string& index_path) {
  std::string name = fs::path(index_path).filename().string();
  name.erase(name.size() - std::string(kIndexSuffix).size());
  if (ends_with(name, kSafetensorsSuffix)) name.erase(name.size() - std::string(kSafetensorsSuffix).size());
  return name;
}

std::string directory_of(const std::string& index_path) {
  return fs::path(index_path).parent_path().string();
}

std::string in_directory(const std::string& index_path, const std::string& file) {
  return (fs::path(index_path).parent_path() / file).string();
}

bool all_digits(const std::string& text) {
  return !text.empty() && std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// Whether `name` is a shard file of this stem ("<stem>-step<N>-<k>-of-<S>.safetensors"), of any save.
bool is_shard_of(const std::string& name, const std::string& stem) {
  const std::string prefix = stem + "-step";
  if (name.rfind(prefix, 0) != 0 || !ends_with(name, kSafetensorsSuffix)) return false;
  std::string rest =
      name.substr(prefix.size(), name.size() - prefix.size() - std::string(kSafetensorsSuffix).size());
  // rest: "<N>-<k>-of-<S>"
  const size_t dash = rest.find('-'), of = rest.find("-of-");
  if (dash == std::string::npos || of == std::string::npos || of <= dash) return false;
  return all_digits(rest.substr(0, dash)) && all_digits(rest.substr(dash + 1, of - dash - 1)) &&
         all_digits(rest.substr(of + 4));
}

[[noreturn]] void refuse(const std::string& file, const std::string& problem) {
  throw CheckpointFileError(file, problem);
}

uint64_t file_size(const std::string& path, bool* exists) {
  struct stat info {};
  *exists = ::stat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode);
  return *exists ? static_cast<uint64_t>(info.st_size) : 0;
}

std::string hex64(uint64_t value) {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(value));
  return text;
}

uint64_t index_checksum(Json index) {
  index["metadata"].erase(kIndexChecksumKey);
  const std::string text = index.dump();
  return fnv1a64(text.data(), text.size());
}

// A non-negative integer held in a metadata string, or -1.
int64_t count_in(const std::map<std::string, std::string>& metadata, const char* key) {
  auto it = metadata.find(key);
  if (it == metadata.end() || !all_digits(it->second) || it->second.size() > 18) return -1;
  return std::stoll(it->second);
}

void check_version(const std::string& index_path, const std::map<std::string, std::string>& metadata,
                   const char* key, int supported) {
  auto it = metadata.find(key);
  if (it == metadata.end()) refuse(index_path, std::string("the index has no '") + key + "'");
  const int64_t version = count_in(metadata, key);
  if (version < 1)
    refuse(index_path, std::string("'") + key + "' is '" + it->second + "', expected a positive integer");
  if (version > supported) {
    refuse(index_path, std::string("was written by a newer brigade (") + key + " " + it->second +
                           "; this build reads versions up to " + std::to_string(supported) + ")");
  }
}

ShardRecord shard_record_from_json(const Json& entry, const std::string& index_path, size_t k) {
  const std::string where = "shard " + std::to_string(k) + " of '" + kShardsKey + "'";
  if (!entry.is_object() || !entry.contains("file") || !entry["file"].is_string() ||
      !entry.contains("bytes") || !entry["bytes"].is_number_unsigned() || !entry.contains("checksum") ||
      !entry["checksum"].is_string()) {
    refuse(index_path, where + " must be {\"file\": string, \"bytes\": uint, \"checksum\": string}, found " +
                           entry.dump());
  }
  ShardRecord record;
  record.file = entry["file"].get<std::string>();
  record.bytes = entry["bytes"].get<uint64_t>();
  record.checksum = entry["checksum"].get<std::string>();
  // A shard is a file beside the index: no directories, so an index cannot point outside its folder.
  if (record.file.empty() || record.file.find('/') != std::string::npos || record.file == "." ||
      record.file == "..") {
    refuse(index_path, where + " names '" + record.file + "', expected a file name beside the index");
  }
  return record;
}

}  // namespace

CheckpointFileError::CheckpointFileError(const std::string& file, const std::string& problem)
    : IOError("checkpoint '" + file + "': " + problem), file_(file), problem_(problem) {}

bool is_sharded_checkpoint_path(const std::string& path) {
  return ends_with(path, kIndexSuffix) &&
         fs::path(path).filename().string().size() > std::string(kIndexSuffix).size();
}

std::string shard_file_name(const std::string& index_path, int64_t step, int shard, int shards) {
  BRIGADE_CHECK_VALUE(is_sharded_checkpoint_path(index_path), "shard_file_name: '", index_path,
                      "' is not an index name (expected a name ending in .index.json)");
  BRIGADE_CHECK_VALUE(step >= 0 && shards >= 1 && shard >= 0 && shard < shards, "shard_file_name: shard ",
                      shard, " of ", shards, " at step ", step, " is out of range");
  char numbers[64];
  std::snprintf(numbers, sizeof numbers, "-%05d-of-%05d", shard + 1, shards);
  return stem_of(index_path) + "-step" + std::to_string(step) + numbers + kSafetensorsSuffix;
}

ShardRecord save_checkpoint_shard(const std::string& index_path, int64_t step, int shard, int shards,
                                  const std::vector<std::pair<std::string, Tensor>>& tensors) {
  const std::string file = shard_file_name(index_path, step, shard, shards);
  const std::string stem = stem_of(index_path);
  remove_stale_temp_files_in(directory_of(index_path),
                             [&](const std::string& name) { return is_shard_of(name, stem); });
  const std::string path = in_directory(index_path, file);
  save_safetensors(path, tensors,
                   {{kShardKindKey, kShardKind},
                    {kShardKey, std::to_string(shard)},
                    {kShardCountKey, std::to_string(shards)},
                    {kShardStepKey, std::to_string(step)}});
  return read_shard_record(index_path, step, shard, shards);
}

ShardRecord read_shard_record(const std::string& index_path, int64_t step, int shard, int shards) {
  const std::string file = shard_file_name(index_path, step, shard, shards);
  const std::string path = in_directory(index_path, file);
  bool exists = false;
  ShardRecord record;
  record.file = file;
  record.bytes = file_size(path, &exists);
  if (!exists) refuse(path, "the shard file is missing");
  // The header alone: the 8-byte length, then the JSON.
  std::ifstream in(path, std::ios::binary);
  uint64_t header_size = 0;
  in.read(reinterpret_cast<char*>(&header_size), 8);
  if (!in || header_size > record.bytes - 8) refuse(path, "not a safetensors file (bad header length)");
  std::string text(header_size, '\0');
  in.read(text.data(), static_cast<std::streamsize>(header_size));
  const nlohmann::ordered_json header = nlohmann::ordered_json::parse(text, nullptr, false);
  if (!in || header.is_discarded() || !header.is_object())
    refuse(path, "not a safetensors file (bad header)");
  const auto meta = header.find("__metadata__");
  auto text_of = [&](const char* key) {
    return meta != header.end() && meta->is_object() && meta->contains(key) && (*meta)[key].is_string()
               ? (*meta)[key].get<std::string>()
               : std::string();
  };
  if (text_of(kShardKindKey) != kShardKind || text_of(kShardKey) != std::to_string(shard) ||
      text_of(kShardCountKey) != std::to_string(shards) || text_of(kShardStepKey) != std::to_string(step)) {
    refuse(path, "is not shard " + std::to_string(shard) + " of " + std::to_string(shards) + " at step " +
                     std::to_string(step) + " (its metadata says otherwise)");
  }
  record.checksum = text_of(kChecksumKey);
  record.tensor_bytes = record.bytes - 8 - header_size;
  for (const auto& [name, value] : header.items()) {
    if (name != "__metadata__") record.tensors.push_back(name);
  }
  return record;
}

void commit_checkpoint_index(const std::string& index_path, const std::vector<ShardRecord>& shards,
                             const std::map<std::string, std::string>& metadata) {
  BRIGADE_CHECK_VALUE(is_sharded_checkpoint_path(index_path), "commit_checkpoint_index: '", index_path,
                      "' is not an index name (expected a name ending in .index.json)");
  BRIGADE_CHECK_VALUE(!shards.empty(), "commit_checkpoint_index: no shards");
  Json index = {{"metadata", Json::object()}, {"weight_map", Json::object()}};
  Json& meta = index["metadata"];
  for (const auto& [key, value] : metadata) meta[key] = value;
  Json records = Json::array();
  for (const ShardRecord& shard : shards) {
    BRIGADE_CHECK_VALUE(!shard.file.empty(), "commit_checkpoint_index: a shard record without a file name");
    records.push_back({{"file", shard.file}, {"bytes", shard.bytes}, {"checksum", shard.checksum}});
    for (const std::string& tensor : shard.tensors) {
      BRIGADE_CHECK_VALUE(!index["weight_map"].contains(tensor), "commit_checkpoint_index: tensor '", tensor,
                          "' is in two shards");
      index["weight_map"][tensor] = shard.file;
    }
  }
  // total_size as Hugging Face's indexes have it: the bytes of the tensors (the data sections).
  uint64_t total = 0;
  for (const ShardRecord& shard : shards) total += shard.tensor_bytes;
  meta["total_size"] = total;
  meta[kFormatVersionKey] = std::to_string(kSafetensorsFormatVersion);
  meta[kPartitionVersionKey] = std::to_string(kPartitionFormatVersion);
  meta[kShardsKey] = records.dump();
  meta.erase(kChecksumKey);
  meta.erase(kHeaderChecksumKey);
  meta[kIndexChecksumKey] = hex64(index_checksum(index));
  const std::string text = index.dump(2) + "\n";

  remove_stale_temp_files(index_path);
  write_file_atomically(index_path, {{text.data(), text.size()}});  // the commit point

  // The committed index names its shards; any other shard file of this stem is garbage now.
  std::set<std::string> named;
  for (const ShardRecord& shard : shards) named.insert(shard.file);
  const std::string stem = stem_of(index_path);
  std::error_code error;
  const fs::path directory =
      directory_of(index_path).empty() ? fs::path(".") : fs::path(directory_of(index_path));
  for (fs::directory_iterator it(directory, error), end; !error && it != end; it.increment(error)) {
    const std::string name = it->path().filename().string();
    if (is_shard_of(name, stem) && !named.count(name)) {
      std::error_code ignored;
      fs::remove(it->path(), ignored);
    }
  }
}

CheckpointIndex parse_checkpoint_index(const std::string& text, const std::string& index_path) {
  const Json index = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (index.is_discarded()) refuse(index_path, "the index is not valid JSON (truncated or corrupt)");
  if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object() ||
      !index.contains("metadata") || !index["metadata"].is_object()) {
    refuse(index_path,
           "not a sharded-safetensors index (expected {\"metadata\": {...}, \"weight_map\": {...}})");
  }
  CheckpointIndex result;
  for (const auto& [key, value] : index["metadata"].items()) {
    if (key == "total_size") continue;  // a number, Hugging Face's; not brigade's metadata
    if (!value.is_string()) refuse(index_path, "metadata '" + key + "' is not a string");
    result.metadata[key] = value.get<std::string>();
  }
  const auto stored = result.metadata.find(kIndexChecksumKey);
  if (stored != result.metadata.end()) {
    const std::string actual = hex64(index_checksum(index));
    if (stored->second != actual) {
      refuse(index_path, "failed its index checksum: the index records " + stored->second +
                             ", it hashes to " + actual + " (FNV-1a 64); the index is corrupt");
    }
    result.metadata.erase(kIndexChecksumKey);
  }
  check_version(index_path, result.metadata, kFormatVersionKey, kSafetensorsFormatVersion);
  check_version(index_path, result.metadata, kPartitionVersionKey, kPartitionFormatVersion);

  const auto shards_text = result.metadata.find(kShardsKey);
  if (shards_text == result.metadata.end())
    refuse(index_path, std::string("the index has no '") + kShardsKey + "'");
  const Json shards = Json::parse(shards_text->second, nullptr, false);
  if (shards.is_discarded() || !shards.is_array() || shards.empty()) {
    refuse(index_path, std::string("'") + kShardsKey + "' must be a non-empty JSON array of shards");
  }
  std::map<std::string, size_t> position;
  for (size_t k = 0; k < shards.size(); ++k) {
    ShardRecord record = shard_record_from_json(shards[k], index_path, k);
    if (!position.emplace(record.file, k).second)
      refuse(index_path, "shard file '" + record.file + "' is listed twice");
    result.shards.push_back(std::move(record));
  }
  result.metadata.erase(kShardsKey);
  for (const auto& [tensor, file] : index["weight_map"].items()) {
    if (!file.is_string()) refuse(index_path, "weight_map entry '" + tensor + "' is not a file name");
    const std::string name = file.get<std::string>();
    auto it = position.find(name);
    if (it == position.end()) {
      refuse(index_path,
             "weight_map puts '" + tensor + "' in '" + name + "', which is not one of the index's shards");
    }
    result.shards[it->second].tensors.push_back(tensor);
    result.weight_map[tensor] = name;
  }
  return result;
}

SafetensorsFile load_sharded_safetensors(const std::string& index_path) {
  std::ifstream in(index_path, std::ios::binary);
  if (!in) refuse(index_path, "cannot open the index: " + std::string(std::strerror(errno)));
  std::ostringstream text;
  text << in.rdbuf();
  const CheckpointIndex index = parse_checkpoint_index(text.str(), index_path);

  SafetensorsFile merged;
  merged.metadata = index.metadata;
  for (const ShardRecord& record : index.shards) {
    const std::string path = in_directory(index_path, record.file);
    bool exists = false;
    const uint64_t bytes = file_size(path, &exists);
    if (!exists) refuse(path, "the shard named by '" + index_path + "' is missing");
    if (bytes != record.bytes) {
      refuse(path, (bytes < record.bytes ? "is truncated: " : "has the wrong size: ") + std::string("'") +
                       index_path + "' records " + std::to_string(record.bytes) + " bytes, the file has " +
                       std::to_string(bytes));
    }
    SafetensorsFile shard;
    try {
      shard = load_safetensors(path);
    } catch (const IOError& e) {
      refuse(path, std::string("the shard cannot be read: ") + e.what());
    }
    const auto checksum = shard.metadata.find(kChecksumKey);
    if (checksum == shard.metadata.end() || checksum->second != record.checksum) {
      refuse(path, "was written by another save than '" + index_path + "' (its checksum " +
                       (checksum == shard.metadata.end() ? std::string("is absent") : checksum->second) +
                       ", the index records " + record.checksum + ")");
    }
    std::set<std::string> expected(record.tensors.begin(), record.tensors.end());
    for (auto& [name, tensor] : shard.tensors) {
      if (!expected.erase(name))
        refuse(path, "holds tensor '" + name + "', which the index's weight_map does not put there");
      merged.tensors.emplace_back(name, tensor);
    }
    if (!expected.empty()) {
      refuse(path, "lacks tensor '" + *expected.begin() + "', which the index's weight_map puts there");
    }
  }
  return merged;
}

}  // namespace brigade::nn
