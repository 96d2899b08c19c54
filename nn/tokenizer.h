// Character-level tokenizer over Unicode code points, and the strict UTF-8 codec it uses.
//
// The vocabulary is the sorted set of code points that occur in the training text; token id i is the i-th
// smallest code point. Sorting makes the vocabulary a pure function of the character *set*, so the same
// text always gives the same ids. The tokenizer is stored with the model (checkpoint metadata, key
// "tokenizer" by convention) as JSON text:
//   {"type": "char", "vocab": "\n +0123456789="}
// where "vocab" is the vocabulary's code points, in id order, as one UTF-8 string (JSON escapes control
// characters, so any vocabulary survives the round trip).
//
// \code
//   auto tok = brigade::nn::CharTokenizer::from_text("hello, wörld");
//   std::vector<int64_t> ids = tok.encode("low");   // throws ValueError for a character not in the text
//   std::string back = tok.decode(ids);             // "low"
// \endcode
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace brigade::nn {

/// Decodes strict UTF-8 (no overlong forms, no surrogates, nothing above U+10FFFF). On invalid input
/// returns false and sets *error_offset to the byte offset of the first bad sequence.
bool utf8_decode(std::string_view text, std::u32string* out, size_t* error_offset);
/// Appends the UTF-8 encoding of `code_point` (which must be a valid scalar value) to `out`.
void utf8_append(char32_t code_point, std::string* out);
/// A readable name for a code point in messages: "'a' (U+0061)", or just "U+000A" for control characters.
std::string describe_code_point(char32_t code_point);

class CharTokenizer {
 public:
  /// An empty vocabulary (vocab_size() == 0); build one with from_text or from_json.
  CharTokenizer() = default;
  /// `vocabulary` must be strictly increasing valid code points (ValueError otherwise).
  explicit CharTokenizer(std::u32string vocabulary);

  /// The vocabulary of `text` (UTF-8; ValueError with the byte offset if it is not valid UTF-8).
  static CharTokenizer from_text(std::string_view text);
  /// Parses to_json()'s output; ValueError naming the problem for anything else.
  static CharTokenizer from_json(const std::string& json);
  std::string to_json() const;

  int64_t vocab_size() const { return static_cast<int64_t>(vocabulary_.size()); }
  const std::u32string& vocabulary() const { return vocabulary_; }
  /// The id of `code_point`, or -1 when it is not in the vocabulary.
  int64_t id_of(char32_t code_point) const;

  /// One id per code point. ValueError for invalid UTF-8, or naming the first character that is not in
  /// the vocabulary and its position (code point index and byte offset).
  std::vector<int64_t> encode(std::string_view text) const;
  /// UTF-8 text of the ids; ValueError for an id outside [0, vocab_size()).
  std::string decode(const std::vector<int64_t>& ids) const;
  std::string decode(int64_t id) const { return decode(std::vector<int64_t>{id}); }

  friend bool operator==(const CharTokenizer& a, const CharTokenizer& b) { return a.vocabulary_ == b.vocabulary_; }

 private:
  std::u32string vocabulary_;  // sorted, unique
};

}  // namespace brigade::nn
