// Shared pieces of the executor tests: small GPTs, batches, the unpipelined reference step, gradient
// comparison, the equivalence check of a pipelined step against the unpipelined one, and a watchdog that
// turns a hang into a failure.
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
#include "pipeline/run/executor.h"
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

/// AdamW for the equivalence checks. eps 1e-5 rather than 1e-8: the key bias of attention has an exactly
/// zero gradient in exact arithmetic (softmax ignores a shift common to all keys), and other components
/// (a bias behind a saturated GELU) have gradients near zero, so both runs compute rounding noise of
/// ~1e-9 there; Adam divides by sqrt(v) + eps, so with eps 1e-8 any noise becomes a step of ~lr, and the
/// two runs would differ by Adam's amplification of noise, not by the pipeline. With eps 1e-5 such noise
/// moves a parameter by ~1e-4 lr. (eps 1e-6 was enough until the AVX-512 FMA attention, whose rounding
/// differs from the non-FMA versions': with it, looped-bfs at S 3-4, v 3 came out at 1.15e-5 and 1.19e-5 on
/// two bias vectors after the three steps, while every gradient still matched to 1e-5.)
inline nn::AdamWOptions equivalence_adamw_options() {
  nn::AdamWOptions o;
  o.lr = 1e-2;
  o.eps = 1e-5;
  return o;
}

/// The configuration of an equivalence check: `schedule` on S stages and M microbatches with v chunks (for
/// the schedules that take them), a recv timeout so that a deadlock fails the test instead of hanging it.
inline PipelineConfig equivalence_config(const std::string& schedule, int stages, int microbatches,
                                         Recompute recompute, int virtual_chunks = 1) {
  PipelineConfig pc;
  pc.schedule = schedule;
  pc.stages = stages;
  pc.microbatches = microbatches;
  pc.virtual_chunks = virtual_chunks;
  pc.recompute = recompute;
  pc.recv_timeout_seconds = 60;
  return pc;
}

/// A pipelined step of a tiny GPT with `blocks` blocks under `config` against the unpipelined model built
/// from the same seed: the loss and every gradient of one step, then the parameters after three AdamW
/// steps, each to a relative error of `tolerance` (on batches of 8 sequences of 8 tokens).
inline void expect_matches_unpipelined(const PipelineConfig& config, int64_t blocks,
                                       double tolerance = 1e-5) {
  constexpr int64_t kSequences = 8, kTokens = 8;
  const nn::GPTConfig model_config = tiny_config(blocks);
  nn::GPT reference(model_config, 7), piped(model_config, 7);
  const Batch batch = make_batch(kSequences, kTokens, model_config.vocab_size, 1);
  const double expected_loss = reference_backward(reference, batch);

  Pipeline pipe(piped, config);
  const StepResult r = pipe.forward_backward(batch.ids, batch.targets);
  EXPECT_LE(std::fabs(r.loss - expected_loss), tolerance * std::fabs(expected_loss));
  ASSERT_EQ(r.microbatch_losses.size(), static_cast<size_t>(config.microbatches));
  expect_same_parameters(piped, reference, tolerance, /*values=*/false);

  nn::AdamW ref_opt(nn::decay_groups(reference, 0.1), equivalence_adamw_options());
  nn::AdamW pipe_opt(nn::decay_groups(piped, 0.1), equivalence_adamw_options());
  for (int step = 0; step < 3; ++step) {
    const Batch b = make_batch(kSequences, kTokens, model_config.vocab_size, 10 + step);
    reference_backward(reference, b);
    ref_opt.step();
    pipe.train_step(b.ids, b.targets, pipe_opt);
  }
  expect_same_parameters(piped, reference, tolerance, /*values=*/true);
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
