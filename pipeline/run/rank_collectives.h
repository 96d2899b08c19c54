// What the processes of a run across processes compute together besides the pipeline's messages.
//
// Each rank runs one stage of one replica (rank_layout.h) and holds the whole model, of which it trains
// its stage's layers. After every step:
//   tied weights    a parameter used on several stages (GPT's token embedding, also the LM head) has a
//                   gradient on each of them; it is summed over the ranks of those stages (and of every
//                   replica), so that each applies the same update to its copy;
//   replicas        each replica's stage computed the gradient of its share of the batch; the replicas of
//                   a stage average theirs (sum / D), which is the gradient of the whole batch's mean loss.
//                   This happens during the step, not after it: the schedule's Reduce actions start one
//                   non-blocking all-reduce per gradient bucket as soon as the bucket is final, and the
//                   stage's step action waits for them (GradientReducer, which this class implements);
//   loss, figures   the stage with the loss has it; one all-reduce gives every rank the step's loss (the
//                   mean over replicas), and rank 0 the bubble, peaks and traffic of every stage;
//   gradient norm   each stage's sum of squares (a tied weight counted on its first stage only, replica 0
//                   only), summed over the ranks: every rank clips by the same global norm, and all stop
//                   together when it is not finite.
// Before an evaluation, which runs the whole model on every rank, each parameter is broadcast from the
// rank of replica 0 that trains it.
//
// All of it goes through a ProcessGroup (process_group.h); every wait gives up at the group's timeout or as
// soon as another rank has failed.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "pipeline/run/executor.h"
#include "pipeline/run/gradient_reducer.h"
#include "pipeline/run/process_group.h"
#include "pipeline/run/rank_layout.h"

namespace brigade::pipeline {

/// One step's figures, combined over the ranks.
struct CombinedStep {
  double loss = 0.0;     ///< the step's loss (mean over replicas of the microbatch means)
  double bubble = 0.0;   ///< mean over the ranks of their stage's idle fraction
  double step_ms = 0.0;  ///< rank 0's step span (first action to last; its stage starts and ends the step)
  std::vector<int64_t> peak_activation_bytes, peak_step_bytes;  ///< per stage (replica 0's)
  Traffic traffic;                                              ///< replica 0's pipeline
};

class RankCollectives : public GradientReducer {
 public:
  /// Collective over `world` (every rank calls it, after the Pipeline is built): makes the sub-groups of
  /// the tied weights and of the replicas, and (D > 1) runs the pipeline's Reduce actions.
  RankCollectives(ProcessGroup& world, RankLayout layout, const Pipeline& pipeline);
  ~RankCollectives() override;

  int rank() const { return world_.rank(); }
  int stage() const { return layout_.stage_of(world_.rank()); }
  int replica() const { return layout_.replica_of(world_.rank()); }
  ProcessGroup& world() { return world_; }

  /// After Pipeline::forward_backward: the tied gradients (above), then the loss and figures (the replicas'
  /// gradients were averaged by the step's Reduce actions).
  CombinedStep finish_step(const StepResult& result);
  /// GradientReducer: a Reduce packs the bucket's gradients into one float32 buffer and starts its sum over
  /// the stage's replicas; finish waits for each, divides by D and unpacks.
  void start(int stage, int bucket, const std::vector<Tensor>& params) override;
  std::vector<std::chrono::steady_clock::time_point> finish(int stage) override;
  void clear() override;
  /// The global gradient norm before clipping; this rank's gradients are scaled by max_norm / norm when
  /// the norm exceeds max_norm (nn::clip_grad_norm's rule).
  double clip_grad_norm(double max_norm);
  /// Every parameter from the rank of replica 0 that trains it (before an evaluation).
  void synchronize_parameters();
  /// Returns once every rank has called it.
  void barrier();

 private:
  void reduce_tied_gradients();
  struct InFlight {
    std::vector<Tensor> params;
    Tensor flat;
    std::unique_ptr<PendingAllReduce> pending;
  };

  ProcessGroup& world_;
  RankLayout layout_;
  const Pipeline& pipeline_;
  std::vector<Tensor> own_;       // this stage's parameters, tied ones excluded
  std::vector<Tensor> tied_;      // the tied parameters this stage uses
  std::vector<bool> tied_first_;  // ... whether this stage is the first to use it (counts it in the norm)
  std::vector<std::unique_ptr<ProcessGroup>> tied_groups_;  // per tied_ entry
  std::unique_ptr<ProcessGroup> replica_group_;             // the replicas of this stage (D > 1)
  std::vector<InFlight> in_flight_;                         // the step's buckets started by Reduce
};

}  // namespace brigade::pipeline
