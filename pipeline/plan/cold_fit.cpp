#include "pipeline/plan/cold_fit.h"

#include <algorithm>
#include <cstdio>

#include "nn/statistics.h"

namespace brigade::pipeline {

Line theil_sen(const std::vector<double>& x, const std::vector<double>& y) {
  std::vector<double> slopes;
  for (size_t i = 0; i < x.size(); ++i)
    for (size_t j = i + 1; j < x.size(); ++j)
      if (x[j] != x[i]) slopes.push_back((y[j] - y[i]) / (x[j] - x[i]));
  Line line;
  line.slope = nn::median(slopes);  // 0 when there is no pair
  std::vector<double> rest;
  for (size_t i = 0; i < x.size(); ++i) rest.push_back(y[i] - line.slope * x[i]);
  line.intercept = nn::median(rest);
  return line;
}

ColdFit fit_cold_backward(std::map<int64_t, ModelProfile>& profiles) {
  ColdFit fit;
  std::vector<double> inverse_ms, excess;
  for (const auto& [samples, profile] : profiles) {
    double backward = 0.0;
    for (const LayerProfile& l : profile.layers) backward += l.backward_ms;
    if (backward <= 0.0) continue;
    fit.samples.push_back(samples);
    fit.backward_ms.push_back(backward);
    fit.measured.push_back(profile.cold_backward_factor);
    inverse_ms.push_back(1.0 / backward);
    excess.push_back(profile.cold_backward_factor - 1.0);
  }
  if (!fit.fitted_any()) {
    fit.fitted = fit.measured;
    return fit;
  }
  const Line line = theil_sen(inverse_ms, excess);
  fit.base = line.intercept;
  fit.per_ms = line.slope;
  for (size_t i = 0; i < fit.samples.size(); ++i) {
    const double factor = std::max(1.0, 1.0 + fit.base + fit.per_ms * inverse_ms[i]);
    fit.fitted.push_back(factor);
    profiles.at(fit.samples[i]).cold_backward_factor = factor;
  }
  return fit;
}

std::string ColdFit::describe() const {
  if (std::none_of(measured.begin(), measured.end(), [](double m) { return m > 1.0; })) return "";
  std::string out = "cold backward (after other microbatches' forwards), measured -> priced:";
  char part[96];
  for (size_t i = 0; i < samples.size(); ++i) {
    std::snprintf(part, sizeof part, " %lld: x%.3f -> x%.3f%s", static_cast<long long>(samples[i]),
                  measured[i], fitted[i], i + 1 < samples.size() ? "," : "");
    out += part;
  }
  if (fitted_any()) {
    std::snprintf(part, sizeof part, " (fitted 1 + %.3f + %.3f ms / B)", base, per_ms);
    out += part;
  }
  return out;
}

}  // namespace brigade::pipeline
