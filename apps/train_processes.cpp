// `brigade train` across processes; see train_processes.h.
#include "apps/train_processes.h"

#include <sstream>

#include "nn/checkpoint_shards.h"
#include "pipeline/dist/mpi_world.h"
#include "pipeline/run/executor.h"
#include "pipeline/run/rank_layout.h"
#include "pipeline/run/train_runner.h"

namespace brigade::apps {

namespace {
// Start-up (data, model, profile) may take much longer on one rank than on another.
constexpr double kStartupTimeoutSeconds = 600.0;
}  // namespace

TrainProcesses join_processes() {
  TrainProcesses processes;
  if (pipeline::dist::launched_by_mpi() && pipeline::dist::launcher_world_size() > 1) {
    processes.world = pipeline::dist::MpiWorld::get().world_group(kStartupTimeoutSeconds);
  }
  return processes;
}

std::string check_process_flags(const nn::TrainOptions& options, const TrainProcesses& processes) {
  if (!processes.world) return "";
  const int size = processes.world->size();
  const int64_t needed = options.stages * options.data_parallel;
  if (needed != size) {
    std::ostringstream out;
    out << "the launcher started " << size << " processes, but --stages " << options.stages
        << " x --data-parallel " << options.data_parallel << " needs " << needed
        << " (one per stage and replica)";
    return out.str();
  }
  if (options.transport == "nccl") {
    if (!processes.world->nccl_built())
      return "--transport nccl: this brigade was built without NCCL (it needs CUDA, MPI and NCCL at "
             "configure "
             "time); use --transport mpi";
    for (const Device& device : pipeline::stage_devices(options)) {
      if (!device.is_cuda())
        return "--transport nccl carries device tensors, but a stage runs on " + device.str();
    }
  }
  if (!options.save.empty() && !nn::is_sharded_checkpoint_path(options.save))
    return "--save '" + options.save +
           "': across processes each stage writes its own shard; name the checkpoint by its index, e.g. "
           "run.safetensors.index.json";
  return "";
}

std::string rank_layout_table(const nn::TrainOptions& options, const TrainProcesses& processes) {
  if (!processes.world) return "";
  const pipeline::RankLayout layout{static_cast<int>(options.stages),
                                    static_cast<int>(options.data_parallel)};
  const int rank = processes.world->rank();
  const std::vector<Device> devices = pipeline::stage_devices(options);
  const std::string mine = devices[static_cast<size_t>(layout.stage_of(rank))].str() + "\t" +
                           pipeline::dist::MpiWorld::get().host();
  const std::vector<std::string> all = processes.world->all_gather(mine);
  std::vector<pipeline::RankPlace> places;
  for (int r = 0; r < static_cast<int>(all.size()); ++r) {
    const std::string& entry = all[static_cast<size_t>(r)];
    const size_t tab = entry.find('\t');
    places.push_back(
        {r, layout.replica_of(r), layout.stage_of(r), entry.substr(0, tab), entry.substr(tab + 1)});
  }
  return pipeline::layout_table(places);
}

namespace {

// How long rank 0 waits for the other ranks' positions after a failure.
constexpr double kReportSeconds = 5.0;

std::string action_text(const pipeline::Schedule& schedule, int stage, int step) {
  const auto& list = schedule.actions[static_cast<size_t>(stage)];
  if (step < 0 || step >= static_cast<int>(list.size())) return "none";
  const pipeline::Action& a = list[static_cast<size_t>(step)];
  std::string text =
      "action " + std::to_string(step) + " (" + pipeline::to_string(a, schedule.virtual_chunks > 1);
  if (a.microbatch >= 0) text += ", microbatch " + std::to_string(a.microbatch);
  return text + ")";
}

// "rank 1 (replica 0, stage 1): failed at action 7 (B2, microbatch 2); last done: action 6 (F3, ...)".
std::string rank_status(const nn::TrainOptions& options, int rank, const std::exception_ptr& error) {
  const pipeline::RankLayout layout{static_cast<int>(options.stages),
                                    static_cast<int>(options.data_parallel)};
  std::string line = "rank " + std::to_string(rank) + " (replica " + std::to_string(layout.replica_of(rank)) +
                     ", stage " + std::to_string(layout.stage_of(rank)) + "): ";
  try {
    std::rethrow_exception(error);
  } catch (const pipeline::PipelineError& e) {
    const pipeline::Schedule schedule = pipeline::schedule_of(options);
    for (const pipeline::StageCursor& c : e.cursors()) {
      line += std::string(c.failed ? "failed at " : "stopped in ") + action_text(schedule, c.stage, c.step) +
              "; last done: " + action_text(schedule, c.stage, c.step - 1);
    }
    if (e.cursors().empty()) line += e.what();
  } catch (const std::exception& e) {
    line += std::string("stopped outside the pipeline's actions: ") + e.what();
  }
  return line;
}

}  // namespace

void end_processes_after_failure(const TrainProcesses& processes, const nn::TrainOptions& options,
                                 const std::exception_ptr& error) {
  if (!processes.world) return;
  pipeline::dist::MpiWorld& world = pipeline::dist::MpiWorld::get();
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    world.announce_failure(e.what());  // nothing new when the failure came from another rank
  }
  world.end_job_after_failure(rank_status(options, processes.rank(), error), kReportSeconds);
}

}  // namespace brigade::apps
