#include "pipeline/plan/factor_fit.h"

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

namespace {

struct FactorField {
  const char* name;
  double ModelProfile::*factor;
  bool over_forward;  // its T: the model's forward (else its backward)
};

constexpr FactorField kFields[] = {
    {"F", &ModelProfile::action_forward_factor, true},
    {"B", &ModelProfile::action_backward_factor, false},
    {"deferred Bw", &ModelProfile::deferred_weight_factor, false},
    {"deferred first Bw", &ModelProfile::deferred_first_weight_factor, false},
    {"cold B", &ModelProfile::cold_backward_factor, false},
};

FactorFit fit_one(const FactorField& field, std::map<int64_t, ModelProfile>& profiles, bool fit) {
  FactorFit out;
  out.name = field.name;
  std::vector<double> inverse_ms, excess;
  for (const auto& [samples, profile] : profiles) {
    double t = 0.0;
    for (const LayerProfile& l : profile.layers) t += field.over_forward ? l.forward_ms : l.backward_ms;
    if (t <= 0.0) continue;
    out.samples.push_back(samples);
    out.time_ms.push_back(t);
    out.measured.push_back(profile.*field.factor);
    inverse_ms.push_back(1.0 / t);
    excess.push_back(profile.*field.factor - 1.0);
  }
  out.fitted = fit && out.samples.size() >= 2;
  if (!out.fitted) {
    out.priced = out.measured;
    return out;
  }
  const Line line = theil_sen(inverse_ms, excess);
  out.base = line.intercept;
  out.per_ms = line.slope;
  for (size_t i = 0; i < out.samples.size(); ++i) {
    const double factor = std::max(1.0, 1.0 + out.base + out.per_ms * inverse_ms[i]);
    out.priced.push_back(factor);
    profiles.at(out.samples[i]).*field.factor = factor;
  }
  return out;
}

}  // namespace

std::vector<FactorFit> fit_profile_factors(std::map<int64_t, ModelProfile>& profiles, bool fit) {
  std::vector<FactorFit> fits;
  for (const FactorField& field : kFields) fits.push_back(fit_one(field, profiles, fit));
  return fits;
}

std::string FactorFit::describe() const {
  if (std::none_of(measured.begin(), measured.end(), [](double m) { return m > 1.0; })) return "";
  std::string out = name;
  char part[96];
  for (size_t i = 0; i < samples.size(); ++i) {
    std::snprintf(part, sizeof part, "%s x%.3f -> x%.3f at %lld", i == 0 ? "" : ",", measured[i], priced[i],
                  static_cast<long long>(samples[i]));
    out += part;
  }
  if (fitted) {
    std::snprintf(part, sizeof part, " (1 %+.3f %+.3f ms / T)", base, per_ms);
    out += part;
  }
  return out;
}

}  // namespace brigade::pipeline
