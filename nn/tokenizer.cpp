// Character-level tokenizer and strict UTF-8 codec; see nn/tokenizer.h.
#include "nn/tokenizer.h"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "tensor/error.h"

namespace brigade::nn {
namespace {

bool is_scalar_value(char32_t c) { return c <= 0x10FFFF && (c < 0xD800 || c > 0xDFFF); }

}  // namespace

bool utf8_decode(std::string_view text, std::u32string* out, size_t* error_offset) {
  out->clear();
  out->reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    const unsigned char lead = static_cast<unsigned char>(text[i]);
    int length;
    char32_t c;
    if (lead < 0x80) {
      length = 1, c = lead;
    } else if (lead >= 0xC2 && lead <= 0xDF) {
      length = 2, c = lead & 0x1F;
    } else if (lead >= 0xE0 && lead <= 0xEF) {
      length = 3, c = lead & 0x0F;
    } else if (lead >= 0xF0 && lead <= 0xF4) {
      length = 4, c = lead & 0x07;
    } else {
      *error_offset = i;  // a continuation byte, an overlong 2-byte lead (C0, C1), or F5..FF
      return false;
    }
    if (i + length > text.size()) {
      *error_offset = i;
      return false;
    }
    for (int k = 1; k < length; ++k) {
      const unsigned char next = static_cast<unsigned char>(text[i + k]);
      if ((next & 0xC0) != 0x80) {
        *error_offset = i;
        return false;
      }
      c = (c << 6) | (next & 0x3F);
    }
    // Overlong 3- and 4-byte forms, surrogates, and values above U+10FFFF.
    const bool overlong = (length == 3 && c < 0x800) || (length == 4 && c < 0x10000);
    if (overlong || !is_scalar_value(c)) {
      *error_offset = i;
      return false;
    }
    out->push_back(c);
    i += length;
  }
  return true;
}

void utf8_append(char32_t c, std::string* out) {
  BRIGADE_CHECK_VALUE(is_scalar_value(c), "utf8_append: U+", std::hex, static_cast<uint32_t>(c),
                      " is not a Unicode scalar value");
  if (c < 0x80) {
    out->push_back(static_cast<char>(c));
  } else if (c < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (c >> 6)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else if (c < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (c >> 12)));
    out->push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (c >> 18)));
    out->push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3F)));
  }
}

std::string describe_code_point(char32_t c) {
  char code[16];
  std::snprintf(code, sizeof code, "U+%04X", static_cast<unsigned>(c));
  if (c < 0x20 || c == 0x7F || !is_scalar_value(c)) return code;
  std::string text = "'";
  utf8_append(c, &text);
  return text + "' (" + code + ")";
}

CharTokenizer::CharTokenizer(std::u32string vocabulary) : vocabulary_(std::move(vocabulary)) {
  for (size_t i = 0; i < vocabulary_.size(); ++i) {
    BRIGADE_CHECK_VALUE(is_scalar_value(vocabulary_[i]), "CharTokenizer: vocabulary entry ", i, " (",
                        describe_code_point(vocabulary_[i]), ") is not a Unicode scalar value");
    BRIGADE_CHECK_VALUE(i == 0 || vocabulary_[i - 1] < vocabulary_[i], "CharTokenizer: the vocabulary must be ",
                        "sorted and without repeats; entry ", i, " (", describe_code_point(vocabulary_[i]),
                        ") follows ", describe_code_point(vocabulary_[i - 1]));
  }
}

CharTokenizer CharTokenizer::from_text(std::string_view text) {
  std::u32string code_points;
  size_t bad = 0;
  BRIGADE_CHECK_VALUE(utf8_decode(text, &code_points, &bad), "CharTokenizer::from_text: invalid UTF-8 at byte ",
                      bad);
  std::sort(code_points.begin(), code_points.end());
  code_points.erase(std::unique(code_points.begin(), code_points.end()), code_points.end());
  return CharTokenizer(std::move(code_points));
}

CharTokenizer CharTokenizer::from_json(const std::string& json) {
  nlohmann::json value = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  BRIGADE_CHECK_VALUE(!value.is_discarded() && value.is_object(), "CharTokenizer::from_json: not a JSON object: ",
                      json.substr(0, 80));
  BRIGADE_CHECK_VALUE(value.contains("type") && value["type"] == "char",
                      "CharTokenizer::from_json: expected \"type\": \"char\", found ",
                      value.contains("type") ? value["type"].dump() : std::string("no type"));
  BRIGADE_CHECK_VALUE(value.contains("vocab") && value["vocab"].is_string(),
                      "CharTokenizer::from_json: expected a string \"vocab\"");
  std::u32string vocabulary;
  size_t bad = 0;
  BRIGADE_CHECK_VALUE(utf8_decode(value["vocab"].get<std::string>(), &vocabulary, &bad),
                      "CharTokenizer::from_json: vocab is not valid UTF-8 at byte ", bad);
  return CharTokenizer(std::move(vocabulary));
}

std::string CharTokenizer::to_json() const {
  std::string vocab;
  for (char32_t c : vocabulary_) utf8_append(c, &vocab);
  nlohmann::ordered_json value = {{"type", "char"}, {"vocab", vocab}};
  return value.dump();
}

int64_t CharTokenizer::id_of(char32_t c) const {
  auto it = std::lower_bound(vocabulary_.begin(), vocabulary_.end(), c);
  return (it != vocabulary_.end() && *it == c) ? it - vocabulary_.begin() : -1;
}

std::vector<int64_t> CharTokenizer::encode(std::string_view text) const {
  std::u32string code_points;
  size_t bad = 0;
  BRIGADE_CHECK_VALUE(utf8_decode(text, &code_points, &bad), "CharTokenizer::encode: invalid UTF-8 at byte ", bad);
  std::vector<int64_t> ids(code_points.size());
  for (size_t i = 0; i < code_points.size(); ++i) {
    ids[i] = id_of(code_points[i]);
    if (ids[i] < 0) {
      std::string prefix;  // only on the error path: the byte offset of the unknown character
      for (size_t k = 0; k < i; ++k) utf8_append(code_points[k], &prefix);
      BRIGADE_THROW(ValueError, "CharTokenizer::encode: character ", describe_code_point(code_points[i]),
                    " at position ", i, " (byte ", prefix.size(), ") is not in the vocabulary of ",
                    vocabulary_.size(), " characters");
    }
  }
  return ids;
}

std::string CharTokenizer::decode(const std::vector<int64_t>& ids) const {
  std::string text;
  text.reserve(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    BRIGADE_CHECK_VALUE(ids[i] >= 0 && ids[i] < vocab_size(), "CharTokenizer::decode: id ", ids[i],
                        " at position ", i, " is outside the vocabulary [0, ", vocab_size(), ")");
    utf8_append(vocabulary_[static_cast<size_t>(ids[i])], &text);
  }
  return text;
}

}  // namespace brigade::nn
