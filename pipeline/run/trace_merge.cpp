// Merging the ranks' traces; see trace_merge.h.
#include "pipeline/run/trace_merge.h"

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <tuple>

#include "tensor/error.h"

namespace brigade::pipeline {

using Json = nlohmann::json;

std::string stage_events_text(const StepResult& result, int stage) {
  const ExecutionTrace& trace = result.trace;
  BRIGADE_CHECK_VALUE(stage >= 0 && stage < static_cast<int>(trace.stages.size()),
                      "stage_events_text: stage ", stage, " outside the trace's ", trace.stages.size());
  const auto s = static_cast<size_t>(stage);
  Json events = Json::array();
  for (const TraceEvent& e : trace.stages[s]) {
    events.push_back({e.step, static_cast<int>(e.action.kind), e.action.microbatch, e.action.chunk,
                      e.action.peer, e.start_ms, e.end_ms, e.cpu_ms, e.bytes, e.scope_bytes,
                      e.action.bucket});
  }
  return Json{{"stage", stage},
              {"origin_ns", result.origin_ns},
              {"peak_bytes", trace.peak_bytes[s]},
              {"compute_stream", trace.compute_streams[s]},
              {"copy_stream", trace.copy_streams[s]},
              {"events", events}}
      .dump();
}

void merge_stage_events(ExecutionTrace& merged, const std::string& text, int64_t origin_ns,
                        double offset_seconds) {
  const Json j = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  BRIGADE_CHECK_VALUE(j.is_object() && j.contains("stage") && j.contains("events"),
                      "merge_stage_events: not the text of stage_events_text");
  const int stage = j["stage"].get<int>();
  BRIGADE_CHECK_VALUE(stage >= 0 && stage < static_cast<int>(merged.stages.size()),
                      "merge_stage_events: stage ", stage, " outside the merged trace's ",
                      merged.stages.size());
  // The writer's step start on our clock, relative to ours.
  const double shift_ms = (static_cast<double>(j["origin_ns"].get<int64_t>()) - 1e9 * offset_seconds -
                           static_cast<double>(origin_ns)) /
                          1e6;
  const auto s = static_cast<size_t>(stage);
  merged.peak_bytes[s] = j["peak_bytes"].get<int64_t>();
  merged.compute_streams[s] = j["compute_stream"].get<int>();
  merged.copy_streams[s] = j["copy_stream"].get<int>();
  merged.stages[s].clear();
  for (const Json& e : j["events"]) {
    TraceEvent event;
    event.step = e[0].get<int>();
    event.action =
        Action{static_cast<ActionKind>(e[1].get<int>()), e[2].get<int>(), e[3].get<int>(), e[4].get<int>()};
    event.start_ms = e[5].get<double>() + shift_ms;
    event.end_ms = e[6].get<double>() + shift_ms;
    event.cpu_ms = e[7].get<double>();
    event.bytes = e[8].get<int64_t>();
    event.scope_bytes = e[9].get<int64_t>();
    if (e.size() > 10) event.action.bucket = e[10].get<int>();
    merged.stages[s].push_back(event);
  }
}

double LinkTraffic::achieved_bytes_per_second() const {
  return in_flight_ms > 0.0 ? static_cast<double>(bytes) / (1e-3 * in_flight_ms) : 0.0;
}

std::vector<LinkTraffic> link_traffic(const ExecutionTrace& trace) {
  using Key = std::tuple<bool, int, int, int, int, int>;
  auto key_of = [](const TransferTag& t) {
    return Key{t.gradient, t.microbatch, t.from_stage, t.from_chunk, t.to_stage, t.to_chunk};
  };
  std::map<Key, double> received_at;  // each message's Recv end
  for (size_t s = 0; s < trace.stages.size(); ++s) {
    for (const TraceEvent& e : trace.stages[s]) {
      if (e.action.kind == ActionKind::RecvActivation || e.action.kind == ActionKind::RecvGrad)
        received_at[key_of(transfer_tag(trace.schedule, static_cast<int>(s), e.action))] = e.end_ms;
    }
  }
  std::map<std::pair<int, int>, LinkTraffic> links;
  for (size_t s = 0; s < trace.stages.size(); ++s) {
    for (const TraceEvent& e : trace.stages[s]) {
      if (e.action.kind != ActionKind::SendActivation && e.action.kind != ActionKind::SendGrad) continue;
      const TransferTag tag = transfer_tag(trace.schedule, static_cast<int>(s), e.action);
      LinkTraffic& link = links[{tag.from_stage, tag.to_stage}];
      link.from_stage = tag.from_stage;
      link.to_stage = tag.to_stage;
      link.bytes += e.bytes;
      ++link.messages;
      const auto it = received_at.find(key_of(tag));
      if (it != received_at.end()) link.in_flight_ms += std::max(0.0, it->second - e.start_ms);
    }
  }
  std::vector<LinkTraffic> out;
  for (const auto& [pair, link] : links) out.push_back(link);
  return out;
}

}  // namespace brigade::pipeline
