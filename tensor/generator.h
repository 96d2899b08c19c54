// A seeded Philox generator state: (seed, offset). Each random op consumes one offset, so the numbers of
// successive draws are independent streams; saving and restoring the state replays a draw exactly
// (autograd::checkpoint does this so that recomputed dropout masks match the original ones).
#pragma once

#include <cstdint>
#include <mutex>

namespace brigade {

struct GeneratorState {
  uint64_t seed = 0;
  uint64_t offset = 0;
  friend bool operator==(const GeneratorState& a, const GeneratorState& b) {
    return a.seed == b.seed && a.offset == b.offset;
  }
};

class Generator {
 public:
  explicit Generator(uint64_t seed = 0x5eed) : state_{seed, 0} {}

  void manual_seed(uint64_t seed);
  GeneratorState state() const;
  void set_state(const GeneratorState& state);
  /// Returns the state to use for one draw and advances the offset by one.
  GeneratorState next_draw();

 private:
  mutable std::mutex mutex_;
  GeneratorState state_;
};

/// The process-wide default generator (shared by CPU and CUDA: same seed, same numbers on both).
Generator& default_generator();
/// Seeds the default generator.
void manual_seed(uint64_t seed);

}  // namespace brigade
