// The training run's data; what it holds is described in nn/train_data.h.
#include "nn/train_data.h"

#include <sstream>

#include "nn/data.h"
#include "tensor/error.h"

namespace brigade::nn {
namespace {

std::vector<int64_t> encode_or_explain(const CharTokenizer& tokenizer, const std::string& text,
                                       const std::string& what) {
  try {
    return tokenizer.encode(text);
  } catch (const ValueError& e) {
    BRIGADE_THROW(ValueError, "train: the ", what,
                  " has a character the checkpoint's vocabulary lacks: ", e.what());
  }
}

}  // namespace

TrainData load_train_data(const TrainOptions& options, int64_t block, const CharTokenizer* tokenizer) {
  TrainData data;
  if (options.data.empty()) {
    auto task = std::make_shared<AdditionTask>();
    std::string heldout_text;
    for (const AdditionProblem& p : task->heldout_problems()) heldout_text += task->line(p);
    data.tokenizer = tokenizer ? *tokenizer : CharTokenizer::from_text(task->train_text());
    data.train = encode_or_explain(data.tokenizer, task->train_text(), "default corpus");
    data.val = encode_or_explain(data.tokenizer, heldout_text, "default corpus");
    const int64_t newline = data.tokenizer.id_of(U'\n');
    data.train_starts = line_starts(data.train, newline, block);
    data.val_starts = line_starts(data.val, newline, block);
    BRIGADE_CHECK_VALUE(!data.train_starts.empty() && !data.val_starts.empty(), "train: --block ", block,
                        " is too long for the default corpus");
    data.description = task->describe();
    data.task = std::move(task);
    return data;
  }
  const std::string text = read_text_file(options.data);
  data.tokenizer = tokenizer ? *tokenizer : CharTokenizer::from_text(text);
  const std::vector<int64_t> tokens =
      encode_or_explain(data.tokenizer, text, "data file '" + options.data + "'");
  BRIGADE_CHECK_VALUE(static_cast<int64_t>(tokens.size()) >= 10 * (block + 1), "data file '", options.data,
                      "' has ", tokens.size(), " characters: too few for --block ", block, " (need at least ",
                      10 * (block + 1), " so that the 10% validation part holds a window)");
  TokenSplit split = split_tokens(tokens, 0.9);
  data.train = std::move(split.train);
  data.val = std::move(split.val);
  std::ostringstream description;
  description << "'" << options.data << "': " << tokens.size() << " characters, vocabulary "
              << data.tokenizer.vocab_size() << " (" << data.train.size() << " train, " << data.val.size()
              << " validation)";
  data.description = description.str();
  return data;
}

std::vector<std::string> greedy_complete(GPT& model, const CharTokenizer& tokenizer,
                                         const std::vector<std::string>& prompts, int64_t max_new_tokens,
                                         const Device& device,
                                         const std::function<Tensor(const Tensor& ids)>& forward) {
  if (prompts.empty()) return {};
  std::vector<int64_t> ids;
  int64_t length = -1;
  for (const std::string& prompt : prompts) {
    std::vector<int64_t> row = tokenizer.encode(prompt);
    BRIGADE_CHECK_VALUE(length < 0 || static_cast<int64_t>(row.size()) == length,
                        "greedy_complete: prompts must all have one length, found ", length, " and ",
                        row.size());
    length = static_cast<int64_t>(row.size());
    ids.insert(ids.end(), row.begin(), row.end());
  }
  const auto count = static_cast<int64_t>(prompts.size());
  Tensor out = model.generate(from_vector(ids, {count, length}, device), max_new_tokens, /*temperature=*/0.0,
                              /*top_k=*/0, /*generator=*/nullptr, forward);
  const std::vector<int64_t> all = out.to_vector<int64_t>();  // [count, length + max_new_tokens]
  const int64_t width = length + max_new_tokens;
  std::vector<std::string> completions;
  for (int64_t b = 0; b < count; ++b) {
    completions.push_back(tokenizer.decode(
        std::vector<int64_t>(all.begin() + b * width + length, all.begin() + (b + 1) * width)));
  }
  return completions;
}

}  // namespace brigade::nn
