// Per-layer recomputation plans (see layer_recompute.h).
#include "pipeline/schedule/layer_recompute.h"

#include "tensor/error.h"

namespace brigade::pipeline {

char to_letter(LayerRecompute choice) {
  switch (choice) {
    case LayerRecompute::None:
      return 'n';
    case LayerRecompute::Full:
      return 'f';
    case LayerRecompute::AttentionCore:
      return 'a';
  }
  return '?';
}

RecomputeSetting RecomputeSetting::parse(const std::string& text) {
  RecomputeSetting setting;
  if (text == "selective") return RecomputeSetting{Recompute::Always, "selective"};
  const size_t colon = text.find(':');
  const std::string policy = text.substr(0, colon);
  try {
    setting.policy = parse_recompute(policy);
  } catch (const ValueError&) {
    BRIGADE_THROW(ValueError, "recompute '", text,
                  "': expected never, always, except-last, selective, or <policy>:<plan> with a plan of one "
                  "letter per layer (n none, f full, a attention core) or 'selective'");
  }
  if (colon == std::string::npos) return setting;
  setting.plan = text.substr(colon + 1);
  BRIGADE_CHECK_VALUE(setting.policy != Recompute::Never, "recompute '", text,
                      "': 'never' recomputes no microbatch, so it takes no per-layer plan");
  BRIGADE_CHECK_VALUE(!setting.plan.empty(), "recompute '", text, "': the plan after ':' is empty");
  if (setting.plan == "selective") return setting;
  for (size_t i = 0; i < setting.plan.size(); ++i) {
    const char c = setting.plan[i];
    BRIGADE_CHECK_VALUE(c == 'n' || c == 'f' || c == 'a', "recompute '", text, "': layer ", i, " is '", c,
                        "'; expected n (none), f (full) or a (attention core)");
  }
  return setting;
}

std::string RecomputeSetting::str() const {
  if (plan.empty()) return to_string(policy);
  if (plan == "selective" && policy == Recompute::Always) return "selective";
  return std::string(to_string(policy)) + ":" + plan;
}

std::vector<LayerRecompute> RecomputeSetting::resolve(const std::vector<bool>& has_attention) const {
  std::vector<LayerRecompute> out;
  if (plan.empty()) return out;
  const size_t layers = has_attention.size();
  if (plan == "selective") {
    for (bool attention : has_attention)
      out.push_back(attention ? LayerRecompute::AttentionCore : LayerRecompute::None);
    return out;
  }
  BRIGADE_CHECK_VALUE(plan.size() == layers, "recompute '", str(), "': the plan has ", plan.size(),
                      " letters; the model has ", layers, " layers (one letter each)");
  for (size_t i = 0; i < layers; ++i) {
    const char c = plan[i];
    BRIGADE_CHECK_VALUE(c != 'a' || has_attention[i], "recompute '", str(), "': layer ", i,
                        " has no attention core to recompute ('a'); use n or f there");
    out.push_back(c == 'n'   ? LayerRecompute::None
                  : c == 'f' ? LayerRecompute::Full
                             : LayerRecompute::AttentionCore);
  }
  return out;
}

std::string plan_letters(const std::vector<LayerRecompute>& plan) {
  std::string letters;
  for (LayerRecompute choice : plan) letters += to_letter(choice);
  return letters;
}

LayerRecompute layer_choice(const std::vector<LayerRecompute>& plan, int layer) {
  if (plan.empty()) return LayerRecompute::Full;
  BRIGADE_CHECK_VALUE(layer >= 0 && layer < static_cast<int>(plan.size()), "recompute plan: layer ", layer,
                      " outside the plan's ", plan.size(), " layers");
  return plan[static_cast<size_t>(layer)];
}

bool whole_chunk_recomputed(const std::vector<LayerRecompute>& plan, int begin, int end) {
  for (int i = begin; i < end; ++i)
    if (layer_choice(plan, i) != LayerRecompute::Full) return false;
  return true;
}

}  // namespace brigade::pipeline
