// The stage interpreter: one action of the IR after the other, on the stage's thread and streams.
#include "pipeline/run/stage.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <ctime>
#include <optional>
#include <sstream>

#include "autograd/checkpoint.h"
#include "autograd/engine.h"
#include "nn/attention.h"
#include "pipeline/plan/profile.h"
#include "pipeline/run/peer_copy.h"
#include "tensor/error.h"
#include "tensor/grad_mode.h"
#include "tensor/memory.h"
#include "tensor/storage.h"

namespace brigade::pipeline::detail {
namespace {

double ms_since(std::chrono::steady_clock::time_point origin) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - origin).count();
}

/// An action's timing before it is put on the step's millisecond time line.
struct RawTiming {
  TraceEvent event;        // step, action, bytes, scope_bytes; host times for transfers
  bool on_stream = false;  // compute action: times come from the two events
  Event start{true}, end{true};
};

bool matches(const Fault& fault, int stage, int step, const Action& action) {
  if (fault.stage != stage) return false;
  if (fault.step >= 0) return fault.step == step;
  if (!fault.kind || *fault.kind != action.kind) return false;
  return fault.microbatch < 0 || fault.microbatch == action.microbatch;
}

}  // namespace

Stage::Stage(int stage, const Schedule& schedule, nn::Sequential& model,
             std::vector<std::pair<int, int>> chunks, Device device, Pipeline::LossFn loss,
             std::string scope_tag, uint64_t seed, int threads, std::vector<LayerRecompute> layer_recompute)
    : stage_(stage),
      schedule_(schedule),
      model_(model),
      chunks_(std::move(chunks)),
      device_(device),
      loss_(std::move(loss)),
      scope_tag_(std::move(scope_tag)),
      threads_(threads),
      layer_recompute_(std::move(layer_recompute)),
      generator_(seed),
      compute_(Stream::create(device)),
      copy_(Stream::create(device)) {
  for (const Action& a : schedule_.actions[static_cast<size_t>(stage_)]) {
    if (a.kind == ActionKind::Recompute) recomputed_.insert({a.microbatch, a.chunk});
  }
}

int64_t Stage::scope_in_use() const {
  return scope_memory_stats(device_, scope_tag_).in_use_bytes;
}

void Stage::begin_step() {
  baseline_bytes_ = scope_in_use();
  actions_peak_bytes_ = 0;
  reset_scope_peak(device_, scope_tag_);
}

int64_t Stage::peak_bytes() const {
  // The scope's peak is reset at every action (run()), so it holds what came after the last one.
  return std::max(actions_peak_bytes_, scope_memory_stats(device_, scope_tag_).peak_bytes - baseline_bytes_);
}

void Stage::clear() {
  reduces_started_ = 0;
  reduces_done_.clear();
  slots_.clear();
  loss_tensors_.clear();
  outputs_.clear();
  in_flight_.clear();
}

void Stage::run(const StepInputs& inputs, Transport& transport) {
  if (threads_ > 0) omp_set_num_threads(threads_);
  MemoryScope scope(scope_tag_);
  StreamGuard on_compute(compute_);
  clear();
  trace_.clear();
  losses_.clear();
  step_ = -1;
  const Schedule& running = inputs.lists != nullptr ? *inputs.lists : schedule_;
  loss_tensors_.assign(static_cast<size_t>(running.microbatches), Tensor());
  outputs_.assign(running.forward_only ? static_cast<size_t>(running.microbatches) : 0, Tensor());
  // Evaluation and sampling: nothing to differentiate, so no graph is built.
  std::optional<NoGradGuard> no_grad;
  if (running.forward_only) no_grad.emplace();

  // The reference for stream timings: recorded while the stream is idle, so its device time is "now".
  compute_.synchronize();
  Event reference(true);
  const double reference_ms = ms_since(inputs.origin);
  reference.record(compute_);

  const std::vector<Action>& list = running.actions[static_cast<size_t>(stage_)];
  std::vector<RawTiming> timings;
  timings.reserve(list.size());
  for (size_t i = 0; i < list.size(); ++i) {
    step_ = static_cast<int>(i);
    const Action& action = list[i];
    // Stop at the next action once another stage has failed, instead of computing on for nothing.
    if (transport.aborted()) throw TransportAborted(transport.abort_reason());
    for (const Fault& fault : inputs.faults) {
      if (matches(fault, stage_, step_, action)) throw InjectedFault("injected fault");
    }
    RawTiming& t = timings.emplace_back();
    t.event.step = step_;
    t.event.action = action;
    // On a GPU the work runs later than the host enqueues it: time it on the stream. A CPU stream runs
    // on this thread, so the host clock is its clock.
    t.on_stream = device_.is_cuda() && is_work(action.kind);
    const bool on_host = device_.is_cpu();
    const double cpu_start = on_host ? thread_cpu_ms() : 0.0;
    reset_scope_peak(device_, scope_tag_);  // from here the scope's peak is this action's
    t.event.start_ms = ms_since(inputs.origin);
    if (t.on_stream) t.start.record(compute_);
    execute(action, inputs, transport, t.event.bytes);
    if (t.on_stream) t.end.record(compute_);
    t.event.end_ms = ms_since(inputs.origin);
    if (on_host) t.event.cpu_ms = thread_cpu_ms() - cpu_start;
    t.event.scope_bytes = scope_in_use() - baseline_bytes_;
    t.event.scope_peak_bytes = scope_memory_stats(device_, scope_tag_).peak_bytes - baseline_bytes_;
    actions_peak_bytes_ = std::max(actions_peak_bytes_, t.event.scope_peak_bytes);
  }
  if (list.empty() || list.back().kind != ActionKind::OptimizerStep) finish(inputs);

  // Every stream event has completed (finish() synchronised the streams): put them on the time line. A
  // Reduce lasts from its start to the end of its all-reduce (the comm track of the trace).
  trace_.reserve(timings.size());
  size_t reduce = 0;
  for (RawTiming& t : timings) {
    if (t.on_stream) {
      t.event.start_ms = reference_ms + reference.elapsed_ms(t.start);
      t.event.end_ms = reference_ms + reference.elapsed_ms(t.end);
    }
    if (t.event.action.kind == ActionKind::Reduce && reduce < reduces_done_.size()) {
      const double done =
          std::chrono::duration<double, std::milli>(reduces_done_[reduce++] - inputs.origin).count();
      t.event.end_ms = std::max(t.event.end_ms, done);
    }
    trace_.push_back(t.event);
  }
}

void Stage::execute(const Action& a, const StepInputs& inputs, Transport& transport, int64_t& bytes) {
  switch (a.kind) {
    case ActionKind::Forward:
      return forward(a, inputs);
    case ActionKind::Recompute:
      return recompute(a, inputs);
    case ActionKind::Backward:
      return backward(a, inputs, /*split=*/false);
    case ActionKind::BackwardInput:
      return backward(a, inputs, /*split=*/true);
    case ActionKind::BackwardWeight:
      return backward_weight(a);
    case ActionKind::SendActivation:
    case ActionKind::SendGrad:
      return send(a, transport, bytes);
    case ActionKind::RecvActivation:
    case ActionKind::RecvGrad:
      return receive(a, transport, bytes);
    case ActionKind::Reduce:
      return start_reduce(a, inputs, bytes);
    case ActionKind::OptimizerStep:
      return finish(inputs);
  }
}

bool Stage::forward_only(const StepInputs& inputs) {
  return inputs.lists != nullptr && inputs.lists->forward_only;
}

Stage::Slot& Stage::slot(const Action& a, const char* what) {
  auto it = slots_.find({a.microbatch, a.chunk});
  BRIGADE_CHECK_VALUE(it != slots_.end(), what, ": microbatch ", a.microbatch, " of chunk ", a.chunk,
                      " has no state on this stage (its forward has not run)");
  return it->second;
}

Tensor Stage::run_chunk(const Tensor& x, int chunk, int microbatch, const StepInputs& inputs) {
  const auto [begin, end] = chunks_[static_cast<size_t>(chunk)];
  Tensor y = model_.forward_range(x, begin, end);
  if (!is_last(chunk) || forward_only(inputs)) return y;
  return loss_(y, inputs.targets[static_cast<size_t>(microbatch)].to(device_));
}

bool Stage::whole_chunk(int chunk) const {
  const auto [begin, end] = chunks_[static_cast<size_t>(chunk)];
  return whole_chunk_recomputed(layer_recompute_, begin, end);
}

Tensor Stage::run_chunk_per_layer(const Tensor& x, int chunk, int microbatch, const StepInputs& inputs) {
  const auto [begin, end] = chunks_[static_cast<size_t>(chunk)];
  const bool last = is_last(chunk);
  const Tensor targets = last ? inputs.targets[static_cast<size_t>(microbatch)].to(device_) : Tensor();
  Tensor h = x;
  for (int i = begin; i < end;) {
    const LayerRecompute choice = layer_choice(layer_recompute_, i);
    if (choice != LayerRecompute::Full) {
      nn::RecomputeAttentionCore attention(choice == LayerRecompute::AttentionCore);
      h = model_.forward_range(h, i, i + 1);
      ++i;
      continue;
    }
    // A span of full layers is one checkpoint; the chunk's loss goes inside when the span ends the model,
    // so that the logits are not kept either (as with whole-chunk recomputation).
    int j = i;
    while (j < end && layer_choice(layer_recompute_, j) == LayerRecompute::Full) ++j;
    const bool with_loss = last && j == end;
    auto span = [this, i, j, with_loss, targets](const std::vector<Tensor>& in) {
      Tensor y = model_.forward_range(in[0], i, j);
      return std::vector<Tensor>{with_loss ? loss_(y, targets) : y};
    };
    h = autograd::checkpoint(span, {h}, &generator_)[0];
    if (with_loss) return h;
    i = j;
  }
  return last ? loss_(h, targets) : h;
}

void Stage::forward(const Action& a, const StepInputs& inputs) {
  Slot& s = slots_[{a.microbatch, a.chunk}];
  Tensor x;
  if (is_first(a.chunk)) {
    // The model input (token ids): nothing to differentiate.
    x = inputs.ids[static_cast<size_t>(a.microbatch)].to(device_);
    if (x.requires_grad()) x = x.detach();
  } else {
    BRIGADE_CHECK_VALUE(s.received.defined(), "F: the input activation of microbatch ", a.microbatch,
                        " has not arrived (no recv before this F)");
    // A fresh leaf: the chunk's graph ends here, and its backward leaves d loss / d input in x.grad().
    x = s.received.detach();
    if (is_floating(x.dtype())) x.set_requires_grad(true);
    s.received = Tensor();
  }
  if (forward_only(inputs)) return route_output(a, inputs, s, run_chunk(x, a.chunk, a.microbatch, inputs));
  s.input = x;

  Tensor out;
  if (recomputed_.count({a.microbatch, a.chunk}) && !whole_chunk(a.chunk)) {
    // Per-layer recomputation: the graph holds a checkpoint per recomputed span; R recomputes them.
    out = run_chunk_per_layer(x, a.chunk, a.microbatch, inputs);
    s.root = out;
  } else if (recomputed_.count({a.microbatch, a.chunk})) {
    // Keep only the input and the generator state: R rebuilds the graph before the backward.
    s.rng = generator_.state();
    NoGradGuard no_grad;
    out = run_chunk(x, a.chunk, a.microbatch, inputs);
  } else {
    out = run_chunk(x, a.chunk, a.microbatch, inputs);
    s.root = out;
  }
  route_output(a, inputs, s, out);
}

void Stage::route_output(const Action& a, const StepInputs& inputs, Slot& s, const Tensor& out) {
  if (is_last(a.chunk)) {
    if (forward_only(inputs)) {
      outputs_[static_cast<size_t>(a.microbatch)] = out;
    } else {
      loss_tensors_[static_cast<size_t>(a.microbatch)] = out.detach();
    }
    return;
  }
  const int next = model_chunk(a.chunk) + 1;
  if (schedule_.stage_of(next) == stage_) {
    slots_[{a.microbatch, schedule_.chunk_of(next)}].received = out;  // same stage: no transport
  } else {
    s.to_send = out;
  }
}

void Stage::recompute(const Action& a, const StepInputs& inputs) {
  Slot& s = slot(a, "R");
  if (!whole_chunk(a.chunk)) {
    BRIGADE_CHECK_VALUE(s.root.defined(), "R: microbatch ", a.microbatch, " chunk ", a.chunk,
                        " has no graph to recompute (its F has not run, or its backward already ran)");
    autograd::recompute_graph_ahead(s.root);
    return;
  }
  BRIGADE_CHECK_VALUE(s.input.defined(), "R: the input of microbatch ", a.microbatch, " chunk ", a.chunk,
                      " was not kept (its F did not run as a recomputed forward)");
  // Replay with the generator where it was at F, so dropout draws the same masks; then put it back.
  const GeneratorState now = generator_.state();
  generator_.set_state(s.rng);
  try {
    autograd::GradModeGuard grad_on(true);
    s.root = run_chunk(s.input, a.chunk, a.microbatch, inputs);
  } catch (...) {
    generator_.set_state(now);
    throw;
  }
  generator_.set_state(now);
}

void Stage::backward(const Action& a, const StepInputs& inputs, bool split) {
  const char* name = split ? "Bi" : "B";
  Slot& s = slot(a, name);
  BRIGADE_CHECK_VALUE(s.root.defined() && s.root.requires_grad(), name, ": microbatch ", a.microbatch,
                      " chunk ", a.chunk, " has no graph (its F ran without grad and no R came before)");
  Tensor grad;
  if (is_last(a.chunk)) {
    // d (sum_i loss_i / M) / d loss_i: the step's loss is the mean over microbatches.
    grad = full(s.root.shape(), inputs.loss_scale, TensorOptions().dtype(s.root.dtype()).device(device_));
  } else {
    BRIGADE_CHECK_VALUE(s.grad_output.defined(), name, ": the output gradient of microbatch ", a.microbatch,
                        " chunk ", a.chunk, " has not arrived (no recv before this backward)");
    grad = s.grad_output;
  }

  Tensor grad_input;
  if (split) {
    grad_input = s.split.backward_input(s.root, grad, s.input);
  } else {
    autograd::backward(s.root, grad);
    if (!is_first(a.chunk)) grad_input = s.input.grad();
  }
  if (!is_first(a.chunk) && !grad_input.defined()) grad_input = zeros_like(s.input);
  s.root = Tensor();
  s.input = Tensor();
  s.grad_output = Tensor();
  if (is_first(a.chunk)) return;

  const int previous = model_chunk(a.chunk) - 1;
  if (schedule_.stage_of(previous) == stage_) {
    slots_[{a.microbatch, schedule_.chunk_of(previous)}].grad_output = grad_input;  // same stage
  } else {
    s.grad_to_send = grad_input;
  }
}

void Stage::backward_weight(const Action& a) {
  Slot& s = slot(a, "Bw");
  BRIGADE_CHECK_VALUE(s.split.pending(), "Bw: microbatch ", a.microbatch, " chunk ", a.chunk,
                      " has no Bi before it");
  s.split.backward_weight();
}

void Stage::send(const Action& a, Transport& transport, int64_t& bytes) {
  const bool gradient = a.kind == ActionKind::SendGrad;
  Slot& s = slot(a, gradient ? "send B" : "send F");
  Tensor& pending = gradient ? s.grad_to_send : s.to_send;
  BRIGADE_CHECK_VALUE(pending.defined(), "send: microbatch ", a.microbatch, " chunk ", a.chunk, " has no ",
                      gradient ? "input gradient" : "output", " to send (its ", gradient ? "backward" : "F",
                      " has not run)");
  // Contiguous on the producer's stream, so that the consumer can copy it as one block.
  Tensor tensor = pending.is_contiguous() ? pending : pending.contiguous();
  if (tensor.requires_grad()) tensor = tensor.detach();
  Event ready;
  ready.record(compute_);
  transport.send(transfer_tag(schedule_, stage_, a), tensor, ready);
  bytes = static_cast<int64_t>(tensor.nbytes());
  pending = Tensor();
}

void Stage::receive(const Action& a, Transport& transport, int64_t& bytes) {
  Message message = transport.recv(transfer_tag(schedule_, stage_, a));
  bytes = static_cast<int64_t>(message.tensor.nbytes());
  Tensor tensor = hand_over(message);
  Slot& s = slots_[{a.microbatch, a.chunk}];
  if (a.kind == ActionKind::RecvGrad) {
    s.grad_output = tensor;
  } else {
    s.received = tensor;
  }
}

Tensor Stage::hand_over(const Message& message) {
  // Drop the sources of copies that have finished.
  std::erase_if(in_flight_, [](const std::pair<Tensor, Event>& f) { return f.second.query(); });

  const Tensor& source = message.tensor;
  if (source.device() == device_) {
    // Same device: no copy. Our stream waits for the producer's; the allocator must not hand the block
    // to anyone else before our stream is done with it.
    compute_.wait(message.ready);
    record_stream(*source.storage(), compute_);
    return source;
  }
  Tensor out;
  if (source.device().is_cuda() && device_.is_cuda()) {
    copy_.wait(message.ready);
    StreamGuard on_copy(copy_);  // allocate from the copy stream's pool
    out = empty(source.shape(), TensorOptions().dtype(source.dtype()).device(device_));
    peer_copy_async(out, source, copy_);
  } else {
    // Host <-> device: Tensor::to synchronises these copies itself; the producer must be done first.
    message.ready.synchronize();
    StreamGuard on_copy(copy_);
    out = source.to(device_);
  }
  Event copied;
  copied.record(copy_);
  compute_.wait(copied);
  record_stream(*out.storage(), compute_);
  in_flight_.emplace_back(source, copied);  // the source must outlive the copy
  return out;
}

void Stage::start_reduce(const Action& a, const StepInputs& inputs, int64_t& bytes) {
  BRIGADE_CHECK_VALUE(inputs.reducer != nullptr,
                      "Reduce: no gradient reducer (a schedule with Reduce actions "
                      "runs with data-parallel replicas, across processes)");
  const auto& buckets = inputs.buckets[static_cast<size_t>(stage_)];
  BRIGADE_CHECK_VALUE(a.bucket >= 0 && a.bucket < static_cast<int>(buckets.size()), "Reduce: bucket ",
                      a.bucket, " outside the stage's ", buckets.size());
  compute_.synchronize();  // the gradients are read from the host
  const std::vector<Tensor>& params = buckets[static_cast<size_t>(a.bucket)];
  bytes = 0;
  for (const Tensor& p : params) bytes += static_cast<int64_t>(p.nbytes());
  inputs.reducer->start(stage_, a.bucket, params);
  ++reduces_started_;
}

void Stage::finish(const StepInputs& inputs) {
  compute_.synchronize();
  copy_.synchronize();
  in_flight_.clear();
  // The optimizer step needs the replicas' averages: every bucket's all-reduce must have ended.
  if (reduces_started_ > 0) {
    reduces_done_ = inputs.reducer->finish(stage_);
    reduces_started_ = 0;
  }
  for (const auto& [key, s] : slots_) {
    const bool busy = s.received.defined() || s.input.defined() || s.to_send.defined() || s.root.defined() ||
                      s.grad_output.defined() || s.grad_to_send.defined() || s.split.pending();
    BRIGADE_CHECK(!busy, "step: microbatch ", key.first, " of chunk ", key.second,
                  " still holds tensors at the end of the stage's list (a schedule without its backward or "
                  "send?)");
  }
  slots_.clear();
  if (schedule_.stage_of(schedule_.model_chunks() - 1) != stage_) return;  // not the stage with the loss
  if (forward_only(inputs)) {
    for (size_t i = 0; i < outputs_.size(); ++i)
      BRIGADE_CHECK(outputs_[i].defined(), "forward: the output of microbatch ", i, " was never computed");
    return;
  }
  losses_.resize(loss_tensors_.size());
  for (size_t i = 0; i < loss_tensors_.size(); ++i) {
    BRIGADE_CHECK(loss_tensors_[i].defined(), "step: the loss of microbatch ", i, " was never computed");
    losses_[i] = loss_tensors_[i].item();
    if (inputs.check_finite && !std::isfinite(losses_[i])) {
      BRIGADE_THROW(Error, "the loss of microbatch ", i, " (computed by its F) is ", losses_[i],
                    "; no optimizer step");
    }
  }
  loss_tensors_.clear();
}

}  // namespace brigade::pipeline::detail
