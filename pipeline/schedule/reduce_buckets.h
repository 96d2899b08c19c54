// Gradient buckets and their Reduce actions: how data-parallel replicas average their gradients inside the
// schedule (schedule.h, "Data parallel").
//
// Buckets. Each stage's parameters (those its replicas average: a weight tied to another stage is summed by
// its own collective and is in no bucket) are cut into buckets of consecutive layers of one local chunk,
// from the chunk's last layer down (the order its backward produces them), each up to `cap_bytes` (a layer
// larger than the cap is a bucket of its own). A chunk whose layers hold no such parameter has no bucket.
// Small buckets start their all-reduce no sooner than large ones here (all layers of a chunk are final at
// the same action, its last B or Bw); they only split a chunk's transfer into several messages. The cap
// keeps one message from growing with the model (every all-reduce packs its bucket into one buffer).
//
// Placement (insert_reduces). The gradients of a chunk are final after the last action of the list that
// writes them: the last B or Bw of that chunk (Bi writes none), whichever microbatch it is (zb-h1 defers
// Bw). The chunk's Reduces go right after it, or after the Send of that action's input gradient when one
// follows (so the stage upstream does not wait for the bucket to be packed), in bucket order. A stage
// whose replicas all run the same list starts its all-reduces in the same order on every replica, as MPI
// requires of collectives.
//
// \code
//   std::vector<std::vector<int64_t>> bytes = ...;  // [stage][layer]: gradient bytes each layer adds
//   auto buckets = gradient_buckets(schedule, chunk_layers, bytes, 1 << 20);
//   insert_reduces(schedule, buckets);  // then validate(schedule): every bucket reduced once, in place
// \endcode
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "pipeline/schedule/schedule.h"

namespace brigade::pipeline {

/// The default bucket cap (--bucket-mb 1): one bucket per chunk for the models of the examples (a few MiB
/// of parameters at most per stage), a few per chunk for larger ones.
constexpr int64_t kDefaultBucketBytes = int64_t{1} << 20;

/// The buckets of every stage. chunk_layers[k] is model chunk k's layers [begin, end) (the executor's
/// layout); layer_bytes[stage][layer] the gradient bytes that layer adds to that stage's buckets (0 for a
/// layer the stage does not hold, or whose parameters are tied or counted in another layer). Buckets are
/// numbered per stage in the order their Reduces run (chunk by chunk, in the order the chunks' gradients
/// become final in the stage's list). ValueError for cap_bytes < 1 or sizes that do not match the schedule.
std::vector<std::vector<GradientBucket>> gradient_buckets(
    const Schedule& schedule, const std::vector<std::pair<int, int>>& chunk_layers,
    const std::vector<std::vector<int64_t>>& layer_bytes, int64_t cap_bytes);

/// The index in `list` of the last action that writes local chunk `chunk`'s parameter gradients (its last
/// B or Bw), or -1 when there is none.
int last_gradient_write(const std::vector<Action>& list, int chunk);

/// The stage's local chunks, the one whose gradients become final last first (a chunk without a gradient
/// write last): the order in which to hand out a stage's parameters to buckets, so that one used by
/// several chunks goes with the chunk that writes its gradient last.
std::vector<int> chunks_by_last_gradient_write(const Schedule& schedule, int stage);

/// Sets schedule.buckets and puts one Reduce per bucket into each stage's list, as "Placement" above says
/// (replacing any Reduce already there). ValueError when `buckets` does not have one entry per stage or a
/// bucket's chunk has no gradient-writing action on its stage.
void insert_reduces(Schedule& schedule, std::vector<std::vector<GradientBucket>> buckets);

}  // namespace brigade::pipeline
