// The pipeline simulator (see simulator.h for the time and memory models).
#include "pipeline/plan/simulator.h"

#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <sstream>

#include "pipeline/plan/activation_ledger.h"
#include "pipeline/plan/key_values.h"
#include "pipeline/schedule/dependencies.h"
#include "pipeline/schedule/validate.h"
#include "tensor/error.h"

namespace brigade::pipeline {

Costs Costs::parse(const std::string& text) {
  const std::string keys = "f|forward, b|backward, w|weight, r|recompute, step, t|transfer";
  Costs costs;
  const std::map<std::string, double*> fields = {
      {"f", &costs.forward},        {"forward", &costs.forward},
      {"b", &costs.backward},       {"backward", &costs.backward},
      {"w", &costs.weight},         {"weight", &costs.weight},
      {"r", &costs.recompute},      {"recompute", &costs.recompute},
      {"step", &costs.step},        {"t", &costs.transfer},
      {"transfer", &costs.transfer}};
  for (const auto& [key, value] : parse_key_values(text, "costs", keys)) {
    auto it = fields.find(key);
    BRIGADE_CHECK_VALUE(it != fields.end(), "costs: unknown key '", key, "' (valid: ", keys, ")");
    *it->second = value;
  }
  return costs;
}

void Costs::check(int stages, int virtual_chunks) const {
  BRIGADE_CHECK_VALUE(forward >= 0 && backward >= 0 && weight >= 0 && step >= 0 && transfer >= 0,
                      "costs: every cost must be >= 0 (found f=", forward, " b=", backward, " w=", weight,
                      " step=", step, " t=", transfer, ")");
  BRIGADE_CHECK_VALUE(weight <= backward, "costs: the weight-gradient part w=", weight,
                      " cannot exceed the whole backward b=", backward, " (Bi costs b - w)");
  BRIGADE_CHECK_VALUE(per_chunk.empty() || static_cast<int>(per_chunk.size()) == stages * virtual_chunks,
                      "costs: per-chunk costs for ", per_chunk.size(), " chunks, the schedule has ", stages,
                      " stages x ", virtual_chunks, " chunks");
  for (size_t k = 0; k < per_chunk.size(); ++k) {
    const ChunkCosts& c = per_chunk[k];
    // With Bi given, Bw may exceed B (a chunk whose backward is all weight gradients, measured twice).
    BRIGADE_CHECK_VALUE(c.forward >= 0 && c.backward >= 0 && c.weight >= 0 && c.recompute >= 0 &&
                            (c.input >= 0 || c.weight <= c.backward),
                        "costs: model chunk ", k, " has f=", c.forward, " b=", c.backward, " w=", c.weight,
                        " r=", c.recompute, " (need all >= 0 and, without a measured Bi, w <= b)");
    BRIGADE_CHECK_VALUE(c.cold >= 1.0, "costs: model chunk ", k, " has a cold backward factor of ", c.cold,
                        " (need >= 1: a cold read is not faster)");
    BRIGADE_CHECK_VALUE(c.weight_deferred < 0 || c.weight_deferred >= c.weight, "costs: model chunk ", k,
                        " has a deferred Bw of ", c.weight_deferred, " below its Bw of ", c.weight,
                        " (need >= w, or negative: w)");
  }
}

ChunkCosts Costs::chunk(const ChunkLayout& layout, int stage, int chunk) const {
  if (!per_chunk.empty()) return per_chunk[static_cast<size_t>(layout.model_chunk(stage, chunk))];
  const double v = layout.virtual_chunks;
  return ChunkCosts{forward / v, backward / v, weight / v, (recompute < 0 ? forward : recompute) / v};
}

double Costs::message_time(const Schedule& schedule, int stage, const Action& send) const {
  if (!link && stage_links.empty()) return transfer;
  const TransferTag tag = transfer_tag(schedule, stage, send);
  const auto it = stage_links.find({tag.from_stage, tag.to_stage});
  if (it == stage_links.end() && !link) return transfer;
  const LinkModel& l = it != stage_links.end() ? it->second : *link;
  const ChunkCosts c = chunk(schedule.layout(), tag.from_stage, tag.from_chunk);
  return l.transfer_ms(tag.gradient ? c.input_bytes : c.output_bytes);
}

double Costs::reduce_time(const Schedule& schedule, int stage, const Action& reduce) const {
  if (!replica_link || replicas <= 1) return 0.0;
  const GradientBucket& bucket =
      schedule.buckets[static_cast<size_t>(stage)][static_cast<size_t>(reduce.bucket)];
  return replica_link->allreduce_ms(bucket.bytes, replicas);
}

namespace {

// What a stage has run before an action, as far as the action's cost depends on it (cost_of).
struct StageHistory {
  Action last_compute{ActionKind::OptimizerStep};  // the latest F, B, Bi, Bw, R or step
  std::optional<Action> last_forward;              // the latest F, or R that recomputed something
  // `c`: the action's chunk's costs. An R that costs nothing (a stage that keeps its activations under a
  // recompute schedule) brings nothing back into the cache.
  void ran(const Action& a, const ChunkCosts& c) {
    last_compute = a;
    if (a.kind == ActionKind::Forward || (a.kind == ActionKind::Recompute && c.recompute > 0))
      last_forward = a;
  }
};

// A Bw that does not follow its own Bi (a deferred one) costs ChunkCosts::weight_deferred; a cold first
// read of a microbatch's activations costs ChunkCosts::cold times more.
double cost_of(const Action& a, const StageHistory& before, const ChunkCosts& c, const Costs& costs) {
  const double cold =
      is_cold_backward(a, before.last_forward ? &*before.last_forward : nullptr, c) ? c.cold : 1.0;
  switch (a.kind) {
    case ActionKind::Forward:
      return c.forward;
    case ActionKind::Backward:
      return c.backward * cold;
    case ActionKind::BackwardInput:
      return c.backward_input() * cold;
    case ActionKind::BackwardWeight:
      return c.backward_weight(is_deferred_weight(a, before.last_compute)) * cold;
    case ActionKind::Recompute:
      return c.recompute;
    case ActionKind::OptimizerStep:
      return costs.step;
    default:
      return 0.0;
  }
}

}  // namespace

bool is_cold_backward(const Action& a, const Action* last_forward, const ChunkCosts& c) {
  const bool first_read = a.kind == ActionKind::Backward ||
                          (a.kind == ActionKind::BackwardInput && c.backward_input() > 0) ||
                          (a.kind == ActionKind::BackwardWeight && c.backward_input() <= 0);
  return first_read && last_forward != nullptr &&
         (last_forward->microbatch != a.microbatch || last_forward->chunk != a.chunk);
}

namespace {

// Walks one stage's simulated actions in order through the activation ledger (activation_ledger.h); the
// memory curve gets a point at each start or end that changes the live activations.
void account_memory(const Schedule& s, int stage, const MemoryModel& memory,
                    const std::vector<TimedAction>& actions, StageStats& stats) {
  ActivationLedger ledger(s, stage, memory);
  stats.memory = {MemoryPoint{0.0, 0.0}};
  auto sample = [&](double time) {
    if (ledger.live() != stats.memory.back().live) stats.memory.push_back({time, ledger.live()});
  };
  for (const TimedAction& t : actions) {
    if (!ActivationLedger::tracks(t.action.kind)) continue;
    ledger.begin(t.action);
    sample(t.start);
    stats.peak_memory = std::max(stats.peak_memory, ledger.live());
    stats.peak_in_flight = std::max(stats.peak_in_flight, ledger.in_flight());
    stats.peak_full = std::max(stats.peak_full, ledger.full());
    ledger.end(t.action);
    sample(t.end);
  }
}

}  // namespace

Timeline simulate(const Schedule& schedule, const Costs& costs, const MemoryModel& memory) {
  validate(schedule);
  costs.check(schedule.stages, schedule.virtual_chunks);
  const int S = schedule.stages;
  Timeline timeline;
  timeline.schedule = schedule;
  timeline.costs = costs;
  timeline.stages.resize(S);
  timeline.stats.resize(S);

  Progress progress(schedule);
  std::vector<double> clock(S, 0.0), first_start(S, 0.0);
  std::vector<double> comm(S, 0.0);  // when each stage's comm lane is free (its last all-reduce's end)
  std::vector<bool> started(S, false);
  std::vector<size_t> next(S, 0);
  std::vector<StageHistory> history(S);
  for (bool moved = true; moved;) {
    moved = false;
    for (int st = 0; st < S; ++st) {
      const auto& list = schedule.actions[st];
      while (next[st] < list.size()) {
        const Action& a = list[next[st]];
        const auto ready = progress.ready_at(st, a);
        if (!ready) break;
        TimedAction t{static_cast<int>(next[st]), a, 0.0, 0.0};
        if (a.kind == ActionKind::RecvActivation || a.kind == ActionKind::RecvGrad) {
          t.start = clock[st];  // the lane waits here until the message is there
          t.end = std::max(clock[st], *ready);
        } else if (a.kind == ActionKind::Reduce) {
          t.start = std::max(clock[st], comm[st]);  // on the comm lane: the compute lane goes on
          t.end = t.start + costs.reduce_time(schedule, st, a);
          comm[st] = t.end;
          timeline.stages[st].push_back(t);
          progress.complete(st, a, t.end);
          ++next[st];
          moved = true;
          continue;
        } else {
          if (a.kind == ActionKind::OptimizerStep && comm[st] > std::max(clock[st], *ready)) {
            timeline.stats[st].exposed_reduce = comm[st] - std::max(clock[st], *ready);
            clock[st] = comm[st];  // the step needs every bucket's average
          }
          t.start = std::max(clock[st], *ready);
          const ChunkCosts c = costs.chunk(schedule.layout(), st, std::max(a.chunk, 0));
          t.end = t.start + cost_of(a, history[st], c, costs);
          if (is_compute(a.kind)) {
            history[st].ran(a, c);
            StageStats& stats = timeline.stats[st];
            if (!started[st]) first_start[st] = t.start, started[st] = true;
            stats.busy += t.end - t.start;
            stats.span = t.end - first_start[st];
          }
        }
        clock[st] = t.end;
        const bool send = a.kind == ActionKind::SendActivation || a.kind == ActionKind::SendGrad;
        const double travel = send ? costs.message_time(schedule, st, a) : 0.0;
        if (send) t.arrival = t.end + travel;
        progress.complete(st, a, t.end, travel);
        timeline.stages[st].push_back(t);
        ++next[st];
        moved = true;
      }
    }
  }
  for (int st = 0; st < S; ++st) {
    // validate() ran the same walk without costs; a stuck stage here would be a bug in this file.
    BRIGADE_CHECK(next[st] == schedule.actions[st].size(), "simulate: stage ", st, " stopped at step ",
                  next[st], " of a validated schedule");
    timeline.step_time = std::max(timeline.step_time, clock[st]);
  }
  const double T = timeline.step_time;
  for (int st = 0; st < S; ++st) {
    StageStats& stats = timeline.stats[st];
    stats.bubble = T > 0 ? (T - stats.busy) / T : 0.0;
    timeline.bubble += stats.bubble / S;
    account_memory(schedule, st, memory, timeline.stages[st], stats);
  }
  return timeline;
}

ActionTotals action_totals(const Timeline& timeline) {
  ActionTotals totals;
  for (int st = 0; st < static_cast<int>(timeline.stages.size()); ++st) {
    for (const TimedAction& t : timeline.stages[static_cast<size_t>(st)]) {
      if (is_work(t.action.kind))
        totals[{timeline.schedule.model_chunk(st, t.action.chunk), t.action.kind}] += t.end - t.start;
    }
  }
  return totals;
}

double textbook_bubble(const std::string& name, int stages, int microbatches, int virtual_chunks) {
  const double S = stages, M = microbatches, v = virtual_chunks;
  if (name == "gpipe" || name == "1f1b") return (S - 1) / (M + S - 1);
  if (name == "interleaved") return (S - 1) / (v * M + S - 1);
  BRIGADE_THROW(ValueError, "textbook_bubble: no closed form for '", name,
                "' (known: gpipe, 1f1b, interleaved; zb-h1's depends on the costs)");
}

}  // namespace brigade::pipeline
