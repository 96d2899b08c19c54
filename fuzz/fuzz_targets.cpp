// The fuzz targets (fuzz/fuzz_targets.h): each feeds the bytes to one reader and accepts a typed refusal.
#include "fuzz/fuzz_targets.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "nn/checkpoint_shards.h"
#include "nn/safetensors.h"
#include "pipeline/schedule/schedule_file.h"
#include "tensor/error.h"

namespace brigade::fuzz {
namespace {

namespace fs = std::filesystem;

// A scratch folder of this process for the readers that take a path: in memory (/dev/shm) where there is one.
const fs::path& scratch() {
  static const fs::path dir = [] {
    const fs::path base = fs::is_directory("/dev/shm") ? fs::path("/dev/shm") : fs::temp_directory_path();
    fs::path d = base / ("brigade_fuzz_" + std::to_string(::getpid()));
    fs::create_directories(d);
    return d;
  }();
  return dir;
}

void write_bytes(const fs::path& path, const uint8_t* data, size_t size) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
}

// Runs `read` and lets only brigade's typed errors through: anything else propagates (a finding).
template <typename F>
void refusals_allowed(F&& read) {
  try {
    read();
  } catch (const brigade::Error&) {
  }
}

std::string text_of(const uint8_t* data, size_t size) {
  return std::string(reinterpret_cast<const char*>(data), size);
}

}  // namespace

void safetensors(const uint8_t* data, size_t size) {
  const fs::path path = scratch() / "input.safetensors";
  write_bytes(path, data, size);
  refusals_allowed([&] { (void)nn::load_safetensors(path.string()); });
}

void checkpoint_index(const uint8_t* data, size_t size) {
  refusals_allowed(
      [&] { (void)nn::parse_checkpoint_index(text_of(data, size), "fuzz.safetensors.index.json"); });
}

// The bytes are shard 1 of 1, holding "model.w" by the index; the index records their size and the data
// checksum their header claims, so that a shard that parses gets as far as the tensor checks.
void checkpoint_shard(const uint8_t* data, size_t size) {
  const std::string index = (scratch() / "fuzz.safetensors.index.json").string();
  const std::string file = nn::shard_file_name(index, 1, 0, 1);
  write_bytes(scratch() / file, data, size);
  const std::string bytes = text_of(data, size), key = "\"brigade.checksum\":\"";
  const size_t at = bytes.find(key);
  const std::string checksum = at == std::string::npos ? "" : bytes.substr(at + key.size(), 16);
  std::string shards = "[{\"file\":\"" + file + "\",\"bytes\":" + std::to_string(size) + ",\"checksum\":\"";
  for (char c : checksum) shards += std::isxdigit(static_cast<unsigned char>(c)) ? c : '0';
  shards += "\"}]";
  std::string escaped;
  for (char c : shards) escaped += c == '"' ? std::string("\\\"") : std::string(1, c);
  std::ofstream(index, std::ios::trunc)
      << "{\"metadata\": {\"brigade.format_version\": \"1\", \"brigade.partition_version\": \"1\", "
      << "\"brigade.shards\": \"" << escaped << "\"}, \"weight_map\": {\"model.w\": \"" << file << "\"}}";
  refusals_allowed([&] { (void)nn::load_sharded_safetensors(index); });
}

void schedule_json(const uint8_t* data, size_t size) {
  refusals_allowed([&] { (void)pipeline::schedule_from_json(text_of(data, size), "fuzz.json"); });
}

void schedule_csv(const uint8_t* data, size_t size) {
  refusals_allowed(
      [&] { (void)pipeline::schedule_from_pytorch_csv(text_of(data, size), "fuzz", "fuzz.csv"); });
}

const std::vector<NamedTarget>& all_targets() {
  static const std::vector<NamedTarget> targets = {{"safetensors", &safetensors},
                                                   {"checkpoint_index", &checkpoint_index},
                                                   {"checkpoint_shard", &checkpoint_shard},
                                                   {"schedule_json", &schedule_json},
                                                   {"schedule_csv", &schedule_csv}};
  return targets;
}

}  // namespace brigade::fuzz
