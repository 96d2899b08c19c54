// Schedule files by path, the refusals the readers share, and adding recomputation to a read schedule
// (see schedule_file.h).
#include "pipeline/schedule/schedule_file.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <tuple>

#include "pipeline/schedule/generators.h"
#include "pipeline/schedule/render_schedule.h"
#include "pipeline/schedule/schedule_file_check.h"

namespace brigade::pipeline {

namespace detail {

void refuse(const std::string& source, const std::string& where, const std::string& text,
            const std::string& reason) {
  throw ScheduleFileError(source + ": " + where + " ('" + text + "'): " + reason);
}

void refuse(const std::string& source, const std::string& reason) {
  throw ScheduleFileError(source + ": " + reason);
}

Origins match_origins(const Schedule& before, const Origins& origins, const Schedule& after) {
  using Key = std::tuple<int, int, int, int>;  // stage, kind, chunk, microbatch
  std::map<Key, std::vector<ActionOrigin>> by_action;
  for (size_t s = 0; s < before.actions.size(); ++s) {
    for (size_t i = 0; i < before.actions[s].size(); ++i) {
      const Action& a = before.actions[s][i];
      by_action[{static_cast<int>(s), static_cast<int>(a.kind), a.chunk, a.microbatch}].push_back(
          origins[s][i]);
    }
  }
  Origins out(after.actions.size());
  for (size_t s = 0; s < after.actions.size(); ++s) {
    for (const Action& a : after.actions[s]) {
      auto& queue = by_action[{static_cast<int>(s), static_cast<int>(a.kind), a.chunk, a.microbatch}];
      if (queue.empty()) {
        out[s].push_back({});
      } else {
        out[s].push_back(queue.front());
        queue.erase(queue.begin());
      }
    }
  }
  return out;
}

void check_sizes(uint64_t chunks, uint64_t microbatches, size_t actions, const std::string& source) {
  // Every (chunk, microbatch) needs at least its F, so a file of n actions can only run counts whose
  // product is at most n. Checked before anything is sized by the counts: a 12-byte file naming
  // microbatch 999999999 must be refused, not allocated for.
  if (chunks > actions || microbatches > actions || chunks * microbatches > actions) {
    refuse(source, "runs " + std::to_string(chunks) + " model chunks x " + std::to_string(microbatches) +
                       " microbatches, but its " + std::to_string(actions) +
                       " actions cannot hold an F for each of them");
  }
}

void check_parsed(const Schedule& schedule, const Origins& origins, const std::string& source) {
  size_t actions = 0;
  for (const auto& list : schedule.actions) actions += list.size();
  check_sizes(static_cast<uint64_t>(std::max(schedule.stages, 0)) * std::max(schedule.virtual_chunks, 0),
              static_cast<uint64_t>(std::max(schedule.microbatches, 0)), actions, source);
  const auto issue = find_issue(schedule);
  if (!issue) return;
  std::string where = "the schedule", text;
  if (!issue->marks.empty()) {
    const auto [stage, step] = issue->marks.front();
    const auto& list = origins[static_cast<size_t>(stage)];
    // An action the reader added has no text of its own: name the file's action it serves, the compute
    // action after a receive, or before anything else.
    const ActionKind kind = schedule.actions[static_cast<size_t>(stage)][static_cast<size_t>(step)].kind;
    const bool receive = kind == ActionKind::RecvActivation || kind == ActionKind::RecvGrad;
    const int n = static_cast<int>(list.size());
    for (int d = 0; d < n && text.empty(); ++d) {
      for (int i : {receive ? step + d : step - d, receive ? step - d : step + d}) {
        if (i >= 0 && i < n && !list[static_cast<size_t>(i)].where.empty()) {
          where = list[static_cast<size_t>(i)].where;
          text = list[static_cast<size_t>(i)].text;
          break;
        }
      }
    }
  }
  std::ostringstream message;
  message << issue->message << "\n" << render_order_grid(schedule, issue->marks, 16);
  if (text.empty()) refuse(source, message.str());
  refuse(source, where, text, message.str());
}

}  // namespace detail

namespace {

std::string extension_of(const std::string& path) {
  return std::filesystem::path(path).extension().string();
}

}  // namespace

Schedule read_schedule_file(const std::string& path) {
  const std::string extension = extension_of(path);
  if (extension != ".json" && extension != ".csv") {
    detail::refuse(path, "a schedule file is .json (brigade's) or .csv (PyTorch's), not '" + extension + "'");
  }
  std::ifstream file(path, std::ios::binary);
  if (!file) detail::refuse(path, "cannot be opened");
  std::ostringstream text;
  text << file.rdbuf();
  if (extension == ".json") return schedule_from_json(text.str(), path);
  return schedule_from_pytorch_csv(text.str(), std::filesystem::path(path).stem().string(), path);
}

void write_schedule_file(const Schedule& schedule, const std::string& path, bool with_transfers) {
  const std::string extension = extension_of(path);
  BRIGADE_CHECK_VALUE(extension == ".json" || extension == ".csv", "schedule file '", path,
                      "': the extension must be .json (brigade's) or .csv (PyTorch's), found '", extension,
                      "'");
  const std::string text =
      extension == ".json" ? schedule_to_json(schedule) : schedule_to_pytorch_csv(schedule, with_transfers);
  std::ofstream file(path, std::ios::binary);
  file << text;
  BRIGADE_CHECK_AS(IOError, file.good(), "schedule file '", path, "' could not be written");
}

Schedule with_recompute(Schedule schedule, Recompute policy) {
  if (policy == Recompute::Never || policy == schedule.recompute) return schedule;
  BRIGADE_CHECK_VALUE(schedule.recompute == Recompute::Never, "schedule '", schedule.name, "' recomputes ",
                      to_string(schedule.recompute), "; it cannot also recompute ", to_string(policy));
  schedule.recompute = policy;
  insert_recompute(schedule);
  return schedule;
}

}  // namespace brigade::pipeline
