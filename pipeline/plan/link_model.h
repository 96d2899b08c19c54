// The link model: how long a message takes between two devices, and an all-reduce over replicas.
//
//   time(bytes) = latency + bytes / bandwidth                       (one message, one link)
//   ring all-reduce of n bytes over D replicas (Patarasuk & Yuan; what NCCL and MPI use for large n):
//     2 (D - 1) steps, each sending n / D bytes to the next replica and receiving as much from the
//     previous one:  time = 2 (D - 1) (latency + n / (D bandwidth))
//   (each replica sends 2 (D - 1) n / D bytes: the bandwidth term tends to 2 n / bandwidth as D grows).
//
// A link is given on the command line as "latency=20us,bandwidth=10GB/s" (either key may be left out:
// latency 0, bandwidth infinite), or measured: one ping-pong of b bytes between two ranks takes a round
// trip r(b), the one-way time r(b) / 2; over sizes from a few bytes to megabytes the one-way times fit
// latency + b / bandwidth by least squares (fit_link_model: the small messages fix the latency, the large
// ones the bandwidth). `brigade bench-link` measures and fits it on its own; `brigade train` across
// processes measures each pipeline link at start and times each message on it (docs/distributed.md). Units:
// latency ns, us, ms, s; bandwidth B/s, KB/s, MB/s, GB/s (powers of 1000), KiB/s, MiB/s, GiB/s (of 1024),
// or "inf". Stages that share one device hand tensors over without a copy: the default link, latency 0 and
// infinite bandwidth, says so.
//
// \code
//   auto link = brigade::pipeline::LinkModel::parse("latency=20us,bandwidth=10GB/s");
//   double ms = link.transfer_ms(4 << 20);          // 0.02 + 4 MiB / 10 GB/s = 0.439 ms
//   double ar = link.allreduce_ms(100 << 20, 4);    // gradients of 100 MiB over 4 replicas
// \endcode
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace brigade::pipeline {

struct LinkModel {
  double latency_ms = 0.0;
  double bytes_per_ms = 0.0;  ///< bandwidth; 0 means infinite

  /// Parses the text above; ValueError naming the item and the expected form otherwise.
  static LinkModel parse(const std::string& text);
  /// "latency=20us,bandwidth=10GB/s": what parse() reads back (shortest units that are exact).
  std::string str() const;
  /// "latency 12.3 us, bandwidth 1.52 GB/s" ("bandwidth unknown" when 0), for reports of measured links.
  std::string describe() const;
  /// latency + bytes / bandwidth (0 bytes: the latency).
  double transfer_ms(int64_t bytes) const;
  /// The ring all-reduce above; 0 for one replica.
  double allreduce_ms(int64_t bytes, int replicas) const;
  /// Bytes one replica sends in that all-reduce: 2 (D - 1) n / D.
  static int64_t allreduce_bytes_sent(int64_t bytes, int replicas);
  bool operator==(const LinkModel&) const = default;
};

/// One measured size: the median one-way time of `bytes` (seconds).
struct LinkSample {
  int64_t bytes = 0;
  double seconds = 0.0;
};

/// The least-squares fit of t = latency + bytes / bandwidth to `samples` (at least one; with one size, or a
/// slope that is not positive, the bandwidth is 0: unknown, no bandwidth term, and the latency is the mean
/// time). Latency is clamped at 0. ValueError for no samples.
LinkModel fit_link_model(const std::vector<LinkSample>& samples);

}  // namespace brigade::pipeline
