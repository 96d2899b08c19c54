// `brigade bench-link`: the links between the processes of an MPI job, measured by ping-pong and fitted as
// latency + bytes / bandwidth (pipeline/plan/link_model.h), the model the pipeline's simulated step uses
// across processes (docs/distributed.md). Run it under the launcher the training runs under:
//
//   mpirun -np 2 brigade bench-link                     # rank 0 with rank 1, 8 B .. 16 MiB
//   mpirun -np 4 brigade bench-link --json links.json   # rank 0 with each other rank in turn
#include <cstdio>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "apps/commands.h"
#include "apps/train_processes.h"
#include "pipeline/dist/mpi_world.h"
#include "pipeline/plan/link_model.h"
#include "pipeline/plan/memory_model.h"

namespace brigade::apps {
namespace {

struct BenchLinkOptions {
  std::string min_bytes = "8";
  std::string max_bytes = "16MiB";
  int repeats = 20;
  std::string json;
};

int run_bench_link(const CLI::App& cmd, const BenchLinkOptions& o) {
  int64_t min_bytes = 0, max_bytes = 0;
  try {
    min_bytes = pipeline::parse_bytes(o.min_bytes);
    max_bytes = pipeline::parse_bytes(o.max_bytes);
  } catch (const ValueError& e) {
    return usage_error(cmd, e.what());
  }
  if (min_bytes < 1 || max_bytes < min_bytes || max_bytes > (int64_t{1} << 30) || o.repeats < 1)
    return usage_error(cmd, "need 1 <= --min-bytes <= --max-bytes <= 1GiB and --repeats >= 1");
  const TrainProcesses processes = join_processes();
  if (!processes.world)
    return usage_error(
        cmd, "run it under an MPI launcher with at least 2 processes: mpirun -np 2 brigade bench-link");
  pipeline::ProcessGroup& world = *processes.world;
  world.set_timeout(60.0);
  const std::vector<std::string> hosts = world.all_gather(pipeline::dist::MpiWorld::get().host());
  std::vector<int64_t> sizes;
  for (int64_t b = min_bytes; b <= max_bytes; b *= 4) sizes.push_back(b);

  nlohmann::json links = nlohmann::json::array();
  for (int peer = 1; peer < world.size(); ++peer) {
    if (world.rank() != 0 && world.rank() != peer) continue;
    const int other = world.rank() == 0 ? peer : 0;
    std::vector<pipeline::LinkSample> samples;
    for (int64_t bytes : sizes) samples.push_back({bytes, world.ping_pong(other, bytes, o.repeats) / 2.0});
    if (world.rank() != 0) continue;
    const pipeline::LinkModel model = pipeline::fit_link_model(samples);
    std::printf("link rank 0 (%s) <-> rank %d (%s), median of %d round trips per size\n", hosts[0].c_str(),
                peer, hosts[static_cast<size_t>(peer)].c_str(), o.repeats);
    std::printf("%12s %12s %12s %12s\n", "bytes", "one way", "model", "achieved");
    nlohmann::json rows = nlohmann::json::array();
    for (const pipeline::LinkSample& s : samples) {
      std::printf("%12lld %9.1f us %9.1f us %7.3f GB/s\n", static_cast<long long>(s.bytes), 1e6 * s.seconds,
                  1e3 * model.transfer_ms(s.bytes), static_cast<double>(s.bytes) / s.seconds / 1e9);
      rows.push_back({{"bytes", s.bytes}, {"one_way_seconds", s.seconds}});
    }
    std::printf("fit: %s\n", model.describe().c_str());
    links.push_back({{"from", 0},
                     {"to", peer},
                     {"hosts", {hosts[0], hosts[static_cast<size_t>(peer)]}},
                     {"samples", rows},
                     {"latency_seconds", model.latency_ms / 1e3},
                     {"bytes_per_second", model.bytes_per_ms * 1e3}});
  }
  if (world.rank() == 0 && !o.json.empty()) {
    std::ofstream out(o.json);
    out << nlohmann::json{{"repeats", o.repeats}, {"links", links}}.dump(2) << "\n";
    if (!out) BRIGADE_THROW(IOError, "cannot write '", o.json, "'");
    std::printf("written to %s\n", o.json.c_str());
  }
  return 0;
}

}  // namespace

Command add_bench_link_command(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand(
      "bench-link", "Measure the links between MPI processes by ping-pong (run under mpirun -np 2 or more)");
  auto o = std::make_shared<BenchLinkOptions>();
  cmd->add_option("--min-bytes", o->min_bytes, "smallest message")->capture_default_str();
  cmd->add_option("--max-bytes", o->max_bytes, "largest message (sizes grow 4x)")->capture_default_str();
  cmd->add_option("--repeats", o->repeats, "timed round trips per size (median)")->capture_default_str();
  cmd->add_option("--json", o->json, "write the samples and the fit to this file");
  return {cmd, [cmd, o] { return run_bench_link(*cmd, *o); }};
}

}  // namespace brigade::apps
