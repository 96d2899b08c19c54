// The rank layout and its table.
#include "pipeline/run/rank_layout.h"

#include <cstdio>

#include "tensor/error.h"

namespace brigade::pipeline {

std::vector<int> RankLayout::pipeline_ranks(int replica) const {
  std::vector<int> ranks;
  for (int s = 0; s < stages; ++s) ranks.push_back(rank_of(replica, s));
  return ranks;
}

std::vector<int> RankLayout::replica_ranks(int stage) const {
  std::vector<int> ranks;
  for (int d = 0; d < replicas; ++d) ranks.push_back(rank_of(d, stage));
  return ranks;
}

void RankLayout::check(int world_size) const {
  BRIGADE_CHECK_VALUE(stages >= 1 && replicas >= 1,
                      "the layout needs --stages >= 1 and --data-parallel >= 1, found ", stages, " and ",
                      replicas);
  BRIGADE_CHECK_VALUE(ranks() == world_size, "the launcher started ", world_size, " process",
                      world_size == 1 ? "" : "es", ", but --stages ", stages, " x --data-parallel ", replicas,
                      " needs ", ranks(), " (one per stage and replica): run mpirun -np ", ranks());
}

std::string layout_table(const std::vector<RankPlace>& places) {
  std::string out = "rank  replica  stage  device   host\n";
  for (const RankPlace& p : places) {
    char line[256];
    std::snprintf(line, sizeof line, "%4d  %7d  %5d  %-7s  %s\n", p.rank, p.replica, p.stage,
                  p.device.c_str(), p.host.c_str());
    out += line;
  }
  return out;
}

}  // namespace brigade::pipeline
