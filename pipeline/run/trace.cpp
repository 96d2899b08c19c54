// Measured step figures, the Chrome trace and the measured SVG timeline.
#include "pipeline/run/trace.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <sstream>

#include "pipeline/plan/svg_timeline.h"

namespace brigade::pipeline {
namespace {

bool is_work(ActionKind kind) {
  return is_compute(kind) && kind != ActionKind::OptimizerStep;
}

std::string json_escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
      continue;
    }
    out += c;
  }
  return out;
}

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
      const double d = thread_cpu_time && e.cpu_ms >= 0.0 ? e.cpu_ms : e.end_ms - e.start_ms;
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

// The Chrome trace's events, written one after the other into its traceEvents array.
class TraceEvents {
 public:
  explicit TraceEvents(std::ostringstream& out) : out_(out) {}
  /// The stream, positioned for the next event.
  std::ostringstream& next() {
    out_ << (first_ ? "\n" : ",\n");
    first_ = false;
    return out_;
  }

 private:
  std::ostringstream& out_;
  bool first_ = true;
};

// Each stage has a compute track and a copy track in the measured process.
int compute_tid(int stage) {
  return 2 * stage;
}
int copy_tid(int stage) {
  return 2 * stage + 1;
}
// Slices of zero length would hide their flow arrows: give each at least a microsecond.
double duration_us(const TraceEvent& e) {
  return std::max(1.0, 1000.0 * (e.end_ms - e.start_ms));
}

// Process "measured": per stage its two tracks (named with the device and the stream), a slice per
// action, and the optimizer step on the compute track.
void measured_tracks(TraceEvents& events, const ExecutionTrace& trace) {
  auto next = [&]() -> std::ostringstream& { return events.next(); };
  const bool show_chunk = trace.schedule.virtual_chunks > 1;
  const int S = static_cast<int>(trace.stages.size());
  next() << R"({"name": "process_name", "ph": "M", "pid": 1, "args": {"name": "measured"}})";
  next() << R"({"name": "process_sort_index", "ph": "M", "pid": 1, "args": {"sort_index": 1}})";
  for (int s = 0; s < S; ++s) {
    const std::string device = s < static_cast<int>(trace.devices.size()) ? trace.devices[s].str() : "?";
    const int cs = s < static_cast<int>(trace.compute_streams.size()) ? trace.compute_streams[s] : 0;
    const int ps = s < static_cast<int>(trace.copy_streams.size()) ? trace.copy_streams[s] : 0;
    next() << R"({"name": "thread_name", "ph": "M", "pid": 1, "tid": )" << compute_tid(s)
           << R"(, "args": {"name": "stage )" << s << " compute (" << json_escape(device) << " stream " << cs
           << ")\"}}";
    next() << R"({"name": "thread_name", "ph": "M", "pid": 1, "tid": )" << copy_tid(s)
           << R"(, "args": {"name": "stage )" << s << " copy (" << json_escape(device) << " stream " << ps
           << ")\"}}";
    next() << R"({"name": "thread_sort_index", "ph": "M", "pid": 1, "tid": )" << compute_tid(s)
           << R"(, "args": {"sort_index": )" << compute_tid(s) << "}}";
    next() << R"({"name": "thread_sort_index", "ph": "M", "pid": 1, "tid": )" << copy_tid(s)
           << R"(, "args": {"sort_index": )" << copy_tid(s) << "}}";
    for (const TraceEvent& e : trace.stages[static_cast<size_t>(s)]) {
      if (e.action.kind == ActionKind::OptimizerStep) continue;  // the barrier; the optimizer is drawn below
      const bool transfer = is_transfer(e.action.kind);
      next() << R"({"name": ")" << json_escape(to_string(e.action, show_chunk)) << R"(", "cat": ")"
             << kind_name(e.action.kind) << R"(", "ph": "X", "pid": 1, "tid": )"
             << (transfer ? copy_tid(s) : compute_tid(s)) << ", \"ts\": " << 1000.0 * e.start_ms
             << ", \"dur\": " << duration_us(e) << R"(, "args": {"step": )" << e.step
             << ", \"microbatch\": " << e.action.microbatch << ", \"chunk\": " << e.action.chunk
             << ", \"bytes\": " << e.bytes << ", \"scope_bytes\": " << e.scope_bytes << "}}";
    }
    if (trace.optimizer_start_ms >= 0.0) {
      next() << R"({"name": "optimizer step", "cat": "step", "ph": "X", "pid": 1, "tid": )" << compute_tid(s)
             << ", \"ts\": " << 1000.0 * trace.optimizer_start_ms
             << ", \"dur\": " << std::max(1.0, 1000.0 * (trace.optimizer_end_ms - trace.optimizer_start_ms))
             << "}";
    }
  }
}

// Flow arrows: each Send to the Recv with the same tag.
void transfer_flows(TraceEvents& events, const ExecutionTrace& trace) {
  auto next = [&]() -> std::ostringstream& { return events.next(); };
  const Schedule& schedule = trace.schedule;
  const int S = static_cast<int>(trace.stages.size());
  int flow = 0;
  for (int s = 0; s < S; ++s) {
    for (const TraceEvent& send : trace.stages[static_cast<size_t>(s)]) {
      const ActionKind k = send.action.kind;
      if (k != ActionKind::SendActivation && k != ActionKind::SendGrad) continue;
      const TransferTag tag = transfer_tag(schedule, s, send.action);
      const int peer = send.action.peer;
      if (peer < 0 || peer >= S) continue;
      for (const TraceEvent& recv : trace.stages[static_cast<size_t>(peer)]) {
        const ActionKind rk = recv.action.kind;
        if (rk != ActionKind::RecvActivation && rk != ActionKind::RecvGrad) continue;
        if (!(transfer_tag(schedule, peer, recv.action) == tag)) continue;
        const char* name = tag.gradient ? "gradient" : "activation";
        next() << R"({"name": ")" << name << R"(", "cat": "transfer", "ph": "s", "id": )" << flow
               << R"(, "pid": 1, "tid": )" << copy_tid(s)
               << ", \"ts\": " << 1000.0 * send.start_ms + duration_us(send) / 2 << "}";
        next() << R"({"name": ")" << name << R"(", "cat": "transfer", "ph": "f", "bp": "e", "id": )" << flow
               << R"(, "pid": 1, "tid": )" << copy_tid(peer)
               << ", \"ts\": " << 1000.0 * recv.start_ms + duration_us(recv) / 2 << "}";
        ++flow;
        break;
      }
    }
  }
}

// Process "simulated": one track per stage, its compute actions with their simulated times (as ms).
void simulated_tracks(TraceEvents& events, const Timeline& simulated) {
  auto next = [&]() -> std::ostringstream& { return events.next(); };
  next() << R"({"name": "process_name", "ph": "M", "pid": 2, "args": {"name": "simulated"}})";
  next() << R"({"name": "process_sort_index", "ph": "M", "pid": 2, "args": {"sort_index": 2}})";
  const bool sim_chunk = simulated.schedule.virtual_chunks > 1;
  for (size_t s = 0; s < simulated.stages.size(); ++s) {
    next() << R"({"name": "thread_name", "ph": "M", "pid": 2, "tid": )" << s
           << R"(, "args": {"name": "stage )" << s << "\"}}";
    for (const TimedAction& t : simulated.stages[s]) {
      if (!is_compute(t.action.kind) || t.end <= t.start) continue;
      next() << R"({"name": ")" << json_escape(to_string(t.action, sim_chunk)) << R"(", "cat": ")"
             << kind_name(t.action.kind) << R"(", "ph": "X", "pid": 2, "tid": )" << s
             << ", \"ts\": " << 1000.0 * t.start << ", \"dur\": " << 1000.0 * (t.end - t.start) << "}";
    }
  }
}

}  // namespace

std::string chrome_trace_json(const ExecutionTrace& trace, const Timeline* simulated) {
  std::ostringstream out;
  out.precision(3);
  out << std::fixed;
  out << "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [";
  TraceEvents events(out);
  measured_tracks(events, trace);
  transfer_flows(events, trace);
  if (simulated) simulated_tracks(events, *simulated);
  out << "\n]}\n";
  return out.str();
}

std::string render_measured_svg(const ExecutionTrace& trace) {
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
  g.span = std::max(end - origin, 1e-9);
  g.left = 64, g.plot = 960, g.right = 230, g.lane = 28, g.lane_pitch = g.lane + wire + 12;
  std::string caption =
      "step " + fixed(trace.span_ms(), 2) + " ms, bubble " + fixed(100 * trace.bubble(), 1) + "%";
  if (trace.optimizer_start_ms >= 0.0) {
    caption += ", optimizer " + fixed(trace.optimizer_end_ms - trace.optimizer_start_ms, 2) + " ms";
  }
  caption += "   (thin lane: time in send/recv)";
  SvgTimeline svg(g, schedule.describe() + " (measured)", caption);
  const std::vector<double> bubbles = trace.bubbles();

  for (int s = 0; s < S; ++s) {
    const double y = svg.lane(s);
    for (const TraceEvent& e : trace.stages[static_cast<size_t>(s)]) {
      const double x = svg.x(e.start_ms - origin), w = std::max(0.5, (e.end_ms - e.start_ms) * g.scale());
      const std::string label = to_string(e.action, show_chunk);
      if (is_transfer(e.action.kind)) {
        svg.raw() << "<g><title>" << xml_escape(label) << ": " << fixed(e.end_ms - e.start_ms, 3) << " ms, "
                  << bytes_text(static_cast<double>(e.bytes)) << "</title><rect x=\"" << x << "\" y=\""
                  << y + g.lane + 1 << "\" width=\"" << w << "\" height=\"" << wire - 2
                  << "\" fill=\"#777777\"/></g>\n";
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
  svg.legend({{"optimizer", svg_color(ActionKind::OptimizerStep)}, {"send/recv", "#777777"}});
  return svg.finish();
}

}  // namespace brigade::pipeline
