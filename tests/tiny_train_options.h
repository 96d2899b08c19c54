// The training run the nn and pipeline tests share: a model small enough that a step takes a few
// milliseconds on one thread, the default corpus, no evaluation before the end.
#pragma once

#include <cstdint>

#include "nn/train_options.h"

namespace brigade::testing {

/// `steps` steps of a 2-head, 32-wide GPT with `layers` blocks (the pipeline tests take 2, which gives
/// 4 layers to cut: embed, blocks.0, blocks.1, head), batch 16, a warm-up of 5 steps, 2 validation batches.
inline nn::TrainOptions tiny_train_options(int64_t steps, int64_t layers = 1) {
  nn::TrainOptions o;
  o.layers = layers;
  o.heads = 2;
  o.embd = 32;
  o.batch = 16;
  o.steps = steps;
  o.lr = 1e-2;
  o.min_lr = 1e-3;
  o.warmup = 5;
  o.eval_every = 0;
  o.eval_iters = 2;
  o.threads = 1;  // a model this small gains nothing from threads, and a busy machine makes them costly
  return o;
}

}  // namespace brigade::testing
