// A link between two processes as latency plus bytes over bandwidth, fitted to ping-pong measurements.
//
// One ping-pong of b bytes between two ranks takes a round trip r(b); the one-way time is r(b) / 2. Over
// sizes from a few bytes to megabytes the one-way times fit t(b) = latency + b / bandwidth by least squares
// (the small messages fix the latency, the large ones the bandwidth). `brigade bench-link` measures and
// fits it on its own; `brigade train` across processes measures each pipeline link at start and adds the
// activation's transfer time to the simulated step (docs/distributed.md).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace brigade::pipeline {

/// One measured size: the median one-way time of `bytes` (seconds).
struct LinkSample {
  int64_t bytes = 0;
  double seconds = 0.0;
};

struct LinkModel {
  double latency_seconds = 0.0;
  double bytes_per_second = 0.0;  ///< 0: unknown (only one size measured)

  /// latency + bytes / bandwidth.
  double seconds(int64_t bytes) const;
  /// "latency 12.3 us, bandwidth 1.52 GB/s".
  std::string describe() const;
};

/// The least-squares fit of t = latency + bytes / bandwidth to `samples` (at least one; with one size, or a
/// slope that is not positive, the bandwidth is 0: unknown, and the latency is the mean time). Latency is
/// clamped at 0. ValueError for no samples.
LinkModel fit_link_model(const std::vector<LinkSample>& samples);

}  // namespace brigade::pipeline
