// Gradient buckets and the Reduce placement pass (see reduce_buckets.h).
#include "pipeline/schedule/reduce_buckets.h"

#include <algorithm>

#include "tensor/error.h"

namespace brigade::pipeline {

int last_gradient_write(const std::vector<Action>& list, int chunk) {
  for (int i = static_cast<int>(list.size()) - 1; i >= 0; --i) {
    const Action& a = list[static_cast<size_t>(i)];
    const bool writes = a.kind == ActionKind::Backward || a.kind == ActionKind::BackwardWeight;
    if (writes && a.chunk == chunk) return i;
  }
  return -1;
}

std::vector<int> chunks_by_last_gradient_write(const Schedule& schedule, int stage) {
  const auto& list = schedule.actions[static_cast<size_t>(stage)];
  std::vector<int> chunks;
  for (int c = 0; c < schedule.virtual_chunks; ++c) chunks.push_back(c);
  std::stable_sort(chunks.begin(), chunks.end(),
                   [&](int a, int b) { return last_gradient_write(list, a) > last_gradient_write(list, b); });
  return chunks;
}

namespace {

// The stage's local chunks in the order their gradients become final in its list.
std::vector<int> chunks_by_final_write(const Schedule& schedule, int stage) {
  const auto& list = schedule.actions[static_cast<size_t>(stage)];
  std::vector<int> chunks;
  for (int c = 0; c < schedule.virtual_chunks; ++c) {
    if (last_gradient_write(list, c) >= 0) chunks.push_back(c);
  }
  std::stable_sort(chunks.begin(), chunks.end(),
                   [&](int a, int b) { return last_gradient_write(list, a) < last_gradient_write(list, b); });
  return chunks;
}

}  // namespace

std::vector<std::vector<GradientBucket>> gradient_buckets(
    const Schedule& schedule, const std::vector<std::pair<int, int>>& chunk_layers,
    const std::vector<std::vector<int64_t>>& layer_bytes, int64_t cap_bytes) {
  BRIGADE_CHECK_VALUE(cap_bytes >= 1, "gradient buckets: the cap must be at least 1 byte, found ", cap_bytes);
  BRIGADE_CHECK_VALUE(static_cast<int>(chunk_layers.size()) == schedule.model_chunks(),
                      "gradient buckets: layers for ", chunk_layers.size(),
                      " model chunks, the schedule has ", schedule.model_chunks());
  BRIGADE_CHECK_VALUE(static_cast<int>(layer_bytes.size()) == schedule.stages, "gradient buckets: bytes for ",
                      layer_bytes.size(), " stages, the schedule has ", schedule.stages);
  std::vector<std::vector<GradientBucket>> out(static_cast<size_t>(schedule.stages));
  for (int st = 0; st < schedule.stages; ++st) {
    const std::vector<int64_t>& bytes = layer_bytes[static_cast<size_t>(st)];
    for (int c : chunks_by_final_write(schedule, st)) {
      const auto [begin, end] = chunk_layers[static_cast<size_t>(schedule.model_chunk(st, c))];
      BRIGADE_CHECK_VALUE(begin >= 0 && end <= static_cast<int>(bytes.size()), "gradient buckets: stage ", st,
                          " has bytes for ", bytes.size(), " layers; its chunk ", c, " holds layers ", begin,
                          "..", end - 1);
      // From the chunk's last layer down: a bucket grows while the next layer still fits under the cap.
      GradientBucket open{c, end, end, 0};
      for (int layer = end - 1; layer >= begin; --layer) {
        const int64_t b = bytes[static_cast<size_t>(layer)];
        if (open.bytes > 0 && b > 0 && open.bytes + b > cap_bytes) {
          out[static_cast<size_t>(st)].push_back(open);
          open = GradientBucket{c, layer + 1, layer + 1, 0};
        }
        open.first_layer = layer;
        open.bytes += b;
      }
      if (open.bytes > 0) out[static_cast<size_t>(st)].push_back(open);
    }
  }
  return out;
}

void insert_reduces(Schedule& schedule, std::vector<std::vector<GradientBucket>> buckets) {
  BRIGADE_CHECK_VALUE(static_cast<int>(buckets.size()) == schedule.stages, "insert_reduces: buckets for ",
                      buckets.size(), " stages, the schedule has ", schedule.stages);
  for (int st = 0; st < schedule.stages; ++st) {
    auto& list = schedule.actions[static_cast<size_t>(st)];
    std::erase_if(list, [](const Action& a) { return a.kind == ActionKind::Reduce; });
    // Where each bucket goes: after its chunk's last gradient write, or after that action's Send.
    std::vector<std::pair<int, Action>> inserts;  // (index to insert before, the Reduce)
    const auto& stage_buckets = buckets[static_cast<size_t>(st)];
    for (int b = 0; b < static_cast<int>(stage_buckets.size()); ++b) {
      const int c = stage_buckets[static_cast<size_t>(b)].chunk;
      const int last = last_gradient_write(list, c);
      BRIGADE_CHECK_VALUE(last >= 0, "insert_reduces: stage ", st, " bucket ", b, " holds layers of chunk ",
                          c, ", which has no B or Bw on the stage");
      int at = last + 1;
      const Action& writer = list[static_cast<size_t>(last)];
      if (at < static_cast<int>(list.size()) && list[static_cast<size_t>(at)].kind == ActionKind::SendGrad &&
          list[static_cast<size_t>(at)].microbatch == writer.microbatch &&
          list[static_cast<size_t>(at)].chunk == writer.chunk)
        ++at;
      inserts.emplace_back(at, reduce(b, c));
    }
    // Stable by position, so buckets that share one keep their order.
    std::stable_sort(inserts.begin(), inserts.end(),
                     [](const auto& x, const auto& y) { return x.first < y.first; });
    std::vector<Action> out;
    size_t next = 0;
    for (int i = 0; i <= static_cast<int>(list.size()); ++i) {
      while (next < inserts.size() && inserts[next].first == i) out.push_back(inserts[next++].second);
      if (i < static_cast<int>(list.size())) out.push_back(list[static_cast<size_t>(i)]);
    }
    list = std::move(out);
  }
  schedule.buckets = std::move(buckets);
}

}  // namespace brigade::pipeline
