// safetensors: bit-exact round trips, an independent reader that proves the files are plain safetensors,
// refusal of truncated / corrupt / foreign / newer files with the right message, and atomic writes.
#include "nn/safetensors.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>

#include "nn/atomic_file.h"
#include "tensor/tensor.h"
#include "test_support.h"

namespace fs = std::filesystem;
using brigade::Tensor;
using brigade::nn::load_safetensors;
using brigade::nn::save_safetensors;
using brigade::testing::message_of;
using brigade::testing::read_file_bytes;
using brigade::testing::write_file_bytes;

namespace {

class SafetensorsTest : public brigade::testing::TempDirTest {};

// The raw bytes of a tensor (made contiguous on the CPU).
std::string tensor_bytes(const Tensor& t) {
  Tensor c = t.cpu().contiguous();
  return std::string(static_cast<const char*>(c.data_ptr()), c.nbytes());
}

// A safetensors file written by hand: 8-byte little-endian length, the header padded to 8, the data.
std::string make_file(const std::string& header, const std::string& data) {
  std::string padded = header + std::string((8 - header.size() % 8) % 8, ' ');
  std::string out(8, '\0');
  uint64_t n = padded.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out + padded + data;
}

// ---- the independent reader: byte parsing + nlohmann, nothing from nn/
// -------------------------------------
struct RawFile {
  uint64_t header_length = 0;
  nlohmann::json header;
  std::string data;  // the data section
};

RawFile parse_raw(const std::string& bytes) {
  RawFile raw;
  EXPECT_GE(bytes.size(), 8u);
  for (int i = 7; i >= 0; --i)
    raw.header_length = (raw.header_length << 8) | static_cast<unsigned char>(bytes[i]);
  EXPECT_LE(8 + raw.header_length, bytes.size());
  raw.header = nlohmann::json::parse(bytes.substr(8, raw.header_length));
  raw.data = bytes.substr(8 + raw.header_length);
  return raw;
}

uint64_t fnv1a64_reference(const std::string& bytes) {
  uint64_t hash = 0xcbf29ce484222325ull;
  for (unsigned char byte : bytes) {
    hash ^= byte;
    hash *= 0x100000001b3ull;
  }
  return hash;
}

std::vector<std::pair<std::string, Tensor>> every_dtype() {
  brigade::Generator gen(7);
  Tensor f32 = brigade::randn({3, 5}, {}, &gen);
  Tensor bf16 = brigade::randn({4, 2, 3}, {}, &gen).to(brigade::kBFloat16);
  Tensor f64 = brigade::randn({7}, brigade::TensorOptions(brigade::kFloat64), &gen);
  Tensor i32 = brigade::from_vector<int32_t>({-2147483647 - 1, -1, 0, 1, 2147483647, 42}, {2, 3});
  Tensor i64 = brigade::from_vector<int64_t>({INT64_MIN, -5, 0, 5, INT64_MAX}, {5});
  Tensor scalar = brigade::full({}, 3.25);                    // 0-d
  Tensor none = brigade::empty({0, 4});                       // size 0
  Tensor none_i64 = brigade::empty({3, 0}, brigade::kInt64);  // size 0, between others
  Tensor f32_nan = brigade::from_vector<float>({0.0f, -0.0f, INFINITY, -INFINITY, NAN, 1e-45f}, {6});
  return {{"blocks.0.f32", f32}, {"blocks.0.bf16", bf16}, {"blocks.1.f64", f64},
          {"ids.i32", i32},      {"ids.i64", i64},        {"scalar", scalar},
          {"empty.f32", none},   {"empty.i64", none_i64}, {"special.f32", f32_nan}};
}

}  // namespace

TEST_F(SafetensorsTest, RoundTripIsBitExactForEveryDtypeAndKeepsOrderAndMetadata) {
  auto tensors = every_dtype();
  std::map<std::string, std::string> metadata = {{"step", "1234"}, {"config", R"({"layers": 2})"}};
  save_safetensors(file("a.safetensors"), tensors, metadata);
  auto loaded = load_safetensors(file("a.safetensors"));

  ASSERT_EQ(loaded.tensors.size(), tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    const auto& [name, expected] = tensors[i];
    const auto& [loaded_name, actual] = loaded.tensors[i];
    EXPECT_EQ(loaded_name, name) << "file order = save order";
    EXPECT_EQ(actual.dtype(), expected.dtype()) << name;
    EXPECT_EQ(actual.shape(), expected.shape()) << name;
    EXPECT_EQ(actual.device(), brigade::Device::cpu()) << name;
    EXPECT_EQ(tensor_bytes(actual), tensor_bytes(expected)) << name << ": bytes differ";
  }
  EXPECT_EQ(loaded.at("scalar").dim(), 0);
  EXPECT_EQ(loaded.at("scalar").item(), 3.25);
  EXPECT_EQ(loaded.metadata.at("step"), "1234");
  EXPECT_EQ(loaded.metadata.at("config"), R"({"layers": 2})");
  EXPECT_EQ(loaded.metadata.at("brigade.format_version"), "1");
  EXPECT_TRUE(loaded.contains("ids.i64"));
  EXPECT_FALSE(loaded.contains("nope"));
  std::string message = message_of<brigade::ValueError>([&] { loaded.at("nope"); });
  EXPECT_NE(message.find("no tensor named 'nope'"), std::string::npos) << message;
}

TEST_F(SafetensorsTest, StridedAndGradTensorsAreSavedAsTheirContiguousValues) {
  Tensor base = brigade::arange(0, 12, 1, brigade::kFloat32).view({3, 4});
  Tensor transposed = base.transpose(0, 1);  // [4, 3], not contiguous
  Tensor leaf = brigade::ones({2}).set_requires_grad(true);
  save_safetensors(file("s.safetensors"), {{"t", transposed}, {"leaf", leaf}});
  auto loaded = load_safetensors(file("s.safetensors"));
  EXPECT_EQ(loaded.at("t").shape(), (brigade::Shape{4, 3}));
  EXPECT_EQ(loaded.at("t").to_vector<float>(), transposed.contiguous().to_vector<float>());
  EXPECT_FALSE(loaded.at("leaf").requires_grad());
  EXPECT_EQ(loaded.at("leaf").to_vector<float>(), (std::vector<float>{1.0f, 1.0f}));
}

TEST_F(SafetensorsTest, IndependentReaderSeesPlainSafetensors) {
  auto tensors = every_dtype();
  save_safetensors(file("plain.safetensors"), tensors, {{"note", "hello"}});
  const std::string bytes = read_file_bytes(file("plain.safetensors"));
  RawFile raw = parse_raw(bytes);

  EXPECT_EQ((8 + raw.header_length) % 8, 0u) << "data section must start 8-byte aligned";
  EXPECT_EQ(bytes[8], '{');
  ASSERT_TRUE(raw.header.is_object());
  const auto& meta = raw.header.at("__metadata__");
  EXPECT_EQ(meta.at("note"), "hello");
  EXPECT_EQ(meta.at("brigade.format_version"), "1");
  char expected_hash[17];
  std::snprintf(expected_hash, sizeof expected_hash, "%016llx",
                static_cast<unsigned long long>(fnv1a64_reference(raw.data)));
  EXPECT_EQ(meta.at("brigade.checksum"), expected_hash);
  for (const auto& [key, value] : meta.items()) EXPECT_TRUE(value.is_string()) << key;

  // Every tensor entry is {dtype, shape, data_offsets}; the offsets tile the data section in order.
  const std::map<std::string, std::pair<std::string, size_t>> dtypes = {{"F32", {"float32", 4}},
                                                                        {"BF16", {"bfloat16", 2}},
                                                                        {"F64", {"float64", 8}},
                                                                        {"I32", {"int32", 4}},
                                                                        {"I64", {"int64", 8}}};
  std::vector<std::tuple<uint64_t, uint64_t, std::string>> spans;
  for (const auto& [name, info] : raw.header.items()) {
    if (name == "__metadata__") continue;
    ASSERT_EQ(info.size(), 3u) << name;
    const std::string dtype = info.at("dtype");
    ASSERT_TRUE(dtypes.count(dtype)) << dtype;
    uint64_t numel = 1;
    for (const auto& d : info.at("shape")) numel *= d.get<uint64_t>();
    const uint64_t begin = info.at("data_offsets")[0], end = info.at("data_offsets")[1];
    EXPECT_EQ(end - begin, numel * dtypes.at(dtype).second) << name;
    spans.emplace_back(begin, end, name);
  }
  ASSERT_EQ(spans.size(), tensors.size());
  std::stable_sort(spans.begin(), spans.end());
  uint64_t cursor = 0;
  for (const auto& [begin, end, name] : spans) {
    EXPECT_EQ(begin, cursor) << name << " must follow the previous tensor";
    cursor = end;
  }
  EXPECT_EQ(cursor, raw.data.size()) << "no bytes after the last tensor";

  // Read raw values by hand and compare with what was saved.
  const Tensor& f32 = tensors[0].second;
  const auto& info = raw.header.at("blocks.0.f32");
  EXPECT_EQ(info.at("dtype"), "F32");
  EXPECT_EQ(info.at("shape"), nlohmann::json({3, 5}));
  std::vector<float> values(15);
  std::memcpy(values.data(), raw.data.data() + info.at("data_offsets")[0].get<uint64_t>(),
              15 * sizeof(float));
  EXPECT_EQ(values, f32.to_vector<float>());
  const auto& i64 = raw.header.at("ids.i64");
  int64_t first = 0;
  std::memcpy(&first, raw.data.data() + i64.at("data_offsets")[0].get<uint64_t>(), 8);
  EXPECT_EQ(first, INT64_MIN);
  EXPECT_EQ(raw.header.at("scalar").at("shape"), nlohmann::json::array());
}

TEST_F(SafetensorsTest, LoadsFilesFromOtherToolsWithoutBrigadeKeys) {
  std::vector<float> a = {1.5f, -2.0f, 3.0f, 0.25f};
  std::vector<int64_t> b = {7, 8};
  std::string data(reinterpret_cast<const char*>(b.data()), 16);  // stored first, though listed second
  data += std::string(reinterpret_cast<const char*>(a.data()), 16);
  write_file_bytes(file("foreign.safetensors"),
                   make_file(R"({"a":{"dtype":"F32","shape":[2,2],"data_offsets":[16,32]},)"
                             R"("b":{"dtype":"I64","shape":[2],"data_offsets":[0,16]}})",
                             data));
  auto loaded = load_safetensors(file("foreign.safetensors"));
  ASSERT_EQ(loaded.tensors.size(), 2u);
  EXPECT_EQ(loaded.tensors[0].first, "b") << "tensors come back in data order";
  EXPECT_EQ(loaded.at("a").to_vector<float>(), a);
  EXPECT_EQ(loaded.at("b").to_vector<int64_t>(), b);
  EXPECT_TRUE(loaded.metadata.empty());
}

TEST_F(SafetensorsTest, MissingFileNamesThePath) {
  std::string path = file("does_not_exist.safetensors");
  std::string message = message_of<brigade::IOError>([&] { load_safetensors(path); });
  EXPECT_NE(message.find(path), std::string::npos) << message;
  EXPECT_NE(message.find("No such file"), std::string::npos) << message;
}

TEST_F(SafetensorsTest, TruncatedFilesAreRefusedWithExpectedAndActualSizes) {
  save_safetensors(file("t.safetensors"), every_dtype());
  const std::string bytes = read_file_bytes(file("t.safetensors"));
  // Cut inside the data section.
  write_file_bytes(file("cut.safetensors"), bytes.substr(0, bytes.size() - 3));
  std::string message = message_of<brigade::IOError>([&] { load_safetensors(file("cut.safetensors")); });
  EXPECT_NE(message.find("truncated"), std::string::npos) << message;
  EXPECT_NE(message.find(std::to_string(bytes.size())), std::string::npos) << "expected size: " << message;
  EXPECT_NE(message.find(std::to_string(bytes.size() - 3)), std::string::npos) << "actual size: " << message;
  // Cut inside the header.
  write_file_bytes(file("cut_header.safetensors"), bytes.substr(0, 40));
  message = message_of<brigade::IOError>([&] { load_safetensors(file("cut_header.safetensors")); });
  EXPECT_NE(message.find("truncated"), std::string::npos) << message;
  EXPECT_NE(message.find(" 40"), std::string::npos) << message;
}

TEST_F(SafetensorsTest, CorruptDataIsRefusedByTheChecksum) {
  save_safetensors(file("c.safetensors"), every_dtype());
  std::string bytes = read_file_bytes(file("c.safetensors"));
  bytes[bytes.size() - 10] ^= 0x01;  // one bit in the last tensor
  write_file_bytes(file("c.safetensors"), bytes);
  std::string message = message_of<brigade::IOError>([&] { load_safetensors(file("c.safetensors")); });
  EXPECT_NE(message.find("checksum"), std::string::npos) << message;
  EXPECT_NE(message.find("corrupt"), std::string::npos) << message;
}

TEST_F(SafetensorsTest, GarbageAndBadHeadersAreNotSafetensors) {
  auto expect_bad_header = [&](const std::string& bytes, const std::string& detail) {
    write_file_bytes(file("bad.safetensors"), bytes);
    std::string message = message_of<brigade::IOError>([&] { load_safetensors(file("bad.safetensors")); });
    EXPECT_NE(message.find("not a safetensors file (bad header"), std::string::npos) << message;
    EXPECT_NE(message.find(detail), std::string::npos) << message;
  };
  expect_bad_header("PK\x03\x04 this is a zip file, not a checkpoint at all.", "implausible");
  expect_bad_header("abc", "fewer than the 8-byte length");
  expect_bad_header("", "fewer than the 8-byte length");
  expect_bad_header(make_file("{not json at all}", ""), "not valid JSON");
  expect_bad_header(make_file("[1, 2, 3]", ""), "does not start with '{'");
  expect_bad_header(make_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}})", "12345678"),
                    "do not hold 2 F32 elements");
  expect_bad_header(make_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", "12345678"),
                    "starts at data offset 4, expected 0");
  expect_bad_header(make_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", "12345678"),
                    "4 bytes after the data section");
  expect_bad_header(make_file(R"({"__metadata__":{"n":3}})", ""), "not a string");
  expect_bad_header(make_file(R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", "1234"),
                    "non-negative");

  write_file_bytes(file("f16.safetensors"),
                   make_file(R"({"h":{"dtype":"F16","shape":[2],"data_offsets":[0,4]}})", "1234"));
  std::string message = message_of<brigade::IOError>([&] { load_safetensors(file("f16.safetensors")); });
  EXPECT_NE(message.find("dtype F16"), std::string::npos) << message;
}

TEST_F(SafetensorsTest, NewerFormatVersionIsRefusedNamingBothVersions) {
  save_safetensors(file("v.safetensors"), {{"w", brigade::ones({2, 2})}});
  RawFile raw = parse_raw(read_file_bytes(file("v.safetensors")));
  raw.header["__metadata__"]["brigade.format_version"] = "2";
  write_file_bytes(file("v2.safetensors"), make_file(raw.header.dump(), raw.data));
  std::string message = message_of<brigade::IOError>([&] { load_safetensors(file("v2.safetensors")); });
  EXPECT_NE(message.find("newer"), std::string::npos) << message;
  EXPECT_NE(message.find("format version 2"), std::string::npos) << message;
  EXPECT_NE(message.find("up to 1"), std::string::npos) << message;

  raw.header["__metadata__"]["brigade.format_version"] = "one";
  write_file_bytes(file("vx.safetensors"), make_file(raw.header.dump(), raw.data));
  message = message_of<brigade::IOError>([&] { load_safetensors(file("vx.safetensors")); });
  EXPECT_NE(message.find("expected a positive integer"), std::string::npos) << message;
}

TEST_F(SafetensorsTest, AtomicWriteLeavesNoTempFileAndFailuresKeepTheOldFile) {
  const std::string path = file("ckpt.safetensors");
  save_safetensors(path, {{"w", brigade::full({3}, 1.0)}});
  save_safetensors(path, {{"w", brigade::full({3}, 2.0)}});  // overwrite
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir_)) names.push_back(entry.path().filename().string());
  EXPECT_EQ(names, std::vector<std::string>{"ckpt.safetensors"}) << "no temp file may remain";
  const std::string good = read_file_bytes(path);
  EXPECT_EQ(load_safetensors(path).at("w").to_vector<float>(), (std::vector<float>{2, 2, 2}));

  // The temp file cannot be created (a directory is in its way): IOError, the old file is untouched.
  const std::string temp = brigade::nn::temp_path_for(path);
  fs::create_directory(temp);
  std::string message = message_of<brigade::IOError>([&] {
    save_safetensors(path, {{"w", brigade::full({3}, 3.0)}});
  });
  EXPECT_NE(message.find(path), std::string::npos) << message;
  fs::remove(temp);
  EXPECT_EQ(read_file_bytes(path), good);

  // An invalid request fails before anything is written.
  EXPECT_THROW(save_safetensors(path, {{"w", brigade::ones({1})}, {"w", brigade::ones({1})}}),
               brigade::ValueError);
  EXPECT_THROW(save_safetensors(path, {{"", brigade::ones({1})}}), brigade::ValueError);
  EXPECT_THROW(save_safetensors(path, {{"u", Tensor()}}), brigade::ValueError);
  EXPECT_EQ(read_file_bytes(path), good);

  // A directory that does not exist: IOError naming the path, nothing created.
  const std::string nowhere = file("missing_dir/ckpt.safetensors");
  message = message_of<brigade::IOError>([&] { save_safetensors(nowhere, {{"w", brigade::ones({1})}}); });
  EXPECT_NE(message.find(nowhere), std::string::npos) << message;
  EXPECT_FALSE(fs::exists(file("missing_dir")));
}

TEST_F(SafetensorsTest, ReservedMetadataKeysAreRewrittenOnSave) {
  save_safetensors(file("r.safetensors"), {{"w", brigade::ones({2})}},
                   {{"brigade.checksum", "0000000000000000"}, {"brigade.format_version", "7"}});
  auto loaded = load_safetensors(file("r.safetensors"));  // would throw if either key were kept
  EXPECT_EQ(loaded.metadata.at("brigade.format_version"), "1");
  EXPECT_EQ(brigade::nn::fnv1a64("a", 1), 0xaf63dc4c8601ec8cull);  // the published FNV-1a 64 test vector
}

// A corruption that still parses: one digit of a metadata value changed in place (same length, so every
// offset stays valid and the data checksum still matches). Only the header checksum can see it.
TEST_F(SafetensorsTest, CorruptHeaderIsRefusedByTheHeaderChecksum) {
  save_safetensors(file("h.safetensors"), {{"w", brigade::ones({3})}}, {{"step", "1000"}});
  std::string bytes = read_file_bytes(file("h.safetensors"));
  RawFile raw = parse_raw(bytes);
  EXPECT_EQ(raw.header.at("__metadata__").at("brigade.header_checksum").get<std::string>().size(), 16u);
  const size_t at = bytes.find("\"1000\"");
  ASSERT_NE(at, std::string::npos);
  bytes[at + 4] = '1';  // "1000" -> "1010"
  write_file_bytes(file("h.safetensors"), bytes);
  std::string message = message_of<brigade::IOError>([&] { load_safetensors(file("h.safetensors")); });
  EXPECT_NE(message.find("header checksum"), std::string::npos) << message;
  EXPECT_NE(message.find("corrupt"), std::string::npos) << message;
}

// The header checksum is over the canonical text (keys sorted, compact), so a tool that rewrites the header
// in another key order or with spaces keeps the file loadable; a file without the key is not checked.
TEST_F(SafetensorsTest, HeaderChecksumIsOverTheCanonicalHeader) {
  save_safetensors(file("k.safetensors"), {{"b", brigade::ones({2})}, {"a", brigade::zeros({1})}},
                   {{"x", "y"}});
  const std::string bytes = read_file_bytes(file("k.safetensors"));
  RawFile raw = parse_raw(bytes);
  auto rewrite = [&](const std::string& header_text) {
    std::string text = header_text;
    text.append((8 - text.size() % 8) % 8, ' ');
    uint64_t length = text.size();
    std::string out(reinterpret_cast<const char*>(&length), 8);
    return out + text + raw.data;
  };
  nlohmann::json sorted = nlohmann::json::parse(raw.header.dump());  // sorted keys
  write_file_bytes(file("pretty.safetensors"), rewrite(sorted.dump(2)));
  auto loaded = load_safetensors(file("pretty.safetensors"));
  EXPECT_EQ(loaded.metadata.at("x"), "y");
  sorted["__metadata__"].erase("brigade.header_checksum");
  sorted["__metadata__"]["x"] = "z";
  write_file_bytes(file("old.safetensors"), rewrite(sorted.dump()));
  EXPECT_EQ(load_safetensors(file("old.safetensors")).metadata.at("x"), "z");
}
