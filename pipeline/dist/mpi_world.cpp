// What is known without MPI: whether the build has it and whether a launcher started this process. In a
// build without MPI, MpiWorld refuses to start (the MPI implementation is mpi/mpi_world.cpp).
#include "pipeline/dist/mpi_world.h"

#include <cstdio>
#include <cstdlib>
#include <string>

#include "tensor/error.h"

namespace brigade::pipeline::dist {
namespace {

const char* const kSizeVariables[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "MPI_LOCALNRANKS"};

}  // namespace

bool mpi_built() {
#if BRIGADE_WITH_MPI
  return true;
#else
  return false;
#endif
}

bool launched_by_mpi() {
  for (const char* name : kSizeVariables) {
    if (std::getenv(name) != nullptr) return true;
  }
  return std::getenv("PMIX_RANK") != nullptr || std::getenv("PMI_RANK") != nullptr;
}

int launcher_world_size() {
  for (const char* name : kSizeVariables) {
    if (const char* value = std::getenv(name)) {
      const int size = std::atoi(value);
      if (size > 0) return size;
    }
  }
  return 1;
}

#if !BRIGADE_WITH_MPI
struct MpiWorld::Impl {};

MpiWorld& MpiWorld::get() {
  BRIGADE_THROW(Error,
                "this brigade was built without MPI, so it cannot run across processes: install MPI "
                "(scripts/install_deps.sh installs OpenMPI) and configure with -DBRIGADE_MPI=ON");
}
MpiWorld::MpiWorld() = default;
MpiWorld::~MpiWorld() = default;
int MpiWorld::rank() const {
  return 0;
}
int MpiWorld::size() const {
  return 1;
}
const std::string& MpiWorld::host() const {
  static const std::string none;
  return none;
}
std::unique_ptr<ProcessGroup> MpiWorld::world_group(double) {
  return nullptr;
}
void MpiWorld::announce_failure(const std::string&) {}
bool MpiWorld::failed(std::string*) {
  return false;
}
// Unreachable in practice (get() refuses first); ends the process as the MPI version does.
void MpiWorld::end_job_after_failure(const std::string& status, double) {
  std::fprintf(stderr, "%s\n", status.c_str());
  std::_Exit(1);
}
double MpiWorld::now() const {
  return 0.0;
}
#endif

}  // namespace brigade::pipeline::dist
