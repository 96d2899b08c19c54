// Which process runs what: a run of S stages x D data-parallel replicas is N = S * D processes, and rank r
// runs stage r % S of replica r / S. A replica's stages have consecutive ranks, so with the launcher's
// usual placement (consecutive ranks on one host first) the pipeline's neighbours, which exchange a
// message per microbatch, share a host, and only the replicas' all-reduce crosses hosts.
//
//   rank  replica  stage  device  host
//      0        0      0  cpu     node1
//      1        0      1  cpu     node1
//
// Devices: with --devices, the stage's entry; otherwise --device, where a bare "cuda" means the GPU of the
// rank's position on its host (local rank modulo the GPUs), the usual one-GPU-per-process layout.
#pragma once

#include <string>
#include <vector>

namespace brigade::pipeline {

struct RankLayout {
  int stages = 1;    ///< S
  int replicas = 1;  ///< D

  /// S * D.
  int ranks() const { return stages * replicas; }
  int stage_of(int rank) const { return rank % stages; }
  int replica_of(int rank) const { return rank / stages; }
  int rank_of(int replica, int stage) const { return replica * stages + stage; }
  /// The ranks of `replica`'s stages, in stage order (what a replica's transport needs).
  std::vector<int> pipeline_ranks(int replica) const;
  /// The ranks that run `stage`, one per replica (the group that all-reduces that stage's gradients).
  std::vector<int> replica_ranks(int stage) const;

  /// ValueError unless S >= 1, D >= 1 and S * D equals the `world_size` the launcher started: "mpirun -np 4
  /// started 4 processes, but --stages 3 x --data-parallel 1 needs 3".
  void check(int world_size) const;
};

/// One row of the table printed at start.
struct RankPlace {
  int rank = 0;
  int replica = 0;
  int stage = 0;
  std::string device;
  std::string host;
};

/// The table above, one line per rank, in rank order.
std::string layout_table(const std::vector<RankPlace>& places);

}  // namespace brigade::pipeline
