// Sharded checkpoints (nn/checkpoint_shards.h): a sharded save loads bit-exactly like a single file, the
// index follows the sharded-safetensors convention, the index is the commit point (a killed save leaves
// the previous checkpoint loadable, the next save removes the debris), every damaged index or shard is
// refused with a CheckpointFileError naming the file and the problem, and temporary files of writers
// killed with SIGKILL are removed on the next save or load.
#include "nn/checkpoint_shards.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <set>

#include "nn/atomic_file.h"
#include "nn/checkpoint.h"
#include "nn/checkpoint_fixture.h"
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

class CheckpointShardsTest : public brigade::testing::TempDirTest {
 protected:
  std::set<std::string> files() const {
    std::set<std::string> names;
    for (const auto& entry : fs::directory_iterator(dir_)) names.insert(entry.path().filename().string());
    return names;
  }
  // Two stages: embed and blocks.0 on stage 0, blocks.1 and head on stage 1.
  const std::vector<int> two_stages_ = {0, 0, 1, 1};
};

void expect_same_checkpoint(const Checkpoint& a, const Checkpoint& b) {
  EXPECT_EQ(a.config, b.config);
  EXPECT_EQ(a.info.step, b.info.step);
  EXPECT_EQ(a.info.generator, b.info.generator);
  EXPECT_EQ(a.info.train_args, b.info.train_args);
  EXPECT_EQ(a.optimizer.step, b.optimizer.step);
  ASSERT_EQ(a.model.size(), b.model.size());
  for (const auto& [name, tensor] : a.model) EXPECT_TRUE(bit_equal(b.model.at(name), tensor)) << name;
  ASSERT_EQ(a.optimizer.tensors.size(), b.optimizer.tensors.size());
  for (const auto& [name, tensor] : a.optimizer.tensors) {
    EXPECT_TRUE(bit_equal(b.optimizer.tensors.at(name), tensor)) << name;
  }
}

TEST_F(CheckpointShardsTest, ShardedSaveLoadsExactlyLikeASingleFile) {
  Trained t;
  save_checkpoint(file("one.safetensors"), *t.model, t.optimizer.get(), t.info());
  save_checkpoint(file("run.safetensors.index.json"), *t.model, t.optimizer.get(), t.info(), two_stages_);
  EXPECT_EQ(files(), (std::set<std::string>{"one.safetensors", "run.safetensors.index.json",
                                            "run-step2-00001-of-00002.safetensors",
                                            "run-step2-00002-of-00002.safetensors"}));
  const Checkpoint single = load_checkpoint(file("one.safetensors"));
  const Checkpoint sharded = load_checkpoint(file("run.safetensors.index.json"));
  expect_same_checkpoint(single, sharded);
  EXPECT_EQ(sharded.metadata.at(kStagesKey), "1");  // the partition of this run (unpipelined) says 1
  EXPECT_EQ(sharded.metadata.at(kPartitionVersionKey), "1");

  // The index is a sharded-safetensors index: every tensor in weight_map, total_size the tensor bytes.
  const nlohmann::json index = nlohmann::json::parse(read_file_bytes(file("run.safetensors.index.json")));
  const nlohmann::json& map = index.at("weight_map");
  EXPECT_EQ(map.size(), single.model.size() + single.optimizer.tensors.size());
  // The tied embedding (also the head's weight) belongs to stage 0, the lowest stage that uses it.
  EXPECT_EQ(map.at("model.embed.wte.weight"), "run-step2-00001-of-00002.safetensors");
  EXPECT_EQ(map.at("optim.embed.wte.weight.exp_avg"), "run-step2-00001-of-00002.safetensors");
  EXPECT_EQ(map.at("model.head.ln_f.weight"), "run-step2-00002-of-00002.safetensors");
  int64_t bytes = 0;
  for (const auto& [name, tensor] : single.model) bytes += tensor.nbytes();
  for (const auto& [name, tensor] : single.optimizer.tensors) bytes += tensor.nbytes();
  EXPECT_EQ(index.at("metadata").at("total_size").get<int64_t>(), bytes);
  for (const char* key : {"brigade.format_version", "brigade.partition_version", "brigade.stages",
                          "brigade.schedule", "brigade.step", "brigade.config", "brigade.optimizer"}) {
    EXPECT_TRUE(index.at("metadata").contains(key)) << key;
  }
  // Each shard is a plain safetensors file.
  const SafetensorsFile shard = load_safetensors(file("run-step2-00002-of-00002.safetensors"));
  EXPECT_EQ(shard.metadata.at("brigade.kind"), "checkpoint-shard");
  EXPECT_TRUE(shard.contains("model.blocks.1.attn.qkv.weight"));
  EXPECT_FALSE(shard.contains("model.embed.wte.weight"));
}

// One process per stage: each writes its own shard, one commits the index from the records on disk.
TEST_F(CheckpointShardsTest, ShardsWrittenOneByOneAndCommittedFromDiskLoad) {
  Trained t;
  const std::string index = file("ranks.safetensors.index.json");
  const auto owners = parameter_shards(*t.model, two_stages_);
  const auto tensors = checkpoint_tensors(*t.model, t.optimizer.get());
  for (int stage = 1; stage >= 0; --stage) {  // any order
    save_checkpoint_shard(index, 2, stage, 2, shard_tensors(tensors, owners, stage));
  }
  EXPECT_FALSE(fs::exists(index)) << "nothing is committed before the index";
  std::vector<ShardRecord> records;
  for (int stage = 0; stage < 2; ++stage) records.push_back(read_shard_record(index, 2, stage, 2));
  commit_checkpoint_index(index, records, checkpoint_metadata(*t.model, t.optimizer.get(), t.info()));
  save_checkpoint(file("one.safetensors"), *t.model, t.optimizer.get(), t.info());
  expect_same_checkpoint(load_checkpoint(file("one.safetensors")), load_checkpoint(index));

  // A record read back for the wrong shard is refused, naming the file.
  fs::rename(file("ranks-step2-00002-of-00002.safetensors"), file("ranks-step2-00001-of-00002.safetensors"));
  const std::string message = message_of<CheckpointFileError>([&] { read_shard_record(index, 2, 0, 2); });
  EXPECT_NE(message.find("is not shard 0 of 2"), std::string::npos) << message;
}

// The index is the commit point: a save killed after its shards leaves the previous checkpoint loadable,
// and the next committed save removes the orphaned shards and the older save's.
TEST_F(CheckpointShardsTest, KilledSaveKeepsThePreviousCheckpointAndTheNextSaveCleansUp) {
  Trained t;
  const std::string index = file("run.safetensors.index.json");
  save_checkpoint(index, *t.model, t.optimizer.get(), t.info(), two_stages_);
  // A save at step 3 that wrote its shards, or one of them, and died before the index.
  const auto tensors = checkpoint_tensors(*t.model, t.optimizer.get());
  const auto owners = parameter_shards(*t.model, two_stages_);
  save_checkpoint_shard(index, 3, 0, 2, shard_tensors(tensors, owners, 0));
  EXPECT_EQ(load_checkpoint(index).info.step, 2);

  CheckpointInfo later = t.info();
  later.step = 4;
  save_checkpoint(index, *t.model, t.optimizer.get(), later, two_stages_);
  EXPECT_EQ(files(),
            (std::set<std::string>{"run.safetensors.index.json", "run-step4-00001-of-00002.safetensors",
                                   "run-step4-00002-of-00002.safetensors"}));
  EXPECT_EQ(load_checkpoint(index).info.step, 4);
}

// ---- refusals -------------------------------------------------------------------------------------------

class DamagedShardsTest : public CheckpointShardsTest {
 protected:
  void SetUp() override {
    CheckpointShardsTest::SetUp();  // makes the scratch directory that file() names
    index_ = file("run.safetensors.index.json");
    shard0_ = file("run-step2-00001-of-00002.safetensors");
    shard1_ = file("run-step2-00002-of-00002.safetensors");
    Trained t;
    save_checkpoint(index_, *t.model, t.optimizer.get(), t.info(), two_stages_);
  }
  // The CheckpointFileError of loading after `damage`; checks that it names `culprit`.
  std::string refusal(const std::string& culprit) {
    std::string file_at_fault, message;
    try {
      load_checkpoint(index_);
      ADD_FAILURE() << "the damaged checkpoint loaded";
    } catch (const CheckpointFileError& e) {
      file_at_fault = e.file();
      message = e.what();
    }
    EXPECT_EQ(file_at_fault, culprit) << message;
    EXPECT_NE(message.find(culprit), std::string::npos) << message;
    return message;
  }
  void edit(const std::string& path, const std::function<void(std::string&)>& change) {
    std::string bytes = read_file_bytes(path);
    change(bytes);
    write_file_bytes(path, bytes);
  }
  std::string index_, shard0_, shard1_;
};

TEST_F(DamagedShardsTest, TruncatedIndexIsNotValidJson) {
  edit(index_, [](std::string& b) { b.resize(b.size() / 2); });
  EXPECT_NE(refusal(index_).find("not valid JSON (truncated"), std::string::npos);
}

TEST_F(DamagedShardsTest, ChangedDigitInTheIndexFailsItsChecksum) {
  edit(index_, [](std::string& b) {
    const size_t at = b.find("\"brigade.step\": \"2\"");
    ASSERT_NE(at, std::string::npos);
    b[at + 17] = '7';
  });
  EXPECT_NE(refusal(index_).find("index checksum"), std::string::npos);
}

TEST_F(DamagedShardsTest, IndexWithoutWeightMapIsNotAnIndex) {
  write_file_bytes(index_, R"({"metadata": {}})");
  EXPECT_NE(refusal(index_).find("not a sharded-safetensors index"), std::string::npos);
}

TEST_F(DamagedShardsTest, NewerPartitionVersionIsRefused) {
  edit(index_, [](std::string& b) {
    nlohmann::json j = nlohmann::json::parse(b);
    j["metadata"].erase("brigade.index_checksum");  // an index another tool rewrote carries none
    j["metadata"]["brigade.partition_version"] = "2";
    b = j.dump();
  });
  const std::string message = refusal(index_);
  EXPECT_NE(message.find("newer"), std::string::npos) << message;
  EXPECT_NE(message.find("brigade.partition_version 2"), std::string::npos) << message;
}

TEST_F(DamagedShardsTest, MissingShardIsNamed) {
  fs::remove(shard1_);
  EXPECT_NE(refusal(shard1_).find("missing"), std::string::npos);
}

TEST_F(DamagedShardsTest, TruncatedShardIsNamed) {
  edit(shard0_, [](std::string& b) { b.resize(b.size() - 10); });
  EXPECT_NE(refusal(shard0_).find("is truncated"), std::string::npos);
}

TEST_F(DamagedShardsTest, FlippedBitInAShardFailsItsChecksum) {
  edit(shard1_, [](std::string& b) { b[b.size() - 3] ^= 0x04; });
  const std::string message = refusal(shard1_);
  EXPECT_NE(message.find("checksum"), std::string::npos) << message;
  EXPECT_NE(message.find("corrupt"), std::string::npos) << message;
}

TEST_F(DamagedShardsTest, ShardOfAnotherSaveIsRefused) {
  // A whole, valid shard of the same name and size, but other values: not the one the index committed.
  Trained other;
  {
    NoGradGuard no_grad;
    other.model->state_dict().at("head.ln_f.weight").fill_(0.25);
  }
  fs::create_directory(file("elsewhere"));
  const auto tensors = checkpoint_tensors(*other.model, other.optimizer.get());
  save_checkpoint_shard(file("elsewhere/run.safetensors.index.json"), 2, 1, 2,
                        shard_tensors(tensors, parameter_shards(*other.model, two_stages_), 1));
  fs::copy_file(file("elsewhere/run-step2-00002-of-00002.safetensors"), shard1_,
                fs::copy_options::overwrite_existing);
  EXPECT_NE(refusal(shard1_).find("written by another save"), std::string::npos);
}

TEST_F(DamagedShardsTest, WeightMapMustAgreeWithTheShards) {
  edit(index_, [](std::string& b) {
    nlohmann::json j = nlohmann::json::parse(b);
    j["metadata"].erase("brigade.index_checksum");
    j["weight_map"]["model.head.ln_f.weight"] = "run-step2-00001-of-00002.safetensors";
    b = j.dump();
  });
  EXPECT_NE(refusal(shard0_).find("lacks tensor 'model.head.ln_f.weight'"), std::string::npos);
  edit(index_, [](std::string& b) {
    nlohmann::json j = nlohmann::json::parse(b);
    j["weight_map"]["model.head.ln_f.weight"] = "../outside.safetensors";
    b = j.dump();
  });
  EXPECT_NE(refusal(index_).find("not one of the index's shards"), std::string::npos);
}

// ---- temporary files of killed writers --------------------------------------------------------------------

// A child that starts writing `path`'s temporary file and is killed with SIGKILL before the rename, as a
// save killed with kill -9 is; returns the temporary file it left.
std::string killed_writer_of(const std::string& path) {
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  const pid_t child = ::fork();
  if (child == 0) {
    char name[4096];
    std::snprintf(name, sizeof name, "%s.tmp.%s.%d", path.c_str(), host, static_cast<int>(::getpid()));
    const int fd = ::open(name, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0 && ::write(fd, "partial", 7) == 7) ::raise(SIGKILL);
    ::_exit(1);
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "the writer was not killed";
  return path + ".tmp." + host + "." + std::to_string(child);
}

TEST_F(CheckpointShardsTest, TempFilesOfKilledWritersAreRemovedOnTheNextSaveOrLoad) {
  Trained t;
  const std::string single = file("run.safetensors");
  save_checkpoint(single, *t.model, t.optimizer.get(), t.info());
  const std::string left = killed_writer_of(single);
  ASSERT_TRUE(fs::exists(left));
  const std::string live = temp_path_for(single);  // this process: alive, so it stays
  write_file_bytes(live, "in progress");
  (void)load_checkpoint(single);
  EXPECT_FALSE(fs::exists(left)) << "the load removes the killed writer's temporary file";
  EXPECT_TRUE(fs::exists(live)) << "a live writer's temporary file stays";
  fs::remove(live);

  const std::string again = killed_writer_of(single);
  save_checkpoint(single, *t.model, t.optimizer.get(), t.info());
  EXPECT_FALSE(fs::exists(again)) << "the save removes it too";

  // Sharded: a shard's temporary file and the index's.
  const std::string index = file("s.safetensors.index.json");
  save_checkpoint(index, *t.model, t.optimizer.get(), t.info(), two_stages_);
  const std::string shard_left = killed_writer_of(file("s-step3-00001-of-00002.safetensors"));
  const std::string index_left = killed_writer_of(index);
  save_checkpoint(index, *t.model, t.optimizer.get(), t.info(), two_stages_);
  EXPECT_FALSE(fs::exists(shard_left));
  EXPECT_FALSE(fs::exists(index_left));
  EXPECT_EQ(files(), (std::set<std::string>{"run.safetensors", "s.safetensors.index.json",
                                            "s-step2-00001-of-00002.safetensors",
                                            "s-step2-00002-of-00002.safetensors"}));
  // Another host's temporary file (a shared file system: it may still be writing) stays.
  const std::string foreign = index + ".tmp.some-other-host.1";
  write_file_bytes(foreign, "x");
  (void)load_checkpoint(index);
  EXPECT_TRUE(fs::exists(foreign));
}

}  // namespace
