// The backward of one model chunk split in two, as zero-bubble schedules need it: Bi computes only the
// gradient w.r.t. the chunk's input (what the previous stage waits for), Bw later computes the gradients of
// the parameters (what only the optimizer step waits for).
//
// How. The graph from the chunk's output (the root) down to its input leaf and its parameters is split by
// one question per node: does a path lead from it to the input? Those nodes form the "input side"; every
// other node reachable from the root leads only to parameters (or other leaves) — the "weight side", which
// is closed downwards (a node with an edge into the input side is on the input side itself).
//   Bi  walks the input side in topological order. Each node's edges into the weight side are masked (set
//       to null while it runs), so its backward formula is told those inputs need no gradient and skips
//       them (matmul skips its dW GEMM, add skips the bias reduction). A node that had such edges keeps the
//       output gradient it received, for Bw; a node without them is released at once (its saved tensors
//       freed). The gradient reaching the input leaf is returned; nothing is accumulated into .grad.
//   Bw  re-runs each kept node with the opposite mask (only its weight-side edges), then walks the weight
//       side in topological order, ending in the parameters' AccumulateGrad nodes (.grad accumulates),
//       and releases the rest of the graph.
//
// Cost, honestly. Every backward formula that honours "needs" (matmul, elementwise ops, reductions,
// embedding) does exactly the work of the unsplit B, divided between Bi and Bw. A formula whose kernel
// computes all its input gradients at once (layer_norm: one kernel for dx, dweight and dbias) runs twice,
// once in each half. Measured (tests/pipeline/executor_slow_test.cpp, two blocks, embd 128, 512 tokens,
// one thread, CPU time on a shared 2-core machine): B 18.2-18.4 ms, Bi 12.8-13.2 ms + Bw 7.9-8.1 ms, i.e.
// the split costs 13-15% more than B. The duplicated LayerNorm backward explains about 2 points of it
// (0.1 ms per call, 4 calls); the rest is not attributed node by node — most likely the price of two
// walks instead of one: each weight-side formula reads its output gradient again later, from memory
// rather than cache, and those gradients stay allocated until Bw. The layer profile times Bi and Bw per
// layer (plan/profile.h), so the simulator and the planner price the split as it runs. Memory: between Bi and
// Bw the chunk keeps the saved tensors of the weight-side formulas (a Linear's input, a LayerNorm's input and
// statistics) and the output gradients of the kept nodes (a Linear's [N, out] gradient); what only the input
// gradient needed (attention probabilities, GELU inputs) is freed by Bi. A graph whose root does not depend
// on the input at all is run entirely by Bw.
//
// \code
//   brigade::pipeline::SplitBackward split;
//   Tensor dx = split.backward_input(y, dy, x);   // Bi: send dx upstream now
//   ...                                           // other work
//   split.backward_weight();                      // Bw: parameters' .grad accumulate
// \endcode
#pragma once

#include <memory>
#include <unordered_set>
#include <vector>

#include "autograd/node.h"
#include "tensor/tensor.h"

namespace brigade::pipeline {

class SplitBackward {
 public:
  SplitBackward() = default;
  SplitBackward(const SplitBackward&) = delete;
  SplitBackward& operator=(const SplitBackward&) = delete;
  SplitBackward(SplitBackward&&) = default;
  SplitBackward& operator=(SplitBackward&&) = default;

  /// Bi: backpropagates `gradient` (d loss / d root; undefined for a one-element root, meaning 1) from
  /// `root` to the leaf `input` only, and returns d loss / d input (undefined when `input` does not require
  /// grad or the root does not depend on it). Keeps what backward_weight() needs.
  /// Throws AutogradError when root does not require grad, on a second call without backward_weight(),
  /// or when the graph was already released.
  Tensor backward_input(const Tensor& root, const Tensor& gradient, const Tensor& input);

  /// Bw: the remaining gradients (parameters and other leaves), accumulated into their .grad; releases the
  /// graph. Throws AutogradError without a preceding backward_input().
  void backward_weight();

  /// True between backward_input() and backward_weight().
  bool pending() const { return pending_; }

 private:
  struct Kept {
    std::shared_ptr<Node> node;
    std::vector<Tensor> grads;  // the output gradients it received in Bi
  };
  bool pending_ = false;
  std::vector<std::shared_ptr<Node>> order_;  // topological order from the root
  std::unordered_set<const Node*> input_side_;
  std::vector<Kept> kept_;
  std::vector<Tensor> root_grads_;  // only when the root itself is on the weight side
};

}  // namespace brigade::pipeline
