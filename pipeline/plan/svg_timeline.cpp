// The SVG timeline drawing (see svg_timeline.h).
#include "pipeline/plan/svg_timeline.h"

#include <cmath>
#include <cstring>

namespace brigade::pipeline {

const char* svg_color(ActionKind kind) {
  switch (kind) {
    case ActionKind::Forward:
      return "#4c78a8";
    case ActionKind::Backward:
      return "#54a24b";
    case ActionKind::BackwardInput:
      return "#72b7b2";
    case ActionKind::BackwardWeight:
      return "#f58518";
    case ActionKind::Recompute:
      return "#b279a2";
    case ActionKind::Reduce:
      return "#bcbd22";
    default:
      return "#9d9d9d";
  }
}

double tick_step(double span, int target) {
  const double raw = span / target;
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (m * magnitude >= raw) return m * magnitude;
  }
  return 10.0 * magnitude;
}

double chunk_shade(int chunk, int virtual_chunks) {
  return virtual_chunks > 1 ? 1.0 - 0.45 * chunk / (virtual_chunks - 1) : 1.0;
}

SvgTimeline::SvgTimeline(const Geometry& geometry, const std::string& title, const std::string& caption)
    : g_(geometry) {
  svg_ << "<text x=\"" << g_.left << "\" y=\"22\" font-size=\"15\" font-weight=\"bold\">" << xml_escape(title)
       << "</text>\n";
  svg_ << "<text x=\"" << g_.left << "\" y=\"40\" fill=\"#444\">" << xml_escape(caption) << "</text>\n";
}

double SvgTimeline::lane(int stage) {
  const double y = g_.top + stage * g_.lane_pitch;
  svg_ << "<text x=\"" << g_.left - 8 << "\" y=\"" << y + g_.lane / 2 + 4 << "\" text-anchor=\"end\">stage "
       << stage << "</text>\n";
  svg_ << "<rect x=\"" << g_.left << "\" y=\"" << y << "\" width=\"" << g_.plot << "\" height=\"" << g_.lane
       << "\" fill=\"#f2f2f2\" stroke=\"#dddddd\"/>\n";
  return y;
}

void SvgTimeline::action(ActionKind kind, double x, double y, double w, double h, double shade,
                         const std::string& tooltip, const std::string& label) {
  svg_ << "<g><title>" << xml_escape(tooltip) << "</title><rect x=\"" << x << "\" y=\"" << y << "\" width=\""
       << w << "\" height=\"" << h << "\" fill=\"" << svg_color(kind) << "\" fill-opacity=\"" << shade
       << "\" stroke=\"white\" stroke-width=\"1\"/>";
  if (w >= 7.0 * label.size() + 4) {  // about 7 px per character of the 11 px font
    svg_ << "<text x=\"" << x + w / 2 << "\" y=\"" << y + h / 2 + 4
         << "\" text-anchor=\"middle\" fill=\"white\" font-size=\"11\">" << xml_escape(label) << "</text>";
  }
  svg_ << "</g>\n";
}

void SvgTimeline::lane_note(double y, const std::string& text) {
  svg_ << "<text x=\"" << g_.left + g_.plot + 10 << "\" y=\"" << y + g_.lane / 2 + 4 << "\" fill=\"#444\">"
       << xml_escape(text) << "</text>\n";
}

void SvgTimeline::time_axis(const std::string& unit,
                            const std::function<std::string(double tick, double step)>& tick_label) {
  const double bottom = g_.lanes_bottom(), span = g_.span;
  const double step = tick_step(span, 10);
  svg_ << "<line x1=\"" << g_.left << "\" y1=\"" << bottom << "\" x2=\"" << g_.left + g_.plot << "\" y2=\""
       << bottom << "\" stroke=\"#333\"/>\n";
  for (double tick = 0; tick <= span + 1e-9 * span; tick += step) {
    const double at = x(tick);
    svg_ << "<line x1=\"" << at << "\" y1=\"" << bottom << "\" x2=\"" << at << "\" y2=\"" << bottom + 5
         << "\" stroke=\"#333\"/><text x=\"" << at << "\" y=\"" << bottom + 18 << "\" text-anchor=\"middle\">"
         << tick_label(tick, step) << "</text>\n";
  }
  svg_ << "<text x=\"" << g_.left + g_.plot << "\" y=\"" << bottom + 34
       << "\" text-anchor=\"end\" fill=\"#444\">" << xml_escape(unit) << "</text>\n";
}

void SvgTimeline::legend(const std::vector<SvgLegendEntry>& extra, const std::string& note) {
  std::vector<SvgLegendEntry> entries = {{"F forward", svg_color(ActionKind::Forward)},
                                         {"B backward", svg_color(ActionKind::Backward)},
                                         {"Bi input-grad", svg_color(ActionKind::BackwardInput)},
                                         {"Bw weight-grad", svg_color(ActionKind::BackwardWeight)},
                                         {"R recompute", svg_color(ActionKind::Recompute)}};
  entries.insert(entries.end(), extra.begin(), extra.end());
  entries.push_back({"idle (bubble)", "#f2f2f2"});
  // The swatches flow left to right and wrap onto a second line where the picture ends.
  double at = g_.left, y = g_.lanes_bottom() + 52;
  auto make_room = [&](double width) {
    if (at > g_.left && at + width > g_.width() - 8) at = g_.left, y += 20;
  };
  for (const SvgLegendEntry& e : entries) {
    make_room(19 + 7.0 * std::strlen(e.name));
    svg_ << "<rect x=\"" << at << "\" y=\"" << y << "\" width=\"14\" height=\"14\" fill=\"" << e.color
         << "\" stroke=\"#bbbbbb\"/><text x=\"" << at + 19 << "\" y=\"" << y + 11 << "\">"
         << xml_escape(e.name) << "</text>\n";
    at += 30 + 7.0 * std::strlen(e.name);
  }
  if (!note.empty()) {
    make_room(7.0 * note.size());
    svg_ << "<text x=\"" << at << "\" y=\"" << y + 11 << "\" fill=\"#444\">" << xml_escape(note)
         << "</text>\n";
  }
}

void SvgTimeline::memory_curve(double y, const std::vector<std::pair<double, double>>& points,
                               double full_scale, const std::string& note) {
  const double top = y + g_.lane + 2, height = g_.memory - 4, bottom = top + height;
  auto level = [&](double value) { return bottom - (full_scale > 0 ? value / full_scale : 0.0) * height; };
  svg_ << "<rect x=\"" << g_.left << "\" y=\"" << top << "\" width=\"" << g_.plot << "\" height=\"" << height
       << "\" fill=\"#fbfbfb\" stroke=\"#e6e6e6\"/>\n";
  // A step curve, closed along the band's bottom: each point's level holds until the next point's time.
  std::ostringstream path;
  path << "M" << g_.left << "," << bottom;
  double held = bottom;
  for (const auto& [time, value] : points) {
    path << " L" << x(time) << "," << held;
    held = level(value);
    path << " L" << x(time) << "," << held;
  }
  path << " L" << g_.left + g_.plot << "," << held << " L" << g_.left + g_.plot << "," << bottom << " Z";
  svg_ << "<path d=\"" << path.str() << "\" fill=\"#e45756\" fill-opacity=\"0.35\" stroke=\"#c03c3b\" "
       << "stroke-width=\"0.8\"/>\n";
  svg_ << "<text x=\"" << g_.left + g_.plot + 10 << "\" y=\"" << top + height / 2 + 4
       << "\" fill=\"#c03c3b\" font-size=\"11\">" << xml_escape(note) << "</text>\n";
}

void SvgTimeline::message(double x0, double y0, double x1, double y1, bool gradient,
                          const std::string& tooltip) {
  svg_ << "<line x1=\"" << x0 << "\" y1=\"" << y0 << "\" x2=\"" << x1 << "\" y2=\"" << y1 << "\" stroke=\""
       << (gradient ? "#8c2d2d" : "#1f3b5c")
       << "\" stroke-opacity=\"0.55\" stroke-width=\"0.9\" marker-end=\"url(#"
       << (gradient ? "gradient-head" : "activation-head") << ")\"><title>" << xml_escape(tooltip)
       << "</title></line>\n";
}

std::string SvgTimeline::finish() const {
  return document(g_.width(), g_.height(), svg_.str());
}

std::string SvgTimeline::document(double width, double height, const std::string& body) {
  std::ostringstream svg;
  svg << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << width << "\" height=\"" << height
      << "\" viewBox=\"0 0 " << width << " " << height
      << "\" font-family=\"Helvetica, Arial, sans-serif\" font-size=\"12\">\n";
  svg << "<defs>";
  for (auto [id, color] : {std::pair{"activation-head", "#1f3b5c"}, std::pair{"gradient-head", "#8c2d2d"}}) {
    svg << "<marker id=\"" << id << "\" viewBox=\"0 0 10 10\" refX=\"10\" refY=\"5\" markerWidth=\"6\" "
        << "markerHeight=\"6\" orient=\"auto-start-reverse\"><path d=\"M0,0 L10,5 L0,10 z\" fill=\"" << color
        << "\" fill-opacity=\"0.7\"/></marker>";
  }
  svg << "</defs>\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n" << body << "</svg>\n";
  return svg.str();
}

}  // namespace brigade::pipeline
