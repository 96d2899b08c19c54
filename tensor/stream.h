// Streams and events, backend-neutral.
//
// A Stream is an ordered queue of work on a device. On CUDA it wraps a cudaStream_t; on the CPU a stream
// runs work synchronously on the calling thread, so work "on" it is done when the call returns.
// An Event marks a point in a stream. Unlike a raw cudaEvent_t, an Event knows whether it has been recorded:
// waiting on an event that nobody has recorded yet blocks the waiting host thread until another thread
// records it. (CUDA treats a never-recorded event as complete, so a consumer stage that waits too early
// would read garbage: the classic pipeline bug this rule prevents.)
//
// Every kernel launches on the current stream of its device, which StreamGuard sets for a scope, per thread.
#pragma once

#include <memory>

#include "tensor/device.h"

namespace brigade {

class Event;

class Stream {
 public:
  /// The default stream of `device` (CUDA: the legacy default stream 0).
  explicit Stream(Device device = Device::cpu());
  /// A new stream on `device` (CUDA: a non-blocking cudaStream_t, destroyed with its last copy).
  static Stream create(const Device& device);
  /// This thread's current stream for `device` (the default stream unless a StreamGuard is active).
  static Stream current(const Device& device);

  const Device& device() const { return device_; }
  /// The cudaStream_t as void* (nullptr for the default stream and for CPU streams).
  void* native_handle() const;
  /// Blocks the host until all work queued on this stream has finished.
  void synchronize() const;
  /// Makes later work on this stream wait for `event` (blocking the host until it is recorded; see above).
  void wait(const Event& event) const;
  /// Makes later work on this stream wait for all work queued so far on `other`.
  void wait(const Stream& other) const;
  /// A small number naming the stream in traces: 0 for a device's default stream, then 1, 2, ... in
  /// creation order (per process).
  int id() const;

  friend bool operator==(const Stream& a, const Stream& b) {
    return a.device_ == b.device_ && a.handle_ == b.handle_;
  }
  friend bool operator!=(const Stream& a, const Stream& b) { return !(a == b); }

 private:
  struct Handle;
  Device device_;
  std::shared_ptr<Handle> handle_;  // null for a device's default stream
};

/// Sets the current stream of the stream's device for this thread until destroyed.
class StreamGuard {
 public:
  explicit StreamGuard(const Stream& stream);
  ~StreamGuard();
  StreamGuard(const StreamGuard&) = delete;
  StreamGuard& operator=(const StreamGuard&) = delete;

 private:
  Stream previous_;
};

/// A completion marker. Copies share one underlying event (so one thread can record what another waits on).
/// An event can be re-recorded; waiters wait for the most recent record.
class Event {
 public:
  /// `enable_timing` lets elapsed_ms() measure between two CUDA events.
  explicit Event(bool enable_timing = false);

  /// Marks the current end of `stream`'s queued work.
  void record(const Stream& stream);
  /// Records on the current stream of `device`.
  void record(const Device& device) { record(Stream::current(device)); }
  /// True once record() has been called at least once.
  bool is_recorded() const;
  /// True when recorded and the recorded work has finished.
  bool query() const;
  /// Blocks the host until the event is recorded and its work has finished.
  void synchronize() const;
  /// Milliseconds between this event and `end` (both recorded and finished; CUDA events need enable_timing,
  /// CPU events use the steady clock at record time).
  double elapsed_ms(const Event& end) const;

  /// Blocks the host until record() has been called (used by Stream::wait before enqueueing a device wait).
  void wait_recorded() const;
  /// Device of the last record (CPU before any record).
  Device device() const;
  /// The cudaEvent_t of the last record as void* (nullptr for CPU events).
  void* native_handle() const;

 private:
  struct State;
  std::shared_ptr<State> state_;
};

}  // namespace brigade
