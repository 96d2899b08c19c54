// What a Reduce action of the IR does (schedule/schedule.h, "Data parallel"): the replicas of a stage
// average one gradient bucket's gradients, started at the Reduce and finished before the optimizer step.
//
// The executor calls start() on the stage's thread when the stage reaches a Reduce (the bucket's
// gradients are final: the validator proves it), and finish() in the stage's step action, which waits for
// every bucket started in the step. Between the two the stage runs on: the all-reduce overlaps the rest
// of its list (and the other stages' backward). Across processes RankCollectives implements it with a
// non-blocking all-reduce over the stage's replicas (rank_collectives.h).
#pragma once

#include <chrono>
#include <vector>

#include "tensor/tensor.h"

namespace brigade::pipeline {

class GradientReducer {
 public:
  virtual ~GradientReducer() = default;
  /// Starts averaging the gradients of `params` (bucket `bucket` of `stage`) over the replicas and
  /// returns without waiting for it. Every replica starts the same buckets in the same order.
  virtual void start(int stage, int bucket, const std::vector<Tensor>& params) = 0;
  /// Waits for every bucket `stage` started since the last finish and puts the averages into the
  /// parameters' .grad. Returns when each one's all-reduce completed, in the order they were started.
  virtual std::vector<std::chrono::steady_clock::time_point> finish(int stage) = 0;
  /// After a failed step: forgets the buckets in flight (without waiting for them).
  virtual void clear() = 0;
};

}  // namespace brigade::pipeline
