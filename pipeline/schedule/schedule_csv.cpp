// PyTorch's CSV schedule files (see schedule_file.h for the format).
#include <algorithm>
#include <cctype>
#include <map>
#include <optional>
#include <sstream>

#include "pipeline/schedule/generators.h"
#include "pipeline/schedule/schedule_file.h"
#include "pipeline/schedule/schedule_file_check.h"

namespace brigade::pipeline {

namespace {

// One parsed cell action: PyTorch's stage index (brigade's model chunk), its type and microbatch.
struct TorchAction {
  int model_chunk = 0;
  std::string type;     // F, I, B, W, SEND_F, RECV_F, SEND_B, RECV_B, UNSHARD, RESHARD, REDUCE_GRAD
  int microbatch = -1;  // -1 where the type takes none
  detail::ActionOrigin origin;
};

// Longest first, so that SEND_F is not read as S...; the first group takes no microbatch.
const std::vector<std::string>& types_without_microbatch() {
  static const std::vector<std::string> types = {"REDUCE_GRAD", "UNSHARD", "RESHARD"};
  return types;
}
const std::vector<std::string>& types_with_microbatch() {
  static const std::vector<std::string> types = {"SEND_F", "RECV_F", "SEND_B", "RECV_B", "F", "I", "B", "W"};
  return types;
}

std::string trim(const std::string& text) {
  size_t begin = 0, end = text.size();
  while (begin < end && std::isspace(static_cast<unsigned char>(text[begin]))) ++begin;
  while (end > begin && std::isspace(static_cast<unsigned char>(text[end - 1]))) --end;
  return text.substr(begin, end - begin);
}

// The fields of one CSV line ("a,b" or "\"a\",b"; "" inside quotes is a quote).
std::vector<std::string> split_fields(const std::string& line) {
  std::vector<std::string> fields(1);
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted && c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
      fields.back() += '"';
      ++i;
    } else if (c == '"') {
      quoted = !quoted;
    } else if (c == ',' && !quoted) {
      fields.emplace_back();
    } else {
      fields.back() += c;
    }
  }
  return fields;
}

// "2F0": one action, or the reason it is not one.
std::optional<TorchAction> parse_one(const std::string& text, std::string& why) {
  size_t pos = 0;
  while (pos < text.size() && std::isdigit(static_cast<unsigned char>(text[pos]))) ++pos;
  if (pos == 0 || pos > 9) {
    why = "not an action: expected <stage><type><microbatch> such as 0F0, 1I2, 3W0, 2B1, 0SEND_F1";
    return std::nullopt;
  }
  TorchAction a;
  a.model_chunk = std::stoi(text.substr(0, pos));
  const std::string rest = text.substr(pos);
  for (const std::string& type : types_without_microbatch()) {
    if (rest == type) {
      a.type = type;
      return a;
    }
  }
  for (const std::string& type : types_with_microbatch()) {
    if (rest.compare(0, type.size(), type) != 0) continue;
    const std::string number = rest.substr(type.size());
    if (number.empty() || number.size() > 9 || !std::all_of(number.begin(), number.end(), [](char c) {
          return std::isdigit(static_cast<unsigned char>(c));
        })) {
      why = "the action type " + type + " needs a microbatch number after it";
      return std::nullopt;
    }
    a.type = type;
    a.microbatch = std::stoi(number);
    return a;
  }
  const std::string type = rest.substr(0, rest.find_last_not_of("0123456789") + 1);
  why = "unknown action type '" + type +
        "' (expected F, I, B, W, SEND_F, RECV_F, SEND_B, RECV_B, UNSHARD, RESHARD, REDUCE_GRAD or "
        "(...)OVERLAP_F_B)";
  return std::nullopt;
}

// A cell: nothing (an idle step), one action, or an overlapped pair "(a;b)OVERLAP_F_B" run as a then b.
std::vector<TorchAction> parse_cell(const std::string& cell, const detail::ActionOrigin& origin,
                                    const std::string& source) {
  const std::string text = trim(cell);
  if (text.empty()) return {};
  std::vector<std::string> parts{text};
  const std::string overlap = ")OVERLAP_F_B";
  if (text.front() == '(') {
    if (text.size() < overlap.size() + 1 ||
        text.compare(text.size() - overlap.size(), overlap.size(), overlap) != 0)
      detail::refuse(source, origin.where, text, "a cell that starts with '(' must be (a;b)OVERLAP_F_B");
    parts.clear();
    std::istringstream inner(text.substr(1, text.size() - 1 - overlap.size()));
    for (std::string part; std::getline(inner, part, ';');) parts.push_back(trim(part));
  }
  std::vector<TorchAction> out;
  for (const std::string& part : parts) {
    std::string why;
    std::optional<TorchAction> a = parse_one(part, why);
    if (!a) detail::refuse(source, origin.where, text, why);
    if (parts.size() > 1 && a->type != "F" && a->type != "I" && a->type != "B" && a->type != "W")
      detail::refuse(source, origin.where, text,
                     "an overlapped pair holds compute actions only, found " + a->type);
    a->origin = origin;
    out.push_back(*a);
  }
  return out;
}

// Which placement puts every model chunk on the rank the file has it on; refuses the file otherwise.
Placement infer_placement(const std::vector<int>& rank_of, int stages,
                          const std::vector<TorchAction>& first_use, const std::string& source) {
  const int v = static_cast<int>(rank_of.size()) / stages;
  for (Placement p : {Placement::Interleaved, Placement::V}) {
    const ChunkLayout layout{p, stages, v};
    bool fits = true;
    for (int k = 0; k < layout.model_chunks() && fits; ++k)
      fits = layout.stage_of(k) == rank_of[static_cast<size_t>(k)];
    if (fits) return p;
  }
  const ChunkLayout interleaved{Placement::Interleaved, stages, v}, vee{Placement::V, stages, v};
  for (int k = 0; k < interleaved.model_chunks(); ++k) {
    if (interleaved.stage_of(k) != rank_of[static_cast<size_t>(k)] &&
        vee.stage_of(k) != rank_of[static_cast<size_t>(k)]) {
      const TorchAction& a = first_use[static_cast<size_t>(k)];
      detail::refuse(source, a.origin.where, a.origin.text,
                     "stage " + std::to_string(k) + " is on rank " +
                         std::to_string(rank_of[static_cast<size_t>(k)]) +
                         ", but brigade places it on rank " + std::to_string(interleaved.stage_of(k)) +
                         " (interleaved) or " + std::to_string(vee.stage_of(k)) + " (v)");
    }
  }
  detail::refuse(source, "the stages are on their ranks neither interleaved nor in a V throughout");
}

// brigade's action for a parsed one on a stage of `layout`; the reason in `why` when there is none.
std::optional<Action> to_action(const TorchAction& t, const ChunkLayout& layout, std::string& why) {
  const int k = t.model_chunk, m = t.microbatch, c = layout.chunk_of(k), K = layout.model_chunks();
  const bool forward_link = t.type == "SEND_F" || t.type == "RECV_B",
             backward_link = t.type == "RECV_F" || t.type == "SEND_B";
  if ((forward_link && k + 1 >= K) || (backward_link && k == 0)) {
    why = std::string("stage ") + std::to_string(k) + " is the " + (forward_link ? "last" : "first") +
          " of the model: it has no " + (forward_link ? "next" : "previous") + " stage to talk to";
    return std::nullopt;
  }
  if (t.type == "F") return F(m, c);
  if (t.type == "I") return Bi(m, c);
  if (t.type == "B") return B(m, c);
  if (t.type == "W") return Bw(m, c);
  if (t.type == "SEND_F") return send_activation(m, c, layout.stage_of(k + 1));
  if (t.type == "RECV_F") return recv_activation(m, c, layout.stage_of(k - 1));
  if (t.type == "SEND_B") return send_grad(m, c, layout.stage_of(k - 1));
  return recv_grad(m, c, layout.stage_of(k + 1));
}

// PyTorch's text of a brigade action on `stage`, or "" for the ones it has no type for (R, the step).
std::string torch_label(const Schedule& schedule, int stage, const Action& a) {
  const std::string k = std::to_string(schedule.model_chunk(stage, a.chunk)),
                    m = std::to_string(a.microbatch);
  switch (a.kind) {
    case ActionKind::Forward:
      return k + "F" + m;
    case ActionKind::Backward:
      return k + "B" + m;
    case ActionKind::BackwardInput:
      return k + "I" + m;
    case ActionKind::BackwardWeight:
      return k + "W" + m;
    case ActionKind::SendActivation:
      return k + "SEND_F" + m;
    case ActionKind::RecvActivation:
      return k + "RECV_F" + m;
    case ActionKind::SendGrad:
      return k + "SEND_B" + m;
    case ActionKind::RecvGrad:
      return k + "RECV_B" + m;
    default:
      return "";
  }
}

// Step 1 of schedule_from_pytorch_csv: every row's actions, with where they stand in the file.
std::vector<std::vector<TorchAction>> read_torch_rows(const std::string& text, const std::string& source) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    lines.push_back(line);
  }
  while (!lines.empty() && trim(lines.back()).empty()) lines.pop_back();
  if (lines.empty()) detail::refuse(source, "has no rows (one row of actions per rank)");
  std::vector<std::vector<TorchAction>> rows;
  for (size_t r = 0; r < lines.size(); ++r) {
    rows.emplace_back();
    const std::vector<std::string> cells = split_fields(lines[r]);
    for (size_t c = 0; c < cells.size(); ++c) {
      const detail::ActionOrigin origin{"row " + std::to_string(r + 1) + ", column " + std::to_string(c + 1),
                                        trim(cells[c])};
      for (const TorchAction& a : parse_cell(cells[c], origin, source)) rows.back().push_back(a);
    }
  }
  return rows;
}

/// The sizes a PyTorch schedule's rows imply and which rank holds each of its model chunks.
struct ChunkRanks {
  int chunks = 0, microbatches = 0;
  std::vector<int> rank_of;            // per model chunk
  std::vector<TorchAction> first_use;  // per model chunk: its first action (for the messages)
};

// Step 2: the sizes, and which rank holds each model chunk (one rank each, every chunk used).
ChunkRanks chunk_ranks(const std::vector<std::vector<TorchAction>>& rows, const std::string& source) {
  const int S = static_cast<int>(rows.size());
  int K = 0, M = 0;
  for (const auto& row : rows) {
    for (const TorchAction& a : row) {
      K = std::max(K, a.model_chunk + 1);
      M = std::max(M, a.microbatch + 1);
    }
  }
  if (M == 0) detail::refuse(source, "has no action with a microbatch");
  size_t actions = 0;
  for (const auto& row : rows) actions += row.size();
  detail::check_sizes(static_cast<uint64_t>(K), static_cast<uint64_t>(M), actions, source);
  if (K % S != 0)
    detail::refuse(source, "uses stages 0.." + std::to_string(K - 1) + ": " + std::to_string(K) +
                               " is not a multiple of its " + std::to_string(S) + " rows (ranks)");
  std::vector<int> rank_of(static_cast<size_t>(K), -1);
  std::vector<TorchAction> first_use(static_cast<size_t>(K));
  for (int r = 0; r < S; ++r) {
    for (const TorchAction& a : rows[static_cast<size_t>(r)]) {
      int& rank = rank_of[static_cast<size_t>(a.model_chunk)];
      if (rank >= 0 && rank != r) {
        const TorchAction& seen = first_use[static_cast<size_t>(a.model_chunk)];
        detail::refuse(source, a.origin.where, a.origin.text,
                       "stage " + std::to_string(a.model_chunk) + " is also on rank " + std::to_string(rank) +
                           " (" + seen.origin.where + "): a stage lives on one rank");
      }
      if (rank < 0) first_use[static_cast<size_t>(a.model_chunk)] = a;
      rank = r;
    }
  }
  for (int k = 0; k < K; ++k) {
    if (rank_of[static_cast<size_t>(k)] < 0)
      detail::refuse(source,
                     "stage " + std::to_string(k) + " of 0.." + std::to_string(K - 1) + " has no action");
  }
  return ChunkRanks{K, M, std::move(rank_of), std::move(first_use)};
}

}  // namespace

std::string schedule_to_pytorch_csv(const Schedule& schedule, bool with_transfers) {
  std::ostringstream out;
  for (int s = 0; s < schedule.stages; ++s) {
    bool first = true;
    for (const Action& a : schedule.actions[static_cast<size_t>(s)]) {
      if (is_transfer(a.kind) && !with_transfers) continue;
      const std::string label = torch_label(schedule, s, a);
      if (label.empty()) continue;
      out << (first ? "" : ",") << label;
      first = false;
    }
    out << "\n";
  }
  return out.str();
}

Schedule schedule_from_pytorch_csv(const std::string& text, const std::string& name,
                                   const std::string& source) {
  const std::vector<std::vector<TorchAction>> rows = read_torch_rows(text, source);
  const int S = static_cast<int>(rows.size());
  const ChunkRanks chunks = chunk_ranks(rows, source);
  // Step 3: brigade's lists.
  Schedule schedule =
      empty_schedule(name, S, chunks.microbatches, chunks.chunks / S,
                     infer_placement(chunks.rank_of, S, chunks.first_use, source), Recompute::Never);
  const ChunkLayout layout = schedule.layout();
  detail::Origins origins(static_cast<size_t>(S));
  bool transfers = false;
  for (int r = 0; r < S; ++r) {
    for (const TorchAction& t : rows[static_cast<size_t>(r)]) {
      if (t.microbatch < 0) continue;  // UNSHARD, RESHARD, REDUCE_GRAD: no FSDP or data parallelism here
      std::string why;
      const std::optional<Action> a = to_action(t, layout, why);
      if (!a) detail::refuse(source, t.origin.where, t.origin.text, why);
      transfers = transfers || is_transfer(a->kind);
      schedule.actions[static_cast<size_t>(r)].push_back(*a);
      origins[static_cast<size_t>(r)].push_back(t.origin);
    }
  }
  if (!transfers) {  // PyTorch's compute-only format: brigade adds the transfers
    const Schedule compute = schedule;
    insert_transfers(schedule);
    origins = detail::match_origins(compute, origins, schedule);
  }
  for (int r = 0; r < S; ++r) {
    schedule.actions[static_cast<size_t>(r)].push_back(optimizer_step());
    origins[static_cast<size_t>(r)].push_back({});
  }
  detail::check_parsed(schedule, origins, source);
  return schedule;
}

}  // namespace brigade::pipeline
