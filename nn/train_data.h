// The text a training run learns from and is scored on: the tokenized train/validation split of the
// default corpus or of a text file (load_train_data), and greedy completion of prompts, which the default
// corpus's held-out accuracy is measured with.
//
// \code
//   brigade::nn::TrainOptions options;  // the default corpus
//   brigade::nn::TrainData data = brigade::nn::load_train_data(options, options.resolved_block());
//   // data.train / data.val: token ids; data.task: the addition task whose held-out problems are scored
// \endcode
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "nn/corpus.h"
#include "nn/gpt.h"
#include "nn/tokenizer.h"
#include "nn/train_options.h"
#include "tensor/device.h"

namespace brigade::nn {

/// The tokenized training and validation text of a run.
struct TrainData {
  CharTokenizer tokenizer;
  std::vector<int64_t> train, val;
  std::vector<int64_t> train_starts, val_starts;  ///< window starts (line starts); empty: any position
  std::shared_ptr<const AdditionTask> task;       ///< the default corpus, or null with --data
  std::string description;
};

/// Reads options.data (IOError naming the path when missing, empty, unreadable or not UTF-8) or builds
/// the default corpus, tokenizes it (with `tokenizer` when given, e.g. a resumed checkpoint's: a character
/// outside its vocabulary is a ValueError) and splits it 90/10 (the default corpus validates on its
/// held-out problems). Windows of `block` tokens must fit in both parts (ValueError otherwise).
TrainData load_train_data(const TrainOptions& options, int64_t block,
                          const CharTokenizer* tokenizer = nullptr);

/// Greedy completions of `prompts` (all of one length) by `model`, `max_new_tokens` characters each;
/// `forward` computes the logits (GPT::generate; default: the model's own forward).
std::vector<std::string> greedy_complete(GPT& model, const CharTokenizer& tokenizer,
                                         const std::vector<std::string>& prompts, int64_t max_new_tokens,
                                         const Device& device,
                                         const std::function<Tensor(const Tensor& ids)>& forward = {});

}  // namespace brigade::nn
