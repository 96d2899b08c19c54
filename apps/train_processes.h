// `brigade train` under an MPI launcher: joining the job, the checks that only apply across processes,
// and the rank layout table printed at start (docs/distributed.md).
#pragma once

#include <exception>
#include <memory>
#include <string>

#include "nn/train_options.h"
#include "pipeline/run/process_group.h"

namespace brigade::apps {

/// The job this process belongs to: null `world` when it runs alone (no launcher, or mpirun -np 1).
struct TrainProcesses {
  std::unique_ptr<pipeline::ProcessGroup> world;
  int rank() const { return world ? world->rank() : 0; }
  /// Rank 0 prints the progress, the summary and writes the files; the other ranks stay quiet.
  bool prints() const { return rank() == 0; }
};

/// Joins the launcher's job when one started several processes (Error when the build has no MPI).
TrainProcesses join_processes();

/// Across processes, the flags that cannot work there: "" when none. Stages x data-parallel must be the
/// launcher's process count; --save must name a sharded checkpoint (each stage writes its shard);
/// --transport nccl needs a build with NCCL and stages on GPUs.
std::string check_process_flags(const nn::TrainOptions& options, const TrainProcesses& processes);

/// Collective: every rank's replica, stage, device and host, as the table rank 0 prints.
std::string rank_layout_table(const nn::TrainOptions& options, const TrainProcesses& processes);

/// Across processes, after `error` ended this rank's run: tells the other ranks (unless the failure came
/// from one of them), sends this rank's position to rank 0, which prints one report naming the failed rank
/// and every rank's position (last action done, the action it stopped in), and exits with status 1 within
/// a few seconds. Does nothing (returns) in a run of one process.
void end_processes_after_failure(const TrainProcesses& processes, const nn::TrainOptions& options,
                                 const std::exception_ptr& error);

}  // namespace brigade::apps
