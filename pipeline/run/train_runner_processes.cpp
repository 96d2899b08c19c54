// PipelineRunner across processes (train_runner.h, "Across processes"): joining the ranks, the links and the
// clocks measured at start, each step's collectives, evaluations, checkpoints and the merged trace.
#include <algorithm>
#include <cmath>

#include "nn/checkpoint_shards.h"
#include "nn/statistics.h"
#include "pipeline/run/trace_merge.h"
#include "pipeline/run/train_runner.h"
#include "pipeline/schedule/validate.h"

namespace brigade::pipeline {
namespace {

// Setup takes as long as the slowest rank's profile; its collectives wait this long before giving up.
constexpr double kSetupTimeoutSeconds = 600.0;

}  // namespace

// This rank's place in the run: its stage (local_stages) on its device, and the transport to the others.
std::unique_ptr<Transport> PipelineRunner::join_processes(const Schedule& schedule,
                                                          const std::vector<Device>& devices) {
  const int stage = layout_->stage_of(world_->rank());
  config_.local_stages = {stage};
  config_.devices = {devices[static_cast<size_t>(stage)]};
  return make_transport(schedule, config_.devices.front());
}

// After the Pipeline exists: the collectives' groups, the links and the clocks, and the links into the
// simulator's costs.
void PipelineRunner::connect_processes(Costs& costs) {
  collectives_ = std::make_unique<RankCollectives>(*world_, *layout_, *pipeline_);
  if (layout_->replicas > 1) pipeline_->set_gradient_reducer(collectives_.get());
  measure_links();
  measure_clock_offsets();
  world_->set_timeout(options_.timeout);
  // Each measured link times the messages between its two stages by their bytes (plan/link_model.h); a pair
  // without a measurement (interleaved's last stage to the first) takes the slowest link.
  for (size_t b = 0; b < links_.size(); ++b) {
    const int s = static_cast<int>(b);
    costs.stage_links[{s, s + 1}] = costs.stage_links[{s + 1, s}] = links_[b];
    if (!costs.link ||
        links_[b].transfer_ms(activation_bytes()) > costs.link->transfer_ms(activation_bytes()))
      costs.link = links_[b];
  }
  // The replicas' all-reduces (the schedule's Reduce actions) on the link between two replicas.
  costs.replicas = layout_->replicas;
  costs.replica_link = replica_link_;
}

int64_t PipelineRunner::largest_bucket_bytes() const {
  int64_t bytes = 0;
  for (const auto& stage : pipeline_->schedule().buckets)
    for (const GradientBucket& b : stage) bytes = std::max(bytes, b.bytes);
  return bytes;
}

void PipelineRunner::agree_on_partition() {
  world_->set_timeout(std::max(kSetupTimeoutSeconds, options_.timeout));
  const std::vector<int> mine = partition_->layer_counts();
  std::vector<double> counts(mine.size(), 0.0);
  if (world_->rank() == 0) std::copy(mine.begin(), mine.end(), counts.begin());
  world_->all_reduce_sum(counts);
  std::vector<int> ranks0(counts.begin(), counts.end());
  if (ranks0 == mine) return;
  PartitionOptions part;
  part.method = PartitionMethod::Balance;
  part.stages = partition_->stages;
  part.virtual_chunks = partition_->virtual_chunks;
  part.placement = partition_->placement;
  part.balance = ranks0;
  Partition agreed = make_partition(*profile_, part);
  agreed.method = partition_->method;  // still the method that rank 0 cut by
  partition_ = std::move(agreed);
}

// --transport: NCCL for device tensors where this build has it and the schedule runs on rendezvous sends
// (auto), or as asked; MPI otherwise.
std::unique_ptr<Transport> PipelineRunner::make_transport(const Schedule& schedule, const Device& device) {
  const std::vector<int> ranks = layout_->pipeline_ranks(layout_->replica_of(world_->rank()));
  bool nccl = options_.transport == "nccl";
  if (options_.transport == "auto")
    nccl = device.is_cuda() && world_->nccl_built() && !find_issue(schedule, TransferModel::Rendezvous);
  transport_name_ = nccl ? "NCCL" : "MPI";
  if (!nccl) return world_->make_transport(ranks, options_.timeout);
  BRIGADE_CHECK_VALUE(device.is_cuda(), "--transport nccl carries device tensors; the stages run on ",
                      device.str());
  BRIGADE_CHECK_VALUE(world_->nccl_built(), "--transport nccl: this brigade was built without NCCL");
  return world_->make_nccl_transport(ranks, options_.timeout, device);
}

int64_t PipelineRunner::activation_bytes() const {
  int64_t bytes = 0;  // every boundary carries a [microbatch, T, C] activation: the largest layer output
  for (size_t i = 0; i + 1 < profile_->layers.size(); ++i)
    bytes = std::max(bytes, profile_->layers[i].output_bytes);
  return bytes;
}

// Each link of replica 0's pipeline (stage b to b + 1) by ping-pong at two sizes: a few bytes (the latency)
// and an activation (the bandwidth). Its two ranks measure it; one all-reduce tells every rank.
void PipelineRunner::measure_links() {
  constexpr int kRepeats = 10;
  const int S = layout_->stages, rank = world_->rank();
  std::vector<double> fits(2 * static_cast<size_t>(std::max(0, S - 1)), 0.0);
  for (int b = 0; b + 1 < S; ++b) {
    const int first = layout_->rank_of(0, b), second = layout_->rank_of(0, b + 1);
    if (rank != first && rank != second) continue;
    const int other = rank == first ? second : first;
    std::vector<LinkSample> samples;
    for (int64_t bytes : {int64_t{8}, activation_bytes()})
      samples.push_back({bytes, world_->ping_pong(other, bytes, kRepeats) / 2.0});
    const LinkModel link = fit_link_model(samples);
    if (rank == first) {
      fits[2 * static_cast<size_t>(b)] = link.latency_ms;
      fits[2 * static_cast<size_t>(b) + 1] = link.bytes_per_ms;
    }
  }
  // D > 1: the link between the replicas of stage 0, at a few bytes and the largest gradient bucket.
  if (layout_->replicas > 1) {
    fits.resize(fits.size() + 2, 0.0);
    const int first = layout_->rank_of(0, 0), second = layout_->rank_of(1, 0);
    if (rank == first || rank == second) {
      std::vector<LinkSample> samples;
      for (int64_t bytes : {int64_t{8}, std::max<int64_t>(largest_bucket_bytes(), 1024)})
        samples.push_back({bytes, world_->ping_pong(rank == first ? second : first, bytes, kRepeats) / 2.0});
      const LinkModel link = fit_link_model(samples);
      if (rank == first) fits[fits.size() - 2] = link.latency_ms, fits[fits.size() - 1] = link.bytes_per_ms;
    }
  }
  world_->all_reduce_sum(fits);
  links_.clear();
  for (int b = 0; b + 1 < S; ++b)
    links_.push_back({fits[2 * static_cast<size_t>(b)], fits[2 * static_cast<size_t>(b) + 1]});
  if (layout_->replicas > 1) replica_link_ = LinkModel{fits[fits.size() - 2], fits[fits.size() - 1]};
}

double PipelineRunner::forward_backward_across_processes(const nn::Batch& batch) {
  // This replica's share of the batch: its mean loss's gradient, averaged over the replicas, is the
  // gradient of the whole batch's mean loss.
  const int64_t per = batch.x.size(0) / layout_->replicas;
  const int64_t first = collectives_->replica() * per;
  StepResult result =
      pipeline_->forward_backward(batch.x.narrow(0, first, per), batch.y.narrow(0, first, per));
  const CombinedStep combined = collectives_->finish_step(result);
  bubbles_.push_back(combined.bubble);
  step_spans_.push_back(combined.step_ms);
  for (size_t s = 0; s < combined.peak_step_bytes.size(); ++s) {
    peak_activation_bytes_[s] = std::max(peak_activation_bytes_[s], combined.peak_activation_bytes[s]);
    peak_step_bytes_[s] = std::max(peak_step_bytes_[s], combined.peak_step_bytes[s]);
  }
  result.loss = combined.loss;
  result.bubble = combined.bubble;
  result.traffic = combined.traffic;
  last_ = std::move(result);
  return combined.loss;
}

double PipelineRunner::clip_grad_norm(nn::GPT& model, double max_norm) {
  if (!collectives_) return StepRunner::clip_grad_norm(model, max_norm);
  return collectives_->clip_grad_norm(max_norm);
}

void PipelineRunner::before_evaluation(nn::GPT& model) {
  (void)model;  // the pipeline holds it
  if (!collectives_) return;
  world_->set_timeout(std::max(kSetupTimeoutSeconds, options_.timeout));
  collectives_->synchronize_parameters();
}

void PipelineRunner::after_evaluation() {
  if (!collectives_) return;
  collectives_->barrier();
  world_->set_timeout(options_.timeout);
}

void PipelineRunner::save_checkpoint(const std::string& path, const nn::GPT& model,
                                     const nn::Optimizer& optimizer, const nn::CheckpointInfo& info) {
  if (!collectives_) return StepRunner::save_checkpoint(path, model, optimizer, info);
  BRIGADE_CHECK_VALUE(
      nn::is_sharded_checkpoint_path(path), "--save '", path,
      "': across processes each stage writes its own shard: name the checkpoint by its index, "
      "e.g. run.safetensors.index.json");
  const int S = layout_->stages;
  world_->set_timeout(std::max(kSetupTimeoutSeconds, options_.timeout));  // writing may take a while
  if (collectives_->replica() == 0) {
    const auto owners = nn::parameter_shards(model, layer_stages(model));
    nn::save_checkpoint_shard(
        path, info.step, collectives_->stage(), S,
        nn::shard_tensors(nn::checkpoint_tensors(model, &optimizer), owners, collectives_->stage()));
  }
  collectives_->barrier();  // every shard is on disk
  if (world_->rank() == 0) {
    std::vector<nn::ShardRecord> records;
    for (int k = 0; k < S; ++k) records.push_back(nn::read_shard_record(path, info.step, k, S));
    nn::commit_checkpoint_index(path, records, nn::checkpoint_metadata(model, &optimizer, info));
  }
  collectives_->barrier();  // committed: no rank runs ahead of the commit point
  world_->set_timeout(options_.timeout);
}

void PipelineRunner::measure_clock_offsets() {
  constexpr int kRepeats = 10;
  const int rank = world_->rank();
  clock_offsets_.assign(static_cast<size_t>(world_->size()), 0.0);
  for (int r = 1; r < world_->size(); ++r) {
    if (rank == 0) clock_offsets_[static_cast<size_t>(r)] = world_->clock_offset(r, kRepeats);
    if (rank == r) (void)world_->clock_offset(0, kRepeats);
  }
}

void PipelineRunner::gather_trace() {
  if (!collectives_ || !last_) return;  // every rank has run the same steps, so all return here or none
  const std::string mine =
      collectives_->replica() == 0 ? stage_events_text(*last_, collectives_->stage()) : "";
  world_->set_timeout(std::max(kSetupTimeoutSeconds, options_.timeout));
  const std::vector<std::string> all = world_->all_gather(mine);
  world_->set_timeout(options_.timeout);
  if (world_->rank() != 0) return;
  ExecutionTrace merged = last_->trace;  // the schedule, the devices and rank 0's own stage
  for (size_t r = 1; r < all.size(); ++r) {
    if (!all[r].empty()) merge_stage_events(merged, all[r], last_->origin_ns, clock_offsets_[r]);
  }
  merged_ = std::move(merged);
}

}  // namespace brigade::pipeline
