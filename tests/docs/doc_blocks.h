// What the doc-sync test reads in a Markdown page: transcripts (fenced blocks of `$ command` lines, each
// followed by its output), their markers, and cited line ranges. The conventions are stated for writers in
// docs/README.md ("Docs that stay true"):
//
//   <!-- doc-sync -->                     the next fenced block is a transcript the test re-runs: every
//   ```                                   `$ ` line is a command (run in order in one scratch directory,
//   $ brigade schedule ...                `brigade` being the built binary), the lines after it are its
//   expected output                       output, stdout and stderr together; a line `...` stands for any
//   ...                                   number of lines; trailing spaces are ignored. `$ cat F` of a file
//   ```                                   that does not exist yet writes the lines shown into F.
//
//   <!-- doc-sync: machine-dependent -->  a transcript whose figures depend on the machine: not re-run.
//
// Every fenced block whose first line starts with `$ ` must carry one of the two markers.
//
//   [tensor/tensor.h:96-118](../tensor/tensor.h#L96-L118) `narrow`, `expand`
//
// is a cited line range: the link's text and target name the same file and lines (the target relative to
// the page), and each backticked name after the link, up to the next link, `|` or the end of the line,
// must occur in those lines.
//
// Every other relative link must name a file or folder that exists, and a `#heading` in it that exists
// (GitHub's anchors: the heading in lower case, punctuation dropped, spaces as dashes).
#pragma once

#include <cstddef>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <string>
#include <vector>

namespace brigade::docs {

/// A page's lines, without their line ends.
inline std::vector<std::string> read_lines(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

inline std::string rstrip(std::string s) {
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.pop_back();
  return s;
}

/// One command of a transcript and the output the page shows for it.
struct Command {
  int line = 0;  ///< 1-based line of the `$ ` line in the page
  std::string text;
  std::vector<std::string> expected;
};

enum class Marker { None, Sync, MachineDependent, Unknown };

/// A fenced block whose first line starts with `$ `.
struct Transcript {
  int line = 0;  ///< 1-based line of the opening fence
  Marker marker = Marker::None;
  std::string marker_text;  ///< the comment as written, for messages
  std::vector<Command> commands;
};

inline Marker parse_marker(const std::string& line) {
  static const std::regex comment(R"(^\s*<!--\s*doc-sync(\s*:\s*([^>]*?))?\s*-->\s*$)");
  std::smatch m;
  if (!std::regex_match(line, m, comment)) return Marker::None;
  const std::string argument = m[2].str();
  if (argument.empty()) return Marker::Sync;
  if (argument.rfind("machine-dependent", 0) == 0) return Marker::MachineDependent;
  return Marker::Unknown;
}

/// Every transcript of a page, with the marker on the last non-blank line before its opening fence.
inline std::vector<Transcript> transcripts(const std::vector<std::string>& lines) {
  std::vector<Transcript> found;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].rfind("```", 0) != 0) continue;
    size_t end = i + 1;
    while (end < lines.size() && lines[end].rfind("```", 0) != 0) ++end;
    if (end > i + 1 && lines[i + 1].rfind("$ ", 0) == 0) {
      Transcript t;
      t.line = static_cast<int>(i) + 1;
      size_t before = i;
      while (before > 0 && rstrip(lines[before - 1]).empty()) --before;
      if (before > 0) {
        t.marker = parse_marker(lines[before - 1]);
        if (t.marker != Marker::None) t.marker_text = lines[before - 1];
      }
      for (size_t k = i + 1; k < end; ++k) {
        if (lines[k].rfind("$ ", 0) == 0) {
          t.commands.push_back({static_cast<int>(k) + 1, lines[k].substr(2), {}});
        } else {
          t.commands.back().expected.push_back(rstrip(lines[k]));
        }
      }
      found.push_back(std::move(t));
    }
    i = end;  // past the closing fence
  }
  return found;
}

/// True when `actual` matches `expected`, where an expected line "..." matches any number of lines. On a
/// mismatch, `why` says where the first difference is.
inline bool output_matches(const std::vector<std::string>& expected, std::vector<std::string> actual,
                           std::string* why) {
  for (std::string& line : actual) line = rstrip(line);
  while (!actual.empty() && actual.back().empty()) actual.pop_back();
  std::vector<std::string> want = expected;
  while (!want.empty() && want.back().empty()) want.pop_back();
  // can[i][j]: want[i..] matches actual[j..]
  const size_t n = want.size(), m = actual.size();
  std::vector<std::vector<char>> can(n + 1, std::vector<char>(m + 1, 0));
  can[n][m] = 1;
  for (size_t i = n; i-- > 0;) {
    for (size_t j = m + 1; j-- > 0;) {
      if (want[i] == "...") {
        can[i][j] = can[i + 1][j] || (j < m && can[i][j + 1]);
      } else {
        can[i][j] = j < m && want[i] == actual[j] && can[i + 1][j + 1];
      }
    }
  }
  if (can[0][0]) return true;
  if (why != nullptr) {
    // Walk the page's lines against the output to show the first one that is not where the page says.
    *why = "the output does not match the page";
    size_t j = 0;
    for (size_t i = 0; i < n; ++i) {
      if (want[i] == "...") continue;
      size_t at = j;
      if (i > 0 && want[i - 1] == "...") {
        while (at < m && actual[at] != want[i]) ++at;
      }
      if (at < m && actual[at] == want[i]) {
        j = at + 1;
        continue;
      }
      *why = "the page's output line " + std::to_string(i + 1) + ":\n  " + want[i] +
             "\nthe command printed " + (j < m ? "there:\n  " + actual[j] : std::string("nothing more"));
      return false;
    }
    if (j < m) *why = "the command printed more than the page shows, from:\n  " + actual[j];
  }
  return false;
}

/// One cited line range: `[path:first-last](target#Lfirst-Llast)` and the names after it.
struct CitedRange {
  int line = 0;           ///< 1-based line in the page
  std::string text_path;  ///< as the link's text says, relative to the repository root
  std::string target;     ///< the link's target without the fragment, relative to the page
  int first = 0, last = 0;
  int target_first = 0, target_last = 0;
  std::vector<std::string> names;  ///< backticked names after the link
};

inline std::vector<CitedRange> cited_ranges(const std::vector<std::string>& lines) {
  static const std::regex link(R"(\[([^\]\s:]+):(\d+)-(\d+)\]\(([^)#\s]+)#L(\d+)-L(\d+)\))");
  static const std::regex name("`([^`]+)`");
  std::vector<CitedRange> found;
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string& line = lines[i];
    std::vector<std::smatch> links;
    for (auto it = std::sregex_iterator(line.begin(), line.end(), link); it != std::sregex_iterator(); ++it) {
      links.push_back(*it);
    }
    for (size_t k = 0; k < links.size(); ++k) {
      const std::smatch& m = links[k];
      CitedRange r;
      r.line = static_cast<int>(i) + 1;
      r.text_path = m[1].str();
      r.first = std::stoi(m[2].str());
      r.last = std::stoi(m[3].str());
      r.target = m[4].str();
      r.target_first = std::stoi(m[5].str());
      r.target_last = std::stoi(m[6].str());
      const size_t from = static_cast<size_t>(m.position(0) + m.length(0));
      size_t to = k + 1 < links.size() ? static_cast<size_t>(links[k + 1].position(0)) : line.size();
      const size_t bar = line.find('|', from);
      if (bar != std::string::npos && bar < to) to = bar;
      const std::string tail = line.substr(from, to - from);
      for (auto it = std::sregex_iterator(tail.begin(), tail.end(), name); it != std::sregex_iterator();
           ++it) {
        r.names.push_back((*it)[1].str());
      }
      found.push_back(std::move(r));
    }
  }
  return found;
}

/// A relative link outside code: `[text](target)` with target = path#anchor (either part may be empty).
struct Link {
  int line = 0;
  std::string path, anchor;
};

/// `line` without its inline code spans (`...`), which may hold brackets that are not links.
inline std::string without_code_spans(const std::string& line) {
  std::string out;
  bool in_code = false;
  for (char c : line) {
    if (c == '`') {
      in_code = !in_code;
      continue;
    }
    if (!in_code) out += c;
  }
  return out;
}

/// Relative links of a page, outside fenced blocks and code spans; http(s) and mailto links are skipped.
inline std::vector<Link> relative_links(const std::vector<std::string>& lines) {
  static const std::regex link(R"(\]\(([^)\s]+)\))");
  std::vector<Link> found;
  bool fenced = false;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].rfind("```", 0) == 0) {
      fenced = !fenced;
      continue;
    }
    if (fenced) continue;
    const std::string text = without_code_spans(lines[i]);
    for (auto it = std::sregex_iterator(text.begin(), text.end(), link); it != std::sregex_iterator(); ++it) {
      const std::string target = (*it)[1].str();
      if (target.rfind("http://", 0) == 0 || target.rfind("https://", 0) == 0 ||
          target.rfind("mailto:", 0) == 0) {
        continue;
      }
      const size_t hash = target.find('#');
      Link l;
      l.line = static_cast<int>(i) + 1;
      l.path = target.substr(0, hash);
      l.anchor = hash == std::string::npos ? "" : target.substr(hash + 1);
      found.push_back(l);
    }
  }
  return found;
}

/// GitHub's anchor of a heading's text: lower case, ASCII punctuation and a few Unicode marks dropped,
/// spaces as dashes.
inline std::string heading_anchor(const std::string& heading) {
  static const std::vector<std::string> dropped = {"…", "—", "–", "→", "×", "−", "·", "“", "”", "’"};
  std::string out;
  for (size_t i = 0; i < heading.size();) {
    bool skip = false;
    for (const std::string& d : dropped) {
      if (heading.compare(i, d.size(), d) == 0) {
        i += d.size();
        skip = true;
        break;
      }
    }
    if (skip) continue;
    const unsigned char c = static_cast<unsigned char>(heading[i++]);
    if (c == ' ') {
      out += '-';
    } else if (c >= 0x80 || std::isalnum(c) || c == '-' || c == '_') {
      out += static_cast<char>(c >= 0x80 ? c : std::tolower(c));
    }
  }
  return out;
}

/// Every heading anchor of a page (a repeated heading gets -1, -2, ... as on GitHub).
inline std::set<std::string> heading_anchors(const std::vector<std::string>& lines) {
  std::set<std::string> anchors;
  bool fenced = false;
  for (const std::string& line : lines) {
    if (line.rfind("```", 0) == 0) fenced = !fenced;
    if (fenced || line.empty() || line[0] != '#') continue;
    const size_t text = line.find_first_not_of('#');
    if (text == std::string::npos || line[text] != ' ') continue;
    const std::string base = heading_anchor(rstrip(line.substr(text + 1)));
    std::string anchor = base;
    for (int n = 1; anchors.count(anchor) != 0; ++n) anchor = base + "-" + std::to_string(n);
    anchors.insert(anchor);
  }
  return anchors;
}

}  // namespace brigade::docs
