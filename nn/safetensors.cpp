// safetensors reader/writer; the format and brigade's metadata keys are described in nn/safetensors.h.
#include "nn/safetensors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "nn/atomic_file.h"
#include "tensor/grad_mode.h"

namespace brigade::nn {
namespace {

static_assert(std::endian::native == std::endian::little,
              "brigade writes tensor bytes as they are in memory; safetensors requires little-endian");

using Json = nlohmann::ordered_json;  // keeps the header's key order: tensors are written in data order

// The Python reference implementation refuses headers above 100 MB; so do we (a larger "length" means the
// first 8 bytes are not a safetensors header at all).
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

const char* safetensors_dtype(DType dtype) {
  switch (dtype) {
    case DType::Float32:
      return "F32";
    case DType::BFloat16:
      return "BF16";
    case DType::Float64:
      return "F64";
    case DType::Int32:
      return "I32";
    case DType::Int64:
      return "I64";
  }
  return "?";
}

bool parse_safetensors_dtype(const std::string& name, DType* dtype) {
  static const std::pair<const char*, DType> kTable[] = {
      {"F32", kFloat32}, {"BF16", kBFloat16}, {"F64", kFloat64}, {"I32", kInt32}, {"I64", kInt64}};
  for (const auto& [text, value] : kTable) {
    if (name == text) {
      *dtype = value;
      return true;
    }
  }
  return false;
}

std::string hex64(uint64_t value) {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(value));
  return text;
}

std::string system_error() {
  return std::strerror(errno);
}

// An open file descriptor (for reading) that closes itself.
class File {
 public:
  explicit File(int fd) : fd_(fd) {}
  ~File() {
    if (fd_ >= 0) ::close(fd_);
  }
  File(const File&) = delete;
  File& operator=(const File&) = delete;
  int fd() const { return fd_; }

 private:
  int fd_;
};

// Reads up to `size` bytes; returns how many were read (fewer only at end of file), or -1 on error.
int64_t read_up_to(int fd, void* data, size_t size) {
  char* bytes = static_cast<char*>(data);
  size_t done = 0;
  while (done < size) {
    ssize_t got = ::read(fd, bytes + done, size - done);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return -1;
    if (got == 0) break;
    done += static_cast<size_t>(got);
  }
  return static_cast<int64_t>(done);
}

// One tensor's entry in a header being read.
struct Entry {
  std::string name;
  DType dtype;
  Shape shape;
  uint64_t begin, end;
};

[[noreturn]] void bad_header(const std::string& path, const std::string& why) {
  BRIGADE_THROW(IOError, "load_safetensors: '", path, "' is not a safetensors file (bad header: ", why, ")");
}

uint64_t json_offset(const Json& value, const std::string& path, const std::string& what) {
  if (!value.is_number_unsigned()) bad_header(path, what + " must be a non-negative integer");
  return value.get<uint64_t>();
}

Entry parse_entry(const std::string& path, const std::string& name, const Json& info) {
  std::string where = "tensor '" + name + "'";
  if (!info.is_object()) bad_header(path, where + " is not a JSON object");
  for (const char* key : {"dtype", "shape", "data_offsets"}) {
    if (!info.contains(key)) bad_header(path, where + " has no \"" + key + "\"");
  }
  Entry entry;
  entry.name = name;
  if (!info["dtype"].is_string()) bad_header(path, where + ": dtype is not a string");
  std::string dtype_text = info["dtype"].get<std::string>();
  if (!parse_safetensors_dtype(dtype_text, &entry.dtype)) {
    BRIGADE_THROW(IOError, "load_safetensors: '", path, "': ", where, " has dtype ", dtype_text,
                  ", which brigade does not support (F32, BF16, F64, I32, I64)");
  }
  if (!info["shape"].is_array()) bad_header(path, where + ": shape is not an array");
  uint64_t numel = 1;
  for (const Json& dim : info["shape"]) {
    uint64_t size = json_offset(dim, path, where + ": each shape entry");
    if (size > static_cast<uint64_t>(INT64_MAX) || __builtin_mul_overflow(numel, size, &numel)) {
      bad_header(path, where + ": shape is too large");
    }
    entry.shape.push_back(static_cast<int64_t>(size));
  }
  const Json& offsets = info["data_offsets"];
  if (!offsets.is_array() || offsets.size() != 2)
    bad_header(path, where + ": data_offsets is not [begin, end]");
  entry.begin = json_offset(offsets[0], path, where + ": data_offsets");
  entry.end = json_offset(offsets[1], path, where + ": data_offsets");
  uint64_t nbytes = 0;
  if (entry.end < entry.begin || __builtin_mul_overflow(numel, dtype_size(entry.dtype), &nbytes) ||
      entry.end - entry.begin != nbytes) {
    bad_header(path, where + ": data_offsets [" + std::to_string(entry.begin) + ", " +
                         std::to_string(entry.end) + "] do not hold " + std::to_string(numel) + " " +
                         dtype_text + " elements");
  }
  return entry;
}

void check_format_version(const std::string& path, const std::map<std::string, std::string>& metadata) {
  auto it = metadata.find(kFormatVersionKey);
  if (it == metadata.end()) return;  // written by another tool
  const std::string& text = it->second;
  bool digits = !text.empty() && text.size() < 10 &&
                std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
  if (!digits) {
    BRIGADE_THROW(IOError, "load_safetensors: '", path, "': ", kFormatVersionKey, " is '", text,
                  "', expected a positive integer");
  }
  int version = std::stoi(text);
  if (version > kSafetensorsFormatVersion) {
    BRIGADE_THROW(IOError, "load_safetensors: '", path, "' was written by a newer brigade (format version ",
                  version, "; this build reads versions up to ", kSafetensorsFormatVersion, ")");
  }
}

}  // namespace

uint64_t fnv1a64(const void* data, size_t size, uint64_t hash) {
  const unsigned char* bytes = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < size; ++i) {
    hash ^= bytes[i];
    hash *= 0x100000001b3ull;
  }
  return hash;
}

bool SafetensorsFile::contains(const std::string& name) const {
  return std::any_of(tensors.begin(), tensors.end(), [&](const auto& entry) { return entry.first == name; });
}

const Tensor& SafetensorsFile::at(const std::string& name) const {
  for (const auto& entry : tensors) {
    if (entry.first == name) return entry.second;
  }
  std::string some;
  for (size_t i = 0; i < tensors.size() && i < 5; ++i) some += (i ? ", " : "") + tensors[i].first;
  if (tensors.size() > 5) some += ", ...";
  BRIGADE_THROW(ValueError, "SafetensorsFile::at: no tensor named '", name, "' (the file has ",
                tensors.size(), " tensors: ", some, ")");
}

namespace {
// FNV-1a 64 of the canonical serialization: Json keeps the file's key order, nlohmann::json sorts keys,
// so a round trip through the latter gives the sorted, compact text the format comment defines.
uint64_t header_checksum(const Json& header) {
  const std::string text = nlohmann::json::parse(header.dump()).dump();
  return fnv1a64(text.data(), text.size());
}

}  // namespace

void save_safetensors(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  // 1. Host copies, validated names, checksum of the data section in write order.
  NoGradGuard no_grad;
  std::vector<Tensor> host;
  host.reserve(tensors.size());
  std::map<std::string, int> seen;
  uint64_t checksum = kFnv1a64Basis;
  for (const auto& [name, tensor] : tensors) {
    BRIGADE_CHECK_VALUE(!name.empty() && name != "__metadata__", "save_safetensors: invalid tensor name '",
                        name, "'");
    BRIGADE_CHECK_VALUE(seen.emplace(name, 0).second, "save_safetensors: duplicate tensor name '", name, "'");
    BRIGADE_CHECK_VALUE(tensor.defined(), "save_safetensors: tensor '", name, "' is undefined");
    Tensor h = tensor.detach().to(Device::cpu()).contiguous();
    if (h.nbytes() > 0) checksum = fnv1a64(h.data_ptr(), h.nbytes(), checksum);
    host.push_back(h);
  }

  // 2. The header: metadata first, then the tensors in data order.
  Json header = Json::object();
  Json meta = Json::object();
  for (const auto& [key, value] : metadata) meta[key] = value;
  meta[kFormatVersionKey] = std::to_string(kSafetensorsFormatVersion);
  meta[kChecksumKey] = hex64(checksum);
  meta.erase(kHeaderChecksumKey);
  header["__metadata__"] = meta;
  uint64_t offset = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& h = host[i];
    Json entry = Json::object();
    entry["dtype"] = safetensors_dtype(h.dtype());
    entry["shape"] = h.shape();
    entry["data_offsets"] = Json::array({offset, offset + static_cast<uint64_t>(h.nbytes())});
    offset += h.nbytes();
    header[tensors[i].first] = entry;
  }
  header["__metadata__"][kHeaderChecksumKey] = hex64(header_checksum(header));
  std::string header_text = header.dump();
  header_text.append((8 - header_text.size() % 8) % 8, ' ');
  uint64_t header_size = header_text.size();

  // 3. Atomic write (temp file, fsync, rename, fsync the directory), after removing the temporary files a
  //    killed writer of this path left behind.
  std::vector<ByteSpan> pieces = {{&header_size, 8}, {header_text.data(), header_size}};
  for (const Tensor& h : host) pieces.push_back({h.data_ptr(), static_cast<size_t>(h.nbytes())});
  remove_stale_temp_files(path);
  try {
    write_file_atomically(path, pieces);
  } catch (const IOError& e) {
    BRIGADE_THROW(IOError, "save_safetensors: ", e.what());
  }
}

namespace {

// Step 1 of load_safetensors: the 8-byte header length (into `header_size`) and the JSON header after it.
Json read_header(int fd, const std::string& path, uint64_t file_size, uint64_t* header_size) {
  if (file_size < 8 || read_up_to(fd, header_size, 8) != 8) {
    bad_header(path, "the file has " + std::to_string(file_size) + " bytes, fewer than the 8-byte length");
  }
  if (*header_size < 2 || *header_size > kMaxHeaderBytes) {
    bad_header(path, "header length " + std::to_string(*header_size) + " is implausible");
  }
  std::string header_text(std::min<uint64_t>(*header_size, file_size - 8), '\0');
  if (read_up_to(fd, header_text.data(), header_text.size()) != static_cast<int64_t>(header_text.size())) {
    BRIGADE_THROW(IOError, "load_safetensors: reading '", path, "': ", system_error());
  }
  if (header_text.empty() || header_text[0] != '{') bad_header(path, "the header does not start with '{'");
  if (header_text.size() < *header_size) {
    BRIGADE_THROW(IOError, "load_safetensors: '", path, "' is truncated: the header alone needs ",
                  8 + *header_size, " bytes, the file has ", file_size);
  }
  Json header = Json::parse(header_text, nullptr, /*allow_exceptions=*/false);
  if (header.is_discarded()) bad_header(path, "the header is not valid JSON");
  if (!header.is_object()) bad_header(path, "the header is not a JSON object");
  return header;
}

// Step 2: the metadata (into `metadata`; the version is checked first: a newer file may mean anything below
// differently), then the entries.
std::vector<Entry> read_entries(const std::string& path, const Json& header,
                                std::map<std::string, std::string>* metadata) {
  std::vector<Entry> entries;
  for (const auto& [key, value] : header.items()) {
    if (key == "__metadata__") {
      if (!value.is_object()) bad_header(path, "__metadata__ is not a JSON object");
      for (const auto& [meta_key, meta_value] : value.items()) {
        if (!meta_value.is_string())
          bad_header(path, "__metadata__ value of '" + meta_key + "' is not a string");
        (*metadata)[meta_key] = meta_value.get<std::string>();
      }
    } else {
      entries.push_back(parse_entry(path, key, value));
    }
  }
  check_format_version(path, *metadata);
  return entries;
}

// Step 3: the entries (sorted here by data offset) must tile the data section: contiguous, in order, no
// holes, no overlaps, and the file must end where the data section does.
void check_data_layout(const std::string& path, std::vector<Entry>* entries, uint64_t header_size,
                       uint64_t file_size) {
  std::stable_sort(entries->begin(), entries->end(), [](const Entry& a, const Entry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t data_size = 0;
  for (const Entry& entry : *entries) {
    if (entry.begin != data_size) {
      bad_header(path, "tensor '" + entry.name + "' starts at data offset " + std::to_string(entry.begin) +
                           ", expected " + std::to_string(data_size) + " (the data must be contiguous)");
    }
    data_size = entry.end;
  }
  const uint64_t expected_size = 8 + header_size + data_size;
  if (file_size < expected_size) {
    BRIGADE_THROW(IOError, "load_safetensors: '", path, "' is truncated: its header describes ",
                  expected_size, " bytes, the file has ", file_size, " (", expected_size - file_size,
                  " missing)");
  }
  if (file_size > expected_size) {
    bad_header(path, "the file has " + std::to_string(file_size - expected_size) +
                         " bytes after the data section that no tensor describes");
  }
}

// Step 5: the checksums the metadata records, if any: of the header (less its own checksum) and of the data.
void check_checksums(const std::string& path, Json header, const std::map<std::string, std::string>& metadata,
                     uint64_t data_checksum) {
  auto stored_header = metadata.find(kHeaderChecksumKey);
  if (stored_header != metadata.end()) {
    header["__metadata__"].erase(kHeaderChecksumKey);
    const std::string actual = hex64(header_checksum(header));
    if (stored_header->second != actual) {
      BRIGADE_THROW(IOError, "load_safetensors: '", path, "' failed its header checksum: the header records ",
                    stored_header->second, ", the header hashes to ", actual,
                    " (FNV-1a 64); the header is corrupt");
    }
  }
  auto stored = metadata.find(kChecksumKey);
  if (stored != metadata.end() && stored->second != hex64(data_checksum)) {
    BRIGADE_THROW(IOError, "load_safetensors: '", path, "' failed its checksum: the header records ",
                  stored->second, ", the data hashes to ", hex64(data_checksum),
                  " (FNV-1a 64); the file is corrupt");
  }
}

}  // namespace

SafetensorsFile load_safetensors(const std::string& path) {
  File file(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (file.fd() < 0) BRIGADE_THROW(IOError, "load_safetensors: cannot open '", path, "': ", system_error());
  struct stat info {};
  if (::fstat(file.fd(), &info) != 0)
    BRIGADE_THROW(IOError, "load_safetensors: '", path, "': ", system_error());
  if (!S_ISREG(info.st_mode)) BRIGADE_THROW(IOError, "load_safetensors: '", path, "' is not a regular file");
  const uint64_t file_size = static_cast<uint64_t>(info.st_size);

  uint64_t header_size = 0;
  Json header = read_header(file.fd(), path, file_size, &header_size);
  SafetensorsFile result;
  std::vector<Entry> entries = read_entries(path, header, &result.metadata);
  check_data_layout(path, &entries, header_size, file_size);

  // Step 4: the data, hashed as it is read.
  uint64_t checksum = kFnv1a64Basis;
  for (const Entry& entry : entries) {
    Tensor tensor = empty(entry.shape, TensorOptions(entry.dtype));
    size_t nbytes = tensor.nbytes();
    if (nbytes > 0) {
      if (read_up_to(file.fd(), tensor.data_ptr(), nbytes) != static_cast<int64_t>(nbytes)) {
        BRIGADE_THROW(IOError, "load_safetensors: '", path,
                      "' is truncated or unreadable while reading tensor '", entry.name,
                      "': ", system_error());
      }
      checksum = fnv1a64(tensor.data_ptr(), nbytes, checksum);
    }
    result.tensors.emplace_back(entry.name, tensor);
  }
  check_checksums(path, std::move(header), result.metadata, checksum);
  return result;
}

}  // namespace brigade::nn
