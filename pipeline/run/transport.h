// Transport: how the tensors a schedule's Send/Recv actions name get from one stage to another.
//
// A Send posts (tensor, ready event) under its TransferTag and returns at once; the Recv with the same tag
// blocks until that message is there and takes it. The event marks the point of the producer's stream
// after which the tensor is complete: the consumer makes its own stream wait on it before it reads (on
// CUDA the producer's kernels may still be running when send() returns). The sender records the event
// before sending, so a receiver never waits on an unrecorded event.
//
// Failure. abort(reason) wakes every receiver blocked in recv() and makes every later send()/recv() throw
// TransportAborted(reason): a stage that fails aborts the transport so that its peers stop instead of
// waiting forever for a message that will never come. The first reason given is the one kept.
//
// InProcessTransport keeps a mailbox per tag (one mutex, one condition variable): the stages are threads
// of one process. A multi-process transport (NCCL between GPUs, MPI between hosts) implements the same
// four calls; the executor does not know which one it talks to.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <tuple>

#include "pipeline/schedule/schedule.h"
#include "pipeline/schedule/validate.h"
#include "tensor/error.h"
#include "tensor/stream.h"
#include "tensor/tensor.h"

namespace brigade::pipeline {

/// Thrown by send()/recv() once the transport has been aborted; what() is the abort reason.
class TransportAborted : public Error {
  using Error::Error;
};
/// recv() waited longer than the transport's timeout (the transport is aborted with the same message).
class TransportTimeout : public Error {
  using Error::Error;
};

/// One message: the tensor and the event after which the producer's stream has finished writing it.
struct Message {
  Tensor tensor;
  Event ready;
};

/// Bytes and messages sent since the last reset(), by direction.
struct Traffic {
  int64_t activation_bytes = 0;  ///< forward direction (SendActivation)
  int64_t gradient_bytes = 0;    ///< backward direction (SendGrad)
  int64_t activation_messages = 0;
  int64_t gradient_messages = 0;
  int64_t total_bytes() const { return activation_bytes + gradient_bytes; }
  /// Counts one message of `bytes` in the direction `tag` names.
  void count(const TransferTag& tag, int64_t bytes);
};

/// "activation mb3 s0.c0->s1.c0" / "gradient mb3 s2.c0->s1.c0".
std::string to_string(const TransferTag& tag);

/// Microbatch `microbatch`'s hand-off between stage 0 and stage 1 (chunk 0 each): its activation going
/// forward, or its gradient coming back. The link measurement's round trips and the tests use it.
TransferTag first_boundary_tag(int microbatch, bool gradient);

/// An event recorded now on the CPU stream: what a CPU tensor that is complete when sent carries.
Event recorded_cpu_event();

class Transport {
 public:
  virtual ~Transport() = default;

  /// Posts `tensor` under `tag`. `ready` must already be recorded. Never blocks. Throws TransportAborted
  /// after abort(), ValueError when a message with the same tag is already waiting (a schedule bug).
  virtual void send(const TransferTag& tag, const Tensor& tensor, const Event& ready) = 0;
  /// Blocks until the message `tag` has been sent, removes it and returns it. Throws TransportAborted
  /// once the transport is aborted (also while waiting), TransportTimeout after the timeout.
  virtual Message recv(const TransferTag& tag) = 0;
  /// Stops the transport: wakes every blocked recv(). The first reason is kept; later calls do nothing.
  virtual void abort(const std::string& reason) = 0;
  virtual bool aborted() const = 0;
  /// The first abort reason ("" when not aborted).
  virtual std::string abort_reason() const = 0;
  /// Traffic since the last reset().
  virtual Traffic traffic() const = 0;
  /// Drops undelivered messages, clears the abort and the counters: a new step begins. Call only while no
  /// stage is using the transport.
  virtual void reset() = 0;
  /// How it delivers messages: the Pipeline validates its schedule for this model (schedule/validate.h).
  /// Buffered (matched by tag, send never blocks) unless a transport says otherwise.
  virtual TransferModel model() const { return TransferModel::Buffered; }
};

/// Mailboxes in memory, for stages that are threads of one process.
class InProcessTransport : public Transport {
 public:
  /// @param recv_timeout_seconds > 0: a recv() waiting longer throws TransportTimeout and aborts the
  ///        transport (a safety net: a validated schedule cannot deadlock). 0 waits forever.
  explicit InProcessTransport(double recv_timeout_seconds = 0.0);

  void send(const TransferTag& tag, const Tensor& tensor, const Event& ready) override;
  Message recv(const TransferTag& tag) override;
  void abort(const std::string& reason) override;
  bool aborted() const override;
  std::string abort_reason() const override;
  Traffic traffic() const override;
  void reset() override;

  /// Messages sent and not yet received (0 at the end of a step that ran to completion).
  size_t pending() const;

 private:
  using Key = std::tuple<bool, int, int, int, int, int>;
  static Key key_of(const TransferTag& tag);

  double recv_timeout_seconds_;
  mutable std::mutex mutex_;
  std::condition_variable arrived_;
  std::map<Key, Message> mailboxes_;
  bool aborted_ = false;
  std::string reason_;
  Traffic traffic_;
};

}  // namespace brigade::pipeline
