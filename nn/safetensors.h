// Reading and writing the safetensors format (https://github.com/huggingface/safetensors), so that brigade
// checkpoints open in any tool that reads safetensors (Python `safetensors`, `transformers`, ...).
//
// File layout (all integers little-endian):
//   bytes [0, 8)        N: uint64, the length of the JSON header
//   bytes [8, 8+N)      the header: one JSON object, UTF-8, padded with trailing spaces so that 8+N is a
//                       multiple of 8 (the data section then starts 8-byte aligned)
//   bytes [8+N, end)    the data section: every tensor's raw row-major little-endian bytes
// The header maps each tensor name to {"dtype": "F32"|"BF16"|"F64"|"I32"|"I64", "shape": [d0, d1, ...],
// "data_offsets": [begin, end]} (offsets relative to the data section, end exclusive; together they cover
// the data section exactly, without holes or overlaps), plus an optional "__metadata__" entry: a flat
// string -> string map (nested values are stored as JSON text, as the format requires).
//
// brigade's additions live only in __metadata__, so files stay plain safetensors:
//   "brigade.format_version"  "1" (kSafetensorsFormatVersion). A file with a larger version is refused
//                             ("newer"), since it may mean something this build does not understand.
//   "brigade.checksum"        FNV-1a 64 of the whole data section, as 16 lowercase hex digits. FNV-1a was
//                             chosen over CRC32 because it is five lines to re-implement in any language
//                             (offset basis 0xcbf29ce484222325, prime 0x100000001b3, xor then multiply per
//                             byte); it detects the corruption that matters here (flipped or zeroed bytes,
//                             swapped blocks), it is not a cryptographic hash.
//   "brigade.header_checksum" FNV-1a 64 of the header itself with this one key left out, serialized
//                             canonically (keys sorted, no whitespace, UTF-8 unescaped: Python's
//                             json.dumps(h, sort_keys=True, separators=(",", ":"), ensure_ascii=False)).
//                             It catches what still parses after a corruption: a changed digit in a shape,
//                             an offset or a metadata value (a checkpoint's step or model config).
// Files written by other tools (no brigade keys) load without a checksum check; each checksum is checked
// when its key is present (brigade files from before the header checksum carry only the data one).
//
// Writes are atomic (nn/atomic_file.h): the file is written to "<path>.tmp.<host>.<pid>", fsync'ed, renamed
// over <path>, and the directory is fsync'ed, so a crash or a failed write never leaves a half-written <path>
// behind and an existing file at <path> stays intact until the new one is complete. A save first removes the
// temporary files of <path> that killed writers (kill -9) left behind.
//
// \code
//   brigade::nn::save_safetensors("model.safetensors", {{"wte.weight", wte}, {"lm_head.bias", b}},
//                                 {{"step", "1000"}});
//   auto file = brigade::nn::load_safetensors("model.safetensors");
//   Tensor w = file.at("wte.weight");          // CPU, contiguous
//   std::string step = file.metadata.at("step");
// \endcode
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "tensor/tensor.h"

namespace brigade::nn {

/// The brigade format version this build writes and the largest one it reads.
inline constexpr int kSafetensorsFormatVersion = 1;
/// Metadata keys reserved by brigade (set by save_safetensors, checked by load_safetensors).
inline constexpr const char* kFormatVersionKey = "brigade.format_version";
inline constexpr const char* kChecksumKey = "brigade.checksum";
inline constexpr const char* kHeaderChecksumKey = "brigade.header_checksum";

/// FNV-1a 64 of `size` bytes, continuing from `hash` (start with kFnv1a64Basis).
inline constexpr uint64_t kFnv1a64Basis = 0xcbf29ce484222325ull;
uint64_t fnv1a64(const void* data, size_t size, uint64_t hash = kFnv1a64Basis);

/// The contents of a safetensors file: named CPU tensors in file (data offset) order, and the metadata.
struct SafetensorsFile {
  std::vector<std::pair<std::string, Tensor>> tensors;
  std::map<std::string, std::string> metadata;

  bool contains(const std::string& name) const;
  /// The tensor called `name`; throws ValueError listing a few available names when there is none.
  const Tensor& at(const std::string& name) const;
};

/// Writes `tensors` (any device, dtype float32/bfloat16/float64/int32/int64, any strides: each is copied
/// to the CPU and made contiguous) in the given order, with `metadata` plus brigade's format version and
/// checksum (the reserved keys above are overwritten if `metadata` carries them, e.g. when re-saving a
/// loaded file). Names must be non-empty, unique and not "__metadata__" (ValueError). Throws IOError naming
/// the path and the system error when the file cannot be written; `path` is then left as it was.
void save_safetensors(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
                      const std::map<std::string, std::string>& metadata = {});

/// Reads a safetensors file into CPU tensors. Throws IOError, naming the path and which problem:
///   missing/unreadable file; "not a safetensors file (bad header ...)" for a wrong header length, a header
///   that is not JSON or not a valid safetensors header; "truncated" (expected vs actual bytes) for a file
///   shorter than its header says; "checksum" for data that does not match brigade.checksum or a header
///   that does not match brigade.header_checksum (the message says which); "newer" (with
///   both versions) for a brigade.format_version this build does not support; an unsupported dtype.
SafetensorsFile load_safetensors(const std::string& path);

}  // namespace brigade::nn
