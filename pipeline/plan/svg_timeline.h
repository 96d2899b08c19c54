// The SVG drawing both timelines share: the simulated step (render_svg, render_timeline.h) and the measured
// one (render_measured_svg, run/trace.h). One lane per stage, a coloured box per compute action, the bare
// lane where the stage idles, a time axis under the lanes and a legend below it; the same colours, sizes
// and fonts in both, so that a prediction and a measurement can be laid side by side and read alike.
//
// \code
//   SvgTimeline svg({.stages = S, .span = step_time}, title, caption);
//   for (int s = 0; s < S; ++s) {
//     const double y = svg.lane(s);
//     svg.action(kind, svg.x(start), y, width, svg.geometry().lane, 1.0, "F3 on stage 1: 2 .. 3", "F3");
//     svg.lane_note(y, "idle 12.5%");
//   }
//   svg.time_axis("time", [](double tick, double step) { return std::to_string(tick); });
//   svg.legend({{"step optimizer", svg_color(ActionKind::OptimizerStep)}});
//   std::string text = svg.finish();
// \endcode
#pragma once

#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "pipeline/schedule/schedule.h"
#include "tensor/xml_escape.h"  // xml_escape, for the callers that write their own SVG text

namespace brigade::pipeline {

/// The fill colour of an action kind.
const char* svg_color(ActionKind kind);
/// A round axis tick spacing (1, 2 or 5 times a power of ten) giving about `target` ticks over [0, span].
double tick_step(double span, int target);
/// The opacity of local chunk `chunk`'s boxes: 1 for chunk 0 and plain schedules, lighter for later chunks
/// of an interleaved schedule (down to 0.55 for the last).
double chunk_shade(int chunk, int virtual_chunks);

/// One entry of a legend: a swatch and its name.
struct SvgLegendEntry {
  const char* name;
  const char* color;
};

class SvgTimeline {
 public:
  /// Where things go, in pixels (times in the caller's unit).
  struct Geometry {
    int stages = 1;
    double span = 1.0;         ///< the time the plot spans, from 0
    double left = 56.0;        ///< the stage names' column
    double plot = 960.0;       ///< the lanes' width
    double right = 190.0;      ///< the lane notes' column
    double top = 52.0;         ///< above the first lane: the title and the caption
    double lane = 30.0;        ///< a compute lane's height
    double lane_pitch = 38.0;  ///< from one stage's lane to the next
    double lanes_bottom() const { return top + stages * lane_pitch; }
    double width() const { return left + plot + right; }
    double height() const { return lanes_bottom() + 84.0; }
    double scale() const { return plot / span; }
  };

  /// Opens the picture: the frame, a white background, the title and a caption line under it.
  SvgTimeline(const Geometry& geometry, const std::string& title, const std::string& caption);

  const Geometry& geometry() const { return g_; }
  /// The x of time `t` (0 is the left edge of the lanes).
  double x(double t) const { return g_.left + t * g_.scale(); }
  /// Draws stage `stage`'s name and its bare lane; returns the lane's top y.
  double lane(int stage);
  /// A box for a compute action at (x, y) of width w and height h, with `tooltip` shown on hover and
  /// `label` written inside when it fits.
  void action(ActionKind kind, double x, double y, double w, double h, double shade,
              const std::string& tooltip, const std::string& label);
  /// Text at the right end of the lane whose top is `y` (a stage's idle fraction, its peak).
  void lane_note(double y, const std::string& text);
  /// The time axis under the lanes: a tick every tick_step(span, 10), labelled by `tick_label(tick, step)`,
  /// and `unit` under its right end.
  void time_axis(const std::string& unit,
                 const std::function<std::string(double tick, double step)>& tick_label);
  /// The legend: the five compute kinds (F, B, Bi, Bw, R), then `extra`, then the idle lane; `note`, if
  /// any, after the last swatch.
  void legend(const std::vector<SvgLegendEntry>& extra, const std::string& note = "");
  /// For what only one picture draws (the measured step's transfer wires): raw SVG elements.
  std::ostringstream& raw() { return svg_; }
  /// Closes the picture and returns it.
  std::string finish();

 private:
  Geometry g_;
  std::ostringstream svg_;
};

}  // namespace brigade::pipeline
