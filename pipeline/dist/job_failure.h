// The failure state of a transport between the processes of one job (MpiTransport, NcclTransport): this
// rank's own failure, whose first reason is kept, or a failure another rank announced through MpiWorld,
// picked up the first time anyone asks. Both transports hold it under their own mutex, and both announce
// their own failure to the other ranks themselves (after their transport-specific teardown).
#pragma once

#include <string>

#include "pipeline/dist/mpi_world.h"

namespace brigade::pipeline::dist {

class JobFailure {
 public:
  /// Records this rank's failure. False when a failure was recorded already (the first reason is kept).
  bool record(const std::string& reason) {
    if (failed_) return false;
    failed_ = true;
    reason_ = reason;
    return true;
  }
  /// True once this rank, or another rank of the job, has failed.
  bool failed() const {
    std::string theirs;
    if (!failed_ && MpiWorld::get().failed(&theirs)) {
      failed_ = true;
      reason_ = theirs;
    }
    return failed_;
  }
  /// The first failure's reason ("" while none).
  const std::string& reason() const { return reason_; }

 private:
  mutable bool failed_ = false;
  mutable std::string reason_;
};

}  // namespace brigade::pipeline::dist
