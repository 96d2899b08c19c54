// Pictures of a simulated timeline (see render_timeline.h).
#include "pipeline/plan/render_timeline.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "pipeline/plan/svg_timeline.h"
#include "pipeline/schedule/render_schedule.h"

namespace brigade::pipeline {

namespace {

// Label of a compute action in the time grid, kept short: the chunk as a letter ("F3b" = F3 of chunk 1).
std::string time_label(const Action& a, bool show_chunk) {
  std::string label = to_string(Action{a.kind, a.microbatch, 0, -1});
  if (show_chunk && a.kind != ActionKind::OptimizerStep) label += static_cast<char>('a' + a.chunk % 26);
  return label;
}

std::string pad(const std::string& text, size_t width) {
  return text.size() >= width ? text : text + std::string(width - text.size(), ' ');
}

std::string format_number(double x) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.10g", x);
  return buffer;
}

std::string percent(double fraction) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.1f%%", 100.0 * fraction);
  return buffer;
}

std::string json_string(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buffer[8];
      std::snprintf(buffer, sizeof buffer, "\\u%04x", c);
      out += buffer;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

}  // namespace

std::string render_time_grid(const Timeline& timeline, int max_columns) {
  const Schedule& schedule = timeline.schedule;
  const bool show_chunk = schedule.virtual_chunks > 1;
  const double T = timeline.step_time;
  double quantum = T;
  size_t width = 3;
  for (const auto& stage : timeline.stages) {
    for (const TimedAction& t : stage) {
      if (!is_compute(t.action.kind) || t.end <= t.start) continue;
      quantum = std::min(quantum, t.end - t.start);
      width = std::max(width, time_label(t.action, show_chunk).size() + 1);
    }
  }
  if (T <= 0 || quantum <= 0) return "(empty timeline)\n";
  if (max_columns > 0 && T / quantum > max_columns) quantum = T / max_columns;
  const int cells = static_cast<int>(std::ceil(T / quantum - 1e-9));
  const std::string head = pad("t", stage_row_name(0, schedule.stages).size());

  // Time axis: the time at every fifth cell.
  std::string axis(static_cast<size_t>(cells) * width, ' ');
  for (int c = 0; c < cells; c += 5) {
    const std::string tick = format_number(c * quantum);
    axis.replace(static_cast<size_t>(c) * width, std::min(tick.size(), axis.size() - c * width), tick);
  }
  std::ostringstream out;
  while (!axis.empty() && axis.back() == ' ') axis.pop_back();
  out << head << " | " << axis << "\n";
  for (int st = 0; st < schedule.stages; ++st) {
    std::string line;
    for (int c = 0; c < cells; ++c) line += pad(" .", width);
    for (const TimedAction& t : timeline.stages[st]) {
      if (!is_compute(t.action.kind) || t.end <= t.start) continue;
      const int c0 = std::min(static_cast<int>(std::lround(t.start / quantum)), cells - 1);
      const int c1 = std::max(c0 + 1, std::min(static_cast<int>(std::lround(t.end / quantum)), cells));
      const size_t span = static_cast<size_t>(c1 - c0) * width;
      std::string box = time_label(t.action, show_chunk);
      if (c1 - c0 > 1) box += std::string(span - box.size() - 1, '-');
      box = pad(box, span).substr(0, span);
      line.replace(static_cast<size_t>(c0) * width, span, box);
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out << pad(stage_row_name(st, schedule.stages), head.size()) << " | " << line << "\n";
  }
  return out.str();
}

std::string render_svg(const Timeline& timeline) {
  const Schedule& schedule = timeline.schedule;
  const bool show_chunk = schedule.virtual_chunks > 1;
  SvgTimeline::Geometry g;
  g.stages = schedule.stages;
  g.span = std::max(timeline.step_time, 1e-12);
  // Wide enough that the shortest action gets ~26 px for its label (960 to 2400 px of plot).
  double shortest = g.span;
  for (const auto& stage : timeline.stages) {
    for (const TimedAction& t : stage) {
      if (is_compute(t.action.kind) && t.end > t.start) shortest = std::min(shortest, t.end - t.start);
    }
  }
  g.plot = std::clamp(26.0 * g.span / shortest, 960.0, 2400.0);
  std::ostringstream costs;
  costs << "step time " << format_number(timeline.step_time) << ", bubble " << percent(timeline.bubble)
        << "  |  costs per stage and microbatch: F=" << format_number(timeline.costs.forward)
        << ", B=" << format_number(timeline.costs.backward)
        << " of which Bw=" << format_number(timeline.costs.weight);
  if (timeline.costs.transfer > 0) costs << ", transfer=" << format_number(timeline.costs.transfer);
  SvgTimeline svg(g, schedule.describe(), costs.str());

  for (int st = 0; st < schedule.stages; ++st) {
    const double y = svg.lane(st);
    for (const TimedAction& t : timeline.stages[st]) {
      if (!is_compute(t.action.kind) || t.end <= t.start) continue;
      const std::string tooltip = to_string(t.action, show_chunk) + " on stage " + std::to_string(st) + ": " +
                                  format_number(t.start) + " .. " + format_number(t.end);
      svg.action(t.action.kind, svg.x(t.start), y, (t.end - t.start) * g.scale(), g.lane,
                 chunk_shade(t.action.chunk, schedule.virtual_chunks), tooltip,
                 time_label(t.action, show_chunk));  // "F3b" = F3 of chunk 1
    }
    const StageStats& stats = timeline.stats[st];
    svg.lane_note(
        y, "idle " + percent(stats.bubble) + ", peak " + std::to_string(stats.peak_in_flight) + " in flight");
  }
  svg.time_axis("time", [](double tick, double) { return format_number(tick); });
  svg.legend({{"step optimizer", svg_color(ActionKind::OptimizerStep)}},
             show_chunk ? "lighter = later chunk (F3b: F3 on chunk 1)" : "");
  return svg.finish();
}

std::string render_json(const Timeline& timeline) {
  const Schedule& s = timeline.schedule;
  const Costs& c = timeline.costs;
  std::ostringstream out;
  out << "{\n  \"schedule\": " << json_string(s.name) << ",\n  \"stages\": " << s.stages
      << ",\n  \"microbatches\": " << s.microbatches << ",\n  \"virtual_chunks\": " << s.virtual_chunks
      << ",\n  \"recompute\": " << json_string(to_string(s.recompute))
      << ",\n  \"costs\": {\"forward\": " << format_number(c.forward)
      << ", \"backward\": " << format_number(c.backward) << ", \"weight\": " << format_number(c.weight)
      << ", \"recompute\": " << format_number(c.recompute < 0 ? c.forward : c.recompute)
      << ", \"step\": " << format_number(c.step) << ", \"transfer\": " << format_number(c.transfer)
      << ", \"per_chunk\": " << (c.per_chunk.empty() ? "false" : "true")
      << "},\n  \"step_time\": " << format_number(timeline.step_time)
      << ",\n  \"bubble\": " << format_number(timeline.bubble) << ",\n  \"stage_stats\": [";
  for (int st = 0; st < s.stages; ++st) {
    const StageStats& stats = timeline.stats[st];
    out << (st ? "," : "") << "\n    {\"stage\": " << st << ", \"busy\": " << format_number(stats.busy)
        << ", \"bubble\": " << format_number(stats.bubble) << ", \"peak_in_flight\": " << stats.peak_in_flight
        << ", \"peak_full\": " << stats.peak_full << ", \"peak_memory\": " << format_number(stats.peak_memory)
        << "}";
  }
  out << "\n  ],\n  \"actions\": [";
  bool first = true;
  for (int st = 0; st < s.stages; ++st) {
    for (const TimedAction& t : timeline.stages[st]) {
      const Action& a = t.action;
      out << (first ? "" : ",") << "\n    {\"stage\": " << st << ", \"step\": " << t.step
          << ", \"kind\": " << json_string(kind_name(a.kind))
          << ", \"label\": " << json_string(to_string(a, s.virtual_chunks > 1))
          << ", \"microbatch\": " << a.microbatch << ", \"chunk\": " << a.chunk << ", \"peer\": " << a.peer
          << ", \"start\": " << format_number(t.start) << ", \"end\": " << format_number(t.end) << "}";
      first = false;
    }
  }
  out << "\n  ]\n}\n";
  return out.str();
}

}  // namespace brigade::pipeline
