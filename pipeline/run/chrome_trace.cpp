// The Chrome trace / Perfetto JSON of an executed step (trace.h: chrome_trace_json).
//
// Layout: process kMeasured ("measured") holds per stage s a compute track (tid 2s) and a copy track
// (tid 2s + 1) with a slice per action, flow arrows from each Send to its Recv, and a counter "stage s
// memory"; with data-parallel replicas also a comm track (tid kCommTid + s) with a slice per Reduce, from
// its start to the end of its all-reduce, so that its overlap with the compute track shows; process
// kSimulated ("simulated") holds a track per stage (tid s) and a counter "stage s activations". Each part is
// one function writing into TraceEvents, so that another part (another process's stages, collectives) is one
// more function.
#include <algorithm>
#include <cstdio>
#include <sstream>

#include "pipeline/run/trace.h"

namespace brigade::pipeline {
namespace {

constexpr int kMeasured = 1, kSimulated = 2;  // the processes' pids

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
// The comm track of a stage (its Reduces' all-reduces), sorted right under the stage's copy track.
constexpr int kCommTid = 1000;
int comm_tid(int stage) {
  return kCommTid + stage;
}
bool has_reduces(const std::vector<TraceEvent>& events) {
  return std::any_of(events.begin(), events.end(),
                     [](const TraceEvent& e) { return e.action.kind == ActionKind::Reduce; });
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
  next() << R"({"name": "process_name", "ph": "M", "pid": )" << kMeasured
         << R"(, "args": {"name": "measured"}})";
  next() << R"({"name": "process_sort_index", "ph": "M", "pid": )" << kMeasured
         << R"(, "args": {"sort_index": 1}})";
  for (int s = 0; s < S; ++s) {
    const std::string device = s < static_cast<int>(trace.devices.size()) ? trace.devices[s].str() : "?";
    const int cs = s < static_cast<int>(trace.compute_streams.size()) ? trace.compute_streams[s] : 0;
    const int ps = s < static_cast<int>(trace.copy_streams.size()) ? trace.copy_streams[s] : 0;
    next() << R"({"name": "thread_name", "ph": "M", "pid": )" << kMeasured << R"(, "tid": )" << compute_tid(s)
           << R"(, "args": {"name": "stage )" << s << " compute (" << json_escape(device) << " stream " << cs
           << ")\"}}";
    next() << R"({"name": "thread_name", "ph": "M", "pid": )" << kMeasured << R"(, "tid": )" << copy_tid(s)
           << R"(, "args": {"name": "stage )" << s << " copy (" << json_escape(device) << " stream " << ps
           << ")\"}}";
    next() << R"({"name": "thread_sort_index", "ph": "M", "pid": )" << kMeasured << R"(, "tid": )"
           << compute_tid(s) << R"(, "args": {"sort_index": )" << 3 * s << "}}";
    next() << R"({"name": "thread_sort_index", "ph": "M", "pid": )" << kMeasured << R"(, "tid": )"
           << copy_tid(s) << R"(, "args": {"sort_index": )" << 3 * s + 1 << "}}";
    const bool reduces = has_reduces(trace.stages[static_cast<size_t>(s)]);
    if (reduces) {
      next() << R"({"name": "thread_name", "ph": "M", "pid": )" << kMeasured << R"(, "tid": )" << comm_tid(s)
             << R"(, "args": {"name": "stage )" << s << " comm (all-reduce over the replicas)\"}}";
      next() << R"({"name": "thread_sort_index", "ph": "M", "pid": )" << kMeasured << R"(, "tid": )"
             << comm_tid(s) << R"(, "args": {"sort_index": )" << 3 * s + 2 << "}}";
    }
    for (const TraceEvent& e : trace.stages[static_cast<size_t>(s)]) {
      if (e.action.kind == ActionKind::OptimizerStep) continue;  // the barrier; the optimizer is drawn below
      const bool transfer = is_transfer(e.action.kind);
      const int tid = e.action.kind == ActionKind::Reduce ? comm_tid(s)
                      : transfer                          ? copy_tid(s)
                                                          : compute_tid(s);
      next() << R"({"name": ")" << json_escape(to_string(e.action, show_chunk)) << R"(", "cat": ")"
             << kind_name(e.action.kind) << R"(", "ph": "X", "pid": )" << kMeasured << R"(, "tid": )" << tid
             << ", \"ts\": " << 1000.0 * e.start_ms << ", \"dur\": " << duration_us(e)
             << R"(, "args": {"step": )" << e.step << ", \"microbatch\": " << e.action.microbatch
             << ", \"chunk\": " << e.action.chunk << ", \"bucket\": " << e.action.bucket
             << ", \"bytes\": " << e.bytes << ", \"scope_bytes\": " << e.scope_bytes
             << ", \"scope_peak_bytes\": " << e.scope_peak_bytes << "}}";
    }
    if (trace.optimizer_start_ms >= 0.0) {
      next() << R"({"name": "optimizer step", "cat": "step", "ph": "X", "pid": )" << kMeasured
             << R"(, "tid": )" << compute_tid(s) << ", \"ts\": " << 1000.0 * trace.optimizer_start_ms
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
               << R"(, "pid": )" << kMeasured << R"(, "tid": )" << copy_tid(s)
               << ", \"ts\": " << 1000.0 * send.start_ms + duration_us(send) / 2 << "}";
        next() << R"({"name": ")" << name << R"(", "cat": "transfer", "ph": "f", "bp": "e", "id": )" << flow
               << R"(, "pid": )" << kMeasured << R"(, "tid": )" << copy_tid(peer)
               << ", \"ts\": " << 1000.0 * recv.start_ms + duration_us(recv) / 2 << "}";
        ++flow;
        break;
      }
    }
  }
}

// Per stage a counter track of its memory scope's live bytes (relative to the step's start): at each
// action's start the scope's peak during the action (all a trace can say of when inside it), at its end
// what the stage holds after it. The counters' highest value is the stage's measured peak.
void memory_counters(TraceEvents& events, const ExecutionTrace& trace) {
  for (size_t s = 0; s < trace.stages.size(); ++s) {
    auto counter = [&](double ms, int64_t bytes) {
      events.next() << R"({"name": "stage )" << s << R"( memory", "ph": "C", "pid": )" << kMeasured
                    << ", \"ts\": " << 1000.0 * ms << R"(, "args": {"live bytes": )" << bytes << "}}";
    };
    for (const TraceEvent& e : trace.stages[s]) {
      counter(e.start_ms, e.scope_peak_bytes);
      counter(e.end_ms, e.scope_bytes);
    }
  }
}

// Process "simulated": one track per stage, its compute actions with their simulated times (as ms).
void simulated_tracks(TraceEvents& events, const Timeline& simulated) {
  auto next = [&]() -> std::ostringstream& { return events.next(); };
  next() << R"({"name": "process_name", "ph": "M", "pid": )" << kSimulated
         << R"(, "args": {"name": "simulated"}})";
  next() << R"({"name": "process_sort_index", "ph": "M", "pid": )" << kSimulated
         << R"(, "args": {"sort_index": 2}})";
  const bool sim_chunk = simulated.schedule.virtual_chunks > 1;
  for (size_t s = 0; s < simulated.stages.size(); ++s) {
    next() << R"({"name": "thread_name", "ph": "M", "pid": )" << kSimulated << R"(, "tid": )" << s
           << R"(, "args": {"name": "stage )" << s << "\"}}";
    bool comm_named = false;
    for (const TimedAction& t : simulated.stages[s]) {
      const bool reduce = t.action.kind == ActionKind::Reduce;
      if ((!is_compute(t.action.kind) && !reduce) || t.end <= t.start) continue;
      const size_t tid = reduce ? kCommTid + s : s;
      if (reduce && !comm_named) {
        next() << R"({"name": "thread_name", "ph": "M", "pid": )" << kSimulated << R"(, "tid": )" << tid
               << R"(, "args": {"name": "stage )" << s << " comm\"}}";
        comm_named = true;
      }
      next() << R"({"name": ")" << json_escape(to_string(t.action, sim_chunk)) << R"(", "cat": ")"
             << kind_name(t.action.kind) << R"(", "ph": "X", "pid": )" << kSimulated << R"(, "tid": )" << tid
             << ", \"ts\": " << 1000.0 * t.start << ", \"dur\": " << 1000.0 * (t.end - t.start) << "}";
    }
    // The simulator's activation ledger over the step (StageStats::memory), in its units (one stage's
    // activations for one microbatch unless the simulation was given sizes): the predicted shape of the
    // measured "stage s memory" counter.
    for (const MemoryPoint& p : simulated.stats[s].memory) {
      next() << R"({"name": "stage )" << s << R"( activations", "ph": "C", "pid": )" << kSimulated
             << ", \"ts\": " << 1000.0 * p.time << R"(, "args": {"live": )" << p.live << "}}";
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
  memory_counters(events, trace);
  if (simulated) simulated_tracks(events, *simulated);
  out << "\n]}\n";
  return out.str();
}

}  // namespace brigade::pipeline
