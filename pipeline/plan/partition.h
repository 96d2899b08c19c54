// Partition by depth: cut a Sequential of L layers into S contiguous stages (S * v model chunks for an
// interleaved schedule), so that the most expensive stage is as cheap as possible.
//
// Methods (what a layer "costs"):
//   balance   given by hand, "3,3,2": the number of layers per model chunk, in order (no optimisation)
//   params    the layer's work per token in parameter units (LayerProfile::work): its parameter elements
//             (a tied weight counts in every layer that uses it: the LM head does its matmul with the
//             embedding's matrix), a lookup table one row (the embedding reads one row of that matrix per
//             token), and the LM head the loss over its logits
//   time      measured forward + backward milliseconds (profile.h)
//   memory    measured activation bytes per microbatch (profile.h)
//
// The cut. Given per-layer costs c_0 .. c_{L-1} and K = S * v parts, min_max_cut returns the contiguous cut
// minimising the largest part's cost, exactly, by dynamic programming over prefixes:
//   best[k][j] = min over i < j of max(best[k-1][i], c_i + ... + c_{j-1})      (k parts over layers 0..j-1)
// which is O(K L^2) time. Many cuts often share the optimal bottleneck (a GPT's identical blocks); among
// them a second pass of the same shape picks the one with the smallest sum of squared part costs, i.e.
// the most even one, and among those the first in lexicographic order of the cut points, so the result
// is deterministic. (A greedy "fill each stage up to the average" is not optimal; see docs/pipeline.md.)
//
// Chunk layout. Model chunk k (0 .. S v - 1) holds layers [begin, end) and runs on the stage, and as the
// local chunk, that the schedule's placement gives it (schedule/schedule.h: ChunkLayout; interleaved:
// stage k % S; V: stages 0 .. S-1, then back). A stage's cost is the sum of its chunks' costs;
// imbalance = max / mean over stages (1 is perfect).
//
// Tied weights. A parameter used by layers that land on different stages (GPT's token embedding, used by
// "embed" on the first stage and by "head" on the last) is listed in Partition::shared with its stages: the
// executor sums the gradients of its copies before the optimizer step.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "pipeline/plan/profile.h"
#include "pipeline/schedule/layer_recompute.h"
#include "pipeline/schedule/schedule.h"

namespace brigade::pipeline {

struct Costs;  // simulator.h (which includes this header through memory_model.h)

enum class PartitionMethod { Balance, Parameters, Time, Memory };
/// "balance", "params", "time", "memory".
const char* to_string(PartitionMethod method);
/// Parses the names above; ValueError listing the valid ones otherwise.
PartitionMethod parse_partition_method(const std::string& name);

/// Parses "3,3,2" into {3, 3, 2}. ValueError naming the offending item for anything but a comma-separated
/// list of positive integers.
std::vector<int> parse_balance(const std::string& text);

/// The one check of a layout by hand: the cut points of `balance`, the layers per model chunk (what
/// --balance, PartitionOptions::balance and PipelineConfig::balance hold), for K = stages x virtual_chunks
/// chunks of a model of `layers` layers. bounds[0] = 0 < bounds[1] < ... < bounds[K] = layers; model
/// chunk k holds layers [bounds[k], bounds[k + 1]). An empty balance is as even as possible, whatever
/// the layer count: the first L % K chunks take one layer more. ValueError, with `what` ("--balance
/// '3,3'", "partition: balance") as its subject, for more chunks than layers, or a balance with other than
/// K entries, an entry below 1 or a sum other than `layers` (callers usually refuse more chunks than layers
/// first, in their own words).
std::vector<int> chunk_bounds(const std::vector<int>& balance, int stages, int virtual_chunks, int layers,
                              const std::string& what);

/// The exact min-max contiguous cut of `costs` into `parts` non-empty parts (see above). Returns the
/// parts + 1 cut points 0 = b_0 < b_1 < ... < b_parts = costs.size(); part p is [b_p, b_{p+1}).
/// ValueError when parts < 1, parts > costs.size(), or a cost is negative or not finite.
std::vector<int> min_max_cut(const std::vector<double>& costs, int parts);
/// The largest part cost of a cut (a helper for tests and tables).
double max_part_cost(const std::vector<double>& costs, const std::vector<int>& bounds);

/// One model chunk of a partition.
struct ChunkPlan {
  int stage = 0;           ///< the stage that runs it (ChunkLayout::stage_of)
  int local_chunk = 0;     ///< its local chunk index on that stage (ChunkLayout::chunk_of)
  int begin = 0, end = 0;  ///< layers [begin, end)
  double cost = 0.0;       ///< in the partition's cost unit
  int64_t parameters = 0;  ///< elements of the distinct tensors its layers use
  int64_t parameter_bytes = 0;
  int64_t activation_bytes = 0;  ///< per profiled microbatch, sum over its layers (0 if not measured)
  int64_t input_bytes = 0;       ///< its first layer's input (0 if not measured)
  int64_t output_bytes = 0;      ///< its last layer's output: the boundary it sends (0 if not measured)
  int layers() const { return end - begin; }
};

/// Per-stage totals (sums over the stage's chunks; parameters over distinct tensors).
struct StagePlan {
  double cost = 0.0;
  int64_t parameters = 0;
  int64_t parameter_bytes = 0;
  int64_t activation_bytes = 0;
  std::vector<int> chunks;  ///< model chunks on this stage, local chunk order
};

/// A parameter used by layers on more than one stage.
struct SharedParameter {
  std::string name;  ///< its model-wide name ("embed.wte.weight")
  int64_t numel = 0;
  std::vector<int> stages;          ///< ascending
  std::vector<std::string> layers;  ///< the layers using it, in order
};

struct Partition {
  PartitionMethod method = PartitionMethod::Parameters;
  std::string cost_unit;  ///< "params", "ms", "bytes"
  int stages = 1;
  int virtual_chunks = 1;
  Placement placement = Placement::Interleaved;
  std::vector<std::string> layer_names;  ///< all L layers
  std::vector<ChunkPlan> chunks;         ///< S * v, in model order
  std::vector<StagePlan> stage_plans;    ///< S
  double imbalance = 1.0;                ///< max / mean of the stages' costs
  std::vector<SharedParameter> shared;

  int num_layers() const { return static_cast<int>(layer_names.size()); }
  ChunkLayout layout() const { return ChunkLayout{placement, stages, virtual_chunks}; }
  int model_chunks() const { return static_cast<int>(chunks.size()); }
  /// The chunk run by `stage` as its local chunk `local_chunk`.
  const ChunkPlan& chunk(int stage, int local_chunk = 0) const;
  /// Layers per model chunk, "3,3,2" (what --balance takes back).
  std::string balance() const;
  /// The same as numbers, e.g. for PipelineConfig::balance.
  std::vector<int> layer_counts() const;
  /// The printed table: one row per stage (per chunk when v > 1) with layers, parameters, cost and
  /// memory, then the imbalance and any shared parameters.
  std::string table() const;
};

struct PartitionOptions {
  PartitionMethod method = PartitionMethod::Parameters;
  int stages = 1;
  int virtual_chunks = 1;
  Placement placement =
      Placement::Interleaved;  ///< where the chunks go (the schedule's, schedule/schedule.h)
  std::vector<int> balance;    ///< layers per model chunk (method Balance): S * v entries, each >= 1, sum L
};

/// Cuts the profiled model. ValueError for stages < 1, virtual_chunks < 1, more chunks than layers, a
/// balance with the wrong count or sum or a zero (naming what was found), or a measured method on a
/// profile that was only counted.
Partition make_partition(const ModelProfile& profile, const PartitionOptions& options);

/// The per-layer costs `method` cuts on (parameters, ms or bytes; Balance uses the time when measured,
/// else the parameters, for the table).
std::vector<double> layer_costs(const ModelProfile& profile, PartitionMethod method);

/// The simulator's action costs of `partition` from the profiled layer times: each model chunk's F and B
/// are the sums of its layers' (the last layer's include the loss), R costs its F, and Bi and Bw the sums
/// of the layers' measured halves (LayerProfile::backward_input_ms, backward_weight_ms; half of B each when
/// a layer's were not measured). per_chunk is indexed by model chunk, as the simulator wants.
/// With a per-layer recomputation plan (schedule/layer_recompute.h) R costs the F of its full layers plus
/// the attention-core recompute of its 'a' layers (LayerProfile::attention_core_ms).
/// Each action's time is then scaled by the executor's factor over the layers timed alone, when the profile
/// has it (ModelProfile::action_forward_factor for F and R, action_backward_factor for B, Bi and Bw), and
/// each chunk carries the profile's deferred Bw factors (ChunkCosts::weight_deferred) and its cold backward
/// factor (ChunkCosts::cold).
Costs profile_costs(const ModelProfile& profile, const Partition& partition,
                    const std::vector<LayerRecompute>& layer_recompute = {});

}  // namespace brigade::pipeline
