// MPI for this process: start-up, who is who, and the channel on which a failing rank tells the others.
//
// MpiWorld::get() initialises MPI on first use (MPI_THREAD_MULTIPLE: stage threads, the main thread and the
// transport all call MPI) and finalises it at exit. No header of brigade includes <mpi.h>: this one, the
// process group (mpi_process_group.h) and the transport (mpi_transport.h) hide it, so that a build without
// MPI (BRIGADE_MPI=OFF, or no MPI found) compiles the same code and MpiWorld::get() refuses with a message
// naming the build option.
//
// Failures. A rank that fails calls announce_failure(reason): a control message carrying the reason goes
// to every other rank on a communicator of its own (never mixed with tensors or collectives). Every wait
// in the transport and in the collectives polls failed(), so each rank stops within a poll interval of
// the message's arrival instead of waiting for a peer that will never answer. Then every rank calls
// end_job_after_failure: rank 0 prints one report with every rank's position, and all exit non-zero.
#pragma once

#include <memory>
#include <string>

#include "pipeline/run/process_group.h"

namespace brigade::pipeline::dist {

/// Whether this build has MPI (the BRIGADE_MPI option found it).
bool mpi_built();

/// Whether an MPI launcher started this process: mpirun/mpiexec (OMPI_COMM_WORLD_SIZE, PMI_SIZE,
/// PMIX_RANK) or srun with PMI/PMIx (PMI_SIZE, PMIX_RANK). Reads the environment only; MPI stays
/// uninitialised.
bool launched_by_mpi();

/// The number of processes the launcher started (1 without a launcher), from the environment.
int launcher_world_size();

class MpiWorld {
 public:
  /// The process's MPI, initialised on the first call. Error when the build has no MPI.
  static MpiWorld& get();
  MpiWorld(const MpiWorld&) = delete;
  MpiWorld& operator=(const MpiWorld&) = delete;
  ~MpiWorld();

  int rank() const;
  int size() const;
  /// This process's host name (MPI_Get_processor_name).
  const std::string& host() const;

  /// Every rank of the job as one group; its waits give up after timeout_seconds (0: never).
  std::unique_ptr<ProcessGroup> world_group(double timeout_seconds);

  /// Tells every other rank that this one failed: "rank R: <reason>"; only the first call sends.
  void announce_failure(const std::string& reason);
  /// Whether some rank has failed: this one (announce_failure) or another (its control message, received
  /// here). `reason` gets the failure's message. Cheap enough to call in every poll of a wait.
  bool failed(std::string* reason = nullptr);

  /// After a failure (this rank's or another's): ends the job's report and this process, within about
  /// `seconds`; never returns. Each rank sends `status` (one line: where it stood) to rank 0 and waits for
  /// its word. Rank 0 collects the lines (naming a rank that sent none in time as silent), prints one
  /// report to stderr (the failure's message, then one line per rank) and releases the others. Every rank
  /// exits with status 1, without MPI_Finalize (messages may be pending). A rank that rank 0 does not
  /// release in time prints its own line.
  [[noreturn]] void end_job_after_failure(const std::string& status, double seconds);

  /// Seconds since an arbitrary origin of this process (MPI_Wtime).
  double now() const;

  struct Impl;  // mpi/mpi_world.cpp

 private:
  MpiWorld();
  std::unique_ptr<Impl> impl_;
};

}  // namespace brigade::pipeline::dist
