// Does the planner's order hold when the candidates run? For a few GPT shapes on this machine, the planner
// (pipeline/plan/planner.h) ranks the configurations for --devices devices (default 2: a stage per core
// here), and the bench runs its top --top distinct programs and `brigade train`'s default configuration (2
// stages, 4 microbatches, 1f1b, no recomputation, cut by parameters) with the executor.
//
//   ./planner_bench                                  # shapes small, wide, deep; 5 rounds of 20 sweeps
//   ./planner_bench --shapes wide --rounds 9 --steps 20 --devices 2 --top 6 --tie 0.01
//   ./planner_bench --instances 3 --steps 7         # each candidate on 3 copies of its model and pipeline
//
// What is predicted is what runs (pipeline/run/plan_model.h: model_profiler, price_executor): per layer
// F, B, and the split backward's Bi and Bw, timed with the thread CPU clock; one hand-off between two stage
// threads (the in-process link's latency, on every message); the optimizer step after the pipeline (the
// gradient norm and AdamW over every parameter). Measured: the wall-clock time of Pipeline::train_step
// (zero_grad, the pipelined forward and backward, the tied-gradient sum, the norm and the AdamW step),
// the median of --steps steps after 2 warm-up steps; beside it the pipeline's own span (StepResult::step_ms,
// first action to last) against the predicted pipeline, and the "replay": each measured step's action times
// in thread CPU time put back through the simulator (simulate_measured), i.e. the pipeline had every stage
// had its core. The candidates take turns step by step (--interleave steps, the default): each keeps its own
// copy of the model, pipeline and optimizer, and every sweep runs one step of each, in an order rotated by
// one each sweep, so that a slow second of a shared machine falls on all of them; --rounds x --steps
// sweeps. A round's figure is the median of its --steps steps; the figure kept is the median over rounds,
// and the lowest, the highest and the spread (max - min over rounds, over the median) say how much a
// candidate's figure moved. "relative" is each step over the geometric mean of its sweep's planned steps,
// the median over the sweeps (drift_relative). --interleave rounds runs each candidate's --steps steps of
// a round back to back instead (a fresh pipeline each round), the rounds' order rotated. Threads are left to
// the scheduler; --pin on runs stage s's thread pinned to core s and this thread to core 0 (on a quiet 2-core
// machine that put the measured steps 41-46 % above the predictions against 16-17 % unpinned, the replays
// agreeing either way: the excess was waiting, not work). Each profiled size prints the executor's factors
// over the layers timed alone and a deferred Bw's over an adjacent one (model_profiler:
// measure_action_factors, measure_deferred_weight) and a cold backward's over a warm one
// (measure_cold_backward), which the prediction includes (--action-cost off: none of them; --deferred-cost
// off: not the deferred Bw's; --cold-cost off: not the cold backward's). The planner prices each factor from
// a line through all the sizes (plan/factor_fit.h; its table prints measured -> priced); --fit off prices
// each size's as measured.
//
// Two checks on the measurement itself. --control on (the default) runs the pick's program once more as a
// "control", on a model and pipeline of its own: the two differ only by where their memory lies and by
// chance, so their gap is what this measurement cannot resolve between candidates. --instances N gives
// every candidate N such copies taking turns, and its figures pool their steps. And per candidate, each
// action kind's measured thread CPU time over its predicted time, over all chunks and chunk by chunk (the
// trace's action_totals against the simulated step's): where a prediction misses, which actions it
// mispriced.
//
// Distinct programs: two schedule names can generate the same action lists (PlanCandidate::same_program);
// the executor runs them alike, so only the first is run and the others are listed as such. Ties: the
// predictions within --tie (relative) of their group's fastest are one tie group (plan/rank_agreement.h).
// Reported per shape: Kendall's tau-b between predicted and measured step times over every candidate
// (tied predictions count for neither order; with its ceiling, what a perfect measurement would give), and
// over the distinct predictions (one point per tie group), and beyond the noise (candidates whose ranges
// over the rounds overlap count as measured ties: plan/rank_agreement.h); the pick's measured step over the
// best measured one, and over the default configuration's. The load average is printed at the start, after
// each shape and at the end: on a loaded machine the stages wait for cores and the wall-clock figures say
// more about the load than about the schedules.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iomanip>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "nn/data.h"
#include "nn/gpt.h"
#include "nn/optim.h"
#include "nn/statistics.h"
#include "pipeline/plan/planner.h"
#include "pipeline/plan/rank_agreement.h"
#include "pipeline/run/executor.h"
#include "pipeline/run/plan_model.h"
#include "pipeline/run/stage_thread.h"
#include "pipeline/run/trace.h"
#include "tensor/generator.h"

namespace {

namespace nn = brigade::nn;
namespace pl = brigade::pipeline;

struct Flags {
  std::vector<std::string> shapes = {"small", "wide", "deep"};
  int devices = 2, top = 6, rounds = 5, steps = 20;
  double tie = 0.01;
  bool pin = false;           // stage threads (and this thread) pinned to cores
  bool action_cost = true;    // price the executor's actions over the layers timed alone
  bool deferred_cost = true;  // price a deferred Bw at its own measured factor
  bool cold_cost = true;      // price a backward after other microbatches' forwards at its measured factor
  bool fit = true;            // price the factors from a line through the sizes (else as measured)
  bool by_step = true;  // --interleave steps: the candidates take turns step by step (else round by round)
  int instances = 1;    // --instances N: copies of each candidate's model and pipeline, taking turns
  bool control = true;  // --control on: the pick's program once more, on instances of its own
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
  std::string label;  // the planner's rank, "default" or "control"
  pl::PipelineConfig config;
  std::string flags;
  double predicted_ms = -1.0, predicted_pipeline_ms = -1.0;  // -1: not planned (the default)
  std::vector<double> step, pipeline, replay;                // per round: the median over steps
  std::vector<double> sweep;  // --interleave steps: every measured step, sweep by sweep (one per sweep)
  pl::ActionTotals predicted_actions;  // per (model chunk, kind), one step
  pl::ActionTotals measured_actions;   // the same, thread CPU time summed over every measured step
  int measured_steps = 0;
};

void print_load(const char* when) {
  double load[3] = {0, 0, 0};
  if (getloadavg(load, 3) == 3)
    std::printf("load average %s: %.2f %.2f %.2f (%u hardware threads)\n", when, load[0], load[1], load[2],
                std::thread::hardware_concurrency());
}

pl::PipelineConfig config_of(const pl::PlanCandidate& c, bool pin) {
  pl::PipelineConfig pc = pl::pipeline_config_of(c);
  pc.threads_per_stage = 1;
  pc.check_finite = false;
  pc.pin_stage_threads = pin;
  return pc;
}

// brigade train's default pipeline: 2 stages x 4 microbatches, 1f1b, no recomputation, cut by parameters.
pl::PipelineConfig default_config(const nn::GPT& model, bool pin) {
  pl::PartitionOptions o;
  o.method = pl::PartitionMethod::Parameters;
  o.stages = 2;
  pl::PipelineConfig pc;
  pc.stages = 2;
  pc.microbatches = 4;
  pc.balance = pl::make_partition(pl::count_parameters(model), o).layer_counts();
  pc.threads_per_stage = 1;
  pc.check_finite = false;
  pc.pin_stage_threads = pin;
  return pc;
}

struct StepTimes {
  double step_ms, pipeline_ms, replay_ms;
  pl::ActionTotals actions;  // thread CPU time
};

// One train_step: its wall-clock time, the pipeline's span and its replay.
StepTimes time_step(pl::Pipeline& pipe, nn::AdamW& optimizer, const nn::Batch& batch) {
  const auto start = std::chrono::steady_clock::now();
  const pl::StepResult r = pipe.train_step(batch.x, batch.y, optimizer);
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return {ms, r.step_ms, pl::simulate_measured(r.trace, /*thread_cpu_time=*/true).step_time,
          pl::action_totals(r.trace, /*thread_cpu_time=*/true)};
}

// Steps of one round of one candidate: their medians are the round's figures.
struct RoundSteps {
  std::vector<double> step, pipeline, replay;
  void add(const StepTimes& t, Run& run) {
    step.push_back(t.step_ms), pipeline.push_back(t.pipeline_ms), replay.push_back(t.replay_ms);
    for (const auto& [key, ms] : t.actions) run.measured_actions[key] += ms;
    ++run.measured_steps;
  }
  void close(Run& run) const {
    run.step.push_back(nn::median(step));
    run.pipeline.push_back(nn::median(pipeline));
    run.replay.push_back(nn::median(replay));
  }
};

// --interleave rounds, one round of one configuration: a fresh pipeline, 2 warm-up steps, then `steps`
// train steps back to back.
void measure_round(nn::GPT& model, const nn::Batch& batch, int steps, Run& run) {
  pl::Pipeline pipe(model, run.config);
  nn::AdamW optimizer(model.parameters());  // after the Pipeline (executor.h)
  RoundSteps round;
  for (int i = 0; i < steps + 2; ++i) {
    const StepTimes t = time_step(pipe, optimizer, batch);
    if (i >= 2) round.add(t, run);
  }
  round.close(run);
}

// --interleave steps: every candidate keeps its own copy of the model (the same initial weights), pipeline
// and optimizer for the whole shape, and the candidates take turns one step each (a sweep), in an order
// rotated by one every sweep. A slow spell of the machine longer than a sweep (tens to hundreds of
// milliseconds here) falls on every candidate alike, and drift_relative takes it out.
void measure_by_step(const nn::GPTConfig& c, const nn::Batch& batch, const Flags& f, std::vector<Run>& runs) {
  struct Live {
    std::unique_ptr<nn::GPT> model;
    std::unique_ptr<pl::Pipeline> pipe;
    std::unique_ptr<nn::AdamW> optimizer;
  };
  std::vector<Live> live;  // run i's instances are live[i * instances ...]
  const size_t n = runs.size(), instances = static_cast<size_t>(f.instances);
  for (const Run& run : runs) {
    for (size_t j = 0; j < instances; ++j) {
      Live l;
      l.model = std::make_unique<nn::GPT>(c, 1);
      l.model->train();
      l.pipe = std::make_unique<pl::Pipeline>(*l.model, run.config);
      l.optimizer = std::make_unique<nn::AdamW>(l.model->parameters());  // after the Pipeline (executor.h)
      live.push_back(std::move(l));
    }
  }
  for (int warm = 0; warm < 2; ++warm) {
    for (Live& l : live) time_step(*l.pipe, *l.optimizer, batch);
  }
  for (int round = 0, sweep = 0; round < f.rounds; ++round) {
    std::vector<RoundSteps> rounds(n);
    for (int s = 0; s < f.steps; ++s, ++sweep) {
      std::vector<double> log_sum(n, 0.0);  // a run's sweep figure: the geometric mean of its instances'
      for (size_t k = 0; k < live.size(); ++k) {
        const size_t at = (k + static_cast<size_t>(sweep)) % live.size(), i = at / instances;
        const StepTimes t = time_step(*live[at].pipe, *live[at].optimizer, batch);
        rounds[i].add(t, runs[i]);
        log_sum[i] += std::log(t.step_ms);
      }
      for (size_t i = 0; i < n; ++i) runs[i].sweep.push_back(std::exp(log_sum[i] / instances));
    }
    for (size_t i = 0; i < n; ++i) rounds[i].close(runs[i]);
  }
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

// The planner's top `top` distinct programs (a candidate whose program an earlier one runs is listed, not
// run), then the default configuration.
std::vector<Run> plan_runs(const Shape& shape, const Flags& f, nn::GPT& model, const nn::Batch& sample) {
  pl::PlanRequest request;
  // Each profiled size says how much longer the executor's actions take than the layers timed alone
  // (model_profiler: measure_action_factors).
  request.profile = [profiler = pl::model_profiler(model, sample, 1), &f](int64_t samples) {
    pl::ModelProfile p = profiler(samples);
    double layers_f = 0, layers_b = 0;
    for (const pl::LayerProfile& l : p.layers) layers_f += l.forward_ms, layers_b += l.backward_ms;
    std::printf(
        "profile at %lld samples: layers F %.3f ms, B %.3f ms; executor's actions x%.3f (F), x%.3f (B), "
        "deferred Bw x%.3f (first chunk x%.3f), cold B x%.3f%s%s%s\n",
        static_cast<long long>(samples), layers_f, layers_b, p.action_forward_factor,
        p.action_backward_factor, p.deferred_weight_factor, p.deferred_first_weight_factor,
        p.cold_backward_factor, f.action_cost ? "" : " (not priced: --action-cost off)",
        f.action_cost && !f.deferred_cost ? " (deferred Bw not priced: --deferred-cost off)" : "",
        f.action_cost && !f.cold_cost ? " (cold B not priced: --cold-cost off)" : "");
    if (!f.action_cost) p.action_forward_factor = p.action_backward_factor = 1.0;
    if (!f.action_cost || !f.deferred_cost) p.deferred_weight_factor = p.deferred_first_weight_factor = 1.0;
    if (!f.action_cost || !f.cold_cost) p.cold_backward_factor = 1.0;
    return p;
  };
  pl::price_executor(request, model, 1);
  request.devices = f.devices;
  request.batch = shape.batch;
  request.fit_factors = f.fit;
  request.keep = 8 * f.top;  // room for the programs that repeat
  pl::Plan plan = pl::plan_pipeline(request);
  std::vector<Run> runs;
  size_t shown = 0;
  for (size_t i = 0; i < plan.ranked.size() && static_cast<int>(runs.size()) < f.top; ++i, shown = i) {
    const pl::PlanCandidate& c = plan.ranked[i];
    const auto same = std::find_if(runs.begin(), runs.end(), [&](const Run& r) {
      return c.same_program(plan.ranked[static_cast<size_t>(std::stoi(r.label) - 1)]);
    });
    if (same != runs.end()) continue;  // the table says "the same program as rank k"
    Run run;
    run.label = std::to_string(i + 1), run.config = config_of(c, f.pin), run.flags = c.flags();
    run.predicted_ms = c.step_ms, run.predicted_pipeline_ms = c.pipeline_ms;
    run.predicted_actions = c.action_ms;
    runs.push_back(std::move(run));
  }
  plan.ranked.resize(shown);  // the table up to the last candidate run
  std::printf("%s", plan.table().c_str());
  Run fallback;
  fallback.label = "default", fallback.config = default_config(model, f.pin);
  fallback.flags = "--stages 2 --microbatches 4 --schedule 1f1b";
  runs.push_back(std::move(fallback));
  if (f.control) {  // the pick's program again, on a model and pipeline of its own: the noise floor
    Run control;
    control.label = "control", control.config = runs.front().config, control.flags = runs.front().flags;
    runs.push_back(std::move(control));
  }
  return runs;
}

double spread_of(const std::vector<double>& rounds) {
  const auto [lo, hi] = std::minmax_element(rounds.begin(), rounds.end());
  return (*hi - *lo) / nn::median(rounds);
}

double median_error(const std::vector<double>& predicted, const std::vector<double>& measured) {
  std::vector<double> e;
  for (size_t i = 0; i < measured.size(); ++i)
    e.push_back(std::fabs(predicted[i] - measured[i]) / measured[i]);
  return nn::median(e);
}

double lowest(const std::vector<double>& v) {
  return *std::min_element(v.begin(), v.end());
}
double highest(const std::vector<double>& v) {
  return *std::max_element(v.begin(), v.end());
}

/// Each planned candidate's step with the machine's common drift taken out: at every index of `series`
/// (a round, or with --interleave steps a sweep), its step over the geometric mean of all planned
/// candidates' steps at that index; the median of those ratios, times the geometric mean of every step.
/// The candidates of a round (or a sweep) run back to back, so a slow spell of the machine that lasts one
/// scales them all and cancels here; a shorter one does not.
std::vector<double> drift_relative(const std::vector<Run>& runs, std::vector<double> Run::*series) {
  std::vector<const Run*> planned;
  for (const Run& r : runs) {
    if (r.predicted_ms >= 0) planned.push_back(&r);
  }
  if (planned.empty()) return {};
  const size_t points = (planned.front()->*series).size();
  std::vector<double> point_log_mean(points, 0.0);
  double all_log_mean = 0.0;
  for (size_t k = 0; k < points; ++k) {
    for (const Run* r : planned)
      point_log_mean[k] += std::log((r->*series)[k]) / static_cast<double>(planned.size());
    all_log_mean += point_log_mean[k] / static_cast<double>(points);
  }
  std::vector<double> out;
  for (const Run* r : planned) {
    std::vector<double> ratios;
    for (size_t k = 0; k < points; ++k) ratios.push_back((r->*series)[k] / std::exp(point_log_mean[k]));
    out.push_back(nn::median(ratios) * std::exp(all_log_mean));
  }
  return out;
}

// Per planned candidate: the measured thread CPU time of each action kind over its predicted time, over
// all chunks and chunk by chunk (model chunks c0, c1, ...), a measured step being the mean of the steps
// measured. Where a schedule's prediction misses, this says which actions it mispriced.
void report_actions(const std::vector<Run>& runs) {
  std::printf(
      "measured / predicted time of each action kind over a step (thread CPU time), all chunks | "
      "by model chunk:\n");
  for (const Run& r : runs) {
    if (r.predicted_ms < 0 || r.measured_steps == 0) continue;
    std::map<pl::ActionKind, std::pair<double, double>> kinds;  // measured, predicted
    std::ostringstream chunks;
    int last_chunk = -1;
    for (const auto& [key, predicted] : r.predicted_actions) {
      const auto it = r.measured_actions.find(key);
      const double measured = it == r.measured_actions.end() ? 0.0 : it->second / r.measured_steps;
      kinds[key.second].first += measured, kinds[key.second].second += predicted;
      if (key.first != last_chunk) chunks << (last_chunk < 0 ? "" : "  ") << "c" << key.first << ":";
      last_chunk = key.first;
      char cell[48];
      std::snprintf(cell, sizeof cell, " %s %.2f", pl::kind_name(key.second),
                    predicted > 0 ? measured / predicted : 0.0);
      chunks << cell;
    }
    std::ostringstream all;
    for (const auto& [kind, mp] : kinds)
      all << " " << pl::kind_name(kind) << " " << std::fixed << std::setprecision(2) << mp.first / mp.second;
    std::printf("%-8s%s |  %s\n", r.label.c_str(), all.str().c_str(), chunks.str().c_str());
  }
}

void report(const std::vector<Run>& runs, double tie, bool by_step) {
  std::vector<double> predicted, measured, low, high, pipe_predicted, pipe_measured, replay;
  for (const Run& r : runs) {
    if (r.predicted_ms < 0) continue;
    predicted.push_back(r.predicted_ms), measured.push_back(nn::median(r.step));
    low.push_back(lowest(r.step)), high.push_back(highest(r.step));
    pipe_predicted.push_back(r.predicted_pipeline_ms), pipe_measured.push_back(nn::median(r.pipeline));
    replay.push_back(nn::median(r.replay));
  }
  const pl::RankAgreement a = pl::rank_agreement(predicted, measured, low, high, tie);
  // "relative": the step with the common drift taken out, per sweep (--interleave steps) or per round.
  const std::vector<double> drift_free = drift_relative(runs, by_step ? &Run::sweep : &Run::step);
  std::printf("%-8s %10s %9s %10s %9s %7s %9s %6s %10s %10s %10s  %s\n", "rank", "predicted", "min",
              "measured", "max", "spread", "relative", "tie", "pipe pred", "pipe meas", "replay",
              "configuration");
  for (size_t i = 0; i < runs.size(); ++i) {
    const Run& r = runs[i];
    char pred[32] = "-", pipe[32] = "-", group[16] = "-", rel[32] = "-";
    if (r.predicted_ms >= 0) {
      std::snprintf(pred, sizeof pred, "%.3f", r.predicted_ms);
      std::snprintf(pipe, sizeof pipe, "%.3f", r.predicted_pipeline_ms);
      std::snprintf(group, sizeof group, "%d", a.groups[i] + 1);
      std::snprintf(rel, sizeof rel, "%.3f", drift_free[i]);
    }
    std::printf("%-8s %10s %9.3f %10.3f %9.3f %6.1f%% %9s %6s %10s %10.3f %10.3f  %s\n", r.label.c_str(),
                pred, lowest(r.step), nn::median(r.step), highest(r.step), 100 * spread_of(r.step), rel,
                group, pipe, nn::median(r.pipeline), nn::median(r.replay), r.flags.c_str());
  }
  report_actions(runs);
  const double best = *std::min_element(measured.begin(), measured.end());
  const auto run_named = [&](const char* label) {
    return std::find_if(runs.begin(), runs.end(), [&](const Run& r) { return r.label == label; });
  };
  const double pick = measured.front(), fallback = nn::median(run_named("default")->step);
  const pl::RankAgreement replayed = pl::rank_agreement(pipe_predicted, replay, tie);
  const pl::RankAgreement relative = pl::rank_agreement(predicted, drift_free, tie);
  std::printf(
      "kendall tau-b, predicted vs measured step: %.2f over all %zu (ceiling %.2f with %d tie groups at "
      "%.1f%%), %.2f over the %d distinct predictions\n",
      a.tau_all, measured.size(), a.tau_all_ceiling, a.group_count, 100 * tie, a.tau_distinct, a.group_count);
  std::printf(
      "kendall tau-b beyond the noise (measured pairs whose min-max ranges over the rounds overlap count as "
      "ties): %.2f over the %d pairs both orders resolve\n",
      a.tau_resolved, a.resolved_pairs);
  std::printf(
      "kendall tau-b, predicted vs measured relative to each %s's geometric mean (the machine's common "
      "drift taken out): %.2f over all, %.2f over distinct predictions\n",
      by_step ? "sweep" : "round", relative.tau_all, relative.tau_distinct);
  std::printf("kendall tau-b, predicted pipeline vs replay: %.2f over all, %.2f over distinct predictions\n",
              replayed.tau_all, replayed.tau_distinct);
  std::printf(
      "pick / best measured: %.3f; pick / default: %.3f; median |predicted - measured| / measured: step "
      "%.1f%%, pipeline %.1f%% (replay %.1f%%)\n",
      pick / best, pick / fallback, 100 * median_error(predicted, measured),
      100 * median_error(pipe_predicted, pipe_measured), 100 * median_error(pipe_predicted, replay));
  if (const auto control = run_named("control"); control != runs.end()) {
    const double again = nn::median(control->step);
    std::printf(
        "control: the pick's program on %s of its own measured %.3f ms against the pick's %.3f (%.1f%% "
        "apart): candidates closer than that are not ordered by this measurement\n",
        by_step ? "instances" : "pipelines", again, pick,
        100 * std::fabs(again - pick) / std::min(again, pick));
  }
  std::printf(
      "goals (tau >= 0.8, pick within 5%% of the best measured): tau over all %s, distinct %s, beyond the "
      "noise %s, %s-relative %s, pick %s\n",
      a.tau_all >= 0.8 ? "met" : "missed", a.tau_distinct >= 0.8 ? "met" : "missed",
      a.tau_resolved >= 0.8 ? "met" : "missed", by_step ? "sweep" : "round",
      relative.tau_all >= 0.8 ? "met" : "missed", pick / best <= 1.05 ? "met" : "missed");
}

void bench_shape(const Shape& shape, const Flags& f) {
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
  std::vector<Run> runs = plan_runs(shape, f, model, batch);
  if (f.by_step) {
    measure_by_step(c, batch, f, runs);
  } else {
    for (int round = 0; round < f.rounds; ++round) {
      for (size_t k = 0; k < runs.size(); ++k)
        measure_round(model, batch, f.steps, runs[(k + round) % runs.size()]);
    }
  }
  report(runs, f.tie, f.by_step);
  print_load("after this shape");
}

[[noreturn]] void usage(const char* program, int code) {
  std::fprintf(code == 0 ? stdout : stderr,
               "usage: %s [--shapes small,wide,deep] [--devices N] [--top N] [--rounds N] [--steps N] "
               "[--tie FRACTION] [--pin on|off] [--action-cost on|off] [--deferred-cost on|off] "
               "[--cold-cost on|off] [--fit on|off] [--instances N] [--control on|off] "
               "[--interleave steps|rounds]\n",
               program);
  std::exit(code);
}

Flags parse(int argc, char** argv) {
  Flags f;
  for (int i = 1; i < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") usage(argv[0], 0);
    if (i + 1 >= argc) usage(argv[0], 2);  // a flag without its value
    const std::string v = argv[i + 1];
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
    } else if (a == "--tie") {
      f.tie = std::max(0.0, std::atof(v.c_str()));
    } else if (a == "--instances") {
      f.instances = std::max(1, std::atoi(v.c_str()));
    } else if (a == "--interleave" && (v == "steps" || v == "rounds")) {
      f.by_step = v == "steps";
    } else if ((a == "--pin" || a == "--action-cost" || a == "--deferred-cost" || a == "--cold-cost" ||
                a == "--fit" || a == "--control") &&
               (v == "on" || v == "off")) {
      bool& flag = a == "--pin"           ? f.pin
                   : a == "--action-cost" ? f.action_cost
                   : a == "--cold-cost"   ? f.cold_cost
                   : a == "--fit"         ? f.fit
                   : a == "--control"     ? f.control
                                          : f.deferred_cost;
      flag = v == "on";
    } else {
      usage(argv[0], 2);
    }
  }
  return f;
}

}  // namespace

int main(int argc, char** argv) {
  const Flags f = parse(argc, argv);
  omp_set_num_threads(1);  // the optimizer step on this thread, as measured (price_executor with 1 thread)
  // This thread profiles, and runs the optimizer step while the stage threads wait: core 0, beside stage 0
  // (idle then). Stage threads it creates inherit it until the Pipeline pins them.
  const bool pinned = f.pin && pl::pin_thread_to_core(0);
  print_load("at start");
  std::printf(
      "devices %d, top %d distinct programs, %d rounds of %d steps (+2 warm-up), the candidates taking turns "
      "%s, ties within %.1f%%, threads %s, executor's action factors %s, deferred Bw %s, cold B %s, factors "
      "%s\n",
      f.devices, f.top, f.rounds, f.steps, f.by_step ? "step by step" : "round by round", 100 * f.tie,
      pinned ? "pinned (stage s on core s, this one on 0)" : "not pinned",
      f.action_cost ? "priced" : "not priced", f.action_cost && f.deferred_cost ? "priced" : "not priced",
      f.action_cost && f.cold_cost ? "priced" : "not priced",
      f.fit ? "fitted across the sizes" : "as measured at each size");
  for (const std::string& name : f.shapes) {
    const auto& shapes = all_shapes();
    const auto it =
        std::find_if(shapes.begin(), shapes.end(), [&](const Shape& s) { return s.name == name; });
    if (it == shapes.end()) {
      std::fprintf(stderr, "unknown shape '%s' (small, wide, deep)\n", name.c_str());
      return 2;
    }
    bench_shape(*it, f);
  }
  print_load("at the end");
  return 0;
}
