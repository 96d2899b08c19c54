// Escaping text for XML (SVG, HTML): every picture brigade writes — autograd graphs, pipeline timelines,
// measured traces — puts user-visible names into markup through this one function. It sits in the lowest
// layer because the pictures are drawn in several layers above it.
#pragma once

#include <string>

namespace brigade {

/// `text` with &, <, > and " replaced by XML entities, safe inside SVG/HTML text and attribute values.
inline std::string xml_escape(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

}  // namespace brigade
