// Shared pieces of the executor tests: small GPTs, batches, the unpipelined reference step, gradient
// comparison and a watchdog that turns a hang into a failure.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "nn/gpt.h"
#include "nn/optim.h"
#include "tensor/tensor.h"

namespace brigade::pipeline::testing {

/// A GPT small enough to step in milliseconds: vocab 20, context 8, embd 32, 4 heads, no dropout.
inline nn::GPTConfig tiny_config(int64_t blocks = 4, double dropout = 0.0) {
  nn::GPTConfig c;
  c.vocab_size = 20;
  c.block_size = 8;
  c.n_layer = blocks;
  c.n_head = 4;
  c.n_embd = 32;
  c.dropout = dropout;
  return c;
}

/// ids and targets [batch, T] of pseudo-random tokens (a fixed LCG, so every run sees the same batch).
struct Batch {
  Tensor ids, targets;
};
inline Batch make_batch(int64_t batch, int64_t T, int64_t vocab, uint64_t seed) {
  std::vector<int64_t> ids(static_cast<size_t>(batch * T)), targets(ids.size());
  uint64_t x = seed * 6364136223846793005ULL + 1442695040888963407ULL;
  auto next = [&] {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<int64_t>((x >> 33) % static_cast<uint64_t>(vocab));
  };
  for (auto& v : ids) v = next();
  for (auto& v : targets) v = next();
  return {from_vector(ids, {batch, T}), from_vector(targets, {batch, T})};
}

/// ||a - b|| / ||b|| over all elements (0 when both are zero).
inline double relative_error(const Tensor& a, const Tensor& b) {
  const std::vector<double> x = a.to_vector<double>(), y = b.to_vector<double>();
  double diff = 0.0, norm = 0.0;
  for (size_t i = 0; i < x.size(); ++i) {
    diff += (x[i] - y[i]) * (x[i] - y[i]);
    norm += y[i] * y[i];
  }
  if (norm == 0.0) return std::sqrt(diff);
  return std::sqrt(diff / norm);
}

/// The unpipelined step: zero_grad, loss of the whole batch, backward. Returns the loss.
inline double reference_backward(nn::GPT& model, const Batch& batch) {
  model.zero_grad();
  Tensor loss = nn::GPT::loss(model.forward(batch.ids), batch.targets);
  loss.backward();
  return loss.item();
}

/// Expects every parameter's gradient (or value, with `values`) of `actual` to match `expected` by name,
/// relative error <= tolerance.
inline void expect_same_parameters(const nn::Module& actual, const nn::Module& expected, double tolerance,
                                   bool values) {
  const auto a = actual.named_parameters();
  const auto e = expected.named_parameters();
  ASSERT_EQ(a.size(), e.size());
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].first, e[i].first);
    const Tensor x = values ? a[i].second : a[i].second.grad();
    const Tensor y = values ? e[i].second : e[i].second.grad();
    ASSERT_TRUE(x.defined()) << a[i].first << " has no " << (values ? "value" : "gradient");
    ASSERT_TRUE(y.defined()) << e[i].first << " has no reference " << (values ? "value" : "gradient");
    EXPECT_LE(relative_error(x, y), tolerance) << (values ? "value of " : "gradient of ") << a[i].first;
  }
}

/// Aborts the test program when a scope runs longer than `seconds`: a hang fails CI instead of blocking it.
class Watchdog {
 public:
  Watchdog(double seconds, std::string what) : what_(std::move(what)) {
    thread_ = std::thread([this, seconds] {
      std::unique_lock<std::mutex> lock(mutex_);
      if (!cv_.wait_for(lock, std::chrono::duration<double>(seconds), [this] { return done_; })) {
        std::fprintf(stderr, "WATCHDOG: '%s' did not finish within %.0f s (hang); aborting\n", what_.c_str(),
                     seconds);
        std::fflush(stderr);
        std::abort();
      }
    });
  }
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

 private:
  std::string what_;
  std::mutex mutex_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};

}  // namespace brigade::pipeline::testing
