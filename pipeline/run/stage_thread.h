// One long-lived host thread per pipeline stage (the executor, executor.h, keeps one per stage). A step
// hands each thread a job and waits for it; keeping the thread from step to step keeps its OpenMP pool and
// the kernels' per-thread workspaces warm, which a fresh std::thread per step would throw away.
#pragma once

#include <sched.h>

#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

namespace brigade::pipeline {

/// Pins the calling thread to CPU `core` (sched_setaffinity); false where that is not possible (no such
/// core, or not allowed). With `previous`, stores the affinity it had first, to restore it with
/// sched_setaffinity. A measurement pins its threads so that the scheduler cannot move them between cores
/// (cold caches) or put two on one core while another is free.
bool pin_thread_to_core(int core, cpu_set_t* previous = nullptr);

}  // namespace brigade::pipeline

namespace brigade::pipeline::detail {

class StageThread {
 public:
  StageThread();
  /// Finishes a job already given to start(), then joins the thread.
  ~StageThread();
  StageThread(const StageThread&) = delete;
  StageThread& operator=(const StageThread&) = delete;

  /// Runs `job` (which must not throw) on the thread.
  void start(std::function<void()> job);
  /// Blocks until the job given to start() has returned.
  void wait();

 private:
  void loop();

  std::mutex mutex_;
  std::condition_variable wake_, finished_;
  std::function<void()> job_;
  bool done_ = true, quit_ = false;
  std::thread thread_;  // last: starts after the members above exist
};

}  // namespace brigade::pipeline::detail
