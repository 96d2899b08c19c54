// brigade's JSON schedule files (see schedule_file.h).
#include <cctype>
#include <nlohmann/json.hpp>
#include <sstream>

#include "pipeline/schedule/schedule_file.h"
#include "pipeline/schedule/schedule_file_check.h"

namespace brigade::pipeline {

namespace {

using Json = nlohmann::json;
constexpr const char* kFormat = "brigade.schedule";
constexpr int kVersion = 1;

// Reads the number at `pos` of `text` (digits only); false when there is none.
bool read_number(const std::string& text, size_t& pos, int& value) {
  const size_t start = pos;
  while (pos < text.size() && std::isdigit(static_cast<unsigned char>(text[pos]))) ++pos;
  if (pos == start || pos - start > 9) return false;
  value = std::stoi(text.substr(start, pos - start));
  return true;
}

bool read_literal(const std::string& text, size_t& pos, const std::string& literal) {
  if (text.compare(pos, literal.size(), literal) != 0) return false;
  pos += literal.size();
  return true;
}

// "F3", "F3.c1", "Bi3.c0", ...: a compute label's kind, microbatch and chunk (chunk 0 when not shown).
bool read_compute(const std::string& text, size_t& pos,
                  const std::vector<std::pair<std::string, ActionKind>>& kinds, Action& action) {
  for (const auto& [name, kind] : kinds) {
    size_t at = pos;
    if (!read_literal(text, at, name) || at >= text.size() ||
        !std::isdigit(static_cast<unsigned char>(text[at])))
      continue;
    action.kind = kind;
    if (!read_number(text, at, action.microbatch)) return false;
    action.chunk = 0;
    if (read_literal(text, at, ".c") && !read_number(text, at, action.chunk)) return false;
    pos = at;
    return true;
  }
  return false;
}

// The inverse of to_string(action, true); the reason in `why` when `text` is not a label.
bool parse_label(const std::string& text, Action& action, std::string& why) {
  why =
      "not an action: expected a label such as F3.c0, B3.c0, Bi3.c0, Bw3.c0, R3.c0, step, "
      "'send F3.c0 ->s1', 'recv F3.c0 <-s0', 'send B3.c0 ->s0' or 'recv B3.c0 <-s2'";
  if (text == "step") {
    action = optimizer_step();
    return true;
  }
  size_t pos = 0;
  const bool send = read_literal(text, pos, "send "), recv = !send && read_literal(text, pos, "recv ");
  if (!send && !recv) {
    const bool ok = read_compute(text, pos,
                                 {{"Bi", ActionKind::BackwardInput},
                                  {"Bw", ActionKind::BackwardWeight},
                                  {"F", ActionKind::Forward},
                                  {"B", ActionKind::Backward},
                                  {"R", ActionKind::Recompute}},
                                 action);
    return ok && pos == text.size();
  }
  Action what;
  if (!read_compute(text, pos, {{"F", ActionKind::Forward}, {"B", ActionKind::Backward}}, what)) return false;
  const bool gradient = what.kind == ActionKind::Backward;
  if (!read_literal(text, pos, send ? " ->s" : " <-s") || !read_number(text, pos, action.peer) ||
      pos != text.size())
    return false;
  action.kind = send ? (gradient ? ActionKind::SendGrad : ActionKind::SendActivation)
                     : (gradient ? ActionKind::RecvGrad : ActionKind::RecvActivation);
  action.microbatch = what.microbatch;
  action.chunk = what.chunk;
  return true;
}

int field_int(const Json& j, const char* key, int least, const std::string& source) {
  if (!j.contains(key) || !j[key].is_number_integer())
    detail::refuse(source, std::string("needs \"") + key + "\", an integer");
  const int64_t value = j[key].get<int64_t>();
  if (value < least || value > 1000000)
    detail::refuse(source, std::string("\"") + key + "\" is " + std::to_string(value) + ", expected " +
                               std::to_string(least) + " to 1000000");
  return static_cast<int>(value);
}

std::string field_string(const Json& j, const char* key, const std::string& source) {
  if (!j.contains(key) || !j[key].is_string())
    detail::refuse(source, std::string("needs \"") + key + "\", a string");
  return j[key].get<std::string>();
}

}  // namespace

std::string schedule_to_json(const Schedule& schedule) {
  std::ostringstream out;
  out << "{\n  \"format\": \"" << kFormat << "\",\n  \"version\": " << kVersion
      << ",\n  \"name\": " << Json(schedule.name).dump() << ",\n  \"stages\": " << schedule.stages
      << ",\n  \"microbatches\": " << schedule.microbatches
      << ",\n  \"virtual_chunks\": " << schedule.virtual_chunks << ",\n  \"placement\": \""
      << to_string(schedule.placement) << "\",\n  \"recompute\": \"" << to_string(schedule.recompute)
      << "\",\n  \"actions\": [";
  for (size_t s = 0; s < schedule.actions.size(); ++s) {
    out << (s ? ",\n    [" : "\n    [");
    for (size_t i = 0; i < schedule.actions[s].size(); ++i)
      out << (i ? ", " : "") << Json(to_string(schedule.actions[s][i], true)).dump();
    out << "]";
  }
  out << "\n  ]\n}\n";
  return out.str();
}

Schedule schedule_from_json(const std::string& text, const std::string& source) {
  Json j;
  try {
    j = Json::parse(text);
  } catch (const Json::exception& e) {  // a syntax error, or a number too large for any type (out_of_range)
    detail::refuse(source, std::string("is not JSON: ") + e.what());
  }
  if (!j.is_object()) detail::refuse(source, "is not a JSON object");
  if (field_string(j, "format", source) != kFormat)
    detail::refuse(source, std::string("\"format\" is not \"") + kFormat + "\"");
  if (field_int(j, "version", 1, source) != kVersion)
    detail::refuse(source, "\"version\" " + j["version"].dump() + " is not one this brigade reads (" +
                               std::to_string(kVersion) + ")");
  Schedule schedule;
  schedule.name = field_string(j, "name", source);
  schedule.stages = field_int(j, "stages", 1, source);
  schedule.microbatches = field_int(j, "microbatches", 1, source);
  schedule.virtual_chunks = field_int(j, "virtual_chunks", 1, source);
  try {
    schedule.placement = parse_placement(field_string(j, "placement", source));
    schedule.recompute = parse_recompute(field_string(j, "recompute", source));
  } catch (const ValueError& e) {
    detail::refuse(source, e.what());
  }
  if (!j.contains("actions") || !j["actions"].is_array())
    detail::refuse(source, "needs \"actions\", one list of action labels per stage");
  const Json& lists = j["actions"];
  if (static_cast<int>(lists.size()) != schedule.stages)
    detail::refuse(source, "\"actions\" has " + std::to_string(lists.size()) + " lists for " +
                               std::to_string(schedule.stages) + " stages");
  detail::Origins origins(lists.size());
  for (size_t s = 0; s < lists.size(); ++s) {
    if (!lists[s].is_array()) detail::refuse(source, "actions[" + std::to_string(s) + "] is not a list");
    schedule.actions.emplace_back();
    for (size_t i = 0; i < lists[s].size(); ++i) {
      const std::string where = "actions[" + std::to_string(s) + "][" + std::to_string(i) + "]";
      const Json& cell = lists[s][i];
      if (!cell.is_string()) detail::refuse(source, where, cell.dump(), "not a string");
      Action action;
      std::string why;
      if (!parse_label(cell.get<std::string>(), action, why))
        detail::refuse(source, where, cell.get<std::string>(), why);
      schedule.actions.back().push_back(action);
      origins[s].push_back({where, cell.get<std::string>()});
    }
  }
  detail::check_parsed(schedule, origins, source);
  return schedule;
}

}  // namespace brigade::pipeline
