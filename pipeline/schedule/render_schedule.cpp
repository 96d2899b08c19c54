// Pictures of a schedule's lists (see render_schedule.h).
#include "pipeline/schedule/render_schedule.h"

#include <algorithm>
#include <sstream>

namespace brigade::pipeline {

namespace {

// Label of an action in a grid cell: compute actions as to_string, transfers compactly ("F3>s1").
std::string cell_label(const Action& a, bool show_chunk) {
  if (!is_transfer(a.kind)) return to_string(a, show_chunk);
  const bool gradient = a.kind == ActionKind::SendGrad || a.kind == ActionKind::RecvGrad;
  const bool send = a.kind == ActionKind::SendActivation || a.kind == ActionKind::SendGrad;
  std::string label = to_string(gradient ? B(a.microbatch, a.chunk) : F(a.microbatch, a.chunk), show_chunk);
  return label + (send ? ">s" : "<s") + std::to_string(a.peer);
}

std::string pad(const std::string& text, size_t width) {
  return text.size() >= width ? text : text + std::string(width - text.size(), ' ');
}

}  // namespace

std::string stage_row_name(int stage, int stages) {
  const int digits = static_cast<int>(std::to_string(std::max(stages - 1, 0)).size());
  std::string number = std::to_string(stage);
  std::string name = "s";
  name.append(digits - number.size(), ' ');
  return name + number;
}

std::string render_order_grid(const Schedule& schedule, const std::vector<std::pair<int, int>>& marks,
                              int max_columns) {
  const bool show_chunk = schedule.virtual_chunks > 1;
  size_t longest = 0;
  for (const auto& list : schedule.actions) longest = std::max(longest, list.size());
  int lo = 0, hi = static_cast<int>(longest);
  if (max_columns > 0 && hi > max_columns) {
    int first = hi, last = 0;
    for (const auto& [stage, step] : marks) {
      first = std::min(first, step);
      last = std::max(last, step);
    }
    if (marks.empty()) first = last = 0;
    const int center = (first + last) / 2;
    lo = std::clamp(center - max_columns / 2, 0, hi - max_columns);
    hi = lo + max_columns;
  }
  auto marked = [&](int stage, int step) {
    return std::find(marks.begin(), marks.end(), std::make_pair(stage, step)) != marks.end();
  };
  size_t width = 3;
  for (int st = 0; st < schedule.stages; ++st) {
    for (int i = lo; i < std::min(hi, static_cast<int>(schedule.actions[st].size())); ++i) {
      width = std::max(width, cell_label(schedule.actions[st][i], show_chunk).size() + 2);
    }
  }
  const std::string head = pad("step", stage_row_name(0, schedule.stages).size());
  std::string header = head + " |" + (lo > 0 ? " ..." : "");
  for (int i = lo; i < hi; ++i) {
    header += ' ';
    header += pad(std::to_string(i), width);
  }
  while (header.back() == ' ') header.pop_back();
  std::ostringstream out;
  out << header << "\n";
  for (int st = 0; st < schedule.stages; ++st) {
    std::string line = pad(stage_row_name(st, schedule.stages), head.size()) + " |" + (lo > 0 ? " ..." : "");
    const auto& list = schedule.actions[st];
    for (int i = lo; i < std::min(hi, static_cast<int>(list.size())); ++i) {
      const std::string label = cell_label(list[i], show_chunk);
      line += ' ';
      line += pad(marked(st, i) ? std::string("[") + label + "]" : std::string(" ") + label, width);
    }
    if (static_cast<int>(list.size()) > hi) line += " ...";
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out << line << "\n";
  }
  return out.str();
}

std::string render_stage_lists(const Schedule& schedule) {
  const bool show_chunk = schedule.virtual_chunks > 1;
  std::ostringstream out;
  for (int st = 0; st < schedule.stages; ++st) {
    out << stage_row_name(st, schedule.stages) << ":";
    const auto& list = schedule.actions[st];
    for (size_t i = 0; i < list.size(); ++i) out << (i ? ", " : " ") << to_string(list[i], show_chunk);
    out << "\n";
  }
  return out.str();
}

}  // namespace brigade::pipeline
