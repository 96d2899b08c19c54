// Checkpoints (nn/checkpoint.h): bit-exact round trip of the model and the AdamW state, the metadata a
// resumed run needs, a plain-safetensors layout seen through an independent reader, every refusal of a
// damaged file through the checkpoint API, and loading a CPU checkpoint onto a GPU.
#include "nn/checkpoint.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "nn/checkpoint_fixture.h"
#include "nn/data.h"
#include "nn/safetensors.h"
#include "tensor/grad_mode.h"
#include "test_support.h"

namespace {

using namespace brigade;
using namespace brigade::nn;
namespace fs = std::filesystem;
using brigade::testing::bit_equal;
using brigade::testing::message_of;
using brigade::testing::read_file_bytes;
using brigade::testing::Trained;
using brigade::testing::write_file_bytes;

class CheckpointTest : public brigade::testing::TempDirTest {};

TEST_F(CheckpointTest, RoundTripIsBitExactForModelOptimizerAndMetadata) {
  Trained t;
  save_checkpoint(file("a.safetensors"), *t.model, t.optimizer.get(), t.info());
  Checkpoint ck = load_checkpoint(file("a.safetensors"));

  EXPECT_EQ(ck.config, t.config);
  EXPECT_EQ(ck.info.tokenizer, t.tokenizer);
  EXPECT_EQ(ck.info.step, 2);
  EXPECT_EQ(ck.info.generator, t.generator.state());
  EXPECT_EQ(nlohmann::json::parse(ck.info.train_args), nlohmann::json::parse(R"({"lr":0.01,"steps":2})"));
  EXPECT_EQ(nlohmann::json::parse(ck.info.partition),
            nlohmann::json::parse(R"({"stages":1,"balance":[4]})"));  // embed, 2 blocks, head
  ASSERT_TRUE(ck.has_optimizer);
  EXPECT_EQ(ck.optimizer_type, "AdamW");
  EXPECT_EQ(ck.optimizer.step, 2);

  // The model, rebuilt from the file, has the very same bytes in every parameter.
  StateDict original = t.model->state_dict();
  ASSERT_EQ(ck.model.size(), original.size());
  std::unique_ptr<GPT> rebuilt = ck.build_model(Device::cpu());
  StateDict loaded = rebuilt->state_dict();
  for (auto& [name, tensor] : original) {
    ASSERT_TRUE(loaded.count(name)) << name;
    EXPECT_TRUE(bit_equal(loaded.at(name), tensor)) << name;
  }
  // The optimizer state restored into a fresh AdamW over the rebuilt model equals the original's.
  AdamW fresh(decay_groups(*rebuilt, 0.1), AdamWOptions{.lr = 1e-2});
  ck.restore_optimizer(fresh);
  OptimizerState a = t.optimizer->state(), b = fresh.state();
  EXPECT_EQ(b.step, a.step);
  ASSERT_EQ(a.tensors.size(), b.tensors.size());
  EXPECT_EQ(a.tensors.size(), 2 * original.size());  // exp_avg and exp_avg_sq per parameter
  for (auto& [name, tensor] : a.tensors) {
    ASSERT_TRUE(b.tensors.count(name)) << name;
    EXPECT_TRUE(bit_equal(b.tensors.at(name), tensor)) << name;
  }
  // Saving the rebuilt state again gives a byte-identical file (nothing is lost or reordered).
  save_checkpoint(file("b.safetensors"), *rebuilt, &fresh, t.info());
  EXPECT_EQ(read_file_bytes(file("a.safetensors")), read_file_bytes(file("b.safetensors")));
}

TEST_F(CheckpointTest, IndependentReaderSeesPlainSafetensorsWithBrigadeMetadata) {
  Trained t;
  save_checkpoint(file("c.safetensors"), *t.model, t.optimizer.get(), t.info());
  // Parse the file by hand: 8-byte little-endian length, JSON header, data section.
  const std::string bytes = read_file_bytes(file("c.safetensors"));
  ASSERT_GE(bytes.size(), 8u);
  uint64_t header_size = 0;
  for (int i = 7; i >= 0; --i) header_size = (header_size << 8) | static_cast<unsigned char>(bytes[i]);
  ASSERT_LE(8 + header_size, bytes.size());
  const nlohmann::json header = nlohmann::json::parse(bytes.substr(8, header_size));
  const std::string data = bytes.substr(8 + header_size);

  const nlohmann::json& meta = header.at("__metadata__");
  for (const char* key :
       {"brigade.format_version", "brigade.checksum", "brigade.config", "brigade.tokenizer", "brigade.step",
        "brigade.generator", "brigade.optimizer", "brigade.train_args", "brigade.partition"}) {
    ASSERT_TRUE(meta.contains(key)) << key;
    EXPECT_TRUE(meta.at(key).is_string()) << key << ": __metadata__ values must be strings";
  }
  EXPECT_EQ(nlohmann::json::parse(meta.at("brigade.config").get<std::string>()).at("n_embd"), 16);
  EXPECT_EQ(meta.at("brigade.step"), "2");

  // Every parameter under "model.<name>", every moment under "optim.<name>.exp_avg[_sq]", raw F32 bytes.
  for (auto& [name, tensor] : t.model->state_dict()) {
    for (const std::string& key :
         {"model." + name, "optim." + name + ".exp_avg", "optim." + name + ".exp_avg_sq"}) {
      ASSERT_TRUE(header.contains(key)) << key;
      EXPECT_EQ(header.at(key).at("dtype"), "F32") << key;
      std::vector<int64_t> shape = header.at(key).at("shape").get<std::vector<int64_t>>();
      EXPECT_EQ(Shape(shape.begin(), shape.end()), tensor.shape()) << key;
    }
    auto offsets = header.at("model." + name).at("data_offsets").get<std::vector<uint64_t>>();
    ASSERT_EQ(offsets[1] - offsets[0], static_cast<uint64_t>(tensor.numel()) * 4) << name;
    std::vector<float> expected = tensor.to_vector<float>();
    EXPECT_EQ(std::memcmp(data.data() + offsets[0], expected.data(), offsets[1] - offsets[0]), 0) << name;
  }
}

// Writes a valid checkpoint, then damages a copy with `damage`; load_checkpoint must refuse it with an
// IOError containing `expected` and the path.
class DamagedCheckpointTest : public CheckpointTest {
 protected:
  std::string damaged(const std::function<void(std::string&)>& damage) {
    Trained t;
    save_checkpoint(file("good.safetensors"), *t.model, t.optimizer.get(), t.info());
    std::string bytes = read_file_bytes(file("good.safetensors"));
    damage(bytes);
    write_file_bytes(file("bad.safetensors"), bytes);
    return message_of<IOError>([&] { load_checkpoint(file("bad.safetensors")); });
  }
};

TEST_F(DamagedCheckpointTest, TruncatedFileIsRefused) {
  std::string message = damaged([](std::string& b) { b.resize(b.size() - 100); });
  EXPECT_NE(message.find("truncated"), std::string::npos) << message;
  EXPECT_NE(message.find(file("bad.safetensors")), std::string::npos) << message;
}

TEST_F(DamagedCheckpointTest, FlippedDataBitFailsTheChecksum) {
  std::string message = damaged([](std::string& b) { b[b.size() - 7] ^= 0x10; });
  EXPECT_NE(message.find("checksum"), std::string::npos) << message;
}

TEST_F(DamagedCheckpointTest, WrongMagicIsNotASafetensorsFile) {
  std::string message =
      damaged([](std::string& b) { std::memcpy(b.data(), "PK\x03\x04\xff\xff\xff\xff", 8); });
  EXPECT_NE(message.find("not a safetensors file"), std::string::npos) << message;
}

TEST_F(DamagedCheckpointTest, NewerFormatVersionIsRefused) {
  std::string message = damaged([](std::string& b) {
    // Same length, so the header size stays right. The version is checked before the header checksum (a
    // newer file may define the checksums differently), so the refusal names the version.
    const size_t key = b.find("brigade.format_version");
    ASSERT_NE(key, std::string::npos);
    const size_t value = b.find("\"1\"", key);
    ASSERT_NE(value, std::string::npos);
    b[value + 1] = '9';
  });
  EXPECT_NE(message.find("newer"), std::string::npos) << message;
  EXPECT_NE(message.find("9"), std::string::npos) << message;
}

TEST_F(CheckpointTest, PlainSafetensorsWithoutBrigadeKeysIsNotACheckpoint) {
  save_safetensors(file("plain.safetensors"), {{"w", ones({2, 2})}});
  std::string message = message_of<IOError>([&] { load_checkpoint(file("plain.safetensors")); });
  EXPECT_NE(message.find("not a brigade checkpoint"), std::string::npos) << message;
  EXPECT_NE(message.find("brigade.config"), std::string::npos) << message;
}

TEST_F(CheckpointTest, MissingFileNamesThePath) {
  std::string message = message_of<IOError>([&] { load_checkpoint(file("nope.safetensors")); });
  EXPECT_NE(message.find(file("nope.safetensors")), std::string::npos) << message;
}

TEST_F(CheckpointTest, ModelOnlyCheckpointHasNoOptimizerState) {
  Trained t;
  save_checkpoint(file("m.safetensors"), *t.model, nullptr, t.info());
  Checkpoint ck = load_checkpoint(file("m.safetensors"));
  EXPECT_FALSE(ck.has_optimizer);
  EXPECT_TRUE(ck.optimizer.tensors.empty());
  std::string message = message_of<ValueError>([&] { ck.restore_optimizer(*t.optimizer); });
  EXPECT_NE(message.find("no optimizer state"), std::string::npos) << message;
  // The weights alone still load.
  std::unique_ptr<GPT> rebuilt = ck.build_model(Device::cpu());
  EXPECT_TRUE(
      bit_equal(rebuilt->state_dict().at("embed.wte.weight"), t.model->state_dict().at("embed.wte.weight")));
}

TEST_F(CheckpointTest, TokenizerMustMatchTheModel) {
  Trained t;
  CheckpointInfo info = t.info();
  info.tokenizer = CharTokenizer::from_text("xyz");
  std::string message =
      message_of<ValueError>([&] { save_checkpoint(file("x.safetensors"), *t.model, nullptr, info); });
  EXPECT_NE(message.find("vocab_size"), std::string::npos) << message;
  EXPECT_FALSE(fs::exists(file("x.safetensors")));
}

TEST_F(CheckpointTest, CpuCheckpointLoadsOntoCuda) {
  BRIGADE_REQUIRE_CUDA();
  Trained t;
  save_checkpoint(file("g.safetensors"), *t.model, t.optimizer.get(), t.info());
  Checkpoint ck = load_checkpoint(file("g.safetensors"));
  std::unique_ptr<GPT> gpu = ck.build_model(Device::cuda(0));
  for (auto& [name, tensor] : gpu->state_dict()) {
    EXPECT_TRUE(tensor.device().is_cuda()) << name;
    EXPECT_TRUE(bit_equal(tensor, t.model->state_dict().at(name))) << name;
  }
  AdamW optimizer(decay_groups(*gpu, 0.1), AdamWOptions{.lr = 1e-2});
  ck.restore_optimizer(optimizer);
  OptimizerState restored = optimizer.state();
  for (auto& [name, tensor] : t.optimizer->state().tensors) {
    EXPECT_TRUE(restored.tensors.at(name).device().is_cuda()) << name;
    EXPECT_TRUE(bit_equal(restored.tensors.at(name), tensor)) << name;
  }
}

}  // namespace
