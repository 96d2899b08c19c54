// Text files, splits and batches; see nn/data.h.
#include "nn/data.h"

#include <sys/stat.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>

#include "nn/tokenizer.h"
#include "tensor/philox.h"

namespace brigade::nn {
namespace {

void check_sizes(const char* op, int64_t batch_size, int64_t block_size) {
  BRIGADE_CHECK_VALUE(batch_size > 0, op, ": batch size must be positive, found ", batch_size);
  BRIGADE_CHECK_VALUE(block_size > 0, op, ": block size must be positive, found ", block_size);
}

// Rows of x and y for windows starting at `starts`.
Batch make_batch(const std::vector<int64_t>& tokens, const std::vector<int64_t>& starts, int64_t block_size,
                 const Device& device) {
  const int64_t rows = static_cast<int64_t>(starts.size());
  std::vector<int64_t> x(static_cast<size_t>(rows * block_size)), y(x.size());
  for (int64_t b = 0; b < rows; ++b) {
    const int64_t* window = tokens.data() + starts[b];
    std::copy(window, window + block_size, x.begin() + b * block_size);
    std::copy(window + 1, window + block_size + 1, y.begin() + b * block_size);
  }
  return {from_vector(x, {rows, block_size}, device), from_vector(y, {rows, block_size}, device)};
}

}  // namespace

std::string read_text_file(const std::string& path) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) {
    BRIGADE_THROW(IOError, "cannot read data file '", path, "': ", std::strerror(errno));
  }
  if (S_ISDIR(info.st_mode)) BRIGADE_THROW(IOError, "cannot read data file '", path, "': it is a directory");
  std::ifstream in(path, std::ios::binary);
  if (!in) BRIGADE_THROW(IOError, "cannot read data file '", path, "': ", std::strerror(errno));
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) BRIGADE_THROW(IOError, "error while reading data file '", path, "'");
  if (text.empty()) BRIGADE_THROW(IOError, "data file '", path, "' is empty: there is no text to train on");
  std::u32string decoded;
  size_t bad = 0;
  if (!utf8_decode(text, &decoded, &bad)) {
    BRIGADE_THROW(IOError, "data file '", path, "' is not valid UTF-8 (first bad byte 0x", std::hex,
                  static_cast<unsigned>(static_cast<unsigned char>(text[bad])), std::dec, " at offset ", bad, ")");
  }
  return text;
}

TokenSplit split_tokens(const std::vector<int64_t>& tokens, double train_fraction) {
  BRIGADE_CHECK_VALUE(train_fraction > 0.0 && train_fraction <= 1.0,
                      "split_tokens: the train fraction must be in (0, 1], found ", train_fraction);
  const auto n = static_cast<int64_t>(tokens.size());
  const auto n_train = static_cast<int64_t>(std::llround(static_cast<double>(n) * train_fraction));
  BRIGADE_CHECK_VALUE(n_train > 0, "split_tokens: ", n, " tokens leave no training tokens at fraction ",
                      train_fraction);
  BRIGADE_CHECK_VALUE(train_fraction == 1.0 || n_train < n, "split_tokens: ", n,
                      " tokens are too few to leave validation tokens at fraction ", train_fraction);
  TokenSplit split;
  split.train.assign(tokens.begin(), tokens.begin() + n_train);
  split.val.assign(tokens.begin() + n_train, tokens.end());
  return split;
}

Batch random_batch(const std::vector<int64_t>& tokens, int64_t batch_size, int64_t block_size,
                   Generator& generator, const Device& device, const std::vector<int64_t>& starts) {
  check_sizes("random_batch", batch_size, block_size);
  const auto n = static_cast<int64_t>(tokens.size());
  BRIGADE_CHECK_VALUE(n >= block_size + 1, "random_batch: ", n, " tokens are too few for block size ", block_size,
                      " (a window needs ", block_size + 1, " tokens)");
  // Number of candidate starts: explicit ones, or every s in [0, n - T - 1].
  const auto count = static_cast<uint64_t>(starts.empty() ? n - block_size : static_cast<int64_t>(starts.size()));
  const GeneratorState draw = generator.next_draw();
  std::vector<int64_t> chosen(static_cast<size_t>(batch_size));
  for (int64_t b = 0; b < batch_size; ++b) {
    const philox::Uint4 bits = philox::random_bits(draw.seed, draw.offset, static_cast<uint64_t>(b));
    const uint64_t index = ((static_cast<uint64_t>(bits.y) << 32) | bits.x) % count;
    const int64_t s = starts.empty() ? static_cast<int64_t>(index) : starts[index];
    BRIGADE_CHECK_VALUE(s >= 0 && s + block_size + 1 <= n, "random_batch: start ", s,
                        " leaves no room for a window of ", block_size + 1, " tokens in ", n, " tokens");
    chosen[static_cast<size_t>(b)] = s;
  }
  return make_batch(tokens, chosen, block_size, device);
}

std::vector<int64_t> line_starts(const std::vector<int64_t>& tokens, int64_t newline_id, int64_t block_size) {
  BRIGADE_CHECK_VALUE(block_size > 0, "line_starts: block size must be positive, found ", block_size);
  const auto n = static_cast<int64_t>(tokens.size());
  std::vector<int64_t> starts;
  for (int64_t s = 0; s + block_size + 1 <= n; ++s) {
    if (s == 0 || tokens[s - 1] == newline_id) starts.push_back(s);
  }
  return starts;
}

int64_t sequential_batch_count(int64_t num_tokens, int64_t batch_size, int64_t block_size) {
  check_sizes("sequential_batch_count", batch_size, block_size);
  const int64_t windows = num_tokens > 0 ? (num_tokens - 1) / block_size : 0;
  return (windows + batch_size - 1) / batch_size;
}

Batch sequential_batch(const std::vector<int64_t>& tokens, int64_t batch_size, int64_t block_size, int64_t index,
                       const Device& device) {
  const auto n = static_cast<int64_t>(tokens.size());
  const int64_t count = sequential_batch_count(n, batch_size, block_size);
  BRIGADE_CHECK_VALUE(index >= 0 && index < count, "sequential_batch: index ", index, " outside [0, ", count,
                      ") for ", n, " tokens, batch ", batch_size, ", block ", block_size);
  const int64_t windows = (n - 1) / block_size;
  std::vector<int64_t> starts;
  for (int64_t w = index * batch_size; w < windows && w < (index + 1) * batch_size; ++w) {
    starts.push_back(w * block_size);
  }
  return make_batch(tokens, starts, block_size, device);
}

}  // namespace brigade::nn
