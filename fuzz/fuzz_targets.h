// The fuzz targets: one function per reader of untrusted bytes, shared by the libFuzzer executables
// (fuzz/*_fuzzer.cpp, built by scripts/fuzz.sh) and by the unit test that replays every kept input
// (tests/fuzz/fuzz_corpus_test.cpp), so a crash found once stays fixed.
//
// The contract each target checks: any input is either read or refused with a typed brigade::Error (an
// IOError, a ValueError, ...). Anything else is a bug: another exception (nlohmann's, std::out_of_range,
// ...), a crash, a hang, or what AddressSanitizer / UndefinedBehaviorSanitizer report.
//
//   safetensors       load_safetensors on the bytes as a file (the header reader and the data section)
//   checkpoint_index  parse_checkpoint_index on the bytes as an index's text
//   checkpoint_shard  load_sharded_safetensors of an index whose one shard is the bytes
//   schedule_json     schedule_from_json on the bytes
//   schedule_csv      schedule_from_pytorch_csv on the bytes
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace brigade::fuzz {

/// A fuzz target: reads `size` bytes at `data`; returns normally on success or a typed refusal.
using Target = void (*)(const uint8_t* data, size_t size);

void safetensors(const uint8_t* data, size_t size);
void checkpoint_index(const uint8_t* data, size_t size);
void checkpoint_shard(const uint8_t* data, size_t size);
void schedule_json(const uint8_t* data, size_t size);
void schedule_csv(const uint8_t* data, size_t size);

/// Every target by name (the folder names under fuzz/corpus/ and fuzz/regressions/).
struct NamedTarget {
  const char* name;
  Target run;
};
const std::vector<NamedTarget>& all_targets();

}  // namespace brigade::fuzz
