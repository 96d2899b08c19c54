// Pair order and the rendezvous dry run; see pair_order.h.
#include "pipeline/schedule/pair_order.h"

#include <map>
#include <sstream>
#include <utility>
#include <vector>

#include "pipeline/schedule/dependencies.h"

namespace brigade::pipeline {
namespace {

bool is_send(ActionKind kind) {
  return kind == ActionKind::SendActivation || kind == ActionKind::SendGrad;
}

// The peer stage of a transfer on `stage` and whether it sends (from its tag: the IR's one statement of
// who talks to whom).
struct End {
  int step;
  TransferTag tag;
};

std::string ordinal(size_t k) {
  return std::to_string(k + 1) + (k == 0 ? "st" : k == 1 ? "nd" : k == 2 ? "rd" : "th");
}

}  // namespace

std::optional<ScheduleIssue> find_pair_order_issue(const Schedule& s) {
  // (from, to) -> the Sends in the sender's order, the Recvs in the receiver's order.
  std::map<std::pair<int, int>, std::vector<End>> sends, recvs;
  for (int st = 0; st < s.stages; ++st) {
    const auto& list = s.actions[static_cast<size_t>(st)];
    for (int i = 0; i < static_cast<int>(list.size()); ++i) {
      const Action& a = list[static_cast<size_t>(i)];
      if (!is_transfer(a.kind)) continue;
      const TransferTag tag = transfer_tag(s, st, a);
      (is_send(a.kind) ? sends : recvs)[{tag.from_stage, tag.to_stage}].push_back({i, tag});
    }
  }
  for (const auto& [pair, sent] : sends) {
    const std::vector<End>& received = recvs[pair];
    const auto [from, to] = pair;
    for (size_t k = 0; k < sent.size() && k < received.size(); ++k) {
      if (sent[k].tag == received[k].tag) continue;
      const Action& send = s.actions[static_cast<size_t>(from)][static_cast<size_t>(sent[k].step)];
      const Action& recv = s.actions[static_cast<size_t>(to)][static_cast<size_t>(received[k].step)];
      std::ostringstream message;
      message << "stages " << from << " -> " << to << ": the " << ordinal(k) << " message is sent as `"
              << to_string(send, s.virtual_chunks > 1) << "` (stage " << from << " step " << sent[k].step
              << ") but received as `" << to_string(recv, s.virtual_chunks > 1) << "` (stage " << to
              << " step " << received[k].step
              << "): the pair's sends and receives must name their messages in one order (a transport "
                 "that matches messages in order, as NCCL does, would hand over the wrong tensor)";
      return ScheduleIssue{message.str(), {{from, sent[k].step}, {to, received[k].step}}};
    }
  }
  return std::nullopt;
}

std::optional<ScheduleIssue> find_rendezvous_deadlock(const Schedule& s) {
  Progress progress(s);
  std::vector<size_t> next(static_cast<size_t>(s.stages), 0);
  auto head = [&](int st) -> const Action* {
    const auto& list = s.actions[static_cast<size_t>(st)];
    return next[static_cast<size_t>(st)] < list.size() ? &list[next[static_cast<size_t>(st)]] : nullptr;
  };
  for (;;) {
    bool moved = false, finished = true;
    for (int st = 0; st < s.stages; ++st) {
      while (const Action* a = head(st)) {
        if (!is_transfer(a->kind)) {
          if (!progress.ready_at(st, *a)) break;
          progress.complete(st, *a, 0.0);
          ++next[static_cast<size_t>(st)];
          moved = true;
          continue;
        }
        // A Send and its Recv complete together, once both stages stand at them (and the tensor exists).
        const TransferTag tag = transfer_tag(s, st, *a);
        const bool send = is_send(a->kind);
        const int peer = send ? tag.to_stage : tag.from_stage;
        const Action* other = head(peer);
        if (other == nullptr || !is_transfer(other->kind) || is_send(other->kind) == send ||
            !(transfer_tag(s, peer, *other) == tag))
          break;
        const int sender = send ? st : peer;
        const Action& send_action = send ? *a : *other;
        const Action& recv_action = send ? *other : *a;
        if (!progress.ready_at(sender, send_action)) break;
        progress.complete(sender, send_action, 0.0);
        progress.complete(send ? peer : st, recv_action, 0.0);
        ++next[static_cast<size_t>(st)];
        ++next[static_cast<size_t>(peer)];
        moved = true;
      }
      finished = finished && head(st) == nullptr;
    }
    if (finished) return std::nullopt;
    if (moved) continue;
    std::ostringstream message;
    message << "deadlock when a send waits for its receive (as NCCL's do):";
    std::vector<std::pair<int, int>> marks;
    for (int st = 0; st < s.stages; ++st) {
      const Action* a = head(st);
      if (a == nullptr) continue;
      message << " stage " << st << " is blocked at step " << next[static_cast<size_t>(st)] << " ("
              << to_string(*a, s.virtual_chunks > 1) << ")";
      if (is_transfer(a->kind)) {
        const TransferTag tag = transfer_tag(s, st, *a);
        const int peer = is_send(a->kind) ? tag.to_stage : tag.from_stage;
        const Action* other = head(peer);
        message << ", while stage " << peer << " stands at "
                << (other ? "`" + to_string(*other, s.virtual_chunks > 1) + "`" : std::string("its end"));
      }
      message << ";";
      marks.emplace_back(st, static_cast<int>(next[static_cast<size_t>(st)]));
    }
    std::string text = message.str();
    text.pop_back();
    return ScheduleIssue{text, marks};
  }
}

}  // namespace brigade::pipeline
