// The memory model and certification (see memory_model.h for the formulas).
#include "pipeline/memory_model.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "pipeline/generators.h"
#include "pipeline/simulator.h"
#include "tensor/error.h"

namespace brigade::pipeline {

std::string MemoryPlan::describe() const {
  std::ostringstream out;
  out << schedule << ", " << stages << " stage" << (stages == 1 ? "" : "s");
  if (virtual_chunks > 1) out << " x " << virtual_chunks << " chunks";
  out << ", " << microbatches << " microbatch" << (microbatches == 1 ? "" : "es");
  if (batch_size > 0 && microbatches > 0) out << " of " << batch_size / microbatches;
  out << ", recompute " << to_string(recompute) << ", partition by " << to_string(partition);
  if (partition == PartitionMethod::Balance) {
    out << " ";
    for (size_t i = 0; i < balance.size(); ++i) out << (i ? "," : "") << balance[i];
  }
  return out.str();
}

int MemoryPrediction::worst_stage() const {
  int worst = 0;
  for (size_t s = 1; s < stages.size(); ++s)
    if (stages[s].total_bytes() > stages[static_cast<size_t>(worst)].total_bytes()) worst = static_cast<int>(s);
  return worst;
}

int64_t MemoryPrediction::peak_bytes() const {
  return stages.empty() ? 0 : stages[static_cast<size_t>(worst_stage())].total_bytes();
}

namespace {

std::string mib(int64_t bytes) { return format_bytes(static_cast<double>(bytes)); }

// Samples per microbatch for a plan (ValueError when the batch does not divide).
int64_t microbatch_size_of(const ModelProfile& profile, const MemoryPlan& plan) {
  BRIGADE_CHECK_VALUE(plan.microbatches >= 1, "memory model: microbatches must be >= 1, got ", plan.microbatches);
  if (plan.batch_size <= 0) return profile.microbatch_size;
  BRIGADE_CHECK_VALUE(plan.batch_size % plan.microbatches == 0, "memory model: batch of ", plan.batch_size,
                      " is not divisible by ", plan.microbatches, " microbatches");
  return plan.batch_size / plan.microbatches;
}

}  // namespace

MemoryPrediction predict_memory(const ModelProfile& profile, const MemoryPlan& plan) {
  BRIGADE_CHECK_VALUE(profile.measured && profile.microbatch_size > 0,
                      "memory model: needs measured activation sizes (profile_layers), got parameter counts only");
  BRIGADE_CHECK_VALUE(plan.optimizer_state_tensors >= 0, "memory model: optimizer_state_tensors must be >= 0, got ",
                      plan.optimizer_state_tensors);
  MemoryPrediction prediction;
  prediction.plan = plan;
  prediction.microbatch_size = microbatch_size_of(profile, plan);
  const double r = static_cast<double>(prediction.microbatch_size) / static_cast<double>(profile.microbatch_size);

  PartitionOptions options;
  options.method = plan.partition;
  options.stages = plan.stages;
  options.virtual_chunks = plan.virtual_chunks;
  options.balance = plan.balance;
  prediction.partition = make_partition(profile, options);
  const Partition& partition = prediction.partition;
  const Schedule schedule =
      make_schedule(plan.schedule, plan.stages, plan.microbatches, plan.virtual_chunks, plan.recompute);

  // Per model chunk: full and boundary activation bytes of one microbatch of the planned size.
  MemoryModel model;
  const int K = partition.model_chunks();
  for (int k = 0; k < K; ++k) {
    const ChunkPlan& c = partition.chunks[static_cast<size_t>(k)];
    ActivationSizes sizes;
    sizes.full = r * static_cast<double>(c.activation_bytes);
    sizes.boundary = k + 1 == K ? 0.0 : r * static_cast<double>(c.output_bytes);
    model.per_chunk.push_back(sizes);
  }
  const Timeline timeline = simulate(schedule, Costs{}, model);

  for (int s = 0; s < plan.stages; ++s) {
    const StagePlan& st = partition.stage_plans[static_cast<size_t>(s)];
    const StageStats& stats = timeline.stats[static_cast<size_t>(s)];
    StageMemory m;
    m.stage = s;
    m.parameter_bytes = st.parameter_bytes;
    m.gradient_bytes = st.parameter_bytes;
    m.optimizer_bytes = plan.optimizer_state_tensors * st.parameter_bytes;
    m.activation_bytes = std::llround(stats.peak_memory);
    m.peak_in_flight = stats.peak_in_flight;
    m.peak_full = stats.peak_full;
    int64_t work = 0, in_transit = 0;
    for (int k : st.chunks) {
      const ChunkPlan& c = partition.chunks[static_cast<size_t>(k)];
      for (int i = c.begin; i < c.end; ++i) {
        const LayerProfile& layer = profile.layers[static_cast<size_t>(i)];
        work = std::max({work, layer.forward_workspace_bytes, layer.backward_workspace_bytes});
      }
      if (k > 0) in_transit = std::max(in_transit, c.input_bytes);
    }
    m.workspace_bytes = std::llround(r * static_cast<double>(work + in_transit));
    prediction.stages.push_back(m);
  }
  return prediction;
}

std::string MemoryPrediction::table(const std::vector<int64_t>& measured_step_peaks) const {
  const bool measured = !measured_step_peaks.empty();
  BRIGADE_CHECK_VALUE(!measured || measured_step_peaks.size() == stages.size(), "MemoryPrediction::table: ",
                      measured_step_peaks.size(), " measured peaks for ", stages.size(), " stages");
  std::ostringstream out;
  out << "memory per stage (" << plan.describe() << "):\n";
  char line[320];
  std::snprintf(line, sizeof line, "%5s %11s %11s %11s %11s %8s %11s %11s %11s", "stage", "params", "grads",
                "optimizer", "activations", "flight", "workspace", "step peak", "total");
  out << line;
  if (measured) {
    std::snprintf(line, sizeof line, " %11s %7s", "measured", "error");
    out << line;
  }
  out << "\n";
  for (size_t s = 0; s < stages.size(); ++s) {
    const StageMemory& m = stages[s];
    const std::string flight = std::to_string(m.peak_full) + "/" + std::to_string(m.peak_in_flight);
    std::snprintf(line, sizeof line, "%5zu %11s %11s %11s %11s %8s %11s %11s %11s", s, mib(m.parameter_bytes).c_str(),
                  mib(m.gradient_bytes).c_str(), mib(m.optimizer_bytes).c_str(), mib(m.activation_bytes).c_str(),
                  flight.c_str(), mib(m.workspace_bytes).c_str(), mib(m.step_peak_bytes()).c_str(),
                  mib(m.total_bytes()).c_str());
    out << line;
    if (measured) {
      const double got = static_cast<double>(measured_step_peaks[s]);
      const double error = got > 0 ? (static_cast<double>(m.step_peak_bytes()) - got) / got : 0.0;
      std::snprintf(line, sizeof line, " %11s %+6.1f%%", mib(measured_step_peaks[s]).c_str(), 100.0 * error);
      out << line;
    }
    out << "\n";
  }
  out << "flight = microbatches holding full activations / holding any, at the peak; step peak = grads + "
         "activations + workspace; total = params + optimizer + step peak\n";
  return out.str();
}

namespace {

std::string breakdown(const StageMemory& m) {
  std::ostringstream out;
  out << mib(m.total_bytes()) << " = parameters " << mib(m.parameter_bytes) << " + optimizer state "
      << mib(m.optimizer_bytes) << " + gradients " << mib(m.gradient_bytes) << " + activations "
      << mib(m.activation_bytes) << " (" << m.peak_in_flight << " microbatch" << (m.peak_in_flight == 1 ? "" : "es")
      << " in flight, " << m.peak_full << " with full activations) + workspace " << mib(m.workspace_bytes);
  return out.str();
}

bool fits(const MemoryPrediction& p, int64_t budget) { return p.peak_bytes() <= budget; }

// The single-change alternatives of memory_model.h, in order; each is predicted and the first that fits
// is kept. Plans that are invalid (a count that does not divide, too many stages) are skipped.
struct Alternative {
  MemoryPlan plan;
  std::string change;
};

std::vector<Alternative> alternatives(const ModelProfile& profile, const MemoryPlan& plan) {
  std::vector<Alternative> out;
  if (plan.batch_size > 0) {
    for (int m = plan.microbatches + 1; m <= plan.batch_size; ++m) {
      if (plan.batch_size % m != 0) continue;
      MemoryPlan p = plan;
      p.microbatches = m;
      out.push_back({p, "--microbatches " + std::to_string(m)});
    }
  }
  if (plan.recompute == Recompute::Never) {
    MemoryPlan p = plan;
    p.recompute = Recompute::ExceptLast;
    out.push_back({p, "--recompute except-last"});
  }
  if (plan.recompute != Recompute::Always) {
    MemoryPlan p = plan;
    p.recompute = Recompute::Always;
    out.push_back({p, "--recompute always"});
  }
  if (plan.schedule == "gpipe") {
    MemoryPlan p = plan;
    p.schedule = "1f1b";
    out.push_back({p, "--schedule 1f1b"});
  }
  for (int s = plan.stages + 1; s * plan.virtual_chunks <= profile.num_layers(); ++s) {
    MemoryPlan p = plan;
    p.stages = s;
    std::string change = "--stages " + std::to_string(s);
    if (p.partition == PartitionMethod::Balance) {
      p.partition = PartitionMethod::Parameters;  // a hand-made balance does not extend to more stages
      p.balance.clear();
      change += " --partition params";
    }
    out.push_back({p, change});
  }
  return out;
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
    msg << "memory budget " << mib(budget_bytes) << " per stage: fits (" << plan.describe() << "); the largest "
        << "predicted peak is stage " << w << ": " << breakdown(p.stages[static_cast<size_t>(w)]);
    cert.message = msg.str();
    return cert;
  }
  cert.stage = p.worst_stage();
  int over = 0;
  for (const StageMemory& m : p.stages) over += m.total_bytes() > budget_bytes ? 1 : 0;
  msg << "memory budget " << mib(budget_bytes) << " per stage refused for " << plan.describe() << ": stage "
      << cert.stage << " is predicted to peak at " << breakdown(p.stages[static_cast<size_t>(cert.stage)]);
  if (over > 1) msg << " (" << over << " stages are over the budget)";
  msg << ". ";
  for (Alternative& alt : alternatives(profile, plan)) {
    MemoryPrediction candidate;
    try {
      candidate = predict_memory(profile, alt.plan);
    } catch (const ValueError&) {
      continue;  // not a valid configuration (e.g. interleaved needs M divisible by S)
    }
    if (!fits(candidate, budget_bytes)) continue;
    msg << "Cheapest change that fits: " << alt.change << " (largest predicted peak "
        << mib(candidate.peak_bytes()) << ", stage " << candidate.worst_stage() << ").";
    cert.change = alt.change;
    cert.suggestion = alt.plan;
    cert.suggestion_prediction = std::move(candidate);
    break;
  }
  if (!cert.suggestion) {
    msg << "No single change fits (tried more microbatches";
    if (plan.batch_size <= 0) msg << " (not applicable without a batch size)";
    msg << ", recompute except-last and always, 1f1b instead of gpipe, more stages up to "
        << profile.num_layers() / std::max(1, plan.virtual_chunks) << ").";
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
  while (pos < text.size() && (std::isdigit(static_cast<unsigned char>(text[pos])) || text[pos] == '.')) ++pos;
  const std::string number = text.substr(0, pos);
  std::string unit = text.substr(pos);
  const bool number_ok = !number.empty() && std::count(number.begin(), number.end(), '.') <= 1 && number != ".";
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
