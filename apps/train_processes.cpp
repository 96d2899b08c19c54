// `brigade train` across processes; see train_processes.h.
#include "apps/train_processes.h"

#include <sstream>

#include "pipeline/dist/mpi_world.h"
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
  if (!options.save.empty() || !options.resume.empty())
    return "--save and --resume are not supported across processes yet (run them in one process)";
  if (!options.trace.empty() || !options.timeline.empty())
    return "--trace and --timeline are not supported across processes yet (run them in one process)";
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

void announce_failure(const TrainProcesses& processes, const std::string& message) {
  if (processes.world) pipeline::dist::MpiWorld::get().announce_failure(message);
}

}  // namespace brigade::apps
