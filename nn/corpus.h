// The embedded default corpus: multi-digit addition as text, generated deterministically, with held-out
// problems and an exact-match scorer, so that `brigade train` with no --data learns a task whose success
// can be checked, not just a falling loss.
//
// One problem per line, fixed width (digits = 3 shown; operands in [0, 10^digits) drawn uniformly):
//     "123+045=8610\n"      123 + 45 = 168 -> sum padded to digits+1 = 4 digits "0168" -> written reversed
// prompt = "123+045=" (operands zero-padded, most significant digit first, as people write them),
// answer = "8610" (the sum, zero-padded to digits+1 digits, least significant digit FIRST).
//
// Why this format. A 2-4 layer character GPT trained for a few minutes on two CPU cores must learn it:
//  - Reversed answers: written least significant digit first, answer digit k is (a_k + b_k + carry_k) mod 10
//    and the carry is a function of tokens already in the context (a_{k-1}, b_{k-1} and the answer digit just
//    written), so every step is a local lookup. Written most significant first, the first digit depends on
//    the carry chain through all the digits, which small models learn slowly and unreliably (Lee et al.,
//    "Teaching Arithmetic to Small Transformers", 2023, report the same: reversed output learns in a small
//    fraction of the steps and reaches near-perfect accuracy).
//  - Zero padding: every line has the same length and every digit a fixed column, so with line-aligned
//    training windows (nn/data.h line_starts, block_size = line_length()) a token's learned position
//    embedding alone tells which operand digit the model must look at.
//  - 3 digits: about 10^6 problems, far more than the training lines, so the model cannot memorise its way
//    to held-out accuracy; the vocabulary is just "\n+0123456789=" (13 tokens).
//
// Held-out problems never appear in the training text, in either order: the training lines skip every
// (a, b) whose pair {a, b} is held out, so a held-out "a+b=" is not answerable by memorising "b+a=".
// Everything is a pure function of the options (Philox streams keyed by the seed), identical on every
// platform and compiler.
//
// \code
//   brigade::nn::AdditionTask task;                         // 3 digits, 50000 training lines
//   auto tok = brigade::nn::CharTokenizer::from_text(task.train_text());
//   ... train on tok.encode(task.train_text()) ...
//   auto score = brigade::nn::score_exact_match(task, [&](const std::string& prompt) {
//     return greedy_complete(model, prompt, task.completion_length());
//   }, 500);
//   std::printf("accuracy %.1f%%\n", 100 * score.accuracy());
// \endcode
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace brigade::nn {

struct AdditionProblem {
  int64_t a = 0;
  int64_t b = 0;
  friend bool operator==(const AdditionProblem&, const AdditionProblem&) = default;
};

struct AdditionTaskOptions {
  int digits = 3;                    // operands in [0, 10^digits); 1..9
  int64_t train_problems = 50000;    // lines of training text (problems may repeat; never held-out ones)
  int64_t heldout_problems = 1000;   // distinct problems (as unordered pairs) kept out of the training text
  uint64_t seed = 20240601;
};

class AdditionTask {
 public:
  /// ValueError for digits outside 1..9, non-positive counts, or more held-out problems than half of the
  /// distinct unordered pairs (the training lines need problems left to draw from).
  explicit AdditionTask(AdditionTaskOptions options = {});

  const AdditionTaskOptions& options() const { return options_; }
  /// All training lines, concatenated (train_problems() in order, one line each).
  const std::string& train_text() const { return train_text_; }
  const std::vector<AdditionProblem>& train_problems() const { return train_; }
  const std::vector<AdditionProblem>& heldout_problems() const { return heldout_; }

  /// "123+045=".
  std::string prompt(const AdditionProblem& problem) const;
  /// "8610": the sum, digits+1 wide, least significant digit first.
  std::string answer(const AdditionProblem& problem) const;
  /// prompt + answer + "\n".
  std::string line(const AdditionProblem& problem) const;
  int64_t prompt_length() const { return 2 * options_.digits + 2; }
  int64_t answer_length() const { return options_.digits + 1; }
  int64_t line_length() const { return prompt_length() + answer_length() + 1; }
  /// Characters a completion should generate: the answer and its newline.
  int64_t completion_length() const { return answer_length() + 1; }
  /// One line for logs, e.g. "3-digit addition, reversed answers (50000 training lines, 1000 held out)".
  std::string describe() const;

 private:
  AdditionTaskOptions options_;
  std::vector<AdditionProblem> train_, heldout_;
  std::string train_text_;
};

/// Exact-match result over held-out problems.
struct ExactMatchScore {
  int64_t correct = 0;
  int64_t total = 0;
  /// The first few wrong answers, "123+045= -> 8611 (expected 8610)", for logs.
  std::vector<std::string> mistakes;
  double accuracy() const { return total > 0 ? static_cast<double>(correct) / static_cast<double>(total) : 0.0; }
};

/// Completes one prompt (greedily, for a deterministic score): returns the generated text after the prompt.
using CompletionFn = std::function<std::string(const std::string& prompt)>;
/// Completes many prompts at once (all prompts of a task have the same length, so they batch trivially).
using BatchCompletionFn = std::function<std::vector<std::string>(const std::vector<std::string>& prompts)>;

/// Scores the first `count` held-out problems (1 <= count <= heldout size, ValueError otherwise). A
/// completion is correct when its text up to the first '\n' (all of it if there is none) equals answer().
ExactMatchScore score_exact_match(const AdditionTask& task, const CompletionFn& complete, int64_t count);
/// The same, `batch_size` prompts per call; `complete` must return one completion per prompt.
ExactMatchScore score_exact_match_batched(const AdditionTask& task, const BatchCompletionFn& complete,
                                          int64_t count, int64_t batch_size = 256);

}  // namespace brigade::nn
