// Atomic file writes and the removal of temporary files left by killed writers; see nn/atomic_file.h.
#include "nn/atomic_file.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "tensor/error.h"

namespace brigade::nn {
namespace {

namespace fs = std::filesystem;

constexpr const char* kTempMarker = ".tmp.";

std::string host_name() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0) return "localhost";
  return name;
}

// An open file descriptor that closes itself.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  /// Closes now and reports failure (close can report a deferred write error).
  bool close() {
    const int fd = fd_;
    fd_ = -1;
    return ::close(fd) == 0;
  }

 private:
  int fd_;
};

bool write_all(int fd, const void* data, size_t size) {
  const char* bytes = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t written = ::write(fd, bytes, size);
    if (written < 0 && errno == EINTR) continue;
    if (written <= 0) return false;
    bytes += written;
    size -= static_cast<size_t>(written);
  }
  return true;
}

bool all_digits(const std::string& text) {
  return !text.empty() && text.size() < 10 &&
         std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// Whether the writer named by a temporary file's suffix ("<host>.<pid>", or "<pid>" from older builds)
// is a process of this host that no longer runs.
bool writer_is_gone(const std::string& suffix, const std::string& this_host) {
  std::string host = this_host, pid = suffix;
  const size_t dot = suffix.rfind('.');
  if (dot != std::string::npos) {
    host = suffix.substr(0, dot);
    pid = suffix.substr(dot + 1);
  }
  if (host != this_host || !all_digits(pid)) return false;
  const pid_t id = static_cast<pid_t>(std::stol(pid));
  if (id <= 0 || id == ::getpid()) return false;
  return ::kill(id, 0) != 0 && errno == ESRCH;  // EPERM: alive, someone else's
}

}  // namespace

std::string temp_path_for(const std::string& path) {
  return path + kTempMarker + host_name() + "." + std::to_string(::getpid());
}

void write_file_atomically(const std::string& path, const std::vector<ByteSpan>& pieces) {
  const std::string temp = temp_path_for(path);
  auto fail = [&](const std::string& step) {
    const std::string why = std::strerror(errno);
    ::unlink(temp.c_str());
    BRIGADE_THROW(IOError, "cannot write '", path, "' (", step, "): ", why);
  };
  {
    Fd file(::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    if (file.get() < 0) fail("creating " + temp);
    for (const ByteSpan& piece : pieces) {
      if (piece.size > 0 && !write_all(file.get(), piece.data, piece.size)) fail("writing " + temp);
    }
    if (::fsync(file.get()) != 0) fail("fsync of " + temp);
    if (!file.close()) fail("closing " + temp);
  }
  if (::rename(temp.c_str(), path.c_str()) != 0) fail("renaming " + temp);
  const fs::path directory = fs::path(path).parent_path();
  Fd dir(::open(directory.empty() ? "." : directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  // The file is complete and in place; a directory that cannot be synced only weakens crash durability.
  if (dir.get() >= 0) ::fsync(dir.get());
}

int remove_stale_temp_files_in(const std::string& directory,
                               const std::function<bool(const std::string& name)>& is_target) {
  const std::string host = host_name();
  std::error_code error;
  fs::directory_iterator it(directory.empty() ? fs::path(".") : fs::path(directory), error), end;
  int removed = 0;
  for (; !error && it != end; it.increment(error)) {
    const std::string name = it->path().filename().string();
    const size_t marker = name.rfind(kTempMarker);
    if (marker == std::string::npos || marker == 0) continue;
    // The host part may itself hold ".tmp." only in theory; the last marker is the one written here.
    if (!is_target(name.substr(0, marker))) continue;
    if (!writer_is_gone(name.substr(marker + std::strlen(kTempMarker)), host)) continue;
    std::error_code ignored;
    if (fs::remove(it->path(), ignored)) ++removed;
  }
  return removed;
}

int remove_stale_temp_files(const std::string& path) {
  const fs::path p(path);
  const std::string target = p.filename().string();
  return remove_stale_temp_files_in(p.parent_path().string(),
                                    [&](const std::string& name) { return name == target; });
}

}  // namespace brigade::nn
