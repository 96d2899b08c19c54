// Measured step figures and the measured SVG timeline (the Chrome trace: chrome_trace.cpp).
#include "pipeline/run/trace.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <sstream>

#include "pipeline/plan/render_timeline.h"
#include "pipeline/plan/svg_timeline.h"

namespace brigade::pipeline {
namespace {

std::string fixed(double value, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, value);
  return buf;
}

std::string bytes_text(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB"};
  int u = 0;
  while (std::fabs(bytes) >= 1024.0 && u < 3) {
    bytes /= 1024.0;
    ++u;
  }
  return fixed(bytes, u == 0 ? 0 : 1) + " " + units[u];
}

}  // namespace

double ExecutionTrace::span_ms() const {
  double first = std::numeric_limits<double>::infinity(), last = -first;
  for (const auto& events : stages) {
    for (const TraceEvent& e : events) {
      first = std::min(first, e.start_ms);
      last = std::max(last, e.end_ms);
    }
  }
  return last > first ? last - first : 0.0;
}

std::vector<double> ExecutionTrace::busy_ms() const {
  std::vector<double> busy;
  for (const auto& events : stages) {
    double sum = 0.0;
    for (const TraceEvent& e : events) {
      if (is_work(e.action.kind)) sum += e.end_ms - e.start_ms;
    }
    busy.push_back(sum);
  }
  return busy;
}

std::vector<double> ExecutionTrace::bubbles() const {
  const double span = span_ms();
  std::vector<double> out;
  for (double busy : busy_ms()) out.push_back(span > 0.0 ? std::max(0.0, (span - busy) / span) : 0.0);
  return out;
}

double ExecutionTrace::bubble() const {
  const std::vector<double> b = bubbles();
  if (b.empty()) return 0.0;
  double sum = 0.0;
  for (double x : b) sum += x;
  return sum / static_cast<double>(b.size());
}

ActionTotals action_totals(const ExecutionTrace& trace, bool thread_cpu_time) {
  ActionTotals totals;
  for (int s = 0; s < static_cast<int>(trace.stages.size()); ++s) {
    for (const TraceEvent& e : trace.stages[static_cast<size_t>(s)]) {
      if (is_work(e.action.kind))
        totals[{trace.schedule.model_chunk(s, e.action.chunk), e.action.kind}] += e.ms(thread_cpu_time);
    }
  }
  return totals;
}

Costs measured_costs(const ExecutionTrace& trace, bool thread_cpu_time) {
  const Schedule& schedule = trace.schedule;
  const int S = schedule.stages, v = schedule.virtual_chunks;
  Costs costs;
  costs.per_chunk.assign(static_cast<size_t>(S * v), ChunkCosts{});
  struct Sums {
    double f = 0, b = 0, bi = 0, bw = 0, r = 0;
    int nf = 0, nb = 0, nbi = 0, nbw = 0, nr = 0;
  };
  std::vector<Sums> sums(static_cast<size_t>(S * v));
  for (int s = 0; s < S && s < static_cast<int>(trace.stages.size()); ++s) {
    for (const TraceEvent& e : trace.stages[static_cast<size_t>(s)]) {
      Sums& x = sums[static_cast<size_t>(schedule.model_chunk(s, e.action.chunk))];
      const double d = e.ms(thread_cpu_time);
      switch (e.action.kind) {
        case ActionKind::Forward:
          x.f += d, ++x.nf;
          break;
        case ActionKind::Backward:
          x.b += d, ++x.nb;
          break;
        case ActionKind::BackwardInput:
          x.bi += d, ++x.nbi;
          break;
        case ActionKind::BackwardWeight:
          x.bw += d, ++x.nbw;
          break;
        case ActionKind::Recompute:
          x.r += d, ++x.nr;
          break;
        default:
          break;
      }
    }
  }
  double f = 0, b = 0, w = 0, r = 0;
  for (size_t k = 0; k < sums.size(); ++k) {
    const Sums& x = sums[k];
    ChunkCosts& c = costs.per_chunk[k];
    c.forward = x.nf ? x.f / x.nf : 0.0;
    const int backwards = x.nb + x.nbi;
    c.backward = backwards ? (x.b + x.bi + x.bw) / backwards : 0.0;
    c.weight = x.nbw ? std::min(c.backward, x.bw / x.nbw) : c.backward / 2.0;
    c.recompute = x.nr ? x.r / x.nr : c.forward;
    f += c.forward, b += c.backward, w += c.weight, r += c.recompute;
  }
  // The uniform fields: per-stage means, shown in captions (per_chunk is what the simulator uses).
  const double per_stage = static_cast<double>(v) / static_cast<double>(S * v);
  costs.forward = f * per_stage;
  costs.backward = b * per_stage;
  costs.weight = w * per_stage;
  costs.recompute = r * per_stage;
  return costs;
}

Timeline simulate_measured(const ExecutionTrace& trace, bool thread_cpu_time) {
  return simulate(trace.schedule, measured_costs(trace, thread_cpu_time));
}

namespace {

// A bar in a stage's thin wire lane: the time a Send/Recv took, or a Reduce's all-reduce over the
// replicas (from the Reduce to the end of its all-reduce, over the compute it overlaps).
void wire_bar(SvgTimeline& svg, const TraceEvent& e, const std::string& label, double x, double y, double w,
              double height) {
  const bool reduce = e.action.kind == ActionKind::Reduce;
  svg.raw() << "<g><title>" << xml_escape(label) << (reduce ? " (all-reduce over the replicas)" : "") << ": "
            << fixed(e.end_ms - e.start_ms, 3) << " ms, " << bytes_text(static_cast<double>(e.bytes))
            << "</title><rect x=\"" << x << "\" y=\"" << y << "\" width=\"" << w << "\" height=\"" << height
            << "\" fill=\"" << (reduce ? svg_color(ActionKind::Reduce) : "#777777") << "\"/></g>\n";
}

}  // namespace

std::string render_measured_svg(const ExecutionTrace& trace, const Timeline* simulated) {
  const Schedule& schedule = trace.schedule;
  const bool show_chunk = schedule.virtual_chunks > 1;
  const int S = static_cast<int>(trace.stages.size());
  double origin = std::numeric_limits<double>::infinity(), end = 0.0;
  for (const auto& events : trace.stages) {
    for (const TraceEvent& e : events) {
      origin = std::min(origin, e.start_ms);
      end = std::max(end, e.end_ms);
    }
  }
  if (!std::isfinite(origin)) origin = 0.0;
  if (trace.optimizer_end_ms > end) end = trace.optimizer_end_ms;
  // Below each stage's compute lane a thin wire lane shows the time its Send/Recv took.
  const double wire = 8;
  SvgTimeline::Geometry g;
  g.stages = S;
  g.span = std::max({end - origin, simulated ? simulated->step_time : 0.0, 1e-9});  // one axis for both
  g.left = 64, g.plot = 960, g.right = 230, g.lane = 28, g.lane_pitch = g.lane + wire + 12;
  std::string caption =
      "step " + fixed(trace.span_ms(), 2) + " ms, bubble " + fixed(100 * trace.bubble(), 1) + "%";
  if (trace.optimizer_start_ms >= 0.0) {
    caption += ", optimizer " + fixed(trace.optimizer_end_ms - trace.optimizer_start_ms, 2) + " ms";
  }
  caption += schedule.buckets.empty()
                 ? "   (thin lane: time in send/recv)"
                 : "   (thin lane: time in send/recv; all-reduces of the gradient buckets)";
  SvgTimeline svg(g, schedule.describe() + " (measured)", caption);
  const std::vector<double> bubbles = trace.bubbles();

  for (int s = 0; s < S; ++s) {
    const double y = svg.lane(s);
    for (const TraceEvent& e : trace.stages[static_cast<size_t>(s)]) {
      const double x = svg.x(e.start_ms - origin), w = std::max(0.5, (e.end_ms - e.start_ms) * g.scale());
      const std::string label = to_string(e.action, show_chunk);
      if (is_transfer(e.action.kind) || e.action.kind == ActionKind::Reduce) {
        wire_bar(svg, e, label, x, y + g.lane + 1, w, wire - 2);
        continue;
      }
      if (!is_work(e.action.kind)) continue;
      svg.action(e.action.kind, x, y, w, g.lane, chunk_shade(e.action.chunk, schedule.virtual_chunks),
                 label + " on stage " + std::to_string(s) + ": " + fixed(e.start_ms - origin, 3) + " .. " +
                     fixed(e.end_ms - origin, 3) + " ms",
                 label);
    }
    if (trace.optimizer_start_ms >= 0.0) {
      const double x = svg.x(trace.optimizer_start_ms - origin);
      const double w = std::max(0.5, (trace.optimizer_end_ms - trace.optimizer_start_ms) * g.scale());
      svg.raw() << "<rect x=\"" << x << "\" y=\"" << y << "\" width=\"" << w << "\" height=\"" << g.lane
                << "\" fill=\"" << svg_color(ActionKind::OptimizerStep)
                << "\"><title>optimizer step</title></rect>\n";
    }
    std::string note =
        "idle " + fixed(100 * (s < static_cast<int>(bubbles.size()) ? bubbles[s] : 0.0), 1) + "%";
    if (s < static_cast<int>(trace.peak_bytes.size())) {
      note += ", peak " + bytes_text(static_cast<double>(trace.peak_bytes[s]));
    }
    svg.lane_note(y, note);
  }
  svg.time_axis("ms", [](double tick, double step) { return fixed(tick, step < 1 ? 2 : 0); });
  std::vector<SvgLegendEntry> legend = {{"optimizer", svg_color(ActionKind::OptimizerStep)},
                                        {"send/recv", "#777777"}};
  if (!schedule.buckets.empty()) legend.push_back({"all-reduce", svg_color(ActionKind::Reduce)});
  svg.legend(legend);
  if (simulated == nullptr) return svg.finish();
  // The simulated twin under it, on the same millisecond axis.
  double twin_height = 0.0;
  const std::string twin = render_svg_block(
      *simulated, simulated->schedule.describe() + " (simulated)",
      "step " + fixed(simulated->step_time, 2) + " ms, bubble " + fixed(100 * simulated->bubble, 1) +
          "%   (the same schedule with each action's cost from the layer profile; red: live activations)",
      g.span, g.left, g.plot, &twin_height);
  const double top = g.height();
  return SvgTimeline::document(
      g.width(), top + twin_height,
      svg.body() + "<g transform=\"translate(0," + fixed(top, 1) + ")\">\n" + twin + "</g>\n");
}

}  // namespace brigade::pipeline
