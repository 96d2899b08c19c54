// DualPipeV (see dualpipe.h).
#include "pipeline/schedule/dualpipe.h"

#include <array>
#include <deque>

#include "pipeline/schedule/generators.h"
#include "tensor/error.h"

namespace brigade::pipeline {

namespace {

// One stage's list under construction: the next microbatch of each pass per chunk, and the weight
// gradients whose Bi has run (oldest first).
class DualPipeStage {
 public:
  explicit DualPipeStage(std::vector<Action>& list) : list_(list) {}
  void forward(int chunk) { list_.push_back(F(next_forward_[chunk]++, chunk)); }
  /// The backward of the chunk's next microbatch: whole, or split (Bi now, its Bw pending).
  void backward(int chunk, bool split) {
    const int m = next_backward_[chunk]++;
    if (!split) {
      list_.push_back(B(m, chunk));
      return;
    }
    list_.push_back(Bi(m, chunk));
    pending_.push_back(Bw(m, chunk));
  }
  /// The oldest pending weight gradient, if any.
  void weight() {
    if (pending_.empty()) return;
    list_.push_back(pending_.front());
    pending_.pop_front();
  }
  void remaining_weights() {
    while (!pending_.empty()) weight();
  }
  /// An overlapped pair, run here as two actions in sequence (dualpipe.h).
  void pair(int forward_chunk, int backward_chunk) {
    forward(forward_chunk);
    backward(backward_chunk, false);
  }

 private:
  std::vector<Action>& list_;
  std::array<int, 2> next_forward_{}, next_backward_{};
  std::deque<Action> pending_;
};

}  // namespace

Schedule dualpipe_v(int stages, int microbatches, Recompute recompute) {
  Schedule schedule = empty_schedule("dualpipev", stages, microbatches, 2, Placement::V, recompute);
  const int S = stages, M = microbatches;
  BRIGADE_CHECK_VALUE(M >= 2 * S, "schedule dualpipev: microbatches (", M, ") must be at least 2 x stages (",
                      2 * S, "): the two directions need that many to fill the pipeline");
  for (int s = 0; s < S; ++s) {
    DualPipeStage stage(schedule.actions[static_cast<size_t>(s)]);
    for (int i = 0; i < 2 * (S - s - 1); ++i) stage.forward(0);
    for (int i = 0; i < s + 1; ++i) {
      stage.forward(0);
      stage.forward(1);
    }
    for (int i = 0; i < S - s - 1; ++i) {
      stage.backward(1, true);
      stage.weight();
      stage.forward(1);
    }
    for (int i = 0; i < M - 2 * S + s + 1; ++i) {
      stage.pair(0, 1);
      stage.pair(1, 0);
    }
    for (int i = 0; i < S - s - 1; ++i) {
      stage.backward(1, false);
      stage.pair(1, 0);
    }
    // The second half of these backwards is split: which backward starts it alternates with the stage.
    bool split = false;
    for (int i = 0; i < s + 1; ++i) {
      if (i == (s + 1) / 2 && s % 2 == 1) split = true;
      stage.backward(1, split);
      if (i == (s + 1) / 2 && s % 2 == 0) split = true;
      stage.backward(0, split);
    }
    for (int i = 0; i < S - s - 1; ++i) {
      stage.weight();
      stage.backward(0, true);
    }
    stage.remaining_weights();  // s + 1 of them
  }
  return finish_schedule(std::move(schedule));
}

}  // namespace brigade::pipeline
