// MpiWorld on MPI: initialisation, the control communicator that carries failures, the wait loop.
#include <mpi.h>
#include <sched.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <vector>

#include "pipeline/dist/mpi/mpi_calls.h"
#include "pipeline/dist/mpi/mpi_process_group.h"
#include "tensor/error.h"

namespace brigade::pipeline::dist {
namespace {

constexpr int kFailureTag = 1;  // a failing rank's message, to every other rank
constexpr int kStatusTag = 2;   // after a failure: each rank's position, to rank 0
constexpr int kReleaseTag = 3;  // rank 0's word that its report is out

}  // namespace

void check_mpi(int rc, const char* call) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(rc, text, &length);
  BRIGADE_THROW(Error, call, " failed: ", std::string(text, static_cast<size_t>(length)));
}

namespace detail {

void pause(int poll) {
  if (poll < 2000) {
    sched_yield();
  } else {
    std::this_thread::sleep_for(std::chrono::microseconds(std::min(200, (poll - 2000) / 8 + 10)));
  }
}

void give_up(const std::string& what, double timeout_seconds) {
  const std::string message = what + ": nothing after " + std::to_string(timeout_seconds) +
                              " s (--timeout; the peer may be slow, stuck or gone)";
  MpiWorld::get().announce_failure(message);
  throw TransportTimeout(message);
}

void stopped_by_failure(const std::string& reason) {
  throw TransportAborted(reason);
}

}  // namespace detail

struct MpiWorld::Impl {
  int rank = 0, size = 1;
  std::string host;
  MPI_Comm control = MPI_COMM_NULL;  // failure messages only
  std::mutex mutex;                  // guards what follows
  bool failed = false;
  std::string reason;
  std::vector<MPI_Request> sent;      // failure messages on their way
  std::vector<std::string> payloads;  // their buffers
};

MpiWorld::MpiWorld() : impl_(std::make_unique<Impl>()) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    int provided = 0;
    check_mpi(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided), "MPI_Init_thread");
    BRIGADE_CHECK(provided >= MPI_THREAD_MULTIPLE, "MPI provides thread level ", provided,
                  " but brigade needs MPI_THREAD_MULTIPLE (", MPI_THREAD_MULTIPLE,
                  "): the stage threads and the main thread call MPI");
  }
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_rank(MPI_COMM_WORLD, &impl_->rank);
  MPI_Comm_size(MPI_COMM_WORLD, &impl_->size);
  char name[MPI_MAX_PROCESSOR_NAME];
  int length = 0;
  MPI_Get_processor_name(name, &length);
  impl_->host.assign(name, static_cast<size_t>(length));
  check_mpi(MPI_Comm_dup(MPI_COMM_WORLD, &impl_->control), "MPI_Comm_dup (control)");
}

MpiWorld::~MpiWorld() {
  // After a failure peers may never receive what is pending: leave without MPI_Finalize (the process
  // exits non-zero and the launcher ends the job).
  if (impl_->failed) return;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) {
    MPI_Comm_free(&impl_->control);
    MPI_Finalize();
  }
}

MpiWorld& MpiWorld::get() {
  static MpiWorld world;  // destroyed at exit, after main returns: MPI_Finalize
  return world;
}

int MpiWorld::rank() const {
  return impl_->rank;
}
int MpiWorld::size() const {
  return impl_->size;
}
const std::string& MpiWorld::host() const {
  return impl_->host;
}
double MpiWorld::now() const {
  return MPI_Wtime();
}

std::unique_ptr<ProcessGroup> MpiWorld::world_group(double timeout_seconds) {
  return std::make_unique<MpiProcessGroup>(MPI_COMM_WORLD, timeout_seconds);
}

void MpiWorld::announce_failure(const std::string& what) {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  if (impl_->failed) return;
  const std::string reason = "rank " + std::to_string(impl_->rank) + ": " + what;
  impl_->failed = true;
  impl_->reason = reason;
  impl_->payloads.reserve(static_cast<size_t>(impl_->size));  // no reallocation: MPI holds the pointers
  for (int r = 0; r < impl_->size; ++r) {
    if (r == impl_->rank) continue;
    const std::string& payload = impl_->payloads.emplace_back(reason);
    MPI_Request request;
    MPI_Isend(payload.data(), static_cast<int>(payload.size()), MPI_CHAR, r, kFailureTag, impl_->control,
              &request);
    impl_->sent.push_back(request);
  }
}

bool MpiWorld::failed(std::string* reason) {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  if (!impl_->failed) {
    int arrived = 0;
    MPI_Status status;
    MPI_Iprobe(MPI_ANY_SOURCE, kFailureTag, impl_->control, &arrived, &status);
    if (arrived) {
      int count = 0;
      MPI_Get_count(&status, MPI_CHAR, &count);
      std::string text(static_cast<size_t>(count), '\0');
      MPI_Recv(text.data(), count, MPI_CHAR, status.MPI_SOURCE, kFailureTag, impl_->control,
               MPI_STATUS_IGNORE);
      impl_->failed = true;
      impl_->reason = text;
    }
  }
  if (impl_->failed && reason != nullptr) *reason = impl_->reason;
  return impl_->failed;
}

namespace {

// Receives a string sent on the control communicator from `source` (any rank with MPI_ANY_SOURCE) under
// `tag`, if one has arrived: its sender, or -1.
int receive_text(MPI_Comm control, int source, int tag, std::string& text) {
  int arrived = 0;
  MPI_Status status;
  MPI_Iprobe(source, tag, control, &arrived, &status);
  if (!arrived) return -1;
  int count = 0;
  MPI_Get_count(&status, MPI_CHAR, &count);
  text.assign(static_cast<size_t>(count), '\0');
  MPI_Recv(text.data(), count, MPI_CHAR, status.MPI_SOURCE, tag, control, MPI_STATUS_IGNORE);
  return status.MPI_SOURCE;
}

}  // namespace

void MpiWorld::end_job_after_failure(const std::string& status, double seconds) {
  Impl& im = *impl_;
  std::string reason;
  failed(&reason);
  const double deadline = now() + seconds;
  auto pause = [] { std::this_thread::sleep_for(std::chrono::milliseconds(1)); };
  if (im.rank != 0) {
    MPI_Request request;
    MPI_Isend(status.data(), static_cast<int>(status.size()), MPI_CHAR, 0, kStatusTag, im.control, &request);
    std::string word;
    while (receive_text(im.control, 0, kReleaseTag, word) < 0) {
      if (now() > deadline) {
        std::fprintf(stderr, "brigade: error: %s\n  %s\n  (rank 0 did not report within %.0f s)\n",
                     reason.c_str(), status.c_str(), seconds);
        std::fflush(stderr);
        std::_Exit(1);
      }
      pause();
    }
    std::_Exit(1);
  }
  std::vector<std::string> lines(static_cast<size_t>(im.size));
  lines[0] = status;
  int reported = 1;
  while (reported < im.size && now() < deadline) {
    std::string line;
    const int from = receive_text(im.control, MPI_ANY_SOURCE, kStatusTag, line);
    if (from < 0) {
      pause();
      continue;
    }
    if (lines[static_cast<size_t>(from)].empty()) ++reported;
    lines[static_cast<size_t>(from)] = line;
  }
  std::string report = "brigade: error: the run failed: " + reason + "\n";
  for (int r = 0; r < im.size; ++r) {
    const std::string& line = lines[static_cast<size_t>(r)];
    report +=
        "  " +
        (line.empty() ? "rank " + std::to_string(r) + ": no report within " +
                            std::to_string(static_cast<int>(seconds)) + " s (killed, or stuck outside MPI)"
                      : line) +
        "\n";
  }
  std::fputs(report.c_str(), stderr);
  std::fflush(stderr);
  std::vector<MPI_Request> releases;
  static const char kWord[] = "done";
  for (int r = 1; r < im.size; ++r) {
    MPI_Request request;
    MPI_Isend(kWord, 4, MPI_CHAR, r, kReleaseTag, im.control, &request);
    releases.push_back(request);
  }
  // Let the words leave before this process does (a rank that is gone never completes its receive).
  const double leave_by = now() + 1.0;
  int done = 0;
  while (!done && now() < leave_by) {
    MPI_Testall(static_cast<int>(releases.size()), releases.data(), &done, MPI_STATUSES_IGNORE);
    if (!done) pause();
  }
  std::_Exit(1);
}

}  // namespace brigade::pipeline::dist
