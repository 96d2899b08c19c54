// Depth partitioning (see partition.h for the methods and the dynamic program).
#include "pipeline/plan/partition.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <sstream>

#include "pipeline/plan/simulator.h"
#include "tensor/error.h"

namespace brigade::pipeline {

const char* to_string(PartitionMethod method) {
  switch (method) {
    case PartitionMethod::Balance:
      return "balance";
    case PartitionMethod::Parameters:
      return "params";
    case PartitionMethod::Time:
      return "time";
    case PartitionMethod::Memory:
      return "memory";
  }
  return "?";
}

PartitionMethod parse_partition_method(const std::string& name) {
  if (name == "balance") return PartitionMethod::Balance;
  if (name == "params") return PartitionMethod::Parameters;
  if (name == "time") return PartitionMethod::Time;
  if (name == "memory") return PartitionMethod::Memory;
  BRIGADE_THROW(ValueError, "partition: unknown method '", name, "' (valid: params, time, memory, balance)");
}

std::vector<int> parse_balance(const std::string& text) {
  std::vector<int> out;
  BRIGADE_CHECK_VALUE(!text.empty(), "balance: empty list (expected layers per stage, e.g. \"3,3,2\")");
  size_t pos = 0;
  for (int item = 0;; ++item) {
    const size_t comma = text.find(',', pos);
    const std::string token = text.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    const bool digits = !token.empty() && token.size() <= 9 &&
                        std::all_of(token.begin(), token.end(), [](char c) { return c >= '0' && c <= '9'; });
    BRIGADE_CHECK_VALUE(digits, "balance: item ", item, " of \"", text, "\" is '", token,
                        "', expected a positive integer (layers per stage, e.g. \"3,3,2\")");
    const int value = std::stoi(token);
    BRIGADE_CHECK_VALUE(value >= 1, "balance: item ", item, " of \"", text,
                        "\" is 0; every stage needs at least one layer");
    out.push_back(value);
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return out;
}

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

std::vector<double> prefix_sums(const std::vector<double>& costs) {
  std::vector<double> prefix(costs.size() + 1, 0.0);
  for (size_t i = 0; i < costs.size(); ++i) prefix[i + 1] = prefix[i] + costs[i];
  return prefix;
}

void check_costs(const std::vector<double>& costs, int parts) {
  const int L = static_cast<int>(costs.size());
  BRIGADE_CHECK_VALUE(parts >= 1, "min_max_cut: need at least one part, got ", parts);
  BRIGADE_CHECK_VALUE(parts <= L, "min_max_cut: cannot cut ", L, " layers into ", parts,
                      " non-empty parts (more parts than layers)");
  for (int i = 0; i < L; ++i) {
    BRIGADE_CHECK_VALUE(std::isfinite(costs[static_cast<size_t>(i)]) && costs[static_cast<size_t>(i)] >= 0,
                        "min_max_cut: cost of layer ", i, " is ", costs[static_cast<size_t>(i)],
                        "; costs must be finite and >= 0");
  }
}

}  // namespace

std::vector<int> chunk_bounds(const std::vector<int>& balance, int stages, int virtual_chunks, int layers,
                              const std::string& what) {
  const int K = stages * virtual_chunks;
  const std::string chunks =
      std::to_string(stages) + " stages" +
      (virtual_chunks > 1 ? " x " + std::to_string(virtual_chunks) + " virtual chunks" : "");
  std::vector<int> counts = balance;
  if (counts.empty()) {
    // As even as possible, whatever L is: the first L % K chunks take one layer more.
    BRIGADE_CHECK_VALUE(layers >= K, what, " is empty, and ", layers, " layers cannot fill ", K,
                        " model chunks (", chunks, ") with a layer each");
    for (int k = 0; k < K; ++k) counts.push_back(layers / K + (k < layers % K ? 1 : 0));
  }
  BRIGADE_CHECK_VALUE(static_cast<int>(counts.size()) == K, what, " has ", counts.size(),
                      " entries, expected ", K, " (one per model chunk: ", chunks, ")");
  std::vector<int> bounds{0};
  for (size_t k = 0; k < counts.size(); ++k) {
    BRIGADE_CHECK_VALUE(counts[k] >= 1, what, " entry ", k, " is ", counts[k],
                        "; every chunk needs at least one layer");
    bounds.push_back(bounds.back() + counts[k]);
  }
  BRIGADE_CHECK_VALUE(bounds.back() == layers, what, " sums to ", bounds.back(), " layers, the model has ",
                      layers);
  return bounds;
}

std::vector<int> min_max_cut(const std::vector<double>& costs, int parts) {
  check_costs(costs, parts);
  const int L = static_cast<int>(costs.size());
  const int K = parts;
  const std::vector<double> P = prefix_sums(costs);
  auto part = [&](int i, int j) { return P[static_cast<size_t>(j)] - P[static_cast<size_t>(i)]; };

  // Pass 1: best[k][j] = the smallest bottleneck cutting layers [0, j) into k parts.
  std::vector<std::vector<double>> best(static_cast<size_t>(K) + 1, std::vector<double>(L + 1, kInf));
  best[0][0] = 0.0;
  for (int k = 1; k <= K; ++k) {
    for (int j = k; j <= L - (K - k); ++j) {
      double b = kInf;
      for (int i = k - 1; i < j; ++i) b = std::min(b, std::max(best[k - 1][i], part(i, j)));
      best[k][j] = b;
    }
  }
  const double bottleneck = best[K][L];
  // Every part of a cut is compared with the bottleneck computed from the same prefix sums; the margin
  // only absorbs the order of floating additions inside max().
  const double limit = bottleneck + 1e-12 * std::max(1.0, std::abs(bottleneck));

  // Pass 2, over suffixes so that the reconstruction can take the first cut point on ties:
  // even[k][i] = the smallest sum of squared part costs cutting [i, L) into k parts, each <= limit.
  std::vector<std::vector<double>> even(static_cast<size_t>(K) + 1, std::vector<double>(L + 1, kInf));
  std::vector<std::vector<int>> next(static_cast<size_t>(K) + 1, std::vector<int>(L + 1, -1));
  even[0][L] = 0.0;
  for (int k = 1; k <= K; ++k) {
    for (int i = L - k; i >= K - k; --i) {
      for (int j = i + 1; j <= L - (k - 1); ++j) {
        const double c = part(i, j);
        if (c > limit || even[k - 1][j] == kInf) continue;
        const double value = c * c + even[k - 1][j];
        if (value < even[k][i]) {  // strict: the first j wins ties
          even[k][i] = value;
          next[k][i] = j;
        }
      }
    }
  }
  BRIGADE_CHECK(next[K][0] >= 0, "min_max_cut: no cut within the optimal bottleneck ", bottleneck,
                " (a bug in the dynamic program)");
  std::vector<int> bounds{0};
  for (int k = K, i = 0; k >= 1; --k) {
    i = next[k][i];
    bounds.push_back(i);
  }
  return bounds;
}

double max_part_cost(const std::vector<double>& costs, const std::vector<int>& bounds) {
  double worst = 0.0;
  for (size_t p = 0; p + 1 < bounds.size(); ++p) {
    double sum = 0.0;
    for (int i = bounds[p]; i < bounds[p + 1]; ++i) sum += costs[static_cast<size_t>(i)];
    worst = std::max(worst, sum);
  }
  return worst;
}

std::vector<double> layer_costs(const ModelProfile& profile, PartitionMethod method) {
  if (method == PartitionMethod::Time || method == PartitionMethod::Memory) {
    BRIGADE_CHECK_VALUE(profile.measured, "partition by ", to_string(method),
                        " needs measured layers (profile_layers), got parameter counts only");
  }
  if (method == PartitionMethod::Balance)
    method = profile.measured ? PartitionMethod::Time : PartitionMethod::Parameters;
  std::vector<double> costs;
  for (const LayerProfile& layer : profile.layers) {
    switch (method) {
      case PartitionMethod::Time:
        costs.push_back(layer.time_ms());
        break;
      case PartitionMethod::Memory:
        costs.push_back(static_cast<double>(layer.activation_bytes));
        break;
      default:
        costs.push_back(static_cast<double>(layer.work >= 0 ? layer.work : layer.parameters));
        break;
    }
  }
  return costs;
}

namespace {

const char* unit_of(const ModelProfile& profile, PartitionMethod method) {
  switch (method) {
    case PartitionMethod::Time:
      return "ms";
    case PartitionMethod::Memory:
      return "bytes";
    case PartitionMethod::Parameters:
      return "params";
    case PartitionMethod::Balance:
      return profile.measured ? "ms" : "params";
  }
  return "";
}

// Elements and bytes of the distinct tensors used by layers [begin, end).
void distinct_parameters(const ModelProfile& profile, const std::vector<std::pair<int, int>>& ranges,
                         int64_t& numel, int64_t& bytes) {
  std::vector<std::string> seen;
  numel = bytes = 0;
  for (const auto& [begin, end] : ranges) {
    for (int i = begin; i < end; ++i) {
      for (const ParameterInfo& p : profile.layers[static_cast<size_t>(i)].parameter_list) {
        if (std::find(seen.begin(), seen.end(), p.name) != seen.end()) continue;
        seen.push_back(p.name);
        numel += p.numel;
        bytes += p.bytes;
      }
    }
  }
}

std::string format_cost(double value, const std::string& unit) {
  char buffer[64];
  if (unit == "ms")
    std::snprintf(buffer, sizeof buffer, "%.3f", value);
  else if (unit == "bytes")
    return format_bytes(value);
  else
    std::snprintf(buffer, sizeof buffer, "%.0f", value);
  return buffer;
}

// Tied weights: the parameters (by name) used by layers on more than one stage of `partition`.
std::vector<SharedParameter> shared_parameters(const ModelProfile& profile, const Partition& partition) {
  std::vector<SharedParameter> candidates;
  for (const ChunkPlan& c : partition.chunks) {
    for (int i = c.begin; i < c.end; ++i) {
      const LayerProfile& layer = profile.layers[static_cast<size_t>(i)];
      for (const ParameterInfo& p : layer.parameter_list) {
        auto it = std::find_if(candidates.begin(), candidates.end(),
                               [&](const SharedParameter& s) { return s.name == p.name; });
        if (it == candidates.end()) {
          candidates.push_back({p.name, p.numel, {}, {}});
          it = candidates.end() - 1;
        }
        if (std::find(it->stages.begin(), it->stages.end(), c.stage) == it->stages.end())
          it->stages.push_back(c.stage);
        if (std::find(it->layers.begin(), it->layers.end(), layer.name) == it->layers.end())
          it->layers.push_back(layer.name);
      }
    }
  }
  std::vector<SharedParameter> shared;
  for (SharedParameter& p : candidates) {
    if (p.stages.size() < 2) continue;
    std::sort(p.stages.begin(), p.stages.end());
    shared.push_back(std::move(p));
  }
  return shared;
}

}  // namespace

Partition make_partition(const ModelProfile& profile, const PartitionOptions& options) {
  const int L = profile.num_layers();
  const int S = options.stages, v = options.virtual_chunks;
  BRIGADE_CHECK_VALUE(S >= 1, "partition: stages must be >= 1, got ", S);
  BRIGADE_CHECK_VALUE(v >= 1, "partition: virtual chunks must be >= 1, got ", v);
  const int K = S * v;
  BRIGADE_CHECK_VALUE(K <= L, "partition: ", S, " stages", v > 1 ? " x " + std::to_string(v) + " chunks" : "",
                      " need at least ", K, " layers, the model has ", L);

  const std::vector<double> costs = layer_costs(profile, options.method);
  std::vector<int> bounds;
  if (options.method == PartitionMethod::Balance) {
    // An empty balance would mean "as even as possible" to chunk_bounds; the balance method wants one.
    BRIGADE_CHECK_VALUE(!options.balance.empty(), "partition: balance has 0 entries, expected ", K,
                        " (one per model chunk)");
    bounds = chunk_bounds(options.balance, S, v, L, "partition: balance");
  } else {
    bounds = min_max_cut(costs, K);
  }

  Partition partition;
  partition.method = options.method;
  partition.cost_unit = unit_of(profile, options.method);
  partition.stages = S;
  partition.virtual_chunks = v;
  partition.placement = options.placement;
  const ChunkLayout layout = partition.layout();
  for (const LayerProfile& layer : profile.layers) partition.layer_names.push_back(layer.name);
  partition.stage_plans.resize(static_cast<size_t>(S));
  std::vector<std::vector<std::pair<int, int>>> stage_ranges(static_cast<size_t>(S));
  for (int k = 0; k < K; ++k) {
    ChunkPlan c;
    c.stage = layout.stage_of(k);
    c.local_chunk = layout.chunk_of(k);
    c.begin = bounds[static_cast<size_t>(k)];
    c.end = bounds[static_cast<size_t>(k) + 1];
    for (int i = c.begin; i < c.end; ++i) {
      c.cost += costs[static_cast<size_t>(i)];
      c.activation_bytes += profile.layers[static_cast<size_t>(i)].activation_bytes;
    }
    c.input_bytes = profile.layers[static_cast<size_t>(c.begin)].input_bytes;
    c.output_bytes = profile.layers[static_cast<size_t>(c.end) - 1].output_bytes;
    distinct_parameters(profile, {{c.begin, c.end}}, c.parameters, c.parameter_bytes);
    StagePlan& st = partition.stage_plans[static_cast<size_t>(c.stage)];
    st.cost += c.cost;
    st.activation_bytes += c.activation_bytes;
    st.chunks.push_back(k);
    stage_ranges[static_cast<size_t>(c.stage)].push_back({c.begin, c.end});
    partition.chunks.push_back(c);
  }
  double worst = 0.0, total = 0.0;
  for (int s = 0; s < S; ++s) {
    StagePlan& st = partition.stage_plans[static_cast<size_t>(s)];
    distinct_parameters(profile, stage_ranges[static_cast<size_t>(s)], st.parameters, st.parameter_bytes);
    worst = std::max(worst, st.cost);
    total += st.cost;
  }
  partition.imbalance = total > 0 ? worst / (total / S) : 1.0;

  partition.shared = shared_parameters(profile, partition);
  return partition;
}

const ChunkPlan& Partition::chunk(int stage, int local_chunk) const {
  BRIGADE_CHECK_VALUE(stage >= 0 && stage < stages && local_chunk >= 0 && local_chunk < virtual_chunks,
                      "Partition::chunk(", stage, ", ", local_chunk, "): outside ", stages, " stages x ",
                      virtual_chunks, " chunks");
  return chunks[static_cast<size_t>(layout().model_chunk(stage, local_chunk))];
}

std::string Partition::balance() const {
  std::string out;
  for (const ChunkPlan& c : chunks) {
    if (!out.empty()) out += ',';
    out += std::to_string(c.layers());
  }
  return out;
}

std::vector<int> Partition::layer_counts() const {
  std::vector<int> out;
  for (const ChunkPlan& c : chunks) out.push_back(c.layers());
  return out;
}

std::string Partition::table() const {
  std::ostringstream out;
  out << "partition by " << to_string(method) << ": " << num_layers() << " layers on " << stages << " stage"
      << (stages == 1 ? "" : "s");
  if (virtual_chunks > 1) out << " x " << virtual_chunks << " chunks";
  out << " (balance " << balance() << ")\n";
  const bool memory =
      std::any_of(chunks.begin(), chunks.end(), [](const ChunkPlan& c) { return c.activation_bytes > 0; });
  char line[256];
  std::snprintf(line, sizeof line, "%-7s %-9s %-26s %12s %12s %12s\n", virtual_chunks > 1 ? "chunk" : "stage",
                "layers", "names", "params", ("cost " + cost_unit).c_str(), memory ? "activations" : "");
  out << line;
  for (const ChunkPlan& c : chunks) {
    const std::string label = virtual_chunks > 1
                                  ? std::to_string(c.stage) + "." + std::to_string(c.local_chunk)
                                  : std::to_string(c.stage);
    const std::string layers = std::to_string(c.begin) + "-" + std::to_string(c.end - 1);
    std::string names = layer_names[static_cast<size_t>(c.begin)];
    if (c.layers() > 1) names += " .. " + layer_names[static_cast<size_t>(c.end) - 1];
    std::snprintf(line, sizeof line, "%-7s %-9s %-26s %12lld %12s %12s\n", label.c_str(), layers.c_str(),
                  names.c_str(), static_cast<long long>(c.parameters), format_cost(c.cost, cost_unit).c_str(),
                  memory ? format_bytes(static_cast<double>(c.activation_bytes)).c_str() : "");
    out << line;
  }
  if (virtual_chunks > 1) {
    for (int s = 0; s < stages; ++s) {
      const StagePlan& st = stage_plans[static_cast<size_t>(s)];
      std::snprintf(line, sizeof line, "%-7s %-9s %-26s %12lld %12s %12s\n",
                    ("stage " + std::to_string(s)).c_str(), "", "", static_cast<long long>(st.parameters),
                    format_cost(st.cost, cost_unit).c_str(),
                    memory ? format_bytes(static_cast<double>(st.activation_bytes)).c_str() : "");
      out << line;
    }
  }
  char imb[64];
  std::snprintf(imb, sizeof imb, "%.3f", imbalance);
  out << "imbalance (max/mean stage cost): " << imb << "\n";
  for (const SharedParameter& p : shared) {
    out << "shared: " << p.name << " (" << p.numel << " elements) used by";
    for (const std::string& l : p.layers) out << " " << l;
    out << " on stages";
    for (int s : p.stages) out << " " << s;
    out << ": its gradients are summed before the optimizer step\n";
  }
  return out.str();
}

Costs profile_costs(const ModelProfile& profile, const Partition& partition,
                    const std::vector<LayerRecompute>& layer_recompute) {
  Costs costs;
  for (const ChunkPlan& chunk : partition.chunks) {
    ChunkCosts c;
    c.forward = c.backward = c.recompute = 0.0;
    double input = 0.0, weight = 0.0;
    bool split = true;
    for (int i = chunk.begin; i < chunk.end; ++i) {
      const LayerProfile& layer = profile.layers[static_cast<size_t>(i)];
      c.forward += layer.forward_ms;
      c.backward += layer.backward_ms;
      input += layer.backward_input_ms, weight += layer.backward_weight_ms;
      split = split && layer.split_measured();
      const LayerRecompute choice = layer_choice(layer_recompute, i);
      if (choice == LayerRecompute::Full) c.recompute += layer.forward_ms;
      if (choice == LayerRecompute::AttentionCore) c.recompute += layer.attention_core_ms;
    }
    // The executor's actions against the layers timed alone (ModelProfile::action_forward_factor): F and
    // R the forward's factor, B, Bi and Bw the backward's.
    const double ff = profile.action_forward_factor, fb = profile.action_backward_factor;
    c.forward *= ff, c.recompute *= ff, c.backward *= fb, input *= fb, weight *= fb;
    // Bi and Bw as measured; without them the split is priced at B, half each. The first chunk's input is
    // the token ids, which have no gradient: its Bi computes nothing and its Bw runs the whole backward
    // (split_backward.h), so it is priced as Bi 0 and Bw B.
    c.weight = split ? weight : 0.5 * c.backward;
    c.input = split ? input : -1.0;
    if (chunk.begin == 0) c.weight = c.backward, c.input = 0.0;
    c.weight_deferred =
        c.weight * (chunk.begin == 0 ? profile.deferred_first_weight_factor : profile.deferred_weight_factor);
    c.cold = profile.cold_backward_factor;
    c.output_bytes = chunk.output_bytes;
    c.input_bytes = chunk.input_bytes;
    costs.per_chunk.push_back(c);
  }
  return costs;
}

}  // namespace brigade::pipeline
