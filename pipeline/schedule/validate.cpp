// The schedule validator (see validate.h for the list of checks).
#include "pipeline/schedule/validate.h"

#include <map>
#include <sstream>
#include <tuple>

#include "pipeline/schedule/dependencies.h"
#include "pipeline/schedule/pair_order.h"
#include "pipeline/schedule/reduce_buckets.h"
#include "pipeline/schedule/render_schedule.h"

namespace brigade::pipeline {

namespace {

constexpr int kKinds = static_cast<int>(ActionKind::OptimizerStep) + 1;

std::string at(int stage, int step) {
  return "stage " + std::to_string(stage) + " step " + std::to_string(step);
}

ScheduleIssue issue(std::string message, std::vector<std::pair<int, int>> marks = {}) {
  return ScheduleIssue{std::move(message), std::move(marks)};
}

// Where each (kind, chunk, microbatch) sits in one stage's list (-1: absent).
class Positions {
 public:
  Positions(const Schedule& schedule)
      : v_(schedule.virtual_chunks),
        m_(schedule.microbatches),
        pos_(static_cast<size_t>(kKinds) * v_ * m_, -1) {}
  int& operator()(ActionKind kind, int chunk, int microbatch) {
    return pos_[(static_cast<size_t>(kind) * v_ + chunk) * m_ + microbatch];
  }
  int get(ActionKind kind, int chunk, int microbatch) const {
    return pos_[(static_cast<size_t>(kind) * v_ + chunk) * m_ + microbatch];
  }

 private:
  int v_, m_;
  std::vector<int> pos_;
};

// 1 for a Reduce: its bucket exists on the stage and holds layers of the Reduce's chunk.
std::optional<ScheduleIssue> check_reduce_range(const Schedule& s, int st, int i) {
  const Action& a = s.actions[st][i];
  const int buckets = s.buckets.empty() ? 0 : static_cast<int>(s.buckets[st].size());
  const std::string where = at(st, i) + ": " + to_string(a, s.virtual_chunks > 1) + " ";
  if (a.bucket < 0 || a.bucket >= buckets) {
    return issue(where + "reduces bucket " + std::to_string(a.bucket) + ", but the stage has " +
                     std::to_string(buckets) + (buckets == 1 ? " gradient bucket" : " gradient buckets"),
                 {{st, i}});
  }
  const int chunk = s.buckets[st][a.bucket].chunk;
  if (a.chunk != chunk) {
    return issue(where + "names chunk " + std::to_string(a.chunk) + ", but bucket " +
                     std::to_string(a.bucket) + " holds layers of chunk " + std::to_string(chunk),
                 {{st, i}});
  }
  return std::nullopt;
}

// 1. sizes and ranges.
std::optional<ScheduleIssue> check_ranges(const Schedule& s) {
  if (s.stages < 1 || s.microbatches < 1 || s.virtual_chunks < 1) {
    return issue("needs stages, microbatches and virtual chunks >= 1 (found S=" + std::to_string(s.stages) +
                 ", M=" + std::to_string(s.microbatches) + ", v=" + std::to_string(s.virtual_chunks) + ")");
  }
  if (static_cast<int>(s.actions.size()) != s.stages) {
    return issue("has " + std::to_string(s.actions.size()) + " instruction lists for " +
                 std::to_string(s.stages) + " stages");
  }
  if (!s.buckets.empty() && static_cast<int>(s.buckets.size()) != s.stages) {
    return issue("has gradient buckets for " + std::to_string(s.buckets.size()) + " stages, and " +
                 std::to_string(s.stages) + " stages");
  }
  for (int st = 0; st < s.stages; ++st) {
    for (int i = 0; i < static_cast<int>(s.actions[st].size()); ++i) {
      const Action& a = s.actions[st][i];
      if (a.kind == ActionKind::OptimizerStep) continue;
      if (a.kind == ActionKind::Reduce) {
        if (auto found = check_reduce_range(s, st, i)) return found;
        continue;
      }
      const std::string where = at(st, i) + ": " + to_string(a) + " ";
      if (a.microbatch < 0 || a.microbatch >= s.microbatches) {
        return issue(where + "has microbatch " + std::to_string(a.microbatch) + ", outside 0.." +
                         std::to_string(s.microbatches - 1),
                     {{st, i}});
      }
      if (a.chunk < 0 || a.chunk >= s.virtual_chunks) {
        return issue(where + "has chunk " + std::to_string(a.chunk) + ", outside 0.." +
                         std::to_string(s.virtual_chunks - 1),
                     {{st, i}});
      }
      if (!is_transfer(a.kind)) continue;
      const int k = s.model_chunk(st, a.chunk);
      const bool forward = a.kind == ActionKind::SendActivation || a.kind == ActionKind::RecvGrad;
      const int other = forward ? k + 1 : k - 1;
      if (other < 0 || other >= s.model_chunks()) {
        return issue(where + "has no peer: model chunk " + std::to_string(k) + " is the " +
                         (forward ? "last" : "first") + " of the model",
                     {{st, i}});
      }
      if (s.stage_of(other) == st) {
        return issue(where + "crosses no stage: model chunk " + std::to_string(other) +
                         " is on this stage (local hand-offs need no Send/Recv)",
                     {{st, i}});
      }
      if (a.peer != s.stage_of(other)) {
        return issue(where + "names peer stage " + std::to_string(a.peer) + ", but model chunk " +
                         std::to_string(other) + " is on stage " + std::to_string(s.stage_of(other)),
                     {{st, i}});
      }
    }
  }
  return std::nullopt;
}

// 2 on one stage: each action at most once, one optimizer step, at the end. Fills `pos`.
std::optional<ScheduleIssue> check_positions(const Schedule& s, int st, Positions& pos) {
  const auto& list = s.actions[st];
  int steps = 0;
  for (int i = 0; i < static_cast<int>(list.size()); ++i) {
    const Action& a = list[i];
    if (s.forward_only && a.kind != ActionKind::Forward && a.kind != ActionKind::SendActivation &&
        a.kind != ActionKind::RecvActivation) {
      return issue(at(st, i) + ": " + to_string(a) +
                       " in a forward-only schedule (it holds F and the activations' Send/Recv only)",
                   {{st, i}});
    }
    if (a.kind == ActionKind::Reduce) continue;  // placement: check_reduces
    if (a.kind == ActionKind::OptimizerStep) {
      if (++steps > 1) return issue(at(st, i) + ": a second optimizer step", {{st, i}});
      for (int j = i + 1; j < static_cast<int>(list.size()); ++j) {
        if (list[j].kind != ActionKind::Reduce) continue;
        return issue(at(st, j) + ": " + to_string(list[j], s.virtual_chunks > 1) +
                         " comes after the optimizer step (step " + std::to_string(i) +
                         "), which must wait for every bucket's all-reduce",
                     {{st, j}, {st, i}});
      }
      if (i + 1 != static_cast<int>(list.size())) {
        return issue(at(st, i) + ": the optimizer step must end the list (" +
                         std::to_string(list.size() - i - 1) + " actions follow it)",
                     {{st, i}});
      }
      continue;
    }
    int& p = pos(a.kind, a.chunk, a.microbatch);
    if (p >= 0) {
      return issue(at(st, i) + ": " + to_string(a) + " appears twice (steps " + std::to_string(p) + " and " +
                       std::to_string(i) + ")",
                   {{st, p}, {st, i}});
    }
    p = i;
  }
  if (steps == 0 && !s.forward_only)
    return issue("stage " + std::to_string(st) + " has no optimizer step at the end of its list");
  return std::nullopt;
}

// Where the actions of (chunk c, microbatch m) of one stage are (-1: absent), and its name ("3", "3.c1").
struct PairSteps {
  int f, b, bi, bw, r;
  int back;  // the action that produces the input-gradient: B, else Bi
  std::string name;
};

PairSteps pair_steps(const Positions& pos, int c, int m) {
  PairSteps p{pos.get(ActionKind::Forward, c, m),
              pos.get(ActionKind::Backward, c, m),
              pos.get(ActionKind::BackwardInput, c, m),
              pos.get(ActionKind::BackwardWeight, c, m),
              pos.get(ActionKind::Recompute, c, m),
              -1,
              to_string(F(m, c)).substr(1)};
  p.back = p.b >= 0 ? p.b : p.bi;
  return p;
}

// 2-3 for one (chunk c, microbatch m) of stage st: its F, its backward (B, or Bi then Bw) and its R, each
// present exactly when needed and in order.
std::optional<ScheduleIssue> check_pair(const Schedule& s, int st, int m, const PairSteps& p) {
  const auto& list = s.actions[st];
  const int f = p.f, b = p.b, bi = p.bi, bw = p.bw, r = p.r, back = p.back;
  const std::string& name = p.name;
  const std::string here = "stage " + std::to_string(st) + ": ";
  auto mark = [&](int step) { return std::vector<std::pair<int, int>>{{st, step}}; };
  if (b >= 0 && (bi >= 0 || bw >= 0)) {
    return issue(here + "runs both B" + name + " and the split Bi" + name + "/Bw" + name, mark(b));
  }
  if (f < 0) {
    return issue(here + "has no F" + name + (back >= 0 ? " for its backward" : ""),
                 back >= 0 ? mark(back) : std::vector<std::pair<int, int>>{});
  }
  if (s.forward_only) return std::nullopt;  // F alone (check_positions refused everything else)
  if (back < 0 && bw < 0) {
    return issue(
        here + "has F" + name + " but no backward (B" + name + ", or Bi" + name + " and Bw" + name + ")",
        mark(f));
  }
  if (bi >= 0 && bw < 0) return issue(here + "has Bi" + name + " but no Bw" + name, mark(bi));
  if (bw >= 0 && bi < 0) return issue(here + "has Bw" + name + " but no Bi" + name, mark(bw));
  if (back < f) {
    return issue(at(st, back) + ": " + to_string(list[back]) + " comes before its F" + name + " (step " +
                     std::to_string(f) + ")",
                 mark(back));
  }
  if (bw >= 0 && bw < bi) {
    return issue(
        at(st, bw) + ": Bw" + name + " comes before its Bi" + name + " (step " + std::to_string(bi) + ")",
        mark(bw));
  }
  const bool wants_r = recomputes(s.recompute, m, s.microbatches);
  if (wants_r && r < 0) {
    return issue(here + "recompute " + to_string(s.recompute) + " needs R" + name + " before " +
                     to_string(list[back]) + ", and there is none",
                 mark(back));
  }
  if (!wants_r && r >= 0) {
    return issue(at(st, r) + ": R" + name + " but recompute " + to_string(s.recompute) +
                     " keeps microbatch " + std::to_string(m) + "'s activations",
                 mark(r));
  }
  if (r >= 0 && (r < f || r > back)) {
    return issue(at(st, r) + ": R" + name + " must come after F" + name + " (step " + std::to_string(f) +
                     ") and before " + to_string(list[back]) + " (step " + std::to_string(back) + ")",
                 mark(r));
  }
  return std::nullopt;
}

// 3-4 for one (chunk c, microbatch m) of stage st: the Send/Recv it needs where the neighbouring chunk is
// on another stage, each on the right side of its action.
std::optional<ScheduleIssue> check_pair_transfers(const Schedule& s, int st, int c, int m, const PairSteps& p,
                                                  const Positions& pos) {
  const auto& list = s.actions[st];
  const int k = s.model_chunk(st, c), last = s.model_chunks() - 1;
  const bool prev_remote = k > 0 && s.stage_of(k - 1) != st;
  const bool next_remote = k < last && s.stage_of(k + 1) != st;
  const int prev_stage = k > 0 ? s.stage_of(k - 1) : -1, next_stage = k < last ? s.stage_of(k + 1) : -1;
  const int f = p.f, back = p.back;
  auto mark = [&](int step) { return std::vector<std::pair<int, int>>{{st, step}}; };
  struct Need {
    ActionKind kind;
    bool wanted;
    int anchor;   // the consuming (Recv) or producing (Send) action
    bool before;  // Recv comes before the anchor, Send after
    Action expected;
  };
  const Need needs[] = {
      {ActionKind::RecvActivation, prev_remote, f, true, recv_activation(m, c, prev_stage)},
      {ActionKind::SendActivation, next_remote, f, false, send_activation(m, c, next_stage)},
      {ActionKind::RecvGrad, next_remote, back, true, recv_grad(m, c, next_stage)},
      {ActionKind::SendGrad, prev_remote, back, false, send_grad(m, c, prev_stage)},
  };
  for (const Need& n : needs) {
    const int t = pos.get(n.kind, c, m);
    if (!n.wanted) continue;  // check_ranges already refused transfers that cross no stage
    if (s.forward_only && (n.kind == ActionKind::RecvGrad || n.kind == ActionKind::SendGrad)) continue;
    const std::string expected = std::string("`") + to_string(n.expected) + "`";
    if (t < 0) {
      return issue(at(st, n.anchor) + ": " + to_string(list[n.anchor]) +
                       (n.before ? " needs its input from stage " : " feeds stage ") +
                       std::to_string(n.expected.peer) + ", but there is no " + expected +
                       (n.before ? " before it" : " after it"),
                   mark(n.anchor));
    }
    if (n.before ? t > n.anchor : t < n.anchor) {
      return issue(at(st, t) + ": " + expected + " must come " + (n.before ? "before " : "after ") +
                       to_string(list[n.anchor]) + " (step " + std::to_string(n.anchor) + ")",
                   {{st, t}, {st, n.anchor}});
    }
  }
  return std::nullopt;
}

// 2-3 for the Reduces of one stage: each bucket reduced exactly once, after the last action that writes its
// chunk's gradients (reduce_buckets.h).
std::optional<ScheduleIssue> check_reduces(const Schedule& s, int st) {
  const auto& list = s.actions[st];
  const int buckets = s.buckets.empty() ? 0 : static_cast<int>(s.buckets[st].size());
  const bool chunked = s.virtual_chunks > 1;
  std::vector<int> where(static_cast<size_t>(buckets), -1);
  for (int i = 0; i < static_cast<int>(list.size()); ++i) {
    const Action& a = list[i];
    if (a.kind != ActionKind::Reduce) continue;
    int& p = where[static_cast<size_t>(a.bucket)];
    if (p >= 0) {
      return issue(at(st, i) + ": " + to_string(a, chunked) + " reduces bucket " + std::to_string(a.bucket) +
                       " a second time (steps " + std::to_string(p) + " and " + std::to_string(i) + ")",
                   {{st, p}, {st, i}});
    }
    p = i;
    const int last = last_gradient_write(list, a.chunk);
    if (last > i) {
      const GradientBucket& b = s.buckets[st][a.bucket];
      return issue(at(st, i) + ": " + to_string(a, chunked) + " reduces bucket " + std::to_string(a.bucket) +
                       " (layers " + std::to_string(b.first_layer) + ".." + std::to_string(b.end_layer - 1) +
                       ") before its gradients are final: " + to_string(list[last], chunked) + " (step " +
                       std::to_string(last) + ") still writes them",
                   {{st, i}, {st, last}});
    }
  }
  for (int b = 0; b < buckets; ++b) {
    if (where[static_cast<size_t>(b)] >= 0 || s.forward_only) continue;
    const GradientBucket& bucket = s.buckets[st][b];
    return issue("stage " + std::to_string(st) + " never reduces gradient bucket " + std::to_string(b) +
                 " (layers " + std::to_string(bucket.first_layer) + ".." +
                 std::to_string(bucket.end_layer - 1) + " of chunk " + std::to_string(bucket.chunk) +
                 "): no " + to_string(reduce(b, bucket.chunk), chunked) + " in its list");
  }
  return std::nullopt;
}

// 2-4 on one stage: counts, order, required transfers. Fills `pos` for the matching check.
std::optional<ScheduleIssue> check_stage(const Schedule& s, int st, Positions& pos) {
  if (auto found = check_positions(s, st, pos)) return found;
  if (auto found = check_reduces(s, st)) return found;
  for (int c = 0; c < s.virtual_chunks; ++c) {
    for (int m = 0; m < s.microbatches; ++m) {
      const PairSteps p = pair_steps(pos, c, m);
      if (auto found = check_pair(s, st, m, p)) return found;
      if (auto found = check_pair_transfers(s, st, c, m, p, pos)) return found;
    }
  }
  return std::nullopt;
}

// 4 across stages: every Send has its Recv on the peer and vice versa.
std::optional<ScheduleIssue> check_matching(const Schedule& s, const std::vector<Positions>& pos) {
  for (int st = 0; st < s.stages; ++st) {
    for (int i = 0; i < static_cast<int>(s.actions[st].size()); ++i) {
      const Action& a = s.actions[st][i];
      if (!is_transfer(a.kind)) continue;
      const TransferTag tag = transfer_tag(s, st, a);
      const bool send = a.kind == ActionKind::SendActivation || a.kind == ActionKind::SendGrad;
      const int other_stage = send ? tag.to_stage : tag.from_stage;
      const int other_chunk = send ? tag.to_chunk : tag.from_chunk;
      ActionKind other_kind;
      switch (a.kind) {
        case ActionKind::SendActivation:
          other_kind = ActionKind::RecvActivation;
          break;
        case ActionKind::RecvActivation:
          other_kind = ActionKind::SendActivation;
          break;
        case ActionKind::SendGrad:
          other_kind = ActionKind::RecvGrad;
          break;
        default:
          other_kind = ActionKind::SendGrad;
          break;
      }
      if (pos[other_stage].get(other_kind, other_chunk, a.microbatch) < 0) {
        Action expected{other_kind, a.microbatch, other_chunk, st};
        return issue(at(st, i) + ": " + to_string(a) + " has no matching `" + to_string(expected) +
                         "` on stage " + std::to_string(other_stage),
                     {{st, i}});
      }
    }
  }
  return std::nullopt;
}

// 5. the deadlock dry run.
std::optional<ScheduleIssue> dry_run(const Schedule& s) {
  Progress progress(s);
  std::vector<size_t> next(s.stages, 0);
  for (;;) {
    bool moved = false, finished = true;
    for (int st = 0; st < s.stages; ++st) {
      const auto& list = s.actions[st];
      while (next[st] < list.size() && progress.ready_at(st, list[next[st]])) {
        progress.complete(st, list[next[st]], 0.0);
        ++next[st];
        moved = true;
      }
      finished = finished && next[st] == list.size();
    }
    if (finished) return std::nullopt;
    if (moved) continue;
    std::ostringstream message;
    message << "deadlock: no stage can move;";
    std::vector<std::pair<int, int>> marks;
    for (int st = 0; st < s.stages; ++st) {
      if (next[st] == s.actions[st].size()) continue;
      std::string waiting;
      progress.ready_at(st, s.actions[st][next[st]], &waiting);
      message << " stage " << st << " waits at step " << next[st] << " ("
              << to_string(s.actions[st][next[st]]) << ") for " << waiting << ";";
      marks.emplace_back(st, static_cast<int>(next[st]));
    }
    std::string text = message.str();
    text.pop_back();
    return issue(text, marks);
  }
}

}  // namespace

const char* to_string(TransferModel model) {
  return model == TransferModel::Buffered ? "buffered" : "rendezvous";
}

std::optional<ScheduleIssue> find_issue(const Schedule& schedule, TransferModel model) {
  if (auto found = check_ranges(schedule)) return found;
  std::vector<Positions> pos(schedule.stages, Positions(schedule));
  for (int st = 0; st < schedule.stages; ++st) {
    if (auto found = check_stage(schedule, st, pos[st])) return found;
  }
  if (auto found = check_matching(schedule, pos)) return found;
  if (auto found = dry_run(schedule)) return found;
  if (model == TransferModel::Buffered) return std::nullopt;
  if (auto found = find_pair_order_issue(schedule)) return found;
  return find_rendezvous_deadlock(schedule);
}

void validate(const Schedule& schedule, TransferModel model) {
  auto found = find_issue(schedule, model);
  if (!found) return;
  std::ostringstream out;
  out << "validate " << schedule.describe() << ": " << found->message;
  if (schedule.stages >= 1 && static_cast<int>(schedule.actions.size()) == schedule.stages) {
    out << "\n" << render_order_grid(schedule, found->marks, 16);
  }
  throw ScheduleError(out.str());
}

}  // namespace brigade::pipeline
