// Per-layer recomputation: what a recomputed microbatch recomputes, layer by layer.
//
// The schedule's Recompute policy (schedule.h) says WHICH microbatches recompute (never, always, all but
// the last); a per-layer plan says WHAT each layer of the model recomputes for them:
//   n  none        the layer keeps its activations, as without recomputation;
//   f  full        the layer keeps only its input; R re-runs it (with the other full layers of its span);
//   a  attention   only the attention core of the block is recomputed (Megatron's "selective"
//                  recomputation, nn/attention.h: RecomputeAttentionCore); the projections, norms and MLP
//                  keep theirs. Only layers with attention (transformer blocks) take it.
// Every chunk with a recomputed microbatch still has its R action (generators.h places it into the idle
// time before the backward); R recreates whatever the chunk's layers recompute, so after R the chunk holds
// its full activations, as with whole-chunk recomputation. A chunk whose layers are all n has an empty R.
// No plan (the empty list) is every layer full: the whole chunk is recomputed, the classic policies.
//
// On the command line (--recompute):
//   never | always | except-last      the policies, every layer full (the empty plan)
//   selective                         always, with the attention core of every block (embed and head n)
//   <policy>:<plan>                   a policy with a plan: one letter per layer (embed, blocks, head),
//                                     e.g. "always:nffaan", or "selective"
#pragma once

#include <string>
#include <vector>

#include "pipeline/schedule/schedule.h"

namespace brigade::pipeline {

enum class LayerRecompute {
  None,           ///< n
  Full,           ///< f
  AttentionCore,  ///< a
};
/// 'n', 'f', 'a'.
char to_letter(LayerRecompute choice);

/// A --recompute setting: the policy and the per-layer plan as written.
struct RecomputeSetting {
  Recompute policy = Recompute::Never;
  /// "" (every layer full), "selective", or one letter per layer.
  std::string plan;

  /// Parses the forms above. ValueError naming what was expected for anything else (an unknown policy,
  /// a letter other than n, f, a, a plan with "never").
  static RecomputeSetting parse(const std::string& text);
  /// The text parse() reads back.
  std::string str() const;
  /// The plan for a model of has_attention.size() layers (layer i has attention when has_attention[i]):
  /// empty for "" (every layer full); ValueError for a plan of the wrong length (naming both) or an 'a'
  /// on a layer without attention.
  std::vector<LayerRecompute> resolve(const std::vector<bool>& has_attention) const;
};

/// The plan as letters ("nffa"; "" for the empty plan).
std::string plan_letters(const std::vector<LayerRecompute>& plan);
/// What layer `layer` recomputes under `plan` (Full for the empty plan).
LayerRecompute layer_choice(const std::vector<LayerRecompute>& plan, int layer);
/// True when every layer of [begin, end) is recomputed in full: the whole-chunk case.
bool whole_chunk_recomputed(const std::vector<LayerRecompute>& plan, int begin, int end);

}  // namespace brigade::pipeline
