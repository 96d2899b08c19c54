// The schedule lab page (see schedule_page.h): the HTML template with the setup, the C++ timeline and the
// scripts filled in.
#include "apps/schedule_page.h"

#include <nlohmann/json.hpp>

#include "apps/schedule_lab_assets.h"  // generated from apps/schedule_lab/ (apps/CMakeLists.txt)
#include "pipeline/plan/render_timeline.h"
#include "tensor/error.h"

namespace brigade::apps {

namespace {

// JSON inside a <script> element: "</" would end the element early, "<\/" reads back the same.
std::string script_safe(std::string json) {
  for (size_t at = json.find("</"); at != std::string::npos; at = json.find("</", at + 3)) {
    json.replace(at, 2, "<\\/");
  }
  return json;
}

void fill(std::string& page, const std::string& placeholder, const std::string& text) {
  const size_t at = page.find(placeholder);
  BRIGADE_CHECK(at != std::string::npos, "schedule page: the template has no ", placeholder);
  page.replace(at, placeholder.size(), text);
}

}  // namespace

std::string render_schedule_page(const SchedulePageSetup& setup, const pipeline::Timeline& reference) {
  const pipeline::Schedule& s = reference.schedule;
  const pipeline::Costs& c = setup.costs;
  const nlohmann::json json = {
      {"schedule", s.name},
      {"stages", s.stages},
      {"microbatches", s.microbatches},
      {"virtual_chunks", s.virtual_chunks},
      {"recompute", pipeline::to_string(s.recompute)},
      {"costs",
       {{"forward", c.forward},
        {"backward", c.backward},
        {"weight", c.weight},
        {"recompute", c.recompute},
        {"step", c.step},
        {"transfer", c.transfer}}},
      {"stage_factors", setup.stage_factors},
      {"memory", {{"full", setup.memory.full}, {"boundary", setup.memory.boundary}}},
  };
  // Last placeholder first: what is filled in comes after the placeholders still to find.
  std::string page = kScheduleLabHtml;
  fill(page, "@SCRIPTS@", std::string(kScheduleModelJs) + kScheduleGeneratorsVJs + kScheduleSimulatorJs + kSchedulePageJs);
  fill(page, "@REFERENCE_JSON@", script_safe(pipeline::render_json(reference)));
  fill(page, "@SETUP_JSON@", script_safe(json.dump()));
  return page;
}

}  // namespace brigade::apps
