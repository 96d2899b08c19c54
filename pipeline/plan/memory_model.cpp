// The memory model and certification (see memory_model.h for the formulas).
#include "pipeline/plan/memory_model.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <functional>
#include <sstream>

#include "pipeline/plan/activation_ledger.h"
#include "pipeline/plan/key_values.h"
#include "pipeline/plan/simulator.h"
#include "pipeline/schedule/generators.h"
#include "tensor/error.h"

namespace brigade::pipeline {

MemoryModel MemoryModel::parse(const std::string& text) {
  MemoryModel model;
  for (const auto& [key, value] : parse_key_values(text, "memory", "full, boundary")) {
    if (key == "full") {
      model.uniform.full = value;
    } else if (key == "boundary") {
      model.uniform.boundary = value;
    } else {
      BRIGADE_THROW(ValueError, "memory: unknown key '", key, "' (valid: full, boundary)");
    }
  }
  BRIGADE_CHECK_VALUE(model.uniform.full >= 0 && model.uniform.boundary >= 0, "memory: sizes must be >= 0");
  return model;
}

ActivationSizes MemoryModel::chunk(const ChunkLayout& layout, int stage, int chunk) const {
  if (!per_chunk.empty()) {
    BRIGADE_CHECK_VALUE(static_cast<int>(per_chunk.size()) == layout.model_chunks(), "memory: sizes for ",
                        per_chunk.size(), " chunks, the schedule has ", layout.stages, " stages x ",
                        layout.virtual_chunks, " chunks");
    return per_chunk[static_cast<size_t>(layout.model_chunk(stage, chunk))];
  }
  return ActivationSizes{uniform.full / layout.virtual_chunks, uniform.boundary};
}

std::string MemoryPlan::describe() const {
  std::ostringstream out;
  out << (schedule_lists ? schedule_lists->name : schedule) << ", " << stages << " stage"
      << (stages == 1 ? "" : "s");
  if (virtual_chunks > 1) out << " x " << virtual_chunks << " chunks";
  out << ", " << microbatches << " microbatch" << (microbatches == 1 ? "" : "es");
  if (batch_size > 0 && microbatches > 0) out << " of " << batch_size / microbatches;
  out << ", recompute " << to_string(recompute);
  if (!layer_recompute.empty()) out << ":" << plan_letters(layer_recompute);
  out << ", partition by " << to_string(partition);
  if (partition == PartitionMethod::Balance) {
    out << " ";
    for (size_t i = 0; i < balance.size(); ++i) out << (i ? "," : "") << balance[i];
  }
  return out.str();
}

int MemoryPrediction::worst_stage() const {
  int worst = 0;
  for (size_t s = 1; s < stages.size(); ++s)
    if (stages[s].total_bytes() > stages[static_cast<size_t>(worst)].total_bytes())
      worst = static_cast<int>(s);
  return worst;
}

int64_t MemoryPrediction::peak_bytes() const {
  return stages.empty() ? 0 : stages[static_cast<size_t>(worst_stage())].total_bytes();
}

namespace {

std::string mib(int64_t bytes) {
  return format_bytes(static_cast<double>(bytes));
}

// Samples per microbatch for a plan (ValueError when the batch does not divide).
int64_t microbatch_size_of(const ModelProfile& profile, const MemoryPlan& plan) {
  BRIGADE_CHECK_VALUE(plan.microbatches >= 1, "memory model: microbatches must be >= 1, got ",
                      plan.microbatches);
  if (plan.batch_size <= 0) return profile.microbatch_size;
  BRIGADE_CHECK_VALUE(plan.batch_size % plan.microbatches == 0, "memory model: batch of ", plan.batch_size,
                      " is not divisible by ", plan.microbatches, " microbatches");
  return plan.batch_size / plan.microbatches;
}

// What a recomputed microbatch keeps of chunk c between F and R (MemoryPlan::layer_recompute), in
// profiled bytes.
double kept_when_recomputed(const ModelProfile& profile, const ChunkPlan& c,
                            const std::vector<LayerRecompute>& plan) {
  const int L = profile.num_layers();
  double kept = 0.0;
  for (int i = c.begin; i < c.end; ++i) {
    const LayerProfile& l = profile.layers[static_cast<size_t>(i)];
    const LayerRecompute choice = layer_choice(plan, i);
    if (choice == LayerRecompute::None) kept += static_cast<double>(l.activation_bytes);
    if (choice == LayerRecompute::AttentionCore) {
      BRIGADE_CHECK_VALUE(l.attention_core_bytes >= 0, "memory model: layer ", i, " (", l.name,
                          ") recomputes its attention core, but the profile did not measure it "
                          "(ProfileOptions::attention_core)");
      kept += static_cast<double>(l.activation_bytes - l.attention_core_bytes);
    }
    const bool span_ends = i + 1 == c.end || layer_choice(plan, i + 1) != LayerRecompute::Full;
    if (choice == LayerRecompute::Full && span_ends && i + 1 < L) kept += static_cast<double>(l.output_bytes);
  }
  return kept;
}

// What a recomputed microbatch holds of chunk c after its R (ActivationSizes::replayed), in profiled bytes,
// when the chunk is recomputed layer by layer: n and f layers their activations, a layers theirs less the
// core's plus what the core's recompute keeps (measured), and a second copy of the output of each span of
// f layers that another layer of the chunk follows (the span's checkpoint holds one, that layer saved one).
double held_after_replay(const ModelProfile& profile, const ChunkPlan& c,
                         const std::vector<LayerRecompute>& plan) {
  double held = 0.0;
  for (int i = c.begin; i < c.end; ++i) {
    const LayerProfile& l = profile.layers[static_cast<size_t>(i)];
    const LayerRecompute choice = layer_choice(plan, i);
    held += static_cast<double>(l.activation_bytes);
    if (choice == LayerRecompute::AttentionCore)
      held += static_cast<double>(l.attention_replay_bytes - l.attention_core_bytes);
    if (choice == LayerRecompute::Full && i + 1 < c.end && layer_choice(plan, i + 1) != LayerRecompute::Full)
      held += static_cast<double>(l.output_bytes);
  }
  return held;
}

}  // namespace

namespace {

// The gradients a stage's backwards create, by parameter name: a tensor used by two chunks of the stage
// (or two layers of one) is created once, by the first backward that reaches it.
class GradientLedger {
 public:
  explicit GradientLedger(const ModelProfile& profile) : profile_(profile) {}

  /// Bytes of the gradients of layers [begin, end) that do not exist yet.
  double uncreated_bytes(int begin, int end) const {
    std::vector<std::string> counted;
    double bytes = 0.0;
    for (int i = begin; i < end; ++i) {
      for (const ParameterInfo& p : profile_.layers[static_cast<size_t>(i)].parameter_list) {
        if (created(p.name) || std::find(counted.begin(), counted.end(), p.name) != counted.end()) continue;
        counted.push_back(p.name);
        bytes += static_cast<double>(p.bytes);
      }
    }
    return bytes;
  }
  /// The gradients of layers [begin, end) exist from now on.
  void create(int begin, int end) {
    for (int i = begin; i < end; ++i) {
      for (const ParameterInfo& p : profile_.layers[static_cast<size_t>(i)].parameter_list) {
        if (created(p.name)) continue;
        created_.push_back(p.name);
        bytes_ += static_cast<double>(p.bytes);
      }
    }
  }
  /// Bytes of the gradients that exist.
  double bytes() const { return bytes_; }

 private:
  bool created(const std::string& name) const {
    return std::find(created_.begin(), created_.end(), name) != created_.end();
  }
  const ModelProfile& profile_;
  std::vector<std::string> created_;
  double bytes_ = 0.0;
};

// The running action's own term (memory_model.h, "the action itself"): its layers' workspaces, walked
// from the chunk's last layer down, net of the activations of the layers after each one, plus, for a B or
// Bw, the gradients it creates. `r` scales the profiled bytes to the planned microbatch.
double action_term(const ModelProfile& profile, const ChunkPlan& c, const Action& a, bool boundary_only,
                   double r, const GradientLedger& gradients) {
  const bool backward = a.kind == ActionKind::Backward || a.kind == ActionKind::BackwardInput ||
                        a.kind == ActionKind::BackwardWeight;
  double term = 0.0, after = 0.0;  // after: activations of the layers after i in the chunk
  // The first chunk's Bi runs nothing: its input (the token ids) has no gradient (see predict_memory).
  if (a.kind == ActionKind::BackwardInput && c.begin == 0) return 0.0;
  for (int i = c.end - 1; i >= c.begin; --i) {
    const LayerProfile& l = profile.layers[static_cast<size_t>(i)];
    double t = 0.0;
    if (a.kind == ActionKind::Forward && boundary_only)
      t = r * static_cast<double>(l.forward_workspace_bytes);
    else if (!backward)
      t = r * static_cast<double>(l.forward_workspace_bytes) - after;
    else
      t = r * static_cast<double>(l.backward_workspace_bytes) - after +
          (a.kind == ActionKind::BackwardInput ? 0.0 : gradients.uncreated_bytes(i, c.end));
    term = std::max(term, t);
    after += r * static_cast<double>(l.activation_bytes);
  }
  return term;
}

// Walks stage s's list as memory_model.h describes and returns the activation peak and the step peak
// with its parts (resident figures and simulator counts are filled in by the caller).
StageMemory walk_stage(const ModelProfile& profile, const Partition& partition, const Schedule& schedule,
                       const MemoryModel& sizes, int s, double r) {
  ActivationLedger activations(schedule, s, sizes);
  GradientLedger gradients(profile);
  double activation_peak = 0.0, in_transit = 0.0, best = -1.0;
  StageMemory m;
  m.stage = s;
  const auto& list = schedule.actions[static_cast<size_t>(s)];
  for (size_t step = 0; step < list.size(); ++step) {
    const Action& a = list[step];
    if (!ActivationLedger::tracks(a.kind)) continue;
    const int k = schedule.model_chunk(s, a.chunk);
    const ChunkPlan& c = partition.chunks[static_cast<size_t>(k)];
    activations.begin(a);
    activation_peak = std::max(activation_peak, activations.live());
    const bool boundary_only =
        a.kind == ActionKind::Forward && activations.held(a.chunk, a.microbatch) == Held::Boundary;
    const double term = action_term(profile, c, a, boundary_only, r, gradients);
    const double candidate = activations.live() + gradients.bytes() + in_transit + term;
    if (candidate > best) {
      best = candidate;
      m.peak_step = static_cast<int>(step);
      m.peak_action = a;
      m.peak_activations = std::llround(activations.live());
      m.peak_gradients = std::llround(gradients.bytes());
      m.peak_workspace = std::llround(in_transit + term);
    }
    // Releases and creations when the action ends.
    activations.end(a);
    if (a.kind == ActionKind::Backward || a.kind == ActionKind::BackwardWeight)
      gradients.create(c.begin, c.end);
    if ((a.kind == ActionKind::Backward || a.kind == ActionKind::BackwardInput) && k > 0)
      in_transit = std::max(in_transit, r * static_cast<double>(c.input_bytes));
  }
  m.activation_bytes = std::llround(activation_peak);
  return m;
}

}  // namespace

MemoryPrediction predict_memory(const ModelProfile& profile, const MemoryPlan& plan) {
  BRIGADE_CHECK_VALUE(
      profile.measured && profile.microbatch_size > 0,
      "memory model: needs measured activation sizes (profile_layers), got parameter counts only");
  BRIGADE_CHECK_VALUE(plan.optimizer_state_tensors >= 0,
                      "memory model: optimizer_state_tensors must be >= 0, got ",
                      plan.optimizer_state_tensors);
  MemoryPrediction prediction;
  prediction.plan = plan;
  prediction.microbatch_size = microbatch_size_of(profile, plan);
  const double r =
      static_cast<double>(prediction.microbatch_size) / static_cast<double>(profile.microbatch_size);

  const Schedule schedule = schedule_for(plan.schedule, plan.stages, plan.microbatches, plan.virtual_chunks,
                                         plan.recompute, plan.schedule_lists);
  PartitionOptions options;
  options.method = plan.partition;
  options.stages = plan.stages;
  options.virtual_chunks = schedule.virtual_chunks;  // a V schedule holds two, whatever the plan asked
  options.placement = schedule.placement;
  options.balance = plan.balance;
  prediction.partition = make_partition(profile, options);
  const Partition& partition = prediction.partition;

  // Per model chunk: full and boundary activation bytes of one microbatch of the planned size.
  MemoryModel model;
  const int K = partition.model_chunks();
  for (int k = 0; k < K; ++k) {
    const ChunkPlan& c = partition.chunks[static_cast<size_t>(k)];
    ActivationSizes sizes;
    sizes.full = r * static_cast<double>(c.activation_bytes);
    sizes.boundary = r * kept_when_recomputed(profile, c, plan.layer_recompute);
    if (!whole_chunk_recomputed(plan.layer_recompute, c.begin, c.end))
      sizes.replayed = r * held_after_replay(profile, c, plan.layer_recompute);
    // Between Bi and Bw: the sum of the layers' measured split_pending_bytes (unmeasured: full). Not for
    // the first chunk: its input is the model's token ids, which have no gradient, so its Bi has no input
    // side to walk and computes nothing, and Bw runs its whole backward (split_backward.h). Until Bw it
    // holds what F left, no more: the per-layer figures, measured with each layer's input a leaf that
    // requires grad, add the output gradients Bi keeps for the weight-side nodes (a block's MLP: the
    // gradient at fc's output, and with bias_gelu also fc's output saved for the bias gradient), which
    // this chunk never allocates. Summed, they put the first stage's step peak under a split backward
    // 4-13 % above the measured one with the unfused MLP, 17-52 % with bias_gelu.
    double pending = 0.0;
    for (int i = c.begin; i < c.end && pending >= 0.0 && k > 0; ++i) {
      const int64_t bytes = profile.layers[static_cast<size_t>(i)].split_pending_bytes;
      pending = bytes < 0 ? -1.0 : pending + r * static_cast<double>(bytes);
    }
    sizes.pending = k == 0 ? -1.0 : pending;
    model.per_chunk.push_back(sizes);
  }
  const Timeline timeline = simulate(schedule, Costs{}, model);

  for (int s = 0; s < plan.stages; ++s) {
    const StagePlan& st = partition.stage_plans[static_cast<size_t>(s)];
    const StageStats& stats = timeline.stats[static_cast<size_t>(s)];
    StageMemory m = walk_stage(profile, partition, schedule, model, s, r);
    // The walk and the simulator step through the same activation ledger; they must agree.
    BRIGADE_CHECK(std::abs(static_cast<double>(m.activation_bytes) - stats.peak_memory) <=
                      1.0 + 1e-9 * stats.peak_memory,
                  "memory model: stage ", s, " walk peak ", m.activation_bytes, " != simulator peak ",
                  stats.peak_memory, " (a bug in memory_model.cpp)");
    m.parameter_bytes = st.parameter_bytes;
    m.gradient_bytes = st.parameter_bytes;
    m.optimizer_bytes = plan.optimizer_state_tensors * st.parameter_bytes;
    m.peak_in_flight = stats.peak_in_flight;
    m.peak_full = stats.peak_full;
    prediction.stages.push_back(m);
  }
  return prediction;
}

std::string MemoryPrediction::table(const std::vector<int64_t>& measured_step_peaks) const {
  const bool measured = !measured_step_peaks.empty();
  BRIGADE_CHECK_VALUE(!measured || measured_step_peaks.size() == stages.size(),
                      "MemoryPrediction::table: ", measured_step_peaks.size(), " measured peaks for ",
                      stages.size(), " stages");
  std::ostringstream out;
  out << "memory per stage (" << plan.describe() << "):\n";
  char line[400];
  std::snprintf(line, sizeof line, "%5s %10s %10s %10s %11s %6s | %-8s %10s %10s %10s | %10s %10s", "stage",
                "params", "optimizer", "grads", "activations", "flight", "peak at", "act", "grads", "work",
                "step peak", "total");
  out << line;
  if (measured) {
    std::snprintf(line, sizeof line, " | %10s %7s", "measured", "error");
    out << line;
  }
  out << "\n";
  for (size_t s = 0; s < stages.size(); ++s) {
    const StageMemory& m = stages[s];
    const std::string flight = std::to_string(m.peak_full) + "/" + std::to_string(m.peak_in_flight);
    const std::string at = m.peak_step >= 0 ? to_string(m.peak_action, partition.virtual_chunks > 1) : "-";
    std::snprintf(line, sizeof line, "%5zu %10s %10s %10s %11s %6s | %-8s %10s %10s %10s | %10s %10s", s,
                  mib(m.parameter_bytes).c_str(), mib(m.optimizer_bytes).c_str(),
                  mib(m.gradient_bytes).c_str(), mib(m.activation_bytes).c_str(), flight.c_str(), at.c_str(),
                  mib(m.peak_activations).c_str(), mib(m.peak_gradients).c_str(),
                  mib(m.peak_workspace).c_str(), mib(m.step_peak_bytes()).c_str(),
                  mib(m.total_bytes()).c_str());
    out << line;
    if (measured) {
      const double got = static_cast<double>(measured_step_peaks[s]);
      const double error = got > 0 ? (static_cast<double>(m.step_peak_bytes()) - got) / got : 0.0;
      std::snprintf(line, sizeof line, " | %10s %+6.1f%%", mib(measured_step_peaks[s]).c_str(),
                    100.0 * error);
      out << line;
    }
    out << "\n";
  }
  out << "activations: the most live at once (flight: microbatches holding full activations / any); at the "
         "step peak: the action running and its live activations, gradients and workspace; step peak = their "
         "sum; total = params + optimizer + step peak\n";
  return out.str();
}

namespace {

std::string breakdown(const StageMemory& m, int virtual_chunks) {
  std::ostringstream out;
  out << mib(m.total_bytes()) << " = parameters " << mib(m.parameter_bytes) << " + optimizer state "
      << mib(m.optimizer_bytes) << " + the step's peak " << mib(m.step_peak_bytes()) << " during "
      << to_string(m.peak_action, virtual_chunks > 1) << " (activations " << mib(m.peak_activations)
      << ", gradients " << mib(m.peak_gradients) << ", workspace " << mib(m.peak_workspace) << "; at most "
      << m.peak_in_flight << " microbatch" << (m.peak_in_flight == 1 ? "" : "es") << " in flight, "
      << m.peak_full << " with full activations)";
  return out.str();
}

bool fits(const MemoryPrediction& p, int64_t budget) {
  return p.peak_bytes() <= budget;
}

// The changes of memory_model.h, one dimension each, cheapest first: option 0 of a dimension is "keep".
// A candidate plan picks one option per dimension; its cost key is (number of changes, then the option
// index of the dearest dimension first: stages, schedule, recompute, microbatches), so that single
// changes come out in the documented order and combinations only after every single change.
struct Option {
  std::string flag;  // "" for "keep"
  std::function<void(MemoryPlan&)> apply;
};

std::vector<std::vector<Option>> dimensions(const ModelProfile& profile, const MemoryPlan& plan) {
  std::vector<Option> microbatches{{"", nullptr}}, recompute{{"", nullptr}}, schedule{{"", nullptr}},
      stages{{"", nullptr}};
  if (plan.schedule_lists)
    return {microbatches, recompute, schedule, stages};  // given lists: nothing to vary
  if (plan.batch_size > 0) {
    for (int m = plan.microbatches + 1; m <= plan.batch_size; ++m) {
      if (plan.batch_size % m != 0) continue;
      microbatches.push_back(
          {"--microbatches " + std::to_string(m), [m](MemoryPlan& p) { p.microbatches = m; }});
    }
  }
  if (plan.recompute == Recompute::Never)
    recompute.push_back(
        {"--recompute except-last", [](MemoryPlan& p) { p.recompute = Recompute::ExceptLast; }});
  if (plan.recompute != Recompute::Always)
    recompute.push_back({"--recompute always", [](MemoryPlan& p) { p.recompute = Recompute::Always; }});
  if (plan.schedule == "gpipe")
    schedule.push_back({"--schedule 1f1b", [](MemoryPlan& p) { p.schedule = "1f1b"; }});
  const int v = chunks_per_stage(plan.schedule, plan.virtual_chunks);
  for (int n = plan.stages + 1; n * v <= profile.num_layers(); ++n) {
    const bool balance = plan.partition == PartitionMethod::Balance;
    stages.push_back({"--stages " + std::to_string(n) + (balance ? " --partition params" : ""),
                      [n, balance](MemoryPlan& p) {
                        p.stages = n;
                        if (balance) {  // a hand-made balance does not extend to more stages
                          p.partition = PartitionMethod::Parameters;
                          p.balance.clear();
                        }
                      }});
  }
  return {microbatches, recompute, schedule, stages};  // flags are printed in this order
}

struct Found {
  MemoryPlan plan;
  std::string change;
  MemoryPrediction prediction;
  int changes = 0;
};

// The cheapest candidate that fits, or the one with the lowest peak when none fits (fits() false).
Found search(const ModelProfile& profile, const MemoryPlan& plan, int64_t budget) {
  const std::vector<std::vector<Option>> dims = dimensions(profile, plan);
  struct Candidate {
    std::array<int, 4> pick;  // option per dimension (microbatches, recompute, schedule, stages)
    std::array<int, 5> key;   // changes, stages, schedule, recompute, microbatches
  };
  std::vector<Candidate> candidates;
  for (int a = 0; a < static_cast<int>(dims[0].size()); ++a)
    for (int b = 0; b < static_cast<int>(dims[1].size()); ++b)
      for (int c = 0; c < static_cast<int>(dims[2].size()); ++c)
        for (int d = 0; d < static_cast<int>(dims[3].size()); ++d) {
          const int changes = (a > 0) + (b > 0) + (c > 0) + (d > 0);
          if (changes > 0) candidates.push_back({{a, b, c, d}, {changes, d, c, b, a}});
        }
  std::sort(candidates.begin(), candidates.end(),
            [](const Candidate& x, const Candidate& y) { return x.key < y.key; });
  Found lowest;
  bool have_lowest = false;
  for (const Candidate& cand : candidates) {
    MemoryPlan p = plan;
    std::string change;
    for (size_t dim = 0; dim < dims.size(); ++dim) {
      const Option& o = dims[dim][static_cast<size_t>(cand.pick[dim])];
      if (!o.apply) continue;
      o.apply(p);
      change += (change.empty() ? "" : " ") + o.flag;
    }
    MemoryPrediction prediction;
    try {
      prediction = predict_memory(profile, p);
    } catch (const ValueError&) {
      continue;  // not a valid configuration (e.g. interleaved needs M divisible by S)
    }
    const bool ok = fits(prediction, budget);
    if (ok || !have_lowest || prediction.peak_bytes() < lowest.prediction.peak_bytes()) {
      lowest = Found{p, change, std::move(prediction), cand.key[0]};
      have_lowest = true;
    }
    if (ok) break;
  }
  return lowest;
}

}  // namespace

Certificate check_memory(const ModelProfile& profile, const MemoryPlan& plan, int64_t budget_bytes) {
  BRIGADE_CHECK_VALUE(budget_bytes > 0, "memory budget must be > 0 bytes, got ", budget_bytes);
  Certificate cert;
  cert.budget_bytes = budget_bytes;
  cert.prediction = predict_memory(profile, plan);
  const MemoryPrediction& p = cert.prediction;
  cert.fits = fits(p, budget_bytes);
  std::ostringstream msg;
  if (cert.fits) {
    const int w = p.worst_stage();
    msg << "memory budget " << mib(budget_bytes) << " per stage: fits (" << plan.describe()
        << "); the largest "
        << "predicted peak is stage " << w << ": "
        << breakdown(p.stages[static_cast<size_t>(w)], p.partition.virtual_chunks);
    cert.message = msg.str();
    return cert;
  }
  cert.stage = p.worst_stage();
  int over = 0;
  for (const StageMemory& m : p.stages) over += m.total_bytes() > budget_bytes ? 1 : 0;
  msg << "memory budget " << mib(budget_bytes) << " per stage refused for " << plan.describe() << ": stage "
      << cert.stage << " is predicted to peak at "
      << breakdown(p.stages[static_cast<size_t>(cert.stage)], p.partition.virtual_chunks);
  if (over > 1) msg << " (" << over << " stages are over the budget)";
  msg << ". ";
  Found found = search(profile, plan, budget_bytes);
  if (!found.change.empty() && fits(found.prediction, budget_bytes)) {
    msg << (found.changes == 1 ? "Cheapest change that fits: "
                               : "No single change fits; the cheapest combination that fits: ")
        << found.change << " (largest predicted peak " << mib(found.prediction.peak_bytes()) << ", stage "
        << found.prediction.worst_stage() << ").";
    cert.change = found.change;
    cert.suggestion = found.plan;
    cert.suggestion_prediction = std::move(found.prediction);
  } else if (plan.schedule_lists) {
    msg << "The schedule's lists are given as they are (" << plan.schedule_lists->name
        << "): change them, or the budget.";
  } else {
    msg << "Nothing fits: no change or combination of more microbatches";
    if (plan.batch_size <= 0) msg << " (not applicable without a batch size)";
    msg << ", recompute, 1f1b instead of gpipe and more stages (up to "
        << profile.num_layers() / std::max(1, p.partition.virtual_chunks)
        << ") brings every stage under the budget";
    if (!found.change.empty())
      msg << "; the lowest predicted peak is " << mib(found.prediction.peak_bytes()) << ", with "
          << found.change;
    msg << ".";
  }
  cert.message = msg.str();
  return cert;
}

MemoryPrediction certify(const ModelProfile& profile, const MemoryPlan& plan, int64_t budget_bytes) {
  Certificate cert = check_memory(profile, plan, budget_bytes);
  if (!cert.fits) BRIGADE_THROW(OutOfMemoryError, cert.message);
  return std::move(cert.prediction);
}

int64_t parse_bytes(const std::string& text) {
  size_t pos = 0;
  while (pos < text.size() && (std::isdigit(static_cast<unsigned char>(text[pos])) || text[pos] == '.'))
    ++pos;
  const std::string number = text.substr(0, pos);
  std::string unit = text.substr(pos);
  const bool number_ok =
      !number.empty() && std::count(number.begin(), number.end(), '.') <= 1 && number != ".";
  double scale = 0.0;
  if (unit.empty() || unit == "B") scale = 1.0;
  const char* prefixes = "KMGT";
  for (int i = 0; i < 4 && scale == 0.0; ++i) {
    const std::string p(1, prefixes[i]);
    const double binary = std::pow(1024.0, i + 1), decimal = std::pow(1000.0, i + 1);
    if (unit == p || unit == p + "iB" || unit == p + "i") scale = binary;
    if (unit == p + "B") scale = decimal;
  }
  BRIGADE_CHECK_VALUE(number_ok && scale > 0.0, "memory budget: cannot read '", text,
                      "' as bytes (examples: 1073741824, 512MiB, 1.5GiB, 2G, 64KB)");
  const double value = std::stod(number) * scale;
  BRIGADE_CHECK_VALUE(value >= 1.0 && value < 9.2e18, "memory budget: '", text, "' is out of range");
  return static_cast<int64_t>(std::llround(value));
}

}  // namespace brigade::pipeline
