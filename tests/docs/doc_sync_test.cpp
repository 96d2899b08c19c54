// Docs that stay true: the transcripts marked <!-- doc-sync --> in README.md and docs/*.md are re-run with
// the built `brigade` and must print what the page shows; every transcript carries a marker (re-run, or
// machine-dependent); every cited line range still holds the names cited with it; every picture in
// docs/img/ is what scripts/make_docs_images.sh draws from the code now. The conventions:
// tests/docs/doc_blocks.h and docs/README.md. Only quick commands are marked for re-running (the whole test
// takes about a second), so it runs with the unit tests.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "tests/docs/doc_blocks.h"

#ifndef BRIGADE_CLI_PATH
#error "BRIGADE_CLI_PATH must name the brigade executable (tests/CMakeLists.txt defines it)"
#endif

namespace fs = std::filesystem;
using brigade::docs::Marker;

namespace {

const fs::path kRoot = fs::path(BRIGADE_TEST_DATA_DIR).parent_path();  // tests/ -> the repository

/// README.md and every page under docs/, repository-relative, sorted.
std::vector<fs::path> pages() {
  std::vector<fs::path> found{"README.md"};
  for (const auto& entry : fs::recursive_directory_iterator(kRoot / "docs")) {
    if (entry.is_regular_file() && entry.path().extension() == ".md") {
      found.push_back(fs::relative(entry.path(), kRoot));
    }
  }
  std::sort(found.begin() + 1, found.end());
  return found;
}

/// A scratch directory with `bin/brigade` linked to the built binary, removed at the end.
class Scratch {
 public:
  Scratch() {
    dir_ = fs::temp_directory_path() /
           ("brigade_doc_sync_" + std::to_string(::getpid()) + "_" + std::to_string(counter_++));
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "bin");
    fs::create_symlink(fs::absolute(BRIGADE_CLI_PATH), dir_ / "bin" / "brigade");
    fs::create_directories(dir_ / "work");
  }
  ~Scratch() { fs::remove_all(dir_); }
  fs::path work() const { return dir_ / "work"; }
  fs::path bin() const { return dir_ / "bin"; }

 private:
  static inline int counter_ = 0;
  fs::path dir_;
};

/// `text` inside single quotes for sh.
std::string shell_quoted(const std::string& text) {
  std::string quoted = "'";
  for (char c : text) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

/// The command as a page writes it, run the way a reader would: `build/apps/brigade` and `brigade` are the
/// built binary. Returns stdout and stderr together, line by line.
std::vector<std::string> run(const Scratch& scratch, std::string command) {
  for (const std::string prefix : {"./build/apps/brigade", "build/apps/brigade"}) {
    if (command.rfind(prefix, 0) == 0) command = "brigade" + command.substr(prefix.size());
  }
  // timeout: a command that hangs fails its check instead of the whole test run.
  const std::string shell = "cd " + shell_quoted(scratch.work().string()) +
                            " && PATH=" + shell_quoted(scratch.bin().string()) +
                            ":\"$PATH\" timeout 20 sh -c " + shell_quoted(command) + " 2>&1";
  std::vector<std::string> lines;
  FILE* pipe = ::popen(shell.c_str(), "r");
  if (pipe == nullptr) return {"(could not start the command)"};
  std::string text;
  char buffer[4096];
  for (size_t n; (n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0;) text.append(buffer, n);
  ::pclose(pipe);
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

/// `$ cat FILE` of a file the transcript has not made: the page shows the file; write it.
bool writes_given_file(const Scratch& scratch, const brigade::docs::Command& command) {
  if (command.text.rfind("cat ", 0) != 0) return false;
  const std::string name = brigade::docs::rstrip(command.text.substr(4));
  if (name.find_first_of(" /'\"$") != std::string::npos || fs::exists(scratch.work() / name)) return false;
  std::ofstream out(scratch.work() / name);
  for (const std::string& line : command.expected) out << line << "\n";
  return true;
}

TEST(DocSync, MatcherTakesEllipsesAndRejectsChangedLines) {
  std::string why;
  EXPECT_TRUE(brigade::docs::output_matches({"a", "...", "d"}, {"a", "b", "c", "d", ""}, &why));
  EXPECT_TRUE(brigade::docs::output_matches({"a", "...", "b"}, {"a", "b", "x", "b"}, &why));
  EXPECT_TRUE(brigade::docs::output_matches({"..."}, {}, &why));
  EXPECT_FALSE(brigade::docs::output_matches({"a", "b"}, {"a", "c"}, &why));
  EXPECT_NE(why.find("line 2"), std::string::npos) << why;
  EXPECT_FALSE(brigade::docs::output_matches({"a"}, {"a", "extra"}, &why));
  EXPECT_NE(why.find("extra"), std::string::npos) << why;
  EXPECT_FALSE(brigade::docs::output_matches({"a", "...", "z"}, {"a", "b"}, &why));
}

TEST(DocSync, ParserFindsTranscriptsMarkersAndRanges) {
  const std::vector<std::string> page = {
      "<!-- doc-sync -->",
      "```",
      "$ brigade x",
      "out",
      "$ cat f",
      "```",
      "",
      "<!-- doc-sync: machine-dependent (timings) -->",
      "",
      "```sh",
      "$ brigade train",
      "```",
      "```",
      "not a transcript",
      "```",
      "```",
      "$ unmarked",
      "```",
      "| [a/b.h:3-9](../a/b.h#L3-L9) `Foo`, `bar(` | [c.h:1-2](c.h#L1-L2) `x` | `test_name` |"};
  const auto ts = brigade::docs::transcripts(page);
  ASSERT_EQ(ts.size(), 3u);
  EXPECT_EQ(ts[0].marker, Marker::Sync);
  ASSERT_EQ(ts[0].commands.size(), 2u);
  EXPECT_EQ(ts[0].commands[0].text, "brigade x");
  EXPECT_EQ(ts[0].commands[0].expected, std::vector<std::string>{"out"});
  EXPECT_EQ(ts[1].marker, Marker::MachineDependent);
  EXPECT_EQ(ts[2].marker, Marker::None);
  EXPECT_EQ(ts[2].line, 16);
  const auto ranges = brigade::docs::cited_ranges(page);
  ASSERT_EQ(ranges.size(), 2u);
  EXPECT_EQ(ranges[0].text_path, "a/b.h");
  EXPECT_EQ(ranges[0].target, "../a/b.h");
  EXPECT_EQ(ranges[0].first, 3);
  EXPECT_EQ(ranges[0].last, 9);
  EXPECT_EQ(ranges[0].names, (std::vector<std::string>{"Foo", "bar("}));
  EXPECT_EQ(ranges[1].names, std::vector<std::string>{"x"});  // the next cell is not the range's
}

TEST(DocSync, EveryTranscriptIsMarked) {
  for (const fs::path& page : pages()) {
    for (const auto& t : brigade::docs::transcripts(brigade::docs::read_lines(kRoot / page))) {
      EXPECT_TRUE(t.marker != Marker::None)
          << page.string() << ":" << t.line << ": a transcript (`$ " << t.commands[0].text
          << "`) without a marker: put <!-- doc-sync --> before it if its output is deterministic and quick, "
             "else <!-- doc-sync: machine-dependent --> (see docs/README.md)";
      EXPECT_TRUE(t.marker != Marker::Unknown)
          << page.string() << ":" << t.line << ": unknown marker " << t.marker_text
          << " (expected <!-- doc-sync --> or <!-- doc-sync: machine-dependent -->)";
    }
  }
}

TEST(DocSync, MarkedTranscriptsPrintWhatThePageShows) {
  int checked = 0;
  for (const fs::path& page : pages()) {
    for (const auto& t : brigade::docs::transcripts(brigade::docs::read_lines(kRoot / page))) {
      if (t.marker != Marker::Sync) continue;
      Scratch scratch;
      for (const auto& command : t.commands) {
        if (writes_given_file(scratch, command)) continue;
        std::string why;
        EXPECT_TRUE(brigade::docs::output_matches(command.expected, run(scratch, command.text), &why))
            << page.string() << ":" << command.line << ": $ " << command.text << "\n"
            << why;
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 0) << "no <!-- doc-sync --> transcript found under " << kRoot.string();
}

TEST(DocSync, PicturesAreWhatTheScriptDrawsNow) {
  Scratch scratch;
  const fs::path drawn = scratch.work() / "img";
  const std::string command = "BRIGADE_BUILD_DIR=" + shell_quoted(BRIGADE_BUILD_DIR) + " bash " +
                              shell_quoted((kRoot / "scripts" / "make_docs_images.sh").string()) +
                              " --no-build --out " + shell_quoted(drawn.string()) + " >/dev/null 2>&1";
  ASSERT_EQ(std::system(command.c_str()), 0) << "failed: " << command;
  int compared = 0;
  for (const auto& entry : fs::directory_iterator(drawn)) {
    const fs::path committed = kRoot / "docs" / "img" / entry.path().filename();
    std::ifstream a(entry.path(), std::ios::binary), b(committed, std::ios::binary);
    const std::string now((std::istreambuf_iterator<char>(a)), std::istreambuf_iterator<char>());
    const std::string was((std::istreambuf_iterator<char>(b)), std::istreambuf_iterator<char>());
    EXPECT_TRUE(now == was) << "docs/img/" << entry.path().filename().string()
                            << (fs::exists(committed) ? " differs from" : " is missing, but is drawn by")
                            << " what scripts/make_docs_images.sh draws now: run it and commit docs/img/";
    ++compared;
  }
  EXPECT_GT(compared, 10);
  // The other way round: a picture the script does not draw would be hand-made (the measured training
  // timeline is drawn only with --with-training).
  for (const auto& entry : fs::directory_iterator(kRoot / "docs" / "img")) {
    const std::string name = entry.path().filename().string();
    EXPECT_TRUE(fs::exists(drawn / name) || name == "train_default_timeline.svg")
        << "docs/img/" << name << " is not drawn by scripts/make_docs_images.sh";
  }
}

TEST(DocSync, LinksPointAtFilesAndHeadingsThatExist) {
  EXPECT_EQ(brigade::docs::heading_anchor("5. From the CLI: `brigade train --stages …`"),
            "5-from-the-cli-brigade-train---stages-");
  int checked = 0;
  for (const fs::path& page : pages()) {
    const std::vector<std::string> lines = brigade::docs::read_lines(kRoot / page);
    for (const auto& link : brigade::docs::relative_links(lines)) {
      const std::string where = page.string() + ":" + std::to_string(link.line) + ": (" + link.path +
                                (link.anchor.empty() ? "" : "#" + link.anchor) + ")";
      const fs::path target = link.path.empty() ? kRoot / page : kRoot / page.parent_path() / link.path;
      EXPECT_TRUE(fs::exists(target)) << where << ": no such file";
      ++checked;
      if (link.anchor.empty() || target.extension() != ".md" || !fs::exists(target)) continue;
      const auto anchors = brigade::docs::heading_anchors(brigade::docs::read_lines(target));
      EXPECT_TRUE(anchors.count(link.anchor) != 0) << where << ": no heading with that anchor in " << target;
    }
  }
  EXPECT_GT(checked, 20);
}

TEST(DocSync, CitedLineRangesHoldWhatTheyName) {
  for (const fs::path& page : pages()) {
    for (const auto& r : brigade::docs::cited_ranges(brigade::docs::read_lines(kRoot / page))) {
      const std::string where = page.string() + ":" + std::to_string(r.line) + ": " + r.text_path + ":" +
                                std::to_string(r.first) + "-" + std::to_string(r.last);
      const fs::path target = (kRoot / page.parent_path() / r.target).lexically_normal();
      EXPECT_EQ(target, (kRoot / r.text_path).lexically_normal())
          << where << ": the link points at " << r.target;
      EXPECT_TRUE(r.first == r.target_first && r.last == r.target_last)
          << where << ": the link's fragment says #L" << r.target_first << "-L" << r.target_last;
      const std::vector<std::string> lines = brigade::docs::read_lines(kRoot / r.text_path);
      ASSERT_FALSE(lines.empty()) << where << ": no such file";
      ASSERT_TRUE(1 <= r.first && r.first <= r.last && r.last <= static_cast<int>(lines.size()))
          << where << ": the file has " << lines.size() << " lines";
      EXPECT_FALSE(r.names.empty()) << where << ": name what the lines hold, in backticks after the link";
      std::string held;
      for (int k = r.first; k <= r.last; ++k) held += lines[static_cast<size_t>(k - 1)] + "\n";
      for (const std::string& name : r.names) {
        EXPECT_NE(held.find(name), std::string::npos) << where << ": `" << name << "` is not in those lines";
      }
    }
  }
}

}  // namespace
