// The "key=value,key=value" lists that describe costs and sizes on a command line (Costs::parse,
// MemoryModel::parse: `brigade schedule --costs f=1,b=2 --memory full=1,boundary=0.1`), and the number
// parse they and the plain lists (parse_stage_factors: `--stage-costs 1,1,2`) share.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace brigade::pipeline {

/// `text` as a number, all of it ("1.5", "2e-3"); ValueError "<what>: '<text>' in '<context>' is not a
/// number" otherwise (a trailing character, an empty string, no digits).
double parse_number(const std::string& text, const std::string& what, const std::string& context);

/// Splits "a=1,b=2" into its (key, number) pairs, in order (empty items are skipped). ValueError naming
/// `what` and listing `keys` for an item without '=', and naming the item for a value that is not a
/// number. The keys themselves are the caller's to check.
std::vector<std::pair<std::string, double>> parse_key_values(const std::string& text, const std::string& what,
                                                             const std::string& keys);

}  // namespace brigade::pipeline
