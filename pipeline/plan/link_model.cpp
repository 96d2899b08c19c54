// The link model (see link_model.h).
#include "pipeline/plan/link_model.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "tensor/error.h"

namespace brigade::pipeline {
namespace {

// "20us" -> (20, "us"). ValueError when there is no number.
std::pair<double, std::string> number_and_unit(const std::string& item, const std::string& text) {
  size_t used = 0;
  double value = 0.0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  BRIGADE_CHECK_VALUE(used > 0 && std::isfinite(value) && value >= 0.0, "link: '", item,
                      "' has no non-negative number (examples: latency=20us, bandwidth=10GB/s)");
  return {value, text.substr(used)};
}

double latency_ms_of(const std::string& item, const std::string& text) {
  const auto [value, unit] = number_and_unit(item, text);
  const std::vector<std::pair<std::string, double>> units = {
      {"ns", 1e-6}, {"us", 1e-3}, {"ms", 1.0}, {"s", 1e3}};
  for (const auto& [name, scale] : units)
    if (unit == name) return value * scale;
  BRIGADE_THROW(ValueError, "link: '", item, "': unknown latency unit '", unit,
                "' (expected ns, us, ms or s)");
}

double bytes_per_ms_of(const std::string& item, const std::string& text) {
  if (text == "inf") return 0.0;
  const auto [value, unit] = number_and_unit(item, text);
  const std::vector<std::pair<std::string, double>> units = {
      {"B/s", 1.0},      {"KB/s", 1e3},        {"MB/s", 1e6},          {"GB/s", 1e9},
      {"KiB/s", 1024.0}, {"MiB/s", 1048576.0}, {"GiB/s", 1073741824.0}};
  for (const auto& [name, scale] : units) {
    if (unit != name) continue;
    BRIGADE_CHECK_VALUE(value > 0.0, "link: '", item, "': bandwidth must be > 0 (or inf)");
    return value * scale / 1e3;
  }
  BRIGADE_THROW(ValueError, "link: '", item, "': unknown bandwidth unit '", unit,
                "' (expected B/s, KB/s, MB/s, GB/s, KiB/s, MiB/s, GiB/s, or inf)");
}

}  // namespace

LinkModel LinkModel::parse(const std::string& text) {
  LinkModel link;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = text.find(',', start);
    const std::string item =
        text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    start = comma == std::string::npos ? text.size() + 1 : comma + 1;
    if (item.empty()) continue;
    const size_t eq = item.find('=');
    BRIGADE_CHECK_VALUE(eq != std::string::npos, "link: '", item,
                        "' is not key=value (expected latency=20us,bandwidth=10GB/s)");
    const std::string key = item.substr(0, eq), value = item.substr(eq + 1);
    if (key == "latency")
      link.latency_ms = latency_ms_of(item, value);
    else if (key == "bandwidth")
      link.bytes_per_ms = bytes_per_ms_of(item, value);
    else
      BRIGADE_THROW(ValueError, "link: unknown key '", key, "' (valid: latency, bandwidth)");
  }
  return link;
}

std::string LinkModel::str() const {
  char latency[64], bandwidth[64];
  std::snprintf(latency, sizeof latency, "%.6gus", latency_ms * 1e3);
  if (bytes_per_ms <= 0.0)
    std::snprintf(bandwidth, sizeof bandwidth, "inf");
  else
    std::snprintf(bandwidth, sizeof bandwidth, "%.6gGB/s", bytes_per_ms * 1e3 / 1e9);
  return std::string("latency=") + latency + ",bandwidth=" + bandwidth;
}

std::string LinkModel::describe() const {
  char text[128];
  if (bytes_per_ms > 0.0) {
    std::snprintf(text, sizeof text, "latency %.1f us, bandwidth %.2f GB/s", 1e3 * latency_ms,
                  bytes_per_ms * 1e3 / 1e9);
  } else {
    std::snprintf(text, sizeof text, "latency %.1f us, bandwidth unknown", 1e3 * latency_ms);
  }
  return text;
}

double LinkModel::transfer_ms(int64_t bytes) const {
  const double payload = bytes_per_ms > 0.0 ? static_cast<double>(bytes) / bytes_per_ms : 0.0;
  return latency_ms + payload;
}

double LinkModel::allreduce_ms(int64_t bytes, int replicas) const {
  if (replicas <= 1) return 0.0;
  const double D = replicas;
  const int64_t piece = static_cast<int64_t>(std::ceil(static_cast<double>(bytes) / D));
  return 2.0 * (D - 1.0) * transfer_ms(piece);
}

int64_t LinkModel::allreduce_bytes_sent(int64_t bytes, int replicas) {
  if (replicas <= 1) return 0;
  return 2 * (replicas - 1) * ((bytes + replicas - 1) / replicas);
}

LinkModel fit_link_model(const std::vector<LinkSample>& samples) {
  BRIGADE_CHECK_VALUE(!samples.empty(), "fit_link_model: no samples");
  const double n = static_cast<double>(samples.size());
  double mean_b = 0.0, mean_t = 0.0;
  for (const LinkSample& s : samples) {
    mean_b += static_cast<double>(s.bytes) / n;
    mean_t += s.seconds / n;
  }
  double cov = 0.0, var = 0.0;
  for (const LinkSample& s : samples) {
    const double db = static_cast<double>(s.bytes) - mean_b;
    cov += db * (s.seconds - mean_t);
    var += db * db;
  }
  LinkModel model;
  if (var <= 0.0 || cov <= 0.0) {
    model.latency_ms = 1e3 * std::max(0.0, mean_t);
    return model;
  }
  const double slope = cov / var;  // seconds per byte
  model.bytes_per_ms = 1e-3 / slope;
  model.latency_ms = 1e3 * std::max(0.0, mean_t - slope * mean_b);
  return model;
}

}  // namespace brigade::pipeline
