// A small trained GPT with its AdamW and generator, and bit-for-bit tensor comparison: what the
// checkpoint tests (single-file and sharded) save and compare.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <vector>

#include "nn/checkpoint.h"
#include "nn/data.h"
#include "nn/gpt.h"
#include "nn/optim.h"

namespace brigade::testing {

/// Same dtype, shape and bytes.
inline ::testing::AssertionResult bit_equal(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) {
    return ::testing::AssertionFailure()
           << "dtype/shape differ: " << shape_str(a.shape()) << " vs " << shape_str(b.shape());
  }
  Tensor ca = a.detach().cpu().contiguous(), cb = b.detach().cpu().contiguous();
  if (std::memcmp(ca.data_ptr(), cb.data_ptr(), static_cast<size_t>(ca.numel() * dtype_size(ca.dtype()))) !=
      0) {
    return ::testing::AssertionFailure() << "bytes differ";
  }
  return ::testing::AssertionSuccess();
}

/// A small trained model (4 layers: embed, 2 blocks, head): two AdamW steps make every moment non-zero.
struct Trained {
  nn::CharTokenizer tokenizer = nn::CharTokenizer::from_text("abcdefgh\n ");
  nn::GPTConfig config;
  std::unique_ptr<nn::GPT> model;
  std::unique_ptr<nn::AdamW> optimizer;
  Generator generator{42};

  Trained() {
    config.vocab_size = tokenizer.vocab_size();
    config.block_size = 8;
    config.n_layer = 2;
    config.n_head = 2;
    config.n_embd = 16;
    config.dropout = 0.1;
    model = std::make_unique<nn::GPT>(config, 7);
    nn::set_dropout_generator(*model, &generator);
    optimizer = std::make_unique<nn::AdamW>(nn::decay_groups(*model, 0.1), nn::AdamWOptions{.lr = 1e-2});
    std::vector<int64_t> tokens = tokenizer.encode("abc defg\nhabcde fgh\nabba cdd\nefgh abc\n");
    for (int step = 0; step < 2; ++step) {
      nn::Batch batch = nn::random_batch(tokens, 4, 8, generator);
      nn::GPT::loss(model->forward(batch.x), batch.y).backward();
      optimizer->step();
      optimizer->zero_grad();
    }
  }
  nn::CheckpointInfo info() const {
    return nn::CheckpointInfo{tokenizer, 2, generator.state(), R"({"lr":0.01,"steps":2})", "", ""};
  }
};

}  // namespace brigade::testing
