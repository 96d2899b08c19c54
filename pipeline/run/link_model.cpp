// The link model's fit; see link_model.h.
#include "pipeline/run/link_model.h"

#include <algorithm>
#include <cstdio>

#include "tensor/error.h"

namespace brigade::pipeline {

double LinkModel::seconds(int64_t bytes) const {
  return latency_seconds + (bytes_per_second > 0.0 ? static_cast<double>(bytes) / bytes_per_second : 0.0);
}

std::string LinkModel::describe() const {
  char text[128];
  if (bytes_per_second > 0.0) {
    std::snprintf(text, sizeof text, "latency %.1f us, bandwidth %.2f GB/s", 1e6 * latency_seconds,
                  bytes_per_second / 1e9);
  } else {
    std::snprintf(text, sizeof text, "latency %.1f us, bandwidth unknown", 1e6 * latency_seconds);
  }
  return text;
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
    model.latency_seconds = std::max(0.0, mean_t);
    return model;
  }
  const double slope = cov / var;  // seconds per byte
  model.bytes_per_second = 1.0 / slope;
  model.latency_seconds = std::max(0.0, mean_t - slope * mean_b);
  return model;
}

}  // namespace brigade::pipeline
