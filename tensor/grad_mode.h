// Whether operations record the autograd graph on this thread. Lives in the tensor layer because Tensor's
// view methods consult it; the autograd layer re-exports NoGradGuard.
#pragma once

namespace brigade {

class GradMode {
 public:
  static bool is_enabled();
  static void set_enabled(bool enabled);
};

/// RAII: disables graph recording on this thread for its lifetime (as torch::NoGradGuard).
class NoGradGuard {
 public:
  NoGradGuard() : previous_(GradMode::is_enabled()) { GradMode::set_enabled(false); }
  ~NoGradGuard() { GradMode::set_enabled(previous_); }
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool previous_;
};

}  // namespace brigade
