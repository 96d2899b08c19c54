// The in-process transport: one map of mailboxes under one mutex. Messages are few and large (one
// activation or gradient per microbatch and stage boundary), so one lock is never contended enough to matter.
#include "pipeline/run/transport.h"

#include <sstream>

namespace brigade::pipeline {

std::string to_string(const TransferTag& tag) {
  std::ostringstream out;
  out << (tag.gradient ? "gradient" : "activation") << " mb" << tag.microbatch << " s" << tag.from_stage
      << ".c" << tag.from_chunk << "->s" << tag.to_stage << ".c" << tag.to_chunk;
  return out.str();
}

TransferTag first_boundary_tag(int microbatch, bool gradient) {
  TransferTag tag;
  tag.gradient = gradient;
  tag.microbatch = microbatch;
  tag.from_stage = gradient ? 1 : 0;
  tag.to_stage = gradient ? 0 : 1;
  tag.from_chunk = tag.to_chunk = 0;
  return tag;
}

Event recorded_cpu_event() {
  Event event;
  event.record(Stream(Device::cpu()));
  return event;
}

void Traffic::count(const TransferTag& tag, int64_t bytes) {
  if (tag.gradient) {
    gradient_bytes += bytes;
    ++gradient_messages;
  } else {
    activation_bytes += bytes;
    ++activation_messages;
  }
}

InProcessTransport::InProcessTransport(double recv_timeout_seconds)
    : recv_timeout_seconds_(recv_timeout_seconds) {
  BRIGADE_CHECK_VALUE(recv_timeout_seconds >= 0.0,
                      "InProcessTransport: recv_timeout_seconds must be >= 0 (0: no timeout), found ",
                      recv_timeout_seconds);
}

InProcessTransport::Key InProcessTransport::key_of(const TransferTag& tag) {
  return {tag.gradient, tag.microbatch, tag.from_stage, tag.from_chunk, tag.to_stage, tag.to_chunk};
}

void InProcessTransport::send(const TransferTag& tag, const Tensor& tensor, const Event& ready) {
  BRIGADE_CHECK_VALUE(tensor.defined(), "transport send ", to_string(tag), ": the tensor is undefined");
  BRIGADE_CHECK_VALUE(ready.is_recorded(), "transport send ", to_string(tag),
                      ": the ready event must be recorded before the message is sent");
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (aborted_) throw TransportAborted(reason_);
    auto [it, inserted] = mailboxes_.emplace(key_of(tag), Message{tensor, ready});
    (void)it;
    BRIGADE_CHECK_VALUE(inserted, "transport send ", to_string(tag),
                        ": a message with this tag is already waiting (sent twice in one step)");
    traffic_.count(tag, static_cast<int64_t>(tensor.nbytes()));
  }
  arrived_.notify_all();
}

Message InProcessTransport::recv(const TransferTag& tag) {
  const Key key = key_of(tag);
  std::unique_lock<std::mutex> lock(mutex_);
  auto ready = [&] { return aborted_ || mailboxes_.count(key) != 0; };
  if (recv_timeout_seconds_ > 0.0) {
    const auto timeout = std::chrono::duration<double>(recv_timeout_seconds_);
    if (!arrived_.wait_for(lock, timeout, ready)) {
      std::ostringstream message;
      message << "transport recv " << to_string(tag) << ": no message after " << recv_timeout_seconds_
              << " s (timeout)";
      if (!aborted_) {
        aborted_ = true;
        reason_ = message.str();
      }
      lock.unlock();
      arrived_.notify_all();
      throw TransportTimeout(message.str());
    }
  } else {
    arrived_.wait(lock, ready);
  }
  if (aborted_) throw TransportAborted(reason_);
  auto it = mailboxes_.find(key);
  Message message = std::move(it->second);
  mailboxes_.erase(it);
  return message;
}

void InProcessTransport::abort(const std::string& reason) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (aborted_) return;
    aborted_ = true;
    reason_ = reason;
  }
  arrived_.notify_all();
}

bool InProcessTransport::aborted() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return aborted_;
}

std::string InProcessTransport::abort_reason() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return reason_;
}

Traffic InProcessTransport::traffic() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return traffic_;
}

void InProcessTransport::reset() {
  std::lock_guard<std::mutex> lock(mutex_);
  mailboxes_.clear();
  aborted_ = false;
  reason_.clear();
  traffic_ = Traffic{};
}

size_t InProcessTransport::pending() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return mailboxes_.size();
}

}  // namespace brigade::pipeline
