// Replays every kept fuzz input through its target (fuzz/fuzz_targets.h): the seeds of fuzz/corpus/<target>/
// and the inputs that once crashed a reader, kept in fuzz/regressions/<target>/ after the fix. Each must be
// read or refused with a typed brigade::Error; another exception fails the test, and a crash or a sanitizer
// report (in the asan build) fails the run. scripts/fuzz.sh does the fuzzing itself.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "fuzz/fuzz_targets.h"

namespace {

namespace fs = std::filesystem;

std::vector<fs::path> inputs_in(const fs::path& dir) {
  std::vector<fs::path> files;
  if (!fs::is_directory(dir)) return files;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.is_regular_file()) files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

std::string bytes_of(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

TEST(FuzzCorpus, EveryKeptInputIsReadOrRefusedWithATypedError) {
  const fs::path root = BRIGADE_FUZZ_SOURCE_DIR;
  for (const auto& target : brigade::fuzz::all_targets()) {
    const std::vector<fs::path> seeds = inputs_in(root / "corpus" / target.name);
    EXPECT_FALSE(seeds.empty()) << "fuzz/corpus/" << target.name << " holds no seed";
    std::vector<fs::path> all = seeds;
    for (const fs::path& p : inputs_in(root / "regressions" / target.name)) all.push_back(p);
    for (const fs::path& path : all) {
      const std::string bytes = bytes_of(path);
      EXPECT_NO_THROW(target.run(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()))
          << target.name << ": " << path;
    }
  }
}

}  // namespace
