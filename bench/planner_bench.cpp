// Does the planner's order hold when the candidates run? For a few GPT shapes on this machine, the planner
// (pipeline/plan/planner.h) ranks the configurations for --devices devices (default 2: a stage per core
// here), and the bench runs its top --top candidates and `brigade train`'s default configuration (2
// stages, 4 microbatches, 1f1b, no recomputation, cut by parameters) with the executor.
//
//   ./planner_bench                                  # shapes small, wide, deep; 5 rounds of 10 steps
//   ./planner_bench --shapes wide --rounds 9 --steps 20 --devices 2 --top 6
//
// Per candidate: the predicted step (the planner's simulated step from profiles taken with the thread CPU
// clock, an in-process link whose latency is one measured hand-off between two stage threads), and the
// measured step (StepResult::step_ms: first action start to last action end, the quantity predicted;
// the optimizer step is not in either), the median of --steps steps after 2 warm-up steps. Rounds: every
// round runs every candidate once, in an order rotated by one each round, so that a slow minute of a
// shared machine falls on all of them; the figure kept is the median over rounds. Beside the wall-clock
// figure, the "replay": each measured step's own action times in thread CPU time put back through the
// simulator (simulate_measured), i.e. what the step would have taken had every stage had its core.
//
// Reported per shape: Kendall's tau-b between the predicted and the measured step times of the top
// candidates (1: the same order; pairs the planner ties count for neither), the pick's measured step over
// the best measured one, and over the default configuration's. The load average is printed at the start
// and the end: on a loaded machine the stages wait for cores and the wall-clock figures say more about the
// load than about the schedules.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "bench/bench_support.h"
#include "nn/data.h"
#include "nn/gpt.h"
#include "nn/statistics.h"
#include "pipeline/plan/planner.h"
#include "pipeline/run/executor.h"
#include "pipeline/run/plan_model.h"
#include "pipeline/run/trace.h"
#include "tensor/generator.h"

namespace {

namespace nn = brigade::nn;
namespace pl = brigade::pipeline;

struct Flags {
  std::vector<std::string> shapes = {"small", "wide", "deep"};
  int devices = 2, top = 6, rounds = 5, steps = 10;
};

struct Shape {
  std::string name;
  int64_t layers, heads, embd, block, vocab, batch;
};

const std::vector<Shape>& all_shapes() {
  static const std::vector<Shape> shapes = {
      {"small", 4, 4, 64, 16, 64, 64},  // brigade train's width, 4 blocks
      {"wide", 2, 4, 128, 64, 64, 32},  // few wide layers, a long context
      {"deep", 8, 4, 32, 32, 64, 32},   // many thin layers
  };
  return shapes;
}

struct Run {
  std::string label;  // "1".."top", or "default"
  pl::PipelineConfig config;
  std::string flags;
  double predicted_ms = -1.0;
  std::vector<double> wall, replay;  // per round: the median over steps
};

void print_load(const char* when) {
  double load[3] = {0, 0, 0};
  if (getloadavg(load, 3) == 3)
    std::printf("load average %s: %.2f %.2f %.2f (%u hardware threads)\n", when, load[0], load[1], load[2],
                std::thread::hardware_concurrency());
}

pl::PipelineConfig config_of(const pl::PlanCandidate& c) {
  pl::PipelineConfig pc = pl::pipeline_config_of(c);
  pc.threads_per_stage = 1;
  pc.check_finite = false;
  return pc;
}

// brigade train's default pipeline: 2 stages x 4 microbatches, 1f1b, no recomputation, cut by parameters.
pl::PipelineConfig default_config(const nn::GPT& model) {
  pl::PartitionOptions o;
  o.method = pl::PartitionMethod::Parameters;
  o.stages = 2;
  pl::PipelineConfig pc;
  pc.stages = 2;
  pc.microbatches = 4;
  pc.balance = pl::make_partition(pl::count_parameters(model), o).layer_counts();
  pc.threads_per_stage = 1;
  pc.check_finite = false;
  return pc;
}

// One round of one configuration: 2 warm-up steps, then the median wall and replayed step over `steps`.
void measure(nn::GPT& model, const nn::Batch& batch, int steps, Run& run) {
  pl::Pipeline pipe(model, run.config);
  std::vector<double> wall, replay;
  for (int i = 0; i < steps + 2; ++i) {
    model.zero_grad();
    const pl::StepResult r = pipe.forward_backward(batch.x, batch.y);
    if (i < 2) continue;
    wall.push_back(r.step_ms);
    replay.push_back(pl::simulate_measured(r.trace, /*thread_cpu_time=*/true).step_time);
  }
  run.wall.push_back(nn::median(wall));
  run.replay.push_back(nn::median(replay));
}

// Kendall's tau-b of two equally long lists.
double kendall_tau_b(const std::vector<double>& x, const std::vector<double>& y) {
  double concordant = 0, discordant = 0, ties_x = 0, ties_y = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    for (size_t j = i + 1; j < x.size(); ++j) {
      const double a = x[i] - x[j], b = y[i] - y[j];
      if (a == 0 && b == 0) continue;
      if (a == 0) {
        ++ties_x;
      } else if (b == 0) {
        ++ties_y;
      } else {
        (a * b > 0 ? concordant : discordant) += 1;
      }
    }
  }
  const double denominator =
      std::sqrt((concordant + discordant + ties_x) * (concordant + discordant + ties_y));
  return denominator > 0 ? (concordant - discordant) / denominator : 0.0;
}

std::vector<int64_t> random_tokens(int64_t n, int64_t vocab) {
  std::vector<int64_t> tokens(static_cast<size_t>(n));
  uint64_t x = 12345;
  for (auto& t : tokens) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    t = static_cast<int64_t>((x >> 33) % static_cast<uint64_t>(vocab));
  }
  return tokens;
}

std::vector<Run> plan_runs(const Shape& shape, const Flags& f, nn::GPT& model, const nn::Batch& sample,
                           double hand_off_ms) {
  pl::PlanRequest request;
  request.profile = pl::model_profiler(model, sample, 1);
  request.devices = f.devices;
  request.batch = shape.batch;
  request.keep = f.top;
  request.link.latency_ms = hand_off_ms;
  const pl::Plan plan = pl::plan_pipeline(request);
  std::printf("%s", plan.table().c_str());
  std::vector<Run> runs;
  for (size_t i = 0; i < plan.ranked.size(); ++i) {
    const pl::PlanCandidate& c = plan.ranked[i];
    runs.push_back({std::to_string(i + 1), config_of(c), c.flags(), c.step_ms, {}, {}});
  }
  runs.push_back(
      {"default", default_config(model), "--stages 2 --microbatches 4 --schedule 1f1b", -1.0, {}, {}});
  return runs;
}

void report(const std::vector<Run>& runs) {
  std::printf("%-8s %12s %12s %12s  %s\n", "rank", "predicted", "measured", "replay", "configuration");
  std::vector<double> predicted, wall, replay;
  double best = 1e300;
  for (const Run& r : runs) {
    const double w = nn::median(r.wall), p = nn::median(r.replay);
    if (r.label != "default") {
      predicted.push_back(r.predicted_ms), wall.push_back(w), replay.push_back(p);
      best = std::min(best, w);
    }
    char pred[32] = "-";
    if (r.predicted_ms >= 0) std::snprintf(pred, sizeof pred, "%.3f", r.predicted_ms);
    std::printf("%-8s %12s %12.3f %12.3f  %s\n", r.label.c_str(), pred, w, p, r.flags.c_str());
  }
  const double pick = wall.front(), fallback = nn::median(runs.back().wall);
  std::printf("kendall tau-b, predicted vs measured: %.2f (vs replay %.2f) over %zu candidates\n",
              kendall_tau_b(predicted, wall), kendall_tau_b(predicted, replay), predicted.size());
  std::printf(
      "pick / best measured: %.3f; pick / default: %.3f; median |predicted - measured| / measured: "
      "%.1f%%\n",
      pick / best, pick / fallback, [&] {
        std::vector<double> e;
        for (size_t i = 0; i < wall.size(); ++i)
          e.push_back(100 * std::fabs(predicted[i] - wall[i]) / wall[i]);
        return nn::median(e);
      }());
}

void bench_shape(const Shape& shape, const Flags& f, double hand_off_ms) {
  nn::GPTConfig c;
  c.vocab_size = shape.vocab, c.block_size = shape.block, c.n_layer = shape.layers;
  c.n_head = shape.heads, c.n_embd = shape.embd;
  nn::GPT model(c, 1);
  model.train();
  brigade::Generator generator(7);
  const nn::Batch batch =
      nn::random_batch(random_tokens(200000, shape.vocab), shape.batch, shape.block, generator);
  std::printf(
      "\n== shape %s: GPT %lld blocks x embd %lld (%lld heads), context %lld, vocab %lld, batch %lld, "
      "%lld parameters\n",
      shape.name.c_str(), static_cast<long long>(shape.layers), static_cast<long long>(shape.embd),
      static_cast<long long>(shape.heads), static_cast<long long>(shape.block),
      static_cast<long long>(shape.vocab), static_cast<long long>(shape.batch),
      static_cast<long long>(model.num_parameters()));
  std::vector<Run> runs = plan_runs(shape, f, model, batch, hand_off_ms);
  for (int round = 0; round < f.rounds; ++round) {
    for (size_t k = 0; k < runs.size(); ++k) measure(model, batch, f.steps, runs[(k + round) % runs.size()]);
  }
  report(runs);
}

Flags parse(int argc, char** argv) {
  Flags f;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i], v = argv[i + 1];
    if (a == "--shapes") {
      f.shapes.clear();
      std::stringstream in(v);
      for (std::string s; std::getline(in, s, ',');) f.shapes.push_back(s);
    } else if (a == "--devices") {
      f.devices = std::max(1, std::atoi(v.c_str()));
    } else if (a == "--top") {
      f.top = std::max(2, std::atoi(v.c_str()));
    } else if (a == "--rounds") {
      f.rounds = std::max(1, std::atoi(v.c_str()));
    } else if (a == "--steps") {
      f.steps = std::max(1, std::atoi(v.c_str()));
    } else {
      std::fprintf(stderr,
                   "usage: %s [--shapes small,wide,deep] [--devices N] [--top N] [--rounds N] [--steps N]\n",
                   argv[0]);
      std::exit(2);
    }
  }
  return f;
}

}  // namespace

int main(int argc, char** argv) {
  const Flags f = parse(argc, argv);
  print_load("at start");
  const double hand_off = brigade::bench::measure_hand_off_ms(200);
  std::printf("one hand-off between two stage threads: %.4f ms (the in-process link's latency)\n", hand_off);
  std::printf("devices %d, top %d, %d rounds of %d steps (+2 warm-up)\n", f.devices, f.top, f.rounds,
              f.steps);
  for (const std::string& name : f.shapes) {
    const auto& shapes = all_shapes();
    const auto it =
        std::find_if(shapes.begin(), shapes.end(), [&](const Shape& s) { return s.name == name; });
    if (it == shapes.end()) {
      std::fprintf(stderr, "unknown shape '%s' (small, wide, deep)\n", name.c_str());
      return 2;
    }
    bench_shape(*it, f, hand_off);
  }
  print_load("at the end");
  return 0;
}
