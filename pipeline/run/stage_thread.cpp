// The stage's worker thread (see stage_thread.h).
#include "pipeline/run/stage_thread.h"

#include <utility>

namespace brigade::pipeline {

bool pin_thread_to_core(int core, cpu_set_t* previous) {
  if (core < 0 || core >= CPU_SETSIZE) return false;
  if (previous && sched_getaffinity(0, sizeof(cpu_set_t), previous) != 0) return false;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(core, &set);
  return sched_setaffinity(0, sizeof(set), &set) == 0;
}

}  // namespace brigade::pipeline

namespace brigade::pipeline::detail {

StageThread::StageThread() : thread_([this] { loop(); }) {}

StageThread::~StageThread() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    quit_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void StageThread::start(std::function<void()> job) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    job_ = std::move(job);
    done_ = false;
  }
  wake_.notify_all();
}

void StageThread::wait() {
  std::unique_lock<std::mutex> lock(mutex_);
  finished_.wait(lock, [this] { return done_; });
}

void StageThread::loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    wake_.wait(lock, [this] { return quit_ || job_; });
    if (!job_) return;  // quit
    std::function<void()> job = std::move(job_);
    job_ = nullptr;
    lock.unlock();
    job();
    lock.lock();
    done_ = true;
    finished_.notify_all();
  }
}

}  // namespace brigade::pipeline::detail
