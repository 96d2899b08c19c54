// The in-process link's latency (see hand_off.h).
#include "pipeline/run/hand_off.h"

#include <sched.h>

#include <chrono>
#include <thread>
#include <vector>

#include "nn/statistics.h"
#include "pipeline/run/stage_thread.h"
#include "pipeline/run/transport.h"
#include "tensor/error.h"
#include "tensor/stream.h"
#include "tensor/tensor.h"

namespace brigade::pipeline {

double measure_hand_off_ms(int rounds) {
  BRIGADE_CHECK_VALUE(rounds >= 1, "measure_hand_off_ms: rounds must be >= 1, got ", rounds);
  InProcessTransport transport;
  const Tensor t = full({16}, 1.0);
  const bool two_cores = std::thread::hardware_concurrency() >= 2;
  cpu_set_t previous;
  const bool pinned = two_cores && pin_thread_to_core(0, &previous);
  std::thread peer([&] {
    if (pinned) pin_thread_to_core(1);
    for (int i = 0; i < rounds; ++i) {
      const Message m = transport.recv(first_boundary_tag(i, false));
      transport.send(first_boundary_tag(i, true), m.tensor, recorded_cpu_event());
    }
  });
  std::vector<double> round_trip;
  for (int i = 0; i < rounds; ++i) {
    std::this_thread::sleep_for(std::chrono::microseconds(200));
    const auto start = std::chrono::steady_clock::now();
    transport.send(first_boundary_tag(i, false), t, recorded_cpu_event());
    transport.recv(first_boundary_tag(i, true));
    round_trip.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  peer.join();
  if (pinned) sched_setaffinity(0, sizeof(previous), &previous);
  return nn::median(round_trip) / 2;
}

LinkModel in_process_link(int rounds) {
  LinkModel link;
  link.latency_ms = measure_hand_off_ms(rounds);
  return link;
}

}  // namespace brigade::pipeline
