// Per-layer profiling (see profile.h for what is measured and how).
#include "pipeline/plan/profile.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <functional>
#include <sstream>

#include "autograd/checkpoint.h"
#include "autograd/engine.h"
#include "nn/attention.h"
#include "nn/gpt.h"
#include "nn/layers.h"
#include "nn/statistics.h"
#include "pipeline/backward/split_backward.h"
#include "tensor/error.h"
#include "tensor/generator.h"
#include "tensor/memory.h"
#include "tensor/stream.h"

namespace brigade::pipeline {

namespace {

void fill_parameters(const nn::Sequential& model, int64_t i, LayerProfile& layer) {
  layer.name = model.name_at(i);
  layer.type = model.at(i)->type_name();
  for (const auto& [name, tensor] : model.named_parameters_range(i, i + 1)) {
    const auto bytes = static_cast<int64_t>(tensor.nbytes());
    layer.parameter_list.push_back({name, tensor.numel(), bytes});
    layer.parameters += tensor.numel();
    layer.parameter_bytes += bytes;
  }
  layer.work = layer.parameters;
  model.at(i)->apply([&layer](nn::Module& m) {
    if (dynamic_cast<nn::CausalSelfAttention*>(&m)) layer.has_attention = true;
    if (auto* lookup = dynamic_cast<nn::Embedding*>(&m))
      layer.work -= lookup->weight().numel() - lookup->dim();
    if (auto* head = dynamic_cast<nn::Head*>(&m))
      layer.work += kLossWorkPerLogit * head->lm_head()->weight().size(0);
  });
}

// Scope tags are process-wide; the prefix keeps them apart from the executor's stage tags. A layer's
// forward and backward share one tag: the activations its backward frees are subtracted from the scope
// that allocated them, so the backward's peak above its starting level is net of what it releases on the
// way (a tag per phase would count every temporary the backward allocates, freed or not).
std::string scope_tag(int64_t layer) {
  return "brigade.profile." + std::to_string(layer);
}

// What one layer's forward or backward did under its scope.
struct ScopeDelta {
  int64_t before = 0, after = 0, peak = 0;
};

class ScopedMeasure {
 public:
  ScopedMeasure(const Device& device, std::string tag, bool cpu_time)
      : device_(device), tag_(std::move(tag)), cpu_time_(cpu_time) {}
  template <typename Fn>
  double run(Fn&& fn, ScopeDelta& delta) {
    Stream stream = Stream::current(device_);
    Event start(/*enable_timing=*/true), end(/*enable_timing=*/true);
    double cpu_start = 0.0, cpu_end = 0.0;
    {
      MemoryScope scope(tag_);
      reset_scope_peak(device_, tag_);
      delta.before = scope_memory_stats(device_, tag_).in_use_bytes;
      start.record(stream);
      if (cpu_time_) cpu_start = thread_cpu_ms();
      fn();
      if (cpu_time_) cpu_end = thread_cpu_ms();
      end.record(stream);
    }
    end.synchronize();
    const MemoryStats stats = scope_memory_stats(device_, tag_);
    delta.after = stats.in_use_bytes;
    delta.peak = stats.peak_bytes;
    return cpu_time_ ? cpu_end - cpu_start : start.elapsed_ms(end);
  }

 private:
  Device device_;
  std::string tag_;
  bool cpu_time_;
};

}  // namespace

int64_t ModelProfile::total_parameters() const {
  // A tied tensor appears in several layers under one name: count each name once.
  std::vector<std::string> seen;
  int64_t total = 0;
  for (const LayerProfile& layer : layers) {
    for (const ParameterInfo& p : layer.parameter_list) {
      if (std::find(seen.begin(), seen.end(), p.name) != seen.end()) continue;
      seen.push_back(p.name);
      total += p.numel;
    }
  }
  return total;
}

std::string ModelProfile::table() const {
  std::ostringstream out;
  char line[256];
  if (measured)
    out << "layer profile on " << device.str() << ", microbatch of " << microbatch_size << ", median of "
        << repeats << " runs\n";
  else
    out << "layer parameters (not measured)\n";
  std::snprintf(line, sizeof line, "%5s  %-14s %-12s %12s %10s %10s %8s %8s %12s %12s %12s %12s\n", "layer",
                "name", "type", "params", "fwd ms", "bwd ms", "Bi ms", "Bw ms", "activations", "output",
                "fwd work", "bwd work");
  out << line;
  for (size_t i = 0; i < layers.size(); ++i) {
    const LayerProfile& l = layers[i];
    char bi[16] = "-", bw[16] = "-";
    if (l.split_measured()) {
      std::snprintf(bi, sizeof bi, "%.3f", l.backward_input_ms);
      std::snprintf(bw, sizeof bw, "%.3f", l.backward_weight_ms);
    }
    std::snprintf(line, sizeof line, "%5zu  %-14s %-12s %12lld %10.3f %10.3f %8s %8s %12s %12s %12s %12s\n",
                  i, l.name.c_str(), l.type.c_str(), static_cast<long long>(l.parameters), l.forward_ms,
                  l.backward_ms, bi, bw, format_bytes(static_cast<double>(l.activation_bytes)).c_str(),
                  format_bytes(static_cast<double>(l.output_bytes)).c_str(),
                  format_bytes(static_cast<double>(l.forward_workspace_bytes)).c_str(),
                  format_bytes(static_cast<double>(l.backward_workspace_bytes)).c_str());
    out << line;
  }
  return out.str();
}

ModelProfile count_parameters(const nn::Sequential& model) {
  ModelProfile profile;
  profile.layers.resize(static_cast<size_t>(model.size()));
  for (int64_t i = 0; i < model.size(); ++i)
    fill_parameters(model, i, profile.layers[static_cast<size_t>(i)]);
  const auto params = model.parameters();
  if (!params.empty()) profile.device = params.front().device();
  return profile;
}

namespace {

// One forward of the model, layer by layer, each layer's input a fresh leaf (detached, and requiring grad
// when floating) so that each layer's backward stops at its own input. `measure(i, forward)` runs layer
// i's forward (forward()) inside whatever the caller measures around it (a timed memory scope, a memory
// level); pass.inputs[i] is set before, pass.outputs[i] (and, for the last layer, pass.loss) by forward().
struct LayerwiseForward {
  std::vector<Tensor> inputs, outputs;
  Tensor loss;  // options.loss of the last output (undefined without a loss)
};

using MeasureLayer = std::function<void(size_t layer, const std::function<void()>& forward)>;

void forward_layer_by_layer(nn::Sequential& model, const Tensor& input, const ProfileOptions& options,
                            LayerwiseForward& pass, const MeasureLayer& measure) {
  const size_t L = static_cast<size_t>(model.size());
  pass.inputs.assign(L, Tensor());
  pass.outputs.assign(L, Tensor());
  pass.loss = Tensor();
  Tensor x = input;
  for (size_t i = 0; i < L; ++i) {
    Tensor h = x;
    if (i > 0 && is_floating(x.dtype())) h = x.detach().set_requires_grad(true);
    pass.inputs[i] = h;
    measure(i, [&] {
      pass.outputs[i] = model.at(static_cast<int64_t>(i))->forward(h);
      if (i + 1 == L && options.loss) pass.loss = options.loss(pass.outputs[i]);
    });
    x = pass.outputs[i];
  }
}

// One run of the profile: the layer-by-layer forward with each layer measured under its scope, then the
// backward, last layer first, each layer's output gradient the next layer's input gradient. The memory
// figures of every run overwrite the previous run's; the times go to fwd_ms and bwd_ms only when `timed`.
void profile_run(nn::Sequential& model, const Tensor& input, const ProfileOptions& options,
                 Generator& generator, bool timed, ModelProfile& profile,
                 std::vector<std::vector<double>>& fwd_ms, std::vector<std::vector<double>>& bwd_ms) {
  const Device device = input.device();
  auto measure = [&](size_t i) {
    return ScopedMeasure(device, scope_tag(static_cast<int64_t>(i)), options.thread_cpu_time);
  };
  LayerwiseForward pass;
  forward_layer_by_layer(model, input, options, pass, [&](size_t i, const std::function<void()>& forward) {
    ScopeDelta d;
    const double ms = measure(i).run(forward, d);
    LayerProfile& layer = profile.layers[i];
    if (timed) fwd_ms[i].push_back(ms);
    layer.activation_bytes = d.after - d.before;
    layer.forward_workspace_bytes = std::max<int64_t>(0, d.peak - d.after);
    layer.output_bytes = static_cast<int64_t>(pass.outputs[i].nbytes());
    layer.input_bytes = static_cast<int64_t>(pass.inputs[i].nbytes());
  });
  Tensor grad;
  for (size_t k = profile.layers.size(); k-- > 0;) {
    LayerProfile& layer = profile.layers[k];
    const Tensor& y = pass.outputs[k];
    const bool with_loss = k + 1 == profile.layers.size() && pass.loss.defined();
    if (!(with_loss ? pass.loss.requires_grad() : y.requires_grad())) {
      grad = Tensor();  // nothing upstream of here needs a gradient
      layer.backward_workspace_bytes = 0;
      if (timed) bwd_ms[k].push_back(0.0);
      continue;
    }
    if (!with_loss && !grad.defined())
      grad = randn(y.shape(), TensorOptions(y.dtype()).device(device), &generator);
    ScopeDelta d;
    const double ms = measure(k).run(
        [&] {
          if (with_loss)
            pass.loss.backward();
          else
            y.backward(grad);
        },
        d);
    if (timed) bwd_ms[k].push_back(ms);
    layer.backward_workspace_bytes = std::max<int64_t>(0, d.peak - d.before);
    grad = pass.inputs[k].requires_grad() ? pass.inputs[k].grad() : Tensor();
  }
}

// The split backward (backward/split_backward.h), as zero-bubble schedules run it. Per run: the
// layer-by-layer forward, then from the last layer down Bi alone, timed under the layer's scope; what the
// scope still holds above its level before the forward (less the input gradient Bi returns, which the
// executor sends upstream and the memory model counts as in transit) is what the layer keeps until Bw;
// then Bw, timed. The memory figure comes from the last run, the times are medians of the timed runs.
void measure_split_backward(nn::Sequential& model, const Tensor& input, const ProfileOptions& options,
                            Generator& generator, ModelProfile& profile) {
  const Device device = input.device();
  const size_t L = profile.layers.size();
  std::vector<std::vector<double>> bi_ms(L), bw_ms(L);
  auto in_use = [&](size_t i) {
    return scope_memory_stats(device, scope_tag(static_cast<int64_t>(i))).in_use_bytes;
  };
  for (int run = 0; run < options.warmup + options.repeats; ++run) {
    const bool timed = run >= options.warmup;
    std::vector<int64_t> level(L, 0);
    LayerwiseForward pass;
    forward_layer_by_layer(model, input, options, pass, [&](size_t i, const std::function<void()>& forward) {
      level[i] = in_use(i);
      MemoryScope scope(scope_tag(static_cast<int64_t>(i)));
      forward();
    });
    Tensor grad;
    for (size_t k = L; k-- > 0;) {
      LayerProfile& layer = profile.layers[k];
      const bool with_loss = k + 1 == L && pass.loss.defined();
      const Tensor& root = with_loss ? pass.loss : pass.outputs[k];
      if (!root.requires_grad()) {
        layer.split_pending_bytes = 0;
        if (timed) bi_ms[k].push_back(0.0), bw_ms[k].push_back(0.0);
        grad = Tensor();
        continue;
      }
      if (!with_loss && !grad.defined())
        grad = randn(root.shape(), TensorOptions(root.dtype()).device(device), &generator);
      ScopedMeasure measure(device, scope_tag(static_cast<int64_t>(k)), options.thread_cpu_time);
      SplitBackward split;
      Tensor dx;
      ScopeDelta d;
      const double input_ms = measure.run(
          [&] { dx = split.backward_input(root, with_loss ? Tensor() : grad, pass.inputs[k]); }, d);
      const int64_t returned = dx.defined() ? static_cast<int64_t>(dx.nbytes()) : 0;
      layer.split_pending_bytes = std::max<int64_t>(0, d.after - level[k] - returned);
      const double weight_ms = measure.run([&] { split.backward_weight(); }, d);
      if (timed) bi_ms[k].push_back(input_ms), bw_ms[k].push_back(weight_ms);
      grad = dx;
    }
  }
  for (size_t i = 0; i < L; ++i) {
    profile.layers[i].backward_input_ms = nn::median(bi_ms[i]);
    profile.layers[i].backward_weight_ms = nn::median(bw_ms[i]);
  }
}

// What recomputing the attention core saves and costs, on the layers with attention: per run, the
// layer-by-layer forward with those layers under RecomputeAttentionCore (the bytes they keep read from
// their scopes), then each one's checkpoints recomputed ahead, timed (what an 'a' layer's R does).
void measure_attention_core(nn::Sequential& model, const Tensor& input, const ProfileOptions& options,
                            ModelProfile& profile) {
  const Device device = input.device();
  const size_t L = profile.layers.size();
  std::vector<std::vector<double>> recompute_ms(L);
  for (int run = 0; run < options.warmup + options.repeats; ++run) {
    LayerwiseForward pass;
    forward_layer_by_layer(model, input, options, pass, [&](size_t i, const std::function<void()>& forward) {
      LayerProfile& layer = profile.layers[i];
      nn::RecomputeAttentionCore core(layer.has_attention);
      ScopeDelta d;
      ScopedMeasure(device, scope_tag(static_cast<int64_t>(i)), false).run(forward, d);
      if (layer.has_attention) layer.attention_core_bytes = layer.activation_bytes - (d.after - d.before);
    });
    for (size_t i = 0; i < L; ++i) {
      if (!profile.layers[i].has_attention) continue;
      ScopeDelta d;
      ScopedMeasure measure(device, scope_tag(static_cast<int64_t>(i)), options.thread_cpu_time);
      const double ms = measure.run([&] { autograd::recompute_graph_ahead(pass.outputs[i]); }, d);
      profile.layers[i].attention_replay_bytes = d.after - d.before;
      if (run >= options.warmup) recompute_ms[i].push_back(ms);
    }
  }
  for (size_t i = 0; i < L; ++i)
    if (profile.layers[i].has_attention) profile.layers[i].attention_core_ms = nn::median(recompute_ms[i]);
}

void check_options(nn::Sequential& model, const Tensor& input, const ProfileOptions& options) {
  BRIGADE_CHECK_VALUE(model.size() > 0, "profile_layers: the model has no layers");
  BRIGADE_CHECK_VALUE(options.repeats >= 1, "profile_layers: repeats must be >= 1, got ", options.repeats);
  BRIGADE_CHECK_VALUE(options.warmup >= 0, "profile_layers: warmup must be >= 0, got ", options.warmup);
  BRIGADE_CHECK_VALUE(input.defined() && input.dim() >= 1,
                      "profile_layers: need an input with a batch "
                      "dimension, got ",
                      input.defined() ? shape_str(input.shape()) : std::string("undefined"));
  BRIGADE_CHECK_DEVICE(!options.thread_cpu_time || input.device().is_cpu(),
                       "profile_layers: thread_cpu_time times host threads; the input is on ",
                       input.device().str(), " (use events: thread_cpu_time = false)");
}

}  // namespace

ModelProfile profile_layers(nn::Sequential& model, const Tensor& input, const ProfileOptions& options) {
  check_options(model, input, options);
  ModelProfile profile = count_parameters(model);
  profile.device = input.device();
  profile.microbatch_size = input.size(0);
  profile.repeats = options.repeats;
  profile.measured = true;
  const size_t L = static_cast<size_t>(model.size());
  Generator generator(options.seed);
  autograd::GradModeGuard grad_on(true);  // profiling needs the graph even under the caller's NoGradGuard
  GradientsSetAside stash(model);

  std::vector<std::vector<double>> fwd_ms(L), bwd_ms(L);
  for (int run = 0; run < options.warmup + options.repeats; ++run)
    profile_run(model, input, options, generator, run >= options.warmup, profile, fwd_ms, bwd_ms);
  for (size_t i = 0; i < L; ++i) {
    profile.layers[i].forward_ms = nn::median(fwd_ms[i]);
    profile.layers[i].backward_ms = nn::median(bwd_ms[i]);
  }
  measure_split_backward(model, input, options, generator, profile);
  if (options.attention_core) measure_attention_core(model, input, options, profile);
  return profile;
}

double thread_cpu_ms() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return 1e3 * static_cast<double>(t.tv_sec) + 1e-6 * static_cast<double>(t.tv_nsec);
}

std::string format_bytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  double value = bytes;
  while (std::abs(value) >= 1024.0 && u < 4) {
    value /= 1024.0;
    ++u;
  }
  char buffer[32];
  if (u == 0)
    std::snprintf(buffer, sizeof buffer, "%.0f %s", value, units[u]);
  else
    std::snprintf(buffer, sizeof buffer, "%.2f %s", value, units[u]);
  return buffer;
}

}  // namespace brigade::pipeline
