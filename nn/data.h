// Text data for language-model training: reading a UTF-8 file, the train/val split, and batches.
//
// A batch is (x, y), both int64 [B, T] on the requested device: row b is a window of T consecutive tokens
// starting at s_b, and y is x shifted by one (y[b, t] == tokens[s_b + t + 1]), the next-token targets.
//
// Random batches draw their start positions from a brigade Generator (Philox): each call consumes exactly
// one draw (one generator offset), and start b of that draw is a pure function of (seed, offset, b). So a
// run's batches depend only on the seed and the number of batches drawn so far, and a resumed run that
// restores the generator state (Generator::state / set_state) draws the very same batches.
//
// \code
//   std::string text = brigade::nn::read_text_file("input.txt");
//   auto tok = brigade::nn::CharTokenizer::from_text(text);
//   auto split = brigade::nn::split_tokens(tok.encode(text), 0.9);
//   brigade::Generator gen(1337);
//   brigade::nn::Batch batch = brigade::nn::random_batch(split.train, 32, 64, gen);  // x, y: [32, 64]
// \endcode
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tensor/tensor.h"

namespace brigade::nn {

/// The contents of a UTF-8 text file. IOError naming the path and the problem for a missing or unreadable
/// file, a directory, an empty file, or invalid UTF-8 (with the byte offset).
std::string read_text_file(const std::string& path);

struct TokenSplit {
  std::vector<int64_t> train;
  std::vector<int64_t> val;
};
/// The first round(n * train_fraction) tokens train, the rest validate (a prefix split, as nanoGPT does,
/// so that validation text is text the model has not seen). train_fraction must be in (0, 1]; ValueError
/// when it is not, or when a part that should be non-empty comes out empty.
TokenSplit split_tokens(const std::vector<int64_t>& tokens, double train_fraction);

struct Batch {
  Tensor x;  // int64 [B, T] inputs
  Tensor y;  // int64 [B, T] targets: x shifted left by one token
};

/// B windows at random starts, uniform over `starts` when given, else over every s with s + T < n.
/// Every entry of `starts` must satisfy 0 <= s and s + T + 1 <= n (ValueError otherwise; line_starts gives
/// such a list). The index is a 64-bit Philox value modulo the number of starts (bias < count / 2^64).
/// Consumes one draw of `generator`.
Batch random_batch(const std::vector<int64_t>& tokens, int64_t batch_size, int64_t block_size,
                   Generator& generator, const Device& device = Device::cpu(),
                   const std::vector<int64_t>& starts = {});

/// The positions where a line begins (0 and every position after `newline_id`) that leave room for a full
/// window (s + block_size + 1 <= n). Training on line-aligned windows makes a token's position in the window
/// tell its role in the line, which small models with learned position embeddings pick up much faster.
std::vector<int64_t> line_starts(const std::vector<int64_t>& tokens, int64_t newline_id, int64_t block_size);

/// Sequential (evaluation) batches tile the tokens with non-overlapping windows w = 0, 1, ... starting at
/// w * T (W = (n - 1) / T windows in all), B windows per batch; the last batch may have fewer rows.
/// Number of batches (0 when the tokens are too few for a single window):
int64_t sequential_batch_count(int64_t num_tokens, int64_t batch_size, int64_t block_size);
/// Batch `index` in [0, sequential_batch_count) (ValueError outside).
Batch sequential_batch(const std::vector<int64_t>& tokens, int64_t batch_size, int64_t block_size, int64_t index,
                       const Device& device = Device::cpu());

}  // namespace brigade::nn
