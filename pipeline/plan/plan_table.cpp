// The planner's output: a candidate's flags, the ranked table and why each row lost to the first.
#include <algorithm>
#include <cstdio>
#include <sstream>

#include "pipeline/plan/planner.h"
#include "pipeline/schedule/generators.h"
#include "tensor/error.h"

namespace brigade::pipeline {

std::string PlanCandidate::recompute_text() const {
  if (policy == Recompute::Never || layer_recompute.empty()) return to_string(policy);
  return RecomputeSetting{policy, plan_letters(layer_recompute)}.str();
}

std::string PlanCandidate::flags() const {
  std::ostringstream out;
  out << "--stages " << stages << " --microbatches " << microbatches << " --schedule " << schedule;
  if (virtual_chunks > 1 && schedule == "interleaved") out << " --virtual " << virtual_chunks;
  if (virtual_chunks > 1 && schedule == "looped-bfs") out << " --virtual " << virtual_chunks;
  out << " --recompute " << recompute_text() << " --balance ";
  for (size_t i = 0; i < balance.size(); ++i) out << (i ? "," : "") << balance[i];
  if (replicas > 1) out << " --data-parallel " << replicas;
  return out.str();
}

int64_t PlanCandidate::max_peak_bytes() const {
  return peak_bytes.empty() ? 0 : *std::max_element(peak_bytes.begin(), peak_bytes.end());
}

bool PlanCandidate::same_program(const PlanCandidate& o) const {
  if (stages != o.stages || replicas != o.replicas || microbatches != o.microbatches ||
      virtual_chunks != o.virtual_chunks || placement != o.placement || balance != o.balance ||
      policy != o.policy || layer_recompute != o.layer_recompute)
    return false;
  if (schedule == o.schedule) return true;
  const Schedule a = make_schedule(schedule, stages, microbatches, virtual_chunks, policy);
  const Schedule b = make_schedule(o.schedule, stages, microbatches, virtual_chunks, policy);
  return a.placement == b.placement && a.actions == b.actions;
}

const PlanCandidate& Plan::best() const {
  if (!ranked.empty()) return ranked.front();
  std::ostringstream msg;
  msg << "plan: nothing fits in " << format_bytes(static_cast<double>(request.device_memory))
      << " per device";
  if (!refused.empty())
    msg << "; the lowest predicted peak is "
        << format_bytes(static_cast<double>(refused.front().max_peak_bytes())) << " ("
        << refused.front().flags() << ": " << refused.front().refusal << ")";
  BRIGADE_THROW(ValueError, msg.str());
}

namespace {

std::string short_bytes(int64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f", static_cast<double>(bytes) / 1048576.0);
  return text;
}

// "never", or the policy and each stage's choice: "always n|a|f".
std::string recompute_column(const PlanCandidate& c) {
  if (c.policy == Recompute::Never) return "never";
  std::string choices =
      c.stage_choices.empty() ? std::string(static_cast<size_t>(c.stages), 'f') : c.stage_choices;
  std::string out = std::string(to_string(c.policy)) + " ";
  for (size_t i = 0; i < choices.size(); ++i) out += (i ? "|" : "") + std::string(1, choices[i]);
  return out;
}

// Why `c` is slower than `first`: the largest of the four parts its step time adds up to (mean busy time
// without R, R on the busiest stage, mean idle time, what follows the pipeline: all-reduce, tied sums and
// optimizer step).
std::string why_slower(const PlanCandidate& c, const PlanCandidate& first) {
  const double slower = c.step_ms - first.step_ms;
  char head[64];
  std::snprintf(head, sizeof head, "+%.2f ms (+%.0f%%): ", slower, 100.0 * slower / first.step_ms);
  const auto idle = [](const PlanCandidate& p) { return p.pipeline_ms * p.bubble; };
  const auto work = [](const PlanCandidate& p) { return p.pipeline_ms * (1.0 - p.bubble) - p.recompute_ms; };
  const auto after = [](const PlanCandidate& p) { return p.allreduce_ms + p.tied_ms + p.optimizer_ms; };
  const double parts[4] = {idle(c) - idle(first), work(c) - work(first), c.recompute_ms - first.recompute_ms,
                           after(c) - after(first)};
  const int largest = static_cast<int>(std::max_element(parts, parts + 4) - parts);
  char why[160];
  if (slower <= 0.0) return "ties with the first";
  if (largest == 0)
    std::snprintf(why, sizeof why, "bubble %.0f%% vs %.0f%%", 100 * c.bubble, 100 * first.bubble);
  else if (largest == 1)
    std::snprintf(why, sizeof why,
                  "more compute per stage (+%.2f ms: smaller, uneven, split or deferred pieces)", parts[1]);
  else if (largest == 2)
    std::snprintf(why, sizeof why, "recomputation (+%.2f ms)", parts[2]);
  else
    std::snprintf(why, sizeof why, "all-reduce, tied sums and optimizer step (+%.2f ms)", parts[3]);
  return head + std::string(why);
}

std::string row(int rank, const PlanCandidate& c, const std::string& why) {
  std::string peaks;
  for (int64_t p : c.peak_bytes) peaks += (peaks.empty() ? "" : " ") + short_bytes(p);
  std::string balance;
  for (size_t i = 0; i < c.balance.size(); ++i) balance += (i ? "," : "") + std::to_string(c.balance[i]);
  char line[512];
  std::snprintf(line, sizeof line, "%4d %9.3f %6.1f%% %2d %2d %3d %2d  %-11s %-18s %-12s %-20s %9s  %s\n",
                rank, c.step_ms, 100.0 * c.bubble, c.stages, c.replicas, c.microbatches, c.virtual_chunks,
                c.schedule.c_str(), recompute_column(c).c_str(), balance.c_str(), peaks.c_str(),
                short_bytes(c.traffic_bytes).c_str(), why.c_str());
  return line;
}

}  // namespace

std::string Plan::table() const {
  std::ostringstream out;
  out << "plan: batch " << request.batch << ", " << request.devices << " device"
      << (request.devices == 1 ? "" : "s");
  if (request.device_memory > 0) out << " of " << format_bytes(static_cast<double>(request.device_memory));
  out << ", link " << request.link.str();
  if (!request.link_origin.empty()) out << " (" << request.link_origin << ")";
  if (request.optimizer_ms > 0) {
    char optimizer[64];
    std::snprintf(optimizer, sizeof optimizer, ", optimizer step %.3f ms", request.optimizer_ms);
    out << optimizer;
  }
  out << ", " << num_layers << " layers\n";
  bool factors_said = false;
  for (const FactorFit& factor : factors) {
    const std::string line = factor.describe();
    if (line.empty()) continue;
    if (!factors_said)
      out << "measured factors (an action over its layers timed alone; a deferred Bw, a cold B over its "
             "twin right after its own Bi or F), measured -> priced at each microbatch size:\n";
    factors_said = true;
    out << "  " << line << "\n";
  }
  char header[256];
  std::snprintf(header, sizeof header, "%4s %9s %7s %2s %2s %3s %2s  %-11s %-18s %-12s %-20s %9s  %s\n",
                "rank", "step ms", "bubble", "S", "D", "M", "v", "schedule", "recompute", "balance",
                "peak MiB/stage", "MiB/step", "why not first");
  out << header;
  for (size_t i = 0; i < ranked.size(); ++i) {
    std::string why = i == 0 ? "(the pick)" : why_slower(ranked[i], ranked[0]);
    for (size_t j = 0; j < i; ++j) {
      if (!ranked[i].same_program(ranked[j])) continue;
      why = "the same program as rank " + std::to_string(j + 1);
      break;
    }
    out << row(static_cast<int>(i) + 1, ranked[i], why);
  }
  if (ranked.empty()) out << "   -  nothing fits\n";
  if (!refused.empty()) {
    out << "refused by the memory model (" << over_budget << "; the " << refused.size() << " closest):\n";
    for (const PlanCandidate& c : refused) out << "     " << c.flags() << ": " << c.refusal << "\n";
  }
  out << "search: " << configurations << " configurations (S, D, M, v, schedule), "
      << (exhaustive ? "exhaustive" : "pruned by the step-time bound") << "; " << scored
      << " candidates scored, " << pruned << " skipped by the bound, " << over_budget
      << " refused by the memory model\n";
  if (!ranked.empty()) {
    const PlanCandidate& pick = ranked.front();
    const int processes = pick.stages * pick.replicas;
    out << "pick: " << (pick.replicas > 1 ? "mpirun -np " + std::to_string(processes) + " " : std::string())
        << "brigade train " << pick.flags() << "\n";
  }
  return out.str();
}

}  // namespace brigade::pipeline
