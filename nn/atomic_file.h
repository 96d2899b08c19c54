// Writing a file so that readers see either the old file or the complete new one, never a half-written one,
// and cleaning up after writers that were killed mid-write.
//
// write_file_atomically(path, ...) writes "<path>.tmp.<host>.<pid>", fsyncs it, renames it over <path> and
// fsyncs the directory. A process killed before the rename (kill -9, a power cut) leaves its temporary file
// behind; remove_stale_temp_files(path) deletes the ones whose writer is gone: written on this host (or by
// a brigade from before the host was part of the name, "<path>.tmp.<pid>") by a process id that no longer
// runs. A temporary file of a live process, or of another host (a shared file system: its process may
// still be writing), is left alone. Checkpoint saves and loads call it (nn/checkpoint.h).
//
// \code
//   brigade::nn::write_file_atomically("run.json", {text.data(), text.size()});
//   int removed = brigade::nn::remove_stale_temp_files("run.json");   // leftovers of killed writers
// \endcode
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace brigade::nn {

/// One piece of the bytes to write.
struct ByteSpan {
  const void* data;
  size_t size;
};

/// Writes the concatenation of `pieces` to `path` atomically (see the header comment). Throws IOError naming
/// `path`, the failed step and the system error; `path` is then left as it was and the temporary file is
/// removed.
void write_file_atomically(const std::string& path, const std::vector<ByteSpan>& pieces);

/// "<path>.tmp.<host>.<pid>": this process's temporary file for `path`.
std::string temp_path_for(const std::string& path);

/// Deletes the temporary files of `path` left by dead writers of this host (see the header comment) and
/// returns how many. Never throws: a file that cannot be removed stays.
int remove_stale_temp_files(const std::string& path);

/// The same for every file of `directory` whose name, without the temporary suffix, satisfies
/// `is_target` (e.g. every shard of a sharded checkpoint).
int remove_stale_temp_files_in(const std::string& directory,
                               const std::function<bool(const std::string& name)>& is_target);

}  // namespace brigade::nn
