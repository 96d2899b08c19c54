// Tokenizer, text files, splits, batches and the addition corpus with its exact-match scorer.
#include "nn/data.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "nn/corpus.h"
#include "nn/tokenizer.h"
#include "test_support.h"

using brigade::nn::AdditionTask;
using brigade::nn::AdditionTaskOptions;
using brigade::nn::CharTokenizer;
using brigade::testing::message_of;

namespace {

// The first three lines of the default corpus (digits 3, seed 20240601).
const std::string kDefaultCorpusPrefix = "430+586=6101\n439+204=3460\n410+569=9790\n";

#define EXPECT_CONTAINS(text, part) EXPECT_NE((text).find(part), std::string::npos) << (text)

// A scratch directory per test (test_support.h): file("x") is a path in it.
class ReadTextFile : public brigade::testing::TempDirTest {
 protected:
  std::string temp_file(const std::string& name, const std::string& bytes) const {
    brigade::testing::write_file_bytes(file(name), bytes);
    return file(name);
  }
};

}  // namespace

// ---- tokenizer
// ---------------------------------------------------------------------------------------------

TEST(CharTokenizer, VocabularyIsTheSortedCodePointsAndRoundTripsMultiByteUtf8) {
  // 1-, 2-, 3- and 4-byte characters: 'a', 'ö' (U+00F6), '€' (U+20AC), '😀' (U+1F600).
  const std::string text = "a\xc3\xb6\xe2\x82\xac\xf0\x9f\x98\x80 ba\xc3\xb6";
  auto tok = CharTokenizer::from_text(text);
  EXPECT_EQ(tok.vocabulary(), (std::u32string{U' ', U'a', U'b', 0xF6, 0x20AC, 0x1F600}));
  EXPECT_EQ(tok.vocab_size(), 6);
  std::vector<int64_t> ids = tok.encode(text);
  EXPECT_EQ(ids, (std::vector<int64_t>{1, 3, 4, 5, 0, 2, 1, 3}));
  EXPECT_EQ(tok.decode(ids), text);
  EXPECT_EQ(tok.decode(5), "\xf0\x9f\x98\x80");
  EXPECT_EQ(tok.id_of(U'z'), -1);
}

TEST(CharTokenizer, JsonRoundTripKeepsControlCharactersAndIds) {
  auto tok = CharTokenizer::from_text("line one\n\ttab \"quoted\" \\ \xe2\x82\xac\r\n");
  std::string json = tok.to_json();
  EXPECT_EQ(json.rfind("{\"type\":\"char\",\"vocab\":", 0), 0u) << json;
  auto back = CharTokenizer::from_json(json);
  EXPECT_EQ(back, tok);
  EXPECT_EQ(back.encode("one\n"), tok.encode("one\n"));
  EXPECT_EQ(CharTokenizer::from_json(R"({"type":"char","vocab":"\n+0123456789="})").vocab_size(), 13);

  EXPECT_THROW(CharTokenizer::from_json("not json"), brigade::ValueError);
  EXPECT_THROW(CharTokenizer::from_json(R"({"type":"bpe","vocab":"ab"})"), brigade::ValueError);
  std::string message =
      message_of<brigade::ValueError>([] { CharTokenizer::from_json(R"({"type":"char","vocab":"ba"})"); });
  EXPECT_CONTAINS(message, "sorted");
}

TEST(CharTokenizer, UnknownCharacterAndBadInputNameWhatAndWhere) {
  auto tok = CharTokenizer::from_text("abc");
  // 'é' is code point 2 of the text, at byte 2.
  std::string message = message_of<brigade::ValueError>([&] {
    tok.encode(
        "ab\xc3\xa9"
        "c");
  });
  EXPECT_CONTAINS(message, "'\xc3\xa9' (U+00E9)");
  EXPECT_CONTAINS(message, "position 2");
  // After a multi-byte character, the code point position and byte offset differ.
  auto wide = CharTokenizer::from_text(
      "\xe2\x82\xac"
      "a");
  message = message_of<brigade::ValueError>([&] {
    wide.encode(
        "\xe2\x82\xac"
        "a\n");
  });
  EXPECT_CONTAINS(message, "U+000A at position 2 (byte 4)");

  message = message_of<brigade::ValueError>([&] { tok.encode("a\xff"); });
  EXPECT_CONTAINS(message, "invalid UTF-8 at byte 1");
  message = message_of<brigade::ValueError>([&] { tok.decode(std::vector<int64_t>{0, 3}); });
  EXPECT_CONTAINS(message, "id 3 at position 1");
}

TEST(Utf8, RejectsOverlongSurrogateTruncatedAndOutOfRangeSequences) {
  std::u32string out;
  size_t bad = 99;
  EXPECT_TRUE(brigade::nn::utf8_decode("\xed\x9f\xbf\xf4\x8f\xbf\xbf", &out, &bad));  // U+D7FF, U+10FFFF
  EXPECT_EQ(out, (std::u32string{0xD7FF, 0x10FFFF}));
  const std::pair<std::string, size_t> invalid[] = {
      {"\xc0\xaf", 0},          // overlong '/'
      {"ab\xe0\x80\xaf", 2},    // overlong 3-byte
      {"\xed\xa0\x80", 0},      // surrogate U+D800
      {"\xf4\x90\x80\x80", 0},  // U+110000
      {"x\xe2\x82", 1},         // truncated
      {"\x80", 0},              // lone continuation byte
      {"\xc3"
       "a",
       0},  // lead byte without continuation
  };
  for (const auto& [bytes, offset] : invalid) {
    EXPECT_FALSE(brigade::nn::utf8_decode(bytes, &out, &bad)) << bytes;
    EXPECT_EQ(bad, offset) << bytes;
  }
}

// ---- text files
// ---------------------------------------------------------------------------------------------

TEST_F(ReadTextFile, ReadsUtf8AndRefusesMissingEmptyAndInvalidFilesNamingThePath) {
  EXPECT_EQ(brigade::nn::read_text_file(temp_file("ok.txt", "hi \xc3\xb6\n")), "hi \xc3\xb6\n");

  std::string missing = file("no_such_file.txt");
  std::string message = message_of<brigade::IOError>([&] { brigade::nn::read_text_file(missing); });
  EXPECT_CONTAINS(message, missing);
  EXPECT_CONTAINS(message, "No such file");

  std::string empty = temp_file("empty.txt", "");
  message = message_of<brigade::IOError>([&] { brigade::nn::read_text_file(empty); });
  EXPECT_CONTAINS(message, empty);
  EXPECT_CONTAINS(message, "is empty");

  std::string latin1 = temp_file("latin1.txt", "caf\xe9 au lait");
  message = message_of<brigade::IOError>([&] { brigade::nn::read_text_file(latin1); });
  EXPECT_CONTAINS(message, latin1);
  EXPECT_CONTAINS(message, "not valid UTF-8 (first bad byte 0xe9 at offset 3)");

  message = message_of<brigade::IOError>([&] { brigade::nn::read_text_file(dir_.string()); });
  EXPECT_CONTAINS(message, "directory");
}

// ---- split and batches
// -------------------------------------------------------------------------------------

TEST(SplitTokens, PrefixSplitSizes) {
  std::vector<int64_t> tokens(1000);
  for (int64_t i = 0; i < 1000; ++i) tokens[i] = i;
  auto split = brigade::nn::split_tokens(tokens, 0.9);
  EXPECT_EQ(split.train.size(), 900u);
  EXPECT_EQ(split.val.size(), 100u);
  EXPECT_EQ(split.train.back(), 899);
  EXPECT_EQ(split.val.front(), 900);
  EXPECT_EQ(brigade::nn::split_tokens(tokens, 1.0).val.size(), 0u);
  // 650000 * 0.9 is not exactly 585000 in floating point; rounding keeps the corpus split line-aligned.
  EXPECT_EQ(brigade::nn::split_tokens(std::vector<int64_t>(650000), 0.9).train.size(), 585000u);
  EXPECT_THROW(brigade::nn::split_tokens(tokens, 0.0), brigade::ValueError);
  EXPECT_THROW(brigade::nn::split_tokens(tokens, 1.5), brigade::ValueError);
  EXPECT_THROW(brigade::nn::split_tokens({1, 2}, 0.9), brigade::ValueError);  // no validation tokens left
}

TEST(RandomBatch, YIsXShiftedAndBatchesAreReproducibleFromTheSeed) {
  std::vector<int64_t> tokens(500);
  for (int64_t i = 0; i < 500; ++i)
    tokens[i] = (i * 7919) % 1000;  // distinct values: a window is identifiable
  brigade::Generator a(1234), b(1234), c(99);
  auto first = brigade::nn::random_batch(tokens, 8, 16, a);
  auto second = brigade::nn::random_batch(tokens, 8, 16, a);
  EXPECT_EQ(first.x.shape(), (brigade::Shape{8, 16}));
  EXPECT_EQ(first.y.shape(), (brigade::Shape{8, 16}));
  EXPECT_EQ(first.x.dtype(), brigade::kInt64);
  EXPECT_EQ(a.state().offset, 2u) << "one generator draw per batch";

  // Same seed, same batches; another seed, other batches; the next batch differs from the first.
  EXPECT_EQ(brigade::nn::random_batch(tokens, 8, 16, b).x.to_vector<int64_t>(), first.x.to_vector<int64_t>());
  EXPECT_EQ(brigade::nn::random_batch(tokens, 8, 16, b).x.to_vector<int64_t>(),
            second.x.to_vector<int64_t>());
  EXPECT_NE(brigade::nn::random_batch(tokens, 8, 16, c).x.to_vector<int64_t>(), first.x.to_vector<int64_t>());
  EXPECT_NE(second.x.to_vector<int64_t>(), first.x.to_vector<int64_t>());
  // Restoring a saved state replays the draw (what --resume relies on).
  brigade::Generator d(1234);
  d.set_state({1234, 1});
  EXPECT_EQ(brigade::nn::random_batch(tokens, 8, 16, d).y.to_vector<int64_t>(),
            second.y.to_vector<int64_t>());

  // Each row is a real window and y is x shifted by one.
  auto x = first.x.to_vector<int64_t>(), y = first.y.to_vector<int64_t>();
  std::set<int64_t> starts;
  for (int64_t r = 0; r < 8; ++r) {
    auto at = std::find(tokens.begin(), tokens.end(), x[r * 16]);
    ASSERT_NE(at, tokens.end());
    const int64_t s = at - tokens.begin();
    ASSERT_LE(s + 17, 500);
    starts.insert(s);
    for (int64_t t = 0; t < 16; ++t) {
      EXPECT_EQ(x[r * 16 + t], tokens[s + t]);
      EXPECT_EQ(y[r * 16 + t], tokens[s + t + 1]);
    }
  }
  EXPECT_GT(starts.size(), 4u) << "starts should vary across rows";
}

TEST(RandomBatch, StartsCoverTheWholeRangeAndRespectExplicitStarts) {
  std::vector<int64_t> tokens(20);
  for (int64_t i = 0; i < 20; ++i) tokens[i] = i;
  brigade::Generator gen(5);
  std::set<int64_t> seen;
  for (int k = 0; k < 200; ++k) {
    auto x = brigade::nn::random_batch(tokens, 4, 6, gen).x.to_vector<int64_t>();
    for (int r = 0; r < 4; ++r) seen.insert(x[r * 6]);
  }
  EXPECT_EQ(seen, (std::set<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13}))
      << "every s with s+T < n";

  // Line-aligned starts: lines "ab\n" of 3 tokens, newline id 9.
  std::vector<int64_t> lines;
  for (int i = 0; i < 10; ++i) lines.insert(lines.end(), {1, 2, 9});
  auto starts = brigade::nn::line_starts(lines, 9, 3);
  EXPECT_EQ(starts, (std::vector<int64_t>{0, 3, 6, 9, 12, 15, 18, 21, 24}));  // 27 + 3 + 1 > 30
  for (int k = 0; k < 20; ++k) {
    auto x =
        brigade::nn::random_batch(lines, 4, 3, gen, brigade::Device::cpu(), starts).x.to_vector<int64_t>();
    for (int r = 0; r < 4; ++r)
      EXPECT_EQ((std::vector<int64_t>(x.begin() + r * 3, x.begin() + r * 3 + 3)),
                (std::vector<int64_t>{1, 2, 9}));
  }
  EXPECT_THROW(brigade::nn::random_batch(lines, 2, 3, gen, brigade::Device::cpu(), {28}),
               brigade::ValueError);
  std::string message =
      message_of<brigade::ValueError>([&] { brigade::nn::random_batch(tokens, 2, 20, gen); });
  EXPECT_CONTAINS(message, "20 tokens are too few for block size 20");
  EXPECT_THROW(brigade::nn::random_batch(tokens, 0, 4, gen), brigade::ValueError);
}

TEST(SequentialBatch, TilesTheTokensWithAShorterLastBatch) {
  std::vector<int64_t> tokens(23);
  for (int64_t i = 0; i < 23; ++i) tokens[i] = i;
  // (23 - 1) / 4 = 5 windows at 0, 4, 8, 12, 16; 2 per batch -> 3 batches, the last with one row.
  EXPECT_EQ(brigade::nn::sequential_batch_count(23, 2, 4), 3);
  auto b0 = brigade::nn::sequential_batch(tokens, 2, 4, 0);
  EXPECT_EQ(b0.x.to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(b0.y.to_vector<int64_t>(), (std::vector<int64_t>{1, 2, 3, 4, 5, 6, 7, 8}));
  auto b2 = brigade::nn::sequential_batch(tokens, 2, 4, 2);
  EXPECT_EQ(b2.x.shape(), (brigade::Shape{1, 4}));
  EXPECT_EQ(b2.y.to_vector<int64_t>(), (std::vector<int64_t>{17, 18, 19, 20}));
  EXPECT_EQ(brigade::nn::sequential_batch_count(4, 2, 4), 0);
  EXPECT_THROW(brigade::nn::sequential_batch(tokens, 2, 4, 3), brigade::ValueError);
}

// ---- the addition corpus ----------------------------------------------------------------------------------

TEST(AdditionTask, FormatIsFixedWidthWithReversedAnswers) {
  AdditionTask task(AdditionTaskOptions{.digits = 3, .train_problems = 100, .heldout_problems = 10});
  EXPECT_EQ(task.prompt({123, 45}), "123+045=");
  EXPECT_EQ(task.answer({123, 45}), "8610");  // 168 -> "0168" -> reversed
  EXPECT_EQ(task.line({999, 999}), "999+999=8991\n");
  EXPECT_EQ(task.line({0, 7}), "000+007=7000\n");
  EXPECT_EQ(task.line_length(), 13);
  EXPECT_EQ(task.completion_length(), 5);
  EXPECT_EQ(task.train_text().size(), 100u * 13u);
  EXPECT_EQ(CharTokenizer::from_text(task.train_text()).vocab_size(), 13) << "\\n + 0-9 =";
  // Every line of the text is its problem's line, and the arithmetic is right.
  for (size_t i = 0; i < task.train_problems().size(); ++i) {
    const auto& p = task.train_problems()[i];
    const std::string line = task.train_text().substr(i * 13, 13);
    EXPECT_EQ(line, task.line(p));
    std::string reversed(line.begin() + 8, line.begin() + 12);
    std::reverse(reversed.begin(), reversed.end());
    EXPECT_EQ(std::stoll(reversed), p.a + p.b) << line;
  }
}

TEST(AdditionTask, IsDeterministicAndSeedDependent) {
  AdditionTaskOptions options{.digits = 3, .train_problems = 2000, .heldout_problems = 200, .seed = 11};
  AdditionTask one(options), two(options);
  EXPECT_EQ(one.train_text(), two.train_text());
  EXPECT_EQ(one.heldout_problems(), two.heldout_problems());
  options.seed = 12;
  AdditionTask other(options);
  EXPECT_NE(one.train_text(), other.train_text());
  // Golden prefix: the corpus must not change silently across platforms, compilers or refactors
  // (checkpoints and recorded accuracies refer to it).
  AdditionTask default_task;
  EXPECT_EQ(default_task.train_text().size(), 50000u * 13u);
  EXPECT_EQ(default_task.train_text().substr(0, 39), kDefaultCorpusPrefix);
}

TEST(AdditionTask, HeldOutProblemsNeverAppearInTheTrainingTextInEitherOrder) {
  AdditionTask task(AdditionTaskOptions{.digits = 2, .train_problems = 20000, .heldout_problems = 500});
  std::set<std::pair<int64_t, int64_t>> heldout;
  for (const auto& p : task.heldout_problems()) heldout.insert({std::min(p.a, p.b), std::max(p.a, p.b)});
  EXPECT_EQ(heldout.size(), 500u) << "held-out problems are distinct";
  for (const auto& p : task.train_problems()) {
    EXPECT_FALSE(heldout.count({std::min(p.a, p.b), std::max(p.a, p.b)})) << p.a << "+" << p.b;
  }
  // And textually: no line of the training text starts with a held-out prompt.
  std::set<std::string> train_prompts;
  for (size_t at = 0; at < task.train_text().size(); at += static_cast<size_t>(task.line_length())) {
    train_prompts.insert(task.train_text().substr(at, static_cast<size_t>(task.prompt_length())));
  }
  // 20000 draws from the ~9000 allowed ordered pairs (10^4 minus held-out pairs in both orders) cover most.
  EXPECT_GT(train_prompts.size(), 7500u);
  size_t excluded = 0;  // ordered problems kept out: both orders of each held-out pair
  for (const auto& p : task.heldout_problems()) excluded += p.a == p.b ? 1 : 2;
  EXPECT_LE(train_prompts.size(), 10000u - excluded);
  for (const auto& p : task.heldout_problems()) {
    EXPECT_FALSE(train_prompts.count(task.prompt(p))) << task.prompt(p);
    EXPECT_FALSE(train_prompts.count(task.prompt({p.b, p.a}))) << task.prompt({p.b, p.a});
  }
  EXPECT_THROW(AdditionTask(AdditionTaskOptions{.digits = 1, .heldout_problems = 30}), brigade::ValueError);
  EXPECT_THROW(AdditionTask(AdditionTaskOptions{.digits = 0}), brigade::ValueError);
}

TEST(AdditionTask, ScorerGivesFullMarksToAnOracleAndNoneToAWrongOne) {
  AdditionTask task;
  // An oracle that parses the prompt and answers in the task's format, followed by more text.
  auto oracle = [&](const std::string& prompt) {
    const int64_t a = std::stoll(prompt.substr(0, 3)), b = std::stoll(prompt.substr(4, 3));
    return task.answer({a, b}) + "\n123+";
  };
  auto score = brigade::nn::score_exact_match(task, oracle, 1000);
  EXPECT_EQ(score.total, 1000);
  EXPECT_EQ(score.correct, 1000);
  EXPECT_DOUBLE_EQ(score.accuracy(), 1.0);
  EXPECT_TRUE(score.mistakes.empty());

  // Off by one in the sum: every answer wrong.
  auto wrong = [&](const std::string& prompt) {
    const int64_t a = std::stoll(prompt.substr(0, 3)), b = std::stoll(prompt.substr(4, 3));
    return task.answer({a, b + 1}) + "\n";
  };
  score = brigade::nn::score_exact_match(task, wrong, 300);
  EXPECT_EQ(score.total, 300);
  EXPECT_EQ(score.correct, 0);
  EXPECT_DOUBLE_EQ(score.accuracy(), 0.0);
  ASSERT_EQ(score.mistakes.size(), 5u);
  const auto& p = task.heldout_problems()[0];
  EXPECT_EQ(score.mistakes[0],
            task.prompt(p) + " -> " + task.answer({p.a, p.b + 1}) + " (expected " + task.answer(p) + ")");

  // Batched: the right answer with extra characters before the newline is wrong (exact match); half right.
  int64_t calls = 0;
  auto half = [&](const std::vector<std::string>& prompts) {
    ++calls;
    std::vector<std::string> out;
    for (size_t i = 0; i < prompts.size(); ++i) {
      const int64_t a = std::stoll(prompts[i].substr(0, 3)), b = std::stoll(prompts[i].substr(4, 3));
      out.push_back(task.answer({a, b}) + (i % 2 ? "0\n" : "\n"));
    }
    return out;
  };
  score = brigade::nn::score_exact_match_batched(task, half, 1000, 64);
  EXPECT_EQ(calls, 16);           // ceil(1000 / 64)
  EXPECT_EQ(score.correct, 500);  // 15 batches of 64 (32 right each) + a last batch of 40 (20 right)
}
