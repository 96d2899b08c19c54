// Tile sizes read from the kernels' own source, so that a figure cannot drift from the code it draws: a
// change to a kernel's constant changes the figure the next time scripts/make_docs_images.sh runs, and a
// renamed constant stops the script with a message naming it.
#pragma once

#include <string>
#include <vector>

namespace brigade::figures {

/// The integer `name` is set to in `file` (relative to the source tree), as in `constexpr int kV4BM = 128,
/// kV4BN = 128;`. ValueError naming the file and the constant when it is not there exactly once.
int source_constant(const std::string& file, const std::string& name);

/// The integer template arguments after the first `type,` of the call `prefix<type, a, b, ...>(` in `file`,
/// e.g. {128, 128, 8, 8, 8} for `launch_tiled<T, 128, 128, 8, 8, 8>(args, stream)` and occurrence 0.
std::vector<int> source_template_arguments(const std::string& file, const std::string& prefix,
                                           int occurrence);

/// The source tree the constants are read from (set by main from --source, default the build's tree).
void set_source_root(const std::string& root);

}  // namespace brigade::figures
