// Per-layer measurements of a Sequential: what the partitioner cuts on and what the memory model predicts
// from.
//
// profile_layers runs the model layer by layer on the target device, keeping every intermediate
// activation, with each layer's input detached into a fresh leaf so that each layer's forward and
// backward can be timed and measured on its own:
//
//   x0 = input;  for i: h_i = detach(x_i) (requires grad if floating);  x_{i+1} = layer_i(h_i)
//   backward, last layer first: layer_i's output gradient g_{i+1} (ones-like random values, or the loss's
//   gradient for the last layer when a loss is given) -> backward(x_{i+1}, g_{i+1}) -> g_i = h_i.grad
//
// Time: each layer's forward, backward, and split backward's halves Bi and Bw (a second pass with
// SplitBackward, as the zero-bubble schedules run them) are bracketed by Events on the device's current
// stream (CUDA events on a GPU, the steady clock on the CPU); the figure kept is the median of `repeats` runs
// after `warmup` runs that are not timed. The parameters' gradients are set aside first and put back at the
// end: the warm-up runs create fresh ones, so the measured runs see the steady state of a training step
// (gradients exist and accumulate), and the model's gradients are left as they were.
//
// Memory: each layer runs under its own MemoryScope, so its figures are exactly the bytes it allocates:
//   activation_bytes   allocated by the forward and still alive after it: the saved tensors its backward
//                      needs plus its output (the output is what a following layer consumes, and what a
//                      stage boundary after this layer carries: output_bytes).
//   forward_workspace  the forward's scope peak above activation_bytes (temporaries freed before it ends).
//   backward_workspace the backward's scope peak above the scope's level when it starts (the gradients of
//                      the layer's intermediates, its input gradient, gradient-accumulation temporaries).
// All activation figures are for the profiled microbatch (input.size(0) samples); they scale linearly
// with the number of samples (every activation of a GPT is [B, ...]).
//
// \code
//   brigade::nn::GPT model(config, 1);
//   auto loss = [&](const brigade::Tensor& logits) { return brigade::nn::GPT::loss(logits, targets); };
//   auto profile = brigade::pipeline::profile_layers(model, ids, {.repeats = 5, .loss = loss});
//   std::cout << profile.table();
// \endcode
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "nn/sequential.h"
#include "tensor/device.h"
#include "tensor/tensor.h"

namespace brigade::pipeline {

/// One parameter tensor a layer uses.
struct ParameterInfo {
  std::string name;  ///< its one model-wide dotted name ("embed.wte.weight")
  int64_t numel = 0;
  int64_t bytes = 0;
};

/// Figures of one layer of a Sequential.
struct LayerProfile {
  std::string name;  ///< the name the layer is registered under ("embed", "blocks.3", "head")
  std::string type;  ///< its type name ("Embeddings", "Block", ...)
  /// Every distinct parameter tensor the layer uses (a tied weight appears in each layer that uses it,
  /// under its one model-wide name).
  std::vector<ParameterInfo> parameter_list;
  int64_t parameters = 0;       ///< elements of those tensors
  int64_t parameter_bytes = 0;  ///< their bytes (gradients have the same size)
  /// The work of the layer per token in parameter units, what partition by params cuts on (partition.h):
  /// its parameters, except that a lookup table (nn::Embedding) costs one row (a lookup reads one row,
  /// however many rows it has: a tied embedding matrix is a lookup in the embedding and a matmul in the
  /// head), and the LM head (nn::Head) adds kLossWorkPerLogit per logit for the loss it feeds (log-softmax
  /// and its gradient: about five passes over the V logits of a token, against three multiply-adds per
  /// weight for a matmul's forward and backward). -1 (hand-made profiles): the parameters.
  int64_t work = -1;

  // Measured by profile_layers (zero when only counted).
  double forward_ms = 0.0;       ///< median forward time
  double backward_ms = 0.0;      ///< median backward time (input and weight gradients)
  int64_t activation_bytes = 0;  ///< alive after the forward: saved tensors + output (see above)
  int64_t output_bytes = 0;      ///< the output alone (a stage boundary after this layer)
  int64_t input_bytes = 0;       ///< the input (for layer 0: the model input, e.g. token ids)
  int64_t forward_workspace_bytes = 0;
  int64_t backward_workspace_bytes = 0;
  /// What the layer still holds between a split backward's Bi and Bw (zero-bubble schedules,
  /// backward/split_backward.h): the saved tensors the weight gradients need and the output gradients of the
  /// weight-side nodes; what only the input gradient needed is freed by Bi. Measured with
  /// SplitBackward (the split pass's last run). -1: not measured, and Bi is taken to free nothing (the
  /// layer's activation_bytes stay).
  int64_t split_pending_bytes = -1;
  /// The split backward's halves, timed like forward_ms and backward_ms (medians): Bi (the input gradient)
  /// and Bw (the weight gradients). Their sum exceeds backward_ms (backward/split_backward.h). -1: not
  /// measured (hand-made profiles), and a schedule's Bi and Bw are priced at half of backward_ms each.
  double backward_input_ms = -1.0;
  double backward_weight_ms = -1.0;
  /// The layer holds an attention (nn::CausalSelfAttention): per-layer recomputation may recompute its
  /// core alone (schedule/layer_recompute.h, 'a'). Set when counted.
  bool has_attention = false;
  /// Measured with ProfileOptions::attention_core, for layers with attention (-1 otherwise): the
  /// activation bytes that recomputing the attention core frees (activation_bytes minus what the layer
  /// keeps under nn::RecomputeAttentionCore), and the median time of that recompute (an 'a' layer's R).
  int64_t attention_core_bytes = -1;
  double attention_core_ms = 0.0;
  /// What that recompute allocates and keeps until the backward: the core's graph again, plus a second copy
  /// of its output beside the one the projection saved at F (the checkpoint also keeps its input).
  int64_t attention_replay_bytes = -1;

  /// forward + backward time.
  double time_ms() const { return forward_ms + backward_ms; }
  /// Bi and Bw were measured.
  bool split_measured() const { return backward_input_ms >= 0 && backward_weight_ms >= 0; }
};

/// The loss's work per logit, in parameter units (LayerProfile::work): 5 passes / 3 multiply-adds, rounded.
constexpr int64_t kLossWorkPerLogit = 2;

/// Per-layer figures of a whole model.
struct ModelProfile {
  std::vector<LayerProfile> layers;
  Device device = Device::cpu();
  int64_t microbatch_size = 0;  ///< samples in the profiled input (0 when only counted)
  int repeats = 0;              ///< timed repetitions behind each median (0 when only counted)
  bool measured = false;        ///< times and activation sizes were measured (profile_layers)
  /// How much longer the executor's actions take than their layers' profiled times, at this microbatch
  /// size (>= 1; 1: not measured): an F (or R) action costs its layers' forward_ms times
  /// action_forward_factor, a B, Bi or Bw action its layers' figures times action_backward_factor. The
  /// layers are timed one at a time, each repeated back to back (its weights and code warm); an action runs
  /// a chunk's layers once, between other chunks' and microbatches' actions, with the executor's own work
  /// around them. On a CPU the difference is largest where the actions are small (about a tenth at one
  /// sample per microbatch in a GPT of width 128, nothing measurable from four samples on), which is where
  /// it decides between many small microbatches and fewer larger ones. Measured by running the executor
  /// (measure_action_factors, run/plan_model.h); profile_costs (partition.h) applies it.
  double action_forward_factor = 1.0;
  double action_backward_factor = 1.0;
  /// How much longer a deferred Bw action takes than one right after its own Bi (>= 1; 1: not measured):
  /// by the time a zero-bubble schedule runs a deferred Bw, other actions have pushed the activations and
  /// output gradients it reads out of the core's caches. One factor for the chunks with a real split, one
  /// for the first chunk, whose Bw is its whole backward (its input is token ids). Measured by running
  /// the executor with each chunk's Bw deferred by one microbatch (measure_deferred_weight); profile_costs
  /// prices ChunkCosts::weight_deferred with them.
  double deferred_weight_factor = 1.0;
  double deferred_first_weight_factor = 1.0;
  /// How much longer a microbatch's backward takes when other microbatches' (or chunks') forwards ran
  /// between its own forward and it (>= 1; 1: not measured): their activations have pushed its own out of the
  /// core's caches. Measured by running the executor on one stage in GPipe's order (every backward but the
  /// last cold) and in 1F1B's (every backward right after its forward) (measure_cold_backward); profile_costs
  /// prices ChunkCosts::cold with it.
  ///
  /// Each of these factors is measured at one size in a few passes, and is noisy: the planner prices
  /// them from a line through every profiled size's (factor_fit.h).
  double cold_backward_factor = 1.0;

  int num_layers() const { return static_cast<int>(layers.size()); }
  /// Elements of all distinct parameters of the model (a tied tensor once).
  int64_t total_parameters() const;
  /// A table: one row per layer with parameters, forward/backward ms, activation/output/workspace bytes.
  std::string table() const;
};

struct ProfileOptions {
  int repeats = 5;  ///< timed runs per layer; the median is kept (>= 1)
  int warmup = 1;   ///< untimed runs first (>= 0); memory figures come from the last run
  /// Applied to the last layer's output to make a scalar loss; its forward and backward are counted
  /// with the last layer (the last stage computes the loss). Without one the last layer's backward
  /// starts from a random output gradient.
  std::function<Tensor(const Tensor&)> loss;
  uint64_t seed = 0;  ///< for the random output gradients
  /// Time with the calling thread's CPU clock instead of events (CPU only). On a machine shared with
  /// other work a wall clock also counts the time the thread waits for a core; the thread's CPU time
  /// counts only its own work. Exact with one OpenMP thread (kernels' other threads are not counted).
  bool thread_cpu_time = false;
  /// Also measure the attention core's recompute on layers with attention (attention_core_bytes and
  /// attention_core_ms): warmup + repeats more forwards of the model, for per-layer recomputation.
  bool attention_core = false;
};

/// Names and parameter counts only, without running anything (enough to partition by parameters).
ModelProfile count_parameters(const nn::Sequential& model);

/// Measures every layer of `model` on the device of its parameters, with `input` (a representative
/// microbatch, on the same device) as the model input. The model keeps its mode (train/eval) and its
/// parameters' gradients; dropout layers draw from their generators as in training.
/// ValueError for an empty model, bad options, or thread_cpu_time on a CUDA device.
ModelProfile profile_layers(nn::Sequential& model, const Tensor& input, const ProfileOptions& options = {});

/// This thread's CPU time in ms (CLOCK_THREAD_CPUTIME_ID): what a host thread's work cost, without the time
/// it waited for a core.
double thread_cpu_ms();

/// "1.5 MiB", "512 B": bytes for tables and messages.
std::string format_bytes(double bytes);

/// Takes the parameters' gradients out for a measurement's runs and puts them back afterwards (also when a
/// run throws), so that profiling leaves the model's gradients as it found them.
class GradientsSetAside {
 public:
  explicit GradientsSetAside(const nn::Module& model) : params_(model.parameters()) {
    for (Tensor& p : params_) {
      grads_.push_back(p.grad());
      p.set_grad(Tensor());
    }
  }
  ~GradientsSetAside() {
    for (size_t i = 0; i < params_.size(); ++i) params_[i].set_grad(grads_[i]);
  }
  GradientsSetAside(const GradientsSetAside&) = delete;
  GradientsSetAside& operator=(const GradientsSetAside&) = delete;

 private:
  std::vector<Tensor> params_, grads_;
};

}  // namespace brigade::pipeline
