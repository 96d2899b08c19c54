// The SVG drawing both timelines share: the simulated step (render_svg, render_timeline.h) and the measured
// one (render_measured_svg, run/trace.h). One lane per stage, a coloured box per compute action, the bare
// lane where the stage idles, optionally a band under each lane with the stage's memory over time and
// arrows for the messages between stages, a time axis under the lanes and a legend below it; the same
// colours, sizes and fonts in both, so that a prediction and a measurement can be laid side by side and
// read alike. Several pictures stack into one document as blocks (body() and document(): the schedules
// side by side of `brigade schedule --compare`).
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
#include <utility>
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
    double memory = 0.0;       ///< the memory band's height under each lane (0: no band); within lane_pitch
    bool legend = true;        ///< room for a legend under the axis (a stack of blocks draws one, at the end)
    double lanes_bottom() const { return top + stages * lane_pitch; }
    double width() const { return left + plot + right; }
    /// The axis, then one or two legend lines.
    double height() const { return lanes_bottom() + (legend ? 92.0 : 48.0); }
    double scale() const { return plot / span; }
  };

  /// Opens the picture with its title and a caption line under it.
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
  /// The memory band under the lane whose top is `y` (needs Geometry::memory > 0): a step curve through
  /// `points` (time, value; from each time on the value holds until the next point, the last one until the
  /// end of the plot), `full_scale` at the top of the band, and `note` at its right end (the peak).
  void memory_curve(double y, const std::vector<std::pair<double, double>>& points, double full_scale,
                    const std::string& note);
  /// An arrow for a message from (x0, y0) to (x1, y1): an activation (forward, dark blue) or a gradient
  /// (backward, dark red), with `tooltip` shown on hover.
  void message(double x0, double y0, double x1, double y1, bool gradient, const std::string& tooltip);
  /// The time axis under the lanes: a tick every tick_step(span, 10), labelled by `tick_label(tick, step)`,
  /// and `unit` under its right end.
  void time_axis(const std::string& unit,
                 const std::function<std::string(double tick, double step)>& tick_label);
  /// The legend: the five compute kinds (F, B, Bi, Bw, R), then `extra`, then the idle lane; `note`, if
  /// any, after the last swatch.
  void legend(const std::vector<SvgLegendEntry>& extra, const std::string& note = "");
  /// For what only one picture draws (the measured step's transfer wires): raw SVG elements.
  std::ostringstream& raw() { return svg_; }
  /// Closes the picture and returns it: document(width, height, body()).
  std::string finish() const;
  /// The picture's elements without the document around them, to stack blocks into one document.
  std::string body() const { return svg_.str(); }
  /// A complete SVG document of `width` x `height` pixels on a white background holding `body` (the
  /// elements of one or more pictures; the arrowheads of message() are defined here).
  static std::string document(double width, double height, const std::string& body);

 private:
  Geometry g_;
  std::ostringstream svg_;
};

}  // namespace brigade::pipeline
