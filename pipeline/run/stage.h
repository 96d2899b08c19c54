// One pipeline stage: its layers, device, streams and generator, and the interpreter that runs its action
// list for one step (the executor, executor.h, starts one thread per stage on Stage::run).
//
// Per-step state lives in one Slot per (microbatch, local chunk): the input leaf, the output waiting to
// be sent, the backward root (the output with its graph, or the loss), the output gradient, the input
// gradient waiting to be sent, the generator state at F (for R) and, between Bi and Bw, the split
// backward. A hand-off between two chunks of the same stage (only with one stage and v > 1) skips the
// transport and moves the tensor into the consumer's slot directly.
#pragma once

#include <chrono>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "nn/sequential.h"
#include "pipeline/backward/split_backward.h"
#include "pipeline/run/executor.h"
#include "pipeline/run/trace.h"
#include "pipeline/run/transport.h"
#include "pipeline/schedule/layer_recompute.h"
#include "pipeline/schedule/schedule.h"
#include "tensor/generator.h"
#include "tensor/stream.h"
#include "tensor/tensor.h"

namespace brigade::pipeline::detail {

/// What every stage reads in one step.
struct StepInputs {
  std::vector<Tensor> ids;                       ///< per microbatch (views of the batch, any device)
  std::vector<Tensor> targets;                   ///< per microbatch
  double loss_scale = 1.0;                       ///< 1 / M
  std::chrono::steady_clock::time_point origin;  ///< time 0 of the trace
  std::vector<Fault> faults;
  bool check_finite = true;
  /// Runs the Reduce actions (data parallel); per stage, per bucket: the bucket's parameters.
  GradientReducer* reducer = nullptr;
  std::vector<std::vector<std::vector<Tensor>>> buckets;
  /// The lists this step runs; nullptr: the stage's training schedule. A forward-only schedule
  /// (Schedule::forward_only, same stages, chunks and placement) runs without grad, and the last model
  /// chunk keeps its output (Stage::outputs) instead of computing the loss.
  const Schedule* lists = nullptr;
};

class Stage {
 public:
  Stage(int stage, const Schedule& schedule, nn::Sequential& model, std::vector<std::pair<int, int>> chunks,
        Device device, Pipeline::LossFn loss, std::string scope_tag, uint64_t seed, int threads = 0,
        std::vector<LayerRecompute> layer_recompute = {});
  Stage(const Stage&) = delete;
  Stage& operator=(const Stage&) = delete;

  /// Records the scope's in-use bytes and resets its peak (call before the step's threads start).
  void begin_step();
  /// Runs the stage's list. On an exception, current_step() is the failing action's index.
  void run(const StepInputs& inputs, Transport& transport);
  /// Frees everything the step left behind (after a failure: graphs, messages in flight).
  void clear();

  int index() const { return stage_; }
  int current_step() const { return step_; }
  const Device& device() const { return device_; }
  const std::vector<std::pair<int, int>>& chunks() const { return chunks_; }
  Generator& generator() { return generator_; }
  const std::string& scope_tag() const { return scope_tag_; }
  const Stream& compute_stream() const { return compute_; }
  const Stream& copy_stream() const { return copy_; }
  /// The scope's peak since begin_step() minus its in-use bytes then: the highest of the actions' peaks
  /// (TraceEvent::scope_peak_bytes) and of what was allocated after the last action.
  int64_t peak_bytes() const;
  /// The last step's executed actions, in order (complete after a successful run()).
  const std::vector<TraceEvent>& trace() const { return trace_; }
  /// The last stage's per-microbatch losses (unscaled) after a successful run(); empty elsewhere.
  const std::vector<double>& losses() const { return losses_; }
  /// After a forward-only run, on the stage of the last model chunk: its output per microbatch.
  const std::vector<Tensor>& outputs() const { return outputs_; }

 private:
  struct Slot {
    Tensor received;      // the activation as it arrived, until F
    Tensor input;         // the leaf F fed to the chunk
    Tensor to_send;       // F's output until its Send
    Tensor root;          // where the backward starts: the output with its graph, or the loss
    Tensor grad_output;   // the gradient of the output, until the backward
    Tensor grad_to_send;  // the input gradient, until its Send
    GeneratorState rng;   // at F, for R
    SplitBackward split;  // between Bi and Bw
  };
  using Key = std::pair<int, int>;  // (microbatch, local chunk)

  void execute(const Action& action, const StepInputs& inputs, Transport& transport, int64_t& bytes);
  void forward(const Action& a, const StepInputs& inputs);
  void recompute(const Action& a, const StepInputs& inputs);
  void backward(const Action& a, const StepInputs& inputs, bool split);
  void backward_weight(const Action& a);
  void send(const Action& a, Transport& transport, int64_t& bytes);
  void receive(const Action& a, Transport& transport, int64_t& bytes);
  /// Reduce: hands the bucket's gradients to the reducer, which all-reduces them while the stage goes on.
  void start_reduce(const Action& a, const StepInputs& inputs, int64_t& bytes);
  void finish(const StepInputs& inputs);
  /// The chunk's layers on x, and for the last model chunk the loss: what F and R compute.
  Tensor run_chunk(const Tensor& x, int chunk, int microbatch, const StepInputs& inputs);
  /// Where F's output goes: the stage's outputs (forward-only, last chunk), the loss, the next chunk on
  /// this stage, or the Send.
  void route_output(const Action& a, const StepInputs& inputs, Slot& s, const Tensor& out);
  /// The same with grad on, each layer as layer_recompute_ says: spans of full layers inside one
  /// autograd::checkpoint each, attention layers with RecomputeAttentionCore (layer_recompute.h).
  Tensor run_chunk_per_layer(const Tensor& x, int chunk, int microbatch, const StepInputs& inputs);
  /// Whether R of `chunk` re-runs the whole chunk (every layer full) rather than its checkpoints.
  bool whole_chunk(int chunk) const;
  /// Makes a received message usable on this stage's compute stream (a copy if it is on another device).
  Tensor hand_over(const Message& message);
  Slot& slot(const Action& a, const char* what);
  static bool forward_only(const StepInputs& inputs);
  int model_chunk(int chunk) const { return schedule_.model_chunk(stage_, chunk); }
  bool is_first(int chunk) const { return model_chunk(chunk) == 0; }
  bool is_last(int chunk) const { return model_chunk(chunk) == schedule_.model_chunks() - 1; }
  int64_t scope_in_use() const;

  const int stage_;
  const Schedule& schedule_;
  nn::Sequential& model_;
  const std::vector<std::pair<int, int>> chunks_;  // layers per local chunk
  const Device device_;
  const Pipeline::LossFn loss_;
  const std::string scope_tag_;
  const int threads_;  // OpenMP threads for this stage's kernels (0: leave the default)
  const std::vector<LayerRecompute> layer_recompute_;  // per model layer; empty: every layer full
  Generator generator_;
  Stream compute_, copy_;
  std::set<Key> recomputed_;  // (microbatch, chunk) that the list recomputes (has an R for)

  // Per step.
  int step_ = -1;
  int64_t baseline_bytes_ = 0;
  int64_t actions_peak_bytes_ = 0;  // the highest TraceEvent::scope_peak_bytes of the step
  std::map<Key, Slot> slots_;
  std::vector<Tensor> loss_tensors_;                 // last stage: detached microbatch losses
  std::vector<std::pair<Tensor, Event>> in_flight_;  // sources of copies still running, and their events
  std::vector<TraceEvent> trace_;
  std::vector<double> losses_;
  std::vector<Tensor> outputs_;  // forward-only: the last model chunk's output per microbatch
  int reduces_started_ = 0;      // Reduce actions run this step
  std::vector<std::chrono::steady_clock::time_point> reduces_done_;  // when each one's all-reduce ended
};

}  // namespace brigade::pipeline::detail
