// Activation checkpointing: trade compute for memory.
//
// checkpoint(fn, inputs) runs fn without recording a graph, so none of its intermediate tensors outlive
// the call; it keeps only the inputs and the generator state. When the gradient of the outputs arrives,
// it replays fn with grad enabled (same generator state, so dropout draws the same masks) on fresh copies
// of the inputs and backpropagates through that recomputed graph. The recompute can also be run early
// with recompute_ahead(outputs): a pipeline stage does it in the idle time before the next stage's
// gradient arrives, and the backward then uses the graph that is already there (the torchgpipe split into
// Checkpoint and Recompute).
//
// \code
//   auto block = [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{mlp(in[0])}; };
//   Tensor h = brigade::checkpoint(block, {x})[0];   // no intermediates of mlp kept
//   brigade::recompute_ahead({h});                  // optional, before the gradient arrives
//   brigade::backward(h, grad_h);                   // mlp's parameters and x get their gradients
// \endcode
//
// Rules for fn: it must be deterministic given its inputs and the generator state (it runs twice), and
// may use parameters that are not among `inputs` (a layer's weights): they receive their gradients during
// the recompute's backward. Because fn may hold such parameters, checkpoint records its node whenever grad
// mode is on, even if no input requires grad. Outputs of a non-floating dtype get no gradient.
// The generator's state is set back and restored around the replay: if other threads draw from the same
// generator meanwhile, their draws interleave with it; give each pipeline stage its own generator.
#pragma once

#include <functional>
#include <vector>

#include "tensor/generator.h"
#include "tensor/tensor.h"

namespace brigade::autograd {

using CheckpointFn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

/// Runs fn(inputs) without saving its intermediates and returns its outputs, attached to one checkpoint
/// node (each output has its own gradient slot). Under NoGradGuard it simply returns fn(inputs).
/// @param generator the generator fn's random ops draw from (default: the process-wide one).
std::vector<Tensor> checkpoint(const CheckpointFn& fn, const std::vector<Tensor>& inputs,
                               Generator* generator = nullptr);

/// Recomputes, now, the graph of the checkpoint that produced `checkpoint_outputs` (any of its outputs
/// identify it; a checkpoint already recomputed is left alone), so that the coming backward need not.
/// Throws AutogradError for a tensor that is not a checkpoint output, or whose graph was released.
void recompute_ahead(const std::vector<Tensor>& checkpoint_outputs);

/// Recomputes, now, every checkpoint in the graph that produced `root` (walking it from root's grad_fn
/// down to the leaves; checkpoints already recomputed are left alone), and returns how many it found. A
/// pipeline stage's R action for a chunk whose layers are checkpointed one by one (per-layer
/// recomputation): the graph holds one checkpoint per recomputed span, wherever it sits.
int recompute_graph_ahead(const Tensor& root);

}  // namespace brigade::autograd

namespace brigade {
using autograd::checkpoint;
using autograd::recompute_ahead;
using autograd::recompute_graph_ahead;
}  // namespace brigade
