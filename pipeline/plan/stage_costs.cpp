// Per-stage cost factors (see stage_costs.h).
#include "pipeline/plan/stage_costs.h"

#include <sstream>

#include "pipeline/plan/key_values.h"
#include "tensor/error.h"

namespace brigade::pipeline {

namespace {

// "s3" -> 3, "last" -> stages - 1; ValueError naming the key otherwise.
int stage_of_key(const std::string& key, int stages) {
  if (key == "last") return stages - 1;
  size_t used = 0;
  int stage = -1;
  if (key.size() > 1 && key[0] == 's') {
    try {
      stage = std::stoi(key.substr(1), &used);
    } catch (const std::exception&) {
      used = 0;
    }
  }
  BRIGADE_CHECK_VALUE(used > 0 && used == key.size() - 1, "stage costs: '", key,
                      "' names no stage (expected s0 .. s", stages - 1, " or last)");
  BRIGADE_CHECK_VALUE(stage >= 0 && stage < stages, "stage costs: ", key, " is not one of the ", stages,
                      " stages (s0 .. s", stages - 1, ")");
  return stage;
}

}  // namespace

std::vector<double> parse_stage_factors(const std::string& text, int stages) {
  std::vector<double> factors(static_cast<size_t>(stages), 1.0);
  if (text.find('=') != std::string::npos) {
    for (const auto& [key, value] : parse_key_values(text, "stage costs", "s0 .. s<S-1>, last")) {
      factors[static_cast<size_t>(stage_of_key(key, stages))] = value;
    }
  } else {
    std::vector<double> list;
    std::stringstream in(text);
    std::string item;
    while (std::getline(in, item, ',')) list.push_back(parse_number(item, "stage costs", text));
    BRIGADE_CHECK_VALUE(static_cast<int>(list.size()) == stages, "stage costs: '", text, "' gives ",
                        list.size(), " factors, the schedule has ", stages, " stages");
    factors = list;
  }
  for (size_t s = 0; s < factors.size(); ++s) {
    BRIGADE_CHECK_VALUE(factors[s] >= 0, "stage costs: stage ", s, " has factor ", factors[s],
                        " (need >= 0)");
  }
  return factors;
}

Costs scale_stage_costs(const Costs& costs, const ChunkLayout& layout, const std::vector<double>& factors) {
  BRIGADE_CHECK_VALUE(static_cast<int>(factors.size()) == layout.stages, "stage costs: ", factors.size(),
                      " factors for ", layout.stages, " stages");
  Costs scaled = costs;
  scaled.per_chunk.assign(static_cast<size_t>(layout.model_chunks()), ChunkCosts{});
  for (int s = 0; s < layout.stages; ++s) {
    const double factor = factors[static_cast<size_t>(s)];
    BRIGADE_CHECK_VALUE(factor >= 0, "stage costs: stage ", s, " has factor ", factor, " (need >= 0)");
    for (int c = 0; c < layout.virtual_chunks; ++c) {
      ChunkCosts chunk = costs.chunk(layout, s, c);
      chunk.forward *= factor;
      chunk.backward *= factor;
      chunk.weight *= factor;
      if (chunk.input >= 0) chunk.input *= factor;
      if (chunk.weight_deferred >= 0) chunk.weight_deferred *= factor;
      chunk.recompute *= factor;
      scaled.per_chunk[static_cast<size_t>(layout.model_chunk(s, c))] = chunk;
    }
  }
  return scaled;
}

}  // namespace brigade::pipeline
