// The addition corpus and its exact-match scorer; see nn/corpus.h for the format and why.
#include "nn/corpus.h"

#include <algorithm>
#include <unordered_set>

#include "tensor/error.h"
#include "tensor/philox.h"

namespace brigade::nn {
namespace {

// Philox streams (the generator "offset" slot) so that held-out and training draws are independent.
constexpr uint64_t kHeldoutStream = 1;
constexpr uint64_t kTrainStream = 2;

int64_t power_of_ten(int digits) {
  int64_t value = 1;
  for (int i = 0; i < digits; ++i) value *= 10;
  return value;
}

// Problem number `index` of `stream`: a and b each from 64 Philox bits (modulo bias < 10^9 / 2^64).
AdditionProblem draw_problem(uint64_t seed, uint64_t stream, uint64_t index, int64_t limit) {
  const philox::Uint4 bits = philox::random_bits(seed, stream, index);
  const uint64_t a = (static_cast<uint64_t>(bits.y) << 32) | bits.x;
  const uint64_t b = (static_cast<uint64_t>(bits.w) << 32) | bits.z;
  const auto modulus = static_cast<uint64_t>(limit);
  return {static_cast<int64_t>(a % modulus), static_cast<int64_t>(b % modulus)};
}

// The unordered pair {a, b} as one number.
int64_t pair_key(const AdditionProblem& p, int64_t limit) { return std::min(p.a, p.b) * limit + std::max(p.a, p.b); }

std::string padded(int64_t value, int64_t width) {
  std::string text = std::to_string(value);
  return std::string(static_cast<size_t>(width) - text.size(), '0') + text;
}

}  // namespace

AdditionTask::AdditionTask(AdditionTaskOptions options) : options_(options) {
  BRIGADE_CHECK_VALUE(options.digits >= 1 && options.digits <= 9, "AdditionTask: digits must be in 1..9, found ",
                      options.digits);
  BRIGADE_CHECK_VALUE(options.train_problems > 0 && options.heldout_problems > 0,
                      "AdditionTask: problem counts must be positive, found train ", options.train_problems,
                      ", held out ", options.heldout_problems);
  const int64_t limit = power_of_ten(options.digits);
  const int64_t distinct_pairs = limit * (limit + 1) / 2;
  BRIGADE_CHECK_VALUE(options.heldout_problems <= distinct_pairs / 2, "AdditionTask: ", options.heldout_problems,
                      " held-out problems are more than half of the ", distinct_pairs, " distinct ",
                      options.digits, "-digit problems");

  std::unordered_set<int64_t> heldout_pairs;
  for (uint64_t i = 0; static_cast<int64_t>(heldout_.size()) < options.heldout_problems; ++i) {
    const AdditionProblem p = draw_problem(options.seed, kHeldoutStream, i, limit);
    if (heldout_pairs.insert(pair_key(p, limit)).second) heldout_.push_back(p);
  }
  // At most half of the pairs are held out, so this rejection loop needs fewer than two draws per line.
  train_.reserve(static_cast<size_t>(options.train_problems));
  for (uint64_t i = 0; static_cast<int64_t>(train_.size()) < options.train_problems; ++i) {
    const AdditionProblem p = draw_problem(options.seed, kTrainStream, i, limit);
    if (!heldout_pairs.count(pair_key(p, limit))) train_.push_back(p);
  }
  train_text_.reserve(train_.size() * static_cast<size_t>(line_length()));
  for (const AdditionProblem& p : train_) train_text_ += line(p);
}

std::string AdditionTask::prompt(const AdditionProblem& p) const {
  return padded(p.a, options_.digits) + "+" + padded(p.b, options_.digits) + "=";
}

std::string AdditionTask::answer(const AdditionProblem& p) const {
  std::string sum = padded(p.a + p.b, answer_length());
  std::reverse(sum.begin(), sum.end());
  return sum;
}

std::string AdditionTask::line(const AdditionProblem& p) const { return prompt(p) + answer(p) + "\n"; }

std::string AdditionTask::describe() const {
  return std::to_string(options_.digits) + "-digit addition, reversed answers (" +
         std::to_string(options_.train_problems) + " training lines, " + std::to_string(options_.heldout_problems) +
         " held out)";
}

ExactMatchScore score_exact_match_batched(const AdditionTask& task, const BatchCompletionFn& complete,
                                          int64_t count, int64_t batch_size) {
  const auto available = static_cast<int64_t>(task.heldout_problems().size());
  BRIGADE_CHECK_VALUE(count >= 1 && count <= available, "score_exact_match: count must be in [1, ", available,
                      "] (the held-out problems), found ", count);
  BRIGADE_CHECK_VALUE(batch_size >= 1, "score_exact_match: batch size must be positive, found ", batch_size);
  constexpr size_t kMistakesKept = 5;
  ExactMatchScore score;
  for (int64_t begin = 0; begin < count; begin += batch_size) {
    const int64_t end = std::min(count, begin + batch_size);
    std::vector<std::string> prompts;
    for (int64_t i = begin; i < end; ++i) prompts.push_back(task.prompt(task.heldout_problems()[i]));
    const std::vector<std::string> completions = complete(prompts);
    BRIGADE_CHECK_VALUE(completions.size() == prompts.size(), "score_exact_match: the completion function returned ",
                        completions.size(), " completions for ", prompts.size(), " prompts");
    for (size_t k = 0; k < prompts.size(); ++k) {
      const std::string expected = task.answer(task.heldout_problems()[begin + static_cast<int64_t>(k)]);
      const std::string got = completions[k].substr(0, completions[k].find('\n'));
      ++score.total;
      if (got == expected) {
        ++score.correct;
      } else if (score.mistakes.size() < kMistakesKept) {
        score.mistakes.push_back(prompts[k] + " -> " + got + " (expected " + expected + ")");
      }
    }
  }
  return score;
}

ExactMatchScore score_exact_match(const AdditionTask& task, const CompletionFn& complete, int64_t count) {
  return score_exact_match_batched(
      task,
      [&](const std::vector<std::string>& prompts) {
        std::vector<std::string> completions;
        for (const std::string& prompt : prompts) completions.push_back(complete(prompt));
        return completions;
      },
      count, 1);
}

}  // namespace brigade::nn
