// `brigade schedule`: draw a pipeline schedule and report what it costs, without training — a teaching tool.
// It builds the IR the executor would run, validates it, simulates it with the given costs and prints the
// stage x time grid, the step time, the bubble per stage and the activations each stage holds at its peak.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <functional>
#include <memory>
#include <string>

#include "apps/commands.h"
#include "pipeline/plan/render_timeline.h"
#include "pipeline/plan/simulator.h"
#include "pipeline/schedule/generators.h"
#include "pipeline/schedule/render_schedule.h"
#include "tensor/error.h"

namespace brigade::apps {

namespace {

struct ScheduleOptions {
  std::string schedule = "1f1b";
  int stages = 4;
  int microbatches = 8;
  int virtual_chunks = 1;
  std::string recompute = "never";
  std::string costs = "f=1,b=2,w=1";
  std::string memory = "full=1,boundary=0";
  std::string svg;
  bool json = false;
  bool actions = false;
  int width = 200;
};

void print_row(const char* title, const pipeline::Timeline& t, const std::function<std::string(int)>& cell) {
  std::printf("%-10s", title);
  for (int s = 0; s < t.schedule.stages; ++s) std::printf("  s%d %s", s, cell(s).c_str());
}

std::string format(const char* pattern, double value) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, pattern, value);
  return buffer;
}

int run_schedule(const ScheduleOptions& o) {
  using namespace pipeline;
  const Schedule schedule =
      make_schedule(o.schedule, o.stages, o.microbatches, o.virtual_chunks, parse_recompute(o.recompute));
  const Costs costs = Costs::parse(o.costs);
  const MemoryModel memory = MemoryModel::parse(o.memory);
  const Timeline t = simulate(schedule, costs, memory);
  if (!o.svg.empty()) {
    std::ofstream file(o.svg, std::ios::binary);
    file << render_svg(t);
    BRIGADE_CHECK_AS(IOError, file.good(), "schedule: could not write the SVG to '", o.svg, "'");
  }
  if (o.json) {
    std::fputs(render_json(t).c_str(), stdout);
    return 0;
  }

  const int S = schedule.stages;
  std::printf("%s\n", schedule.describe().c_str());
  std::printf("costs per stage and microbatch: F=%g B=%g (Bi=%g Bw=%g) R=%g step=%g transfer=%g%s\n\n",
              costs.forward, costs.backward, costs.backward - costs.weight, costs.weight,
              costs.recompute < 0 ? costs.forward : costs.recompute, costs.step, costs.transfer,
              schedule.virtual_chunks > 1 ? "  (each chunk costs 1/v of these)" : "");
  if (o.actions) std::printf("%s\n", render_stage_lists(schedule).c_str());
  std::printf("%s", render_time_grid(t, o.width).c_str());
  if (schedule.virtual_chunks > 1) std::printf("(a, b, c, ...: the stage's chunk 0, 1, 2, ...)\n");

  double busiest = 0.0;
  for (const StageStats& stats : t.stats) busiest = std::max(busiest, stats.busy);
  std::printf("\nstep time %g   (the busiest stage computes for %g of it)\n", t.step_time, busiest);
  print_row("bubble", t, [&](int s) { return format("%.1f%%", 100.0 * t.stats[s].bubble); });
  std::printf("   total %.1f%%", 100.0 * t.bubble);
  if (schedule.name != "zb-h1" && costs.transfer == 0 && costs.step == 0 && costs.per_chunk.empty() &&
      schedule.recompute == Recompute::Never) {
    const double textbook = textbook_bubble(schedule.name, S, schedule.microbatches, schedule.virtual_chunks);
    std::printf("   (textbook %s = %.1f%%)",
                schedule.name == "interleaved" ? "(S-1)/(vM+S-1)" : "(S-1)/(M+S-1)", 100.0 * textbook);
  }
  std::printf("\n");
  print_row("in flight", t, [&](int s) { return std::to_string(t.stats[s].peak_in_flight); });
  std::printf("   %s holding activations at the peak\n",
              schedule.virtual_chunks > 1 ? "(microbatch, chunk) pairs" : "microbatches");
  print_row("memory", t, [&](int s) { return format("%g", t.stats[s].peak_memory); });
  std::printf("   peak activations, in units of one stage's activations for one microbatch\n");
  int activations = 0, gradients = 0;
  for (const auto& list : schedule.actions) {
    for (const Action& a : list) {
      activations += a.kind == ActionKind::SendActivation;
      gradients += a.kind == ActionKind::SendGrad;
    }
  }
  std::printf("traffic     %d messages between stages per step (%d activations, %d gradients)\n",
              activations + gradients, activations, gradients);
  if (!o.svg.empty()) std::printf("wrote %s\n", o.svg.c_str());
  return 0;
}

}  // namespace

Command add_schedule_command(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand(
      "schedule", "Draw a pipeline schedule and report its step time, bubble and peak activations");
  auto o = std::make_shared<ScheduleOptions>();
  cmd->add_option("--schedule", o->schedule, "gpipe, 1f1b, interleaved or zb-h1")
      ->check(CLI::IsMember(pipeline::schedule_names()))
      ->capture_default_str();
  cmd->add_option("--stages", o->stages, "pipeline stages S")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--microbatches", o->microbatches, "microbatches M per step")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--virtual", o->virtual_chunks, "model chunks per stage v (interleaved only)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--recompute", o->recompute, "activation recomputation: never, always or except-last")
      ->check(CLI::IsMember({"never", "always", "except-last"}))
      ->capture_default_str();
  cmd->add_option("--costs", o->costs,
                  "per stage and microbatch: f=forward, b=backward (Bi + Bw), w=weight-gradient part, "
                  "r=recompute (default f), step=optimizer step, t=transfer latency")
      ->capture_default_str();
  cmd->add_option("--memory", o->memory,
                  "activation sizes per microbatch: full=one stage's activations, boundary=a chunk's input "
                  "(kept between F and R when recomputing)")
      ->capture_default_str();
  cmd->add_option("--svg", o->svg, "also write an SVG timeline to this file");
  cmd->add_flag("--json", o->json, "print the simulated timeline as JSON instead of the picture");
  cmd->add_flag("--actions", o->actions,
                "also print each stage's instruction list (with sends and receives)");
  cmd->add_option("--width", o->width, "most time columns in the grid")->check(CLI::PositiveNumber);
  return {cmd, [o] { return run_schedule(*o); }};
}

}  // namespace brigade::apps
