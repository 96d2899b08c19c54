// RankCollectives: the gradients, the loss and the figures that the ranks combine; see rank_collectives.h.
#include "pipeline/run/rank_collectives.h"

#include <algorithm>
#include <cmath>

#include "kernels/kernels.h"
#include "tensor/grad_mode.h"

namespace brigade::pipeline {
namespace {

const void* id_of(const Tensor& t) {
  return t.unsafe_impl_id();
}

// The gradients of `params` as one float32 buffer on the CPU (zeros where a gradient is undefined): one
// collective for a whole stage instead of one per tensor.
Tensor pack_gradients(const std::vector<Tensor>& params) {
  int64_t total = 0;
  for (const Tensor& p : params) total += p.numel();
  Tensor flat = zeros({total}, TensorOptions().dtype(kFloat32).device(Device::cpu()));
  int64_t offset = 0;
  for (const Tensor& p : params) {
    BRIGADE_CHECK_DTYPE(p.dtype() == kFloat32, "RankCollectives: parameter gradients must be float32, found ",
                        dtype_name(p.dtype()));
    if (p.grad().defined())
      flat.narrow(0, offset, p.numel()).copy_(p.grad().to(Device::cpu()).reshape({p.numel()}));
    offset += p.numel();
  }
  return flat;
}

// Each parameter's .grad = its slice of `flat` (a fresh tensor on the parameter's device).
void unpack_gradients(const Tensor& flat, const std::vector<Tensor>& params) {
  int64_t offset = 0;
  for (const Tensor& p : params) {
    Tensor slice = flat.narrow(0, offset, p.numel()).view(p.shape());
    Tensor grad = p.device().is_cpu() ? slice.clone() : slice.to(p.device());
    Tensor(p).set_grad(grad);
    offset += p.numel();
  }
}

}  // namespace

RankCollectives::RankCollectives(ProcessGroup& world, RankLayout layout, const Pipeline& pipeline)
    : world_(world), layout_(layout), pipeline_(pipeline) {
  layout_.check(world_.size());
  const int s = stage();
  const std::vector<Pipeline::TiedParameter> tied = pipeline_.tied_parameters();
  for (const Tensor& p : pipeline_.stage_parameters(s)) {
    const bool is_tied = std::any_of(tied.begin(), tied.end(), [&](const Pipeline::TiedParameter& t) {
      return id_of(t.param) == id_of(p);
    });
    if (!is_tied) own_.push_back(p);
  }
  // Every rank walks the same list, so the splits match; a rank whose stage does not use it joins none.
  for (const Pipeline::TiedParameter& t : tied) {
    const bool uses = std::find(t.stages.begin(), t.stages.end(), s) != t.stages.end();
    std::unique_ptr<ProcessGroup> group = world_.split(uses ? 0 : -1);
    if (!uses) continue;
    tied_.push_back(t.param);
    tied_first_.push_back(t.stages.front() == s);
    tied_groups_.push_back(std::move(group));
  }
  if (layout_.replicas > 1) replica_group_ = world_.split(s);
}

RankCollectives::~RankCollectives() = default;

void RankCollectives::reduce_tied_gradients() {
  NoGradGuard no_grad;
  for (size_t i = 0; i < tied_.size(); ++i) {
    Tensor flat = pack_gradients({tied_[i]});
    tied_groups_[i]->all_reduce_sum(flat);  // every stage using it, every replica
    if (layout_.replicas > 1) kernels::mul_(flat, 1.0 / layout_.replicas);
    unpack_gradients(flat, {tied_[i]});
  }
}

void RankCollectives::start(int stage, int bucket, const std::vector<Tensor>& params) {
  BRIGADE_CHECK_VALUE(replica_group_ != nullptr, "Reduce of bucket ", bucket, " on stage ", stage,
                      ": this run has one replica");
  NoGradGuard no_grad;
  InFlight f{params, pack_gradients(params), nullptr};
  f.pending = replica_group_->start_all_reduce_sum(f.flat);
  in_flight_.push_back(std::move(f));
}

std::vector<std::chrono::steady_clock::time_point> RankCollectives::finish(int stage) {
  (void)stage;  // one stage per rank
  NoGradGuard no_grad;
  std::vector<std::chrono::steady_clock::time_point> done;
  for (InFlight& f : in_flight_) {
    f.pending->wait();
    done.push_back(f.pending->completed_at());
    kernels::mul_(f.flat, 1.0 / layout_.replicas);
    unpack_gradients(f.flat, f.params);
  }
  in_flight_.clear();
  return done;
}

void RankCollectives::clear() {
  in_flight_.clear();
}

CombinedStep RankCollectives::finish_step(const StepResult& result) {
  reduce_tied_gradients();

  const int S = layout_.stages;
  const auto s = static_cast<size_t>(S);
  // [loss, bubble, activation peaks (S), step peaks (S), traffic (4), rank 0's span]: one all-reduce.
  std::vector<double> values(2 + 2 * s + 5, 0.0);
  if (world_.rank() == 0) values[2 + 2 * s + 4] = result.step_ms;
  if (!result.microbatch_losses.empty()) values[0] = result.loss / layout_.replicas;  // NaN stays NaN
  values[1] = result.bubble / world_.size();
  if (replica() == 0) {
    for (const StageReport& r : result.stages) {
      values[2 + static_cast<size_t>(r.stage)] = static_cast<double>(r.activation_peak_bytes);
      values[2 + s + static_cast<size_t>(r.stage)] = static_cast<double>(r.peak_bytes);
    }
    values[2 + 2 * s + 0] = static_cast<double>(result.traffic.activation_bytes);
    values[2 + 2 * s + 1] = static_cast<double>(result.traffic.gradient_bytes);
    values[2 + 2 * s + 2] = static_cast<double>(result.traffic.activation_messages);
    values[2 + 2 * s + 3] = static_cast<double>(result.traffic.gradient_messages);
  }
  world_.all_reduce_sum(values);
  CombinedStep out;
  out.loss = values[0];
  out.bubble = values[1];
  for (size_t k = 0; k < s; ++k) {
    out.peak_activation_bytes.push_back(static_cast<int64_t>(values[2 + k]));
    out.peak_step_bytes.push_back(static_cast<int64_t>(values[2 + s + k]));
  }
  out.traffic.activation_bytes = static_cast<int64_t>(values[2 + 2 * s + 0]);
  out.traffic.gradient_bytes = static_cast<int64_t>(values[2 + 2 * s + 1]);
  out.traffic.activation_messages = static_cast<int64_t>(values[2 + 2 * s + 2]);
  out.traffic.gradient_messages = static_cast<int64_t>(values[2 + 2 * s + 3]);
  out.step_ms = values[2 + 2 * s + 4];
  return out;
}

double RankCollectives::clip_grad_norm(double max_norm) {
  std::vector<Tensor> counted;  // each gradient of the model once over all ranks
  for (const Tensor& p : own_) {
    if (p.grad().defined()) counted.push_back(p.grad());
  }
  for (size_t i = 0; i < tied_.size(); ++i) {
    if (tied_first_[i] && tied_[i].grad().defined()) counted.push_back(tied_[i].grad());
  }
  std::vector<double> squares{0.0};
  if (replica() == 0 && !counted.empty()) {
    const double norm = kernels::global_l2_norm(counted);
    squares[0] = norm * norm;
  }
  world_.all_reduce_sum(squares);
  const double norm = std::sqrt(squares[0]);
  if (!std::isfinite(norm)) return norm;
  const double scale = max_norm / (norm + 1e-6);
  if (scale < 1.0) {
    NoGradGuard no_grad;
    for (const Tensor& p : own_) {
      if (p.grad().defined()) kernels::mul_(p.grad(), scale);
    }
    for (const Tensor& p : tied_) {
      if (p.grad().defined()) kernels::mul_(p.grad(), scale);
    }
  }
  return norm;
}

void RankCollectives::synchronize_parameters() {
  NoGradGuard no_grad;
  std::vector<const void*> done;
  for (int s = 0; s < layout_.stages; ++s) {
    for (const Tensor& p : pipeline_.stage_parameters(s)) {
      if (std::find(done.begin(), done.end(), id_of(p)) != done.end()) continue;  // a tied one
      done.push_back(id_of(p));
      Tensor host = p.device().is_cpu() && p.is_contiguous() ? p : p.to(Device::cpu()).contiguous();
      world_.broadcast(host, layout_.rank_of(0, s));
      if (host.unsafe_impl_id() != p.unsafe_impl_id()) Tensor(p).copy_(host);
    }
  }
}

void RankCollectives::barrier() {
  std::vector<double> nothing{0.0};
  world_.all_reduce_sum(nothing);
}

}  // namespace brigade::pipeline
