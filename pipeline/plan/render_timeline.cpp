// Pictures of a simulated timeline (see render_timeline.h).
#include "pipeline/plan/render_timeline.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <limits>
#include <sstream>
#include <vector>

#include "pipeline/plan/svg_timeline.h"
#include "pipeline/schedule/render_schedule.h"

namespace brigade::pipeline {

namespace {

// Label of a compute action in the time grid, kept short: the chunk as a letter ("F3b" = F3 of chunk 1).
std::string time_label(const Action& a, bool show_chunk) {
  Action bare = a;
  bare.chunk = 0;
  std::string label = to_string(bare);
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

// The shortest text that reads back as the same double (JavaScript's Number.prototype.toString gives the
// same digits), so that a reader of the JSON sees exactly the simulator's times.
std::string json_number(double x) {
  char buffer[32];
  const auto [end, error] = std::to_chars(buffer, buffer + sizeof buffer, x);
  return error == std::errc() ? std::string(buffer, end) : format_number(x);
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

namespace {

// How the blocks of one picture are scaled: a common time span and plot width, so that the schedules of
// a comparison are drawn to one time scale, and a common memory scale, so that their curves compare too.
struct PictureScale {
  double span = 1.0;
  double plot = 960.0;
  double left = 56.0;   ///< where the time axis starts (SvgTimeline::Geometry::left)
  double memory = 1.0;  ///< the live activations at the top of a memory band
};

PictureScale scale_for(const std::vector<const Timeline*>& timelines) {
  PictureScale scale;
  double shortest = std::numeric_limits<double>::infinity(), span = 1e-12, memory = 0.0;
  for (const Timeline* t : timelines) {
    span = std::max(span, t->step_time);
    for (const auto& stage : t->stages) {
      for (const TimedAction& a : stage) {
        if (is_compute(a.action.kind) && a.end > a.start) shortest = std::min(shortest, a.end - a.start);
      }
    }
    for (const StageStats& stats : t->stats) memory = std::max(memory, stats.peak_memory);
  }
  scale.span = span;
  // Wide enough that the shortest action gets ~26 px for its label (960 to 2400 px of plot).
  scale.plot = std::clamp(26.0 * span / std::min(shortest, span), 960.0, 2400.0);
  scale.memory = memory > 0 ? memory : 1.0;
  return scale;
}

std::string caption_of(const Timeline& timeline) {
  const Costs& c = timeline.costs;
  std::ostringstream caption;
  caption << "step time " << format_number(timeline.step_time) << ", bubble " << percent(timeline.bubble)
          << "  |  costs per stage and microbatch: F=" << format_number(c.forward)
          << ", B=" << format_number(c.backward) << " of which Bw=" << format_number(c.weight);
  if (c.transfer > 0) caption << ", transfer=" << format_number(c.transfer);
  if (!c.per_chunk.empty()) caption << ", per-chunk costs";
  return caption.str();
}

// The arrows of the messages: from the end of the Send on the producer's lane to the time its message is
// there (TimedAction::arrival) on the consumer's, from the lane edge that faces the other stage.
void draw_messages(SvgTimeline& svg, const Timeline& timeline) {
  const SvgTimeline::Geometry& g = svg.geometry();
  const Schedule& schedule = timeline.schedule;
  const bool show_chunk = schedule.virtual_chunks > 1;
  for (int st = 0; st < schedule.stages; ++st) {
    for (const TimedAction& t : timeline.stages[st]) {
      const ActionKind k = t.action.kind;
      if (k != ActionKind::SendActivation && k != ActionKind::SendGrad) continue;
      const int peer = t.action.peer;
      const bool down = peer > st;
      const double from_top = g.top + st * g.lane_pitch, to_top = g.top + peer * g.lane_pitch;
      const double y0 = down ? from_top + g.lane : from_top, y1 = down ? to_top : to_top + g.lane;
      const std::string what = k == ActionKind::SendGrad ? "gradient of " : "activation of ";
      const std::string name = to_string(k == ActionKind::SendGrad ? B(t.action.microbatch, t.action.chunk)
                                                                   : F(t.action.microbatch, t.action.chunk),
                                         show_chunk);
      svg.message(svg.x(t.end), y0, svg.x(t.arrival), y1, k == ActionKind::SendGrad,
                  what + name + " from stage " + std::to_string(st) + " to " + std::to_string(peer) +
                      ": sent " + format_number(t.end) + ", there " + format_number(t.arrival));
    }
  }
}

// One schedule's block: its lanes with the compute boxes, the memory band under each lane, the messages'
// arrows, the time axis and, with `legend`, the legend (`chunk_note`: with the note on lighter chunks).
// `title` and `caption` replace the schedule's description and the costs line when not empty.
SvgTimeline draw_timeline(const Timeline& timeline, const PictureScale& scale, bool legend, bool chunk_note,
                          const std::string& title = "", const std::string& caption = "") {
  const Schedule& schedule = timeline.schedule;
  const bool show_chunk = schedule.virtual_chunks > 1;
  SvgTimeline::Geometry g;
  g.stages = schedule.stages;
  g.span = scale.span;
  g.plot = scale.plot;
  g.left = scale.left;
  g.memory = 22;
  g.lane_pitch = g.lane + g.memory + 10;
  g.legend = legend;
  SvgTimeline svg(g, title.empty() ? schedule.describe() : title,
                  caption.empty() ? caption_of(timeline) : caption);

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
    for (const TimedAction& t : timeline.stages[st]) {  // all-reduces: a bar on the comm lane's edge
      if (t.action.kind != ActionKind::Reduce) continue;
      svg.action(ActionKind::Reduce, svg.x(t.start), y + g.lane + 1,
                 std::max(1.0, (t.end - t.start) * g.scale()), 6, 1.0,
                 to_string(t.action, show_chunk) + " (all-reduce) on stage " + std::to_string(st) + ": " +
                     format_number(t.start) + " .. " + format_number(t.end),
                 "");
    }
    const StageStats& stats = timeline.stats[st];
    svg.lane_note(
        y, "idle " + percent(stats.bubble) + ", " + std::to_string(stats.peak_in_flight) + " in flight");
    std::vector<std::pair<double, double>> points;
    for (const MemoryPoint& p : stats.memory) points.emplace_back(p.time, p.live);
    svg.memory_curve(y, points, scale.memory, "memory peak " + format_number(stats.peak_memory));
  }
  draw_messages(svg, timeline);
  svg.time_axis("time", [](double tick, double) { return format_number(tick); });
  if (legend) {
    std::vector<SvgLegendEntry> entries = {{"step optimizer", svg_color(ActionKind::OptimizerStep)},
                                           {"activation message", "#1f3b5c"},
                                           {"gradient message", "#8c2d2d"},
                                           {"live activations", "#e45756"}};
    if (!schedule.buckets.empty()) entries.push_back({"all-reduce", svg_color(ActionKind::Reduce)});
    svg.legend(entries, chunk_note ? "lighter = later chunk (F3b: F3 on chunk 1)" : "");
  }
  return svg;
}

}  // namespace

std::string render_svg(const Timeline& timeline) {
  return draw_timeline(timeline, scale_for({&timeline}), true, timeline.schedule.virtual_chunks > 1).finish();
}

std::string render_compare_svg(const std::vector<Timeline>& timelines) {
  std::vector<const Timeline*> all;
  for (const Timeline& t : timelines) all.push_back(&t);
  const PictureScale scale = scale_for(all);
  std::ostringstream body;
  double top = 0.0, width = 0.0;
  bool chunks = false;  // the last block's legend explains the lighter chunks if any block has them
  for (const Timeline& t : timelines) chunks = chunks || t.schedule.virtual_chunks > 1;
  for (size_t k = 0; k < timelines.size(); ++k) {
    const Timeline& t = timelines[k];
    const SvgTimeline block = draw_timeline(t, scale, k + 1 == timelines.size(), chunks);
    body << "<g transform=\"translate(0," << top << ")\">\n" << block.body() << "</g>\n";
    top += block.geometry().height();
    width = std::max(width, block.geometry().width());
  }
  return SvgTimeline::document(width, top, body.str());
}

std::string render_svg_block(const Timeline& timeline, const std::string& title, const std::string& caption,
                             double span, double left, double plot, double* height) {
  PictureScale scale = scale_for({&timeline});
  scale.span = span, scale.left = left, scale.plot = plot;
  const SvgTimeline block =
      draw_timeline(timeline, scale, true, timeline.schedule.virtual_chunks > 1, title, caption);
  *height = block.geometry().height();
  return block.body();
}

std::string render_json(const Timeline& timeline) {
  const Schedule& s = timeline.schedule;
  const Costs& c = timeline.costs;
  const auto n = json_number;
  std::ostringstream out;
  out << "{\n  \"schedule\": " << json_string(s.name) << ",\n  \"stages\": " << s.stages
      << ",\n  \"microbatches\": " << s.microbatches << ",\n  \"virtual_chunks\": " << s.virtual_chunks
      << ",\n  \"placement\": " << json_string(to_string(s.placement))
      << ",\n  \"recompute\": " << json_string(to_string(s.recompute))
      << ",\n  \"costs\": {\"forward\": " << n(c.forward) << ", \"backward\": " << n(c.backward)
      << ", \"weight\": " << n(c.weight)
      << ", \"recompute\": " << n(c.recompute < 0 ? c.forward : c.recompute) << ", \"step\": " << n(c.step)
      << ", \"transfer\": " << n(c.transfer) << ", \"per_chunk\": [";
  for (size_t k = 0; k < c.per_chunk.size(); ++k) {
    const ChunkCosts& p = c.per_chunk[k];
    out << (k ? ", " : "") << "{\"forward\": " << n(p.forward) << ", \"backward\": " << n(p.backward)
        << ", \"weight\": " << n(p.weight) << ", \"weight_deferred\": " << n(p.backward_weight(true))
        << ", \"input\": " << n(p.backward_input()) << ", \"recompute\": " << n(p.recompute) << "}";
  }
  out << "]},\n  \"step_time\": " << n(timeline.step_time) << ",\n  \"bubble\": " << n(timeline.bubble)
      << ",\n  \"stage_stats\": [";
  for (int st = 0; st < s.stages; ++st) {
    const StageStats& stats = timeline.stats[st];
    out << (st ? "," : "") << "\n    {\"stage\": " << st << ", \"busy\": " << n(stats.busy)
        << ", \"bubble\": " << n(stats.bubble) << ", \"span\": " << n(stats.span)
        << ", \"peak_in_flight\": " << stats.peak_in_flight << ", \"peak_full\": " << stats.peak_full
        << ", \"peak_memory\": " << n(stats.peak_memory) << ",\n     \"memory\": [";
    for (size_t k = 0; k < stats.memory.size(); ++k) {
      out << (k ? ", " : "") << "[" << n(stats.memory[k].time) << ", " << n(stats.memory[k].live) << "]";
    }
    out << "]}";
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
          << ", \"start\": " << n(t.start) << ", \"end\": " << n(t.end);
      if (t.arrival >= 0) out << ", \"arrival\": " << n(t.arrival);
      out << "}";
      first = false;
    }
  }
  out << "\n  ]\n}\n";
  return out.str();
}

}  // namespace brigade::pipeline
