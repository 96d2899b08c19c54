// Pipeline scaling: throughput of a small GPT against stages S in {1, 2, 4, 8} and microbatches M in
// {1, 4, 32} (GPipe's Table 2 layout), simulated from per-layer costs measured on this machine and
// measured by running the executor with one CPU thread group per stage.
//
//   ./pipeline_scaling_bench --table            # the tables of docs/pipeline.md (profile, partitions,
//                                               # simulated and measured throughput)
//   ./pipeline_scaling_bench --table --threads 2 --steps 9
//   ./pipeline_scaling_bench --table --device cuda  # one GPU, a compute + copy stream per stage
//   ./pipeline_scaling_bench --benchmark_filter=PipelineStep/2/4   # Google Benchmark cases
//
// The model: 8 blocks of n_embd 128, 4 heads, context 64, vocabulary 16 (wider than `brigade
// train`'s default of 2 blocks of 64, so that 8 stages have a block each and there is work to cut), global
// batch 32, no dropout. A microbatch holds 32 / M sequences; M = 1 is the unpipelined step when S = 1.
//
// Simulated. For each microbatch size the layers are profiled (profile.h: median of 15 forward and backward
// times, one OpenMP thread unless --threads, timed with the thread's CPU clock when one thread, so that a
// busy machine does not inflate the costs), cut by measured time into S stages (partition.h) and fed to
// the simulator (simulator.h) as per-stage forward/backward costs of a GPipe schedule without
// recomputation, transfers free (in-process hand-offs do not copy). Throughput = batch / step time. Each
// stage is assumed to have its own processor, like GPipe's one accelerator per partition.
//
// Measured. The executor runs forward_backward on the same batch with the same partition, each stage on
// its own host thread with --threads OpenMP threads; the step time is the median of --steps steps after one
// warm-up. Beside it: the same steps replayed through the simulator with their own mean action costs
// (simulate_measured: the difference to the measured step is time between actions, i.e. hand-offs and
// waiting for a core), and each configuration's CPU share (thread CPU time over wall time inside the
// stages' compute actions, lowest stage). A machine with fewer cores than S x threads cannot show the
// simulated speed-up: its stages take turns on the cores, which the CPU share shows. With --device cuda
// every stage runs on that one GPU with its own compute and copy streams (layers profiled and actions timed
// with CUDA events; the CPU share does not apply and reads 1).
#include <benchmark/benchmark.h>
#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "nn/gpt.h"
#include "pipeline/plan/partition.h"
#include "pipeline/plan/profile.h"
#include "pipeline/plan/simulator.h"
#include "pipeline/run/executor.h"
#include "pipeline/schedule/generators.h"
#include "tensor/tensor.h"

namespace {

using brigade::Tensor;
namespace pl = brigade::pipeline;

constexpr int64_t kBatch = 32, kT = 64, kVocab = 16;
const std::vector<int> kStages{1, 2, 4, 8};
const std::vector<int> kMicrobatches{1, 4, 32};
brigade::Device g_device =
    brigade::Device::cpu();  // --device: where the model, the batch and every stage live

brigade::nn::GPTConfig model_config() {
  brigade::nn::GPTConfig c;
  c.vocab_size = kVocab;
  c.block_size = kT;
  c.n_layer = 8;
  c.n_head = 4;
  c.n_embd = 128;
  return c;
}

Tensor random_ids(int64_t rows, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int64_t> pick(0, kVocab - 1);
  std::vector<int64_t> ids(static_cast<size_t>(rows * kT));
  for (auto& id : ids) id = pick(rng);
  return brigade::from_vector(ids, {rows, kT});
}

struct Data {
  Tensor ids, targets;
};
Data batch_of(int64_t rows) {
  return {random_ids(rows, 1).to(g_device), random_ids(rows, 2).to(g_device)};
}

pl::ModelProfile profile_at(brigade::nn::GPT& model, int64_t microbatch, int repeats) {
  const Data d = batch_of(microbatch);
  pl::ProfileOptions o;
  o.repeats = repeats;
  o.warmup = 2;
  o.loss = [&](const Tensor& logits) { return brigade::nn::GPT::loss(logits, d.targets); };
  // With one thread per stage, the thread's CPU time is the layer's work even on a busy machine.
  o.thread_cpu_time = omp_get_max_threads() == 1 && g_device.is_cpu();
  return pl::profile_layers(model, d.ids, o);
}

// Simulated step time (ms) of GPipe with the time partition of `profile` into S stages and M microbatches.
double simulated_ms(const pl::ModelProfile& profile, int S, int M, pl::Partition* out = nullptr) {
  pl::PartitionOptions po;
  po.method = pl::PartitionMethod::Time;
  po.stages = S;
  const pl::Partition part = pl::make_partition(profile, po);
  const pl::Costs costs = pl::profile_costs(profile, part);
  if (out) *out = part;
  return pl::simulate(pl::make_schedule("gpipe", S, M), costs).step_time;
}

// One measured configuration: medians over the timed steps.
struct Measured {
  double ms = 0.0;         // the pipeline's span (StepResult::step_ms)
  double replay_ms = 0.0;  // simulate_measured: the schedule replayed with the measured action costs
  double cpu_share = 1.0;  // the stages' thread CPU time / wall time in compute actions (lowest stage)
};

// The executor's forward_backward (the simulation has no optimizer step), median of `steps` after one
// warm-up step.
Measured measure(const pl::Partition& part, int M, int threads, int steps) {
  brigade::nn::GPT model(model_config(), 1);
  model.to(g_device);
  pl::PipelineConfig pc;
  pc.schedule = "gpipe";
  pc.stages = part.stages;
  pc.microbatches = M;
  pc.threads_per_stage = threads;
  for (const pl::ChunkPlan& c : part.chunks) pc.balance.push_back(c.layers());
  pl::Pipeline pipe(model, pc);
  const Data d = batch_of(kBatch);
  std::vector<double> ms, replay, share;
  for (int i = 0; i <= steps; ++i) {
    model.zero_grad();
    const pl::StepResult r = pipe.forward_backward(d.ids, d.targets);
    if (i == 0) continue;
    ms.push_back(r.step_ms);
    replay.push_back(pl::simulate_measured(r.trace).step_time);
    double lowest = 1.0;
    for (const auto& stage : r.trace.stages) {
      double cpu = 0.0, wall = 0.0;
      for (const pl::TraceEvent& e : stage) {
        if (!pl::is_compute(e.action.kind) || e.cpu_ms < 0.0) continue;
        cpu += e.cpu_ms;
        wall += e.end_ms - e.start_ms;
      }
      if (wall > 0.0) lowest = std::min(lowest, cpu / wall);
    }
    share.push_back(lowest);
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  return {median(ms), median(replay), median(share)};
}

std::string cell(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.2f", v);
  return b;
}

void print_table(const std::string& title, const std::map<std::pair<int, int>, double>& value,
                 const std::map<std::pair<int, int>, double>& bubble) {
  if (!title.empty()) std::printf("\n%s\n", title.c_str());
  std::printf("\n| M \\ S |");
  for (int S : kStages) std::printf(" %d |", S);
  std::printf("\n|---|");
  for (size_t i = 0; i < kStages.size(); ++i) std::printf("---|");
  std::printf("\n");
  for (int M : kMicrobatches) {
    std::printf("| %d |", M);
    for (int S : kStages) {
      std::printf(" %s", cell(value.at({S, M})).c_str());
      if (!bubble.empty()) std::printf(" (%.0f%%)", 100.0 * bubble.at({S, M}));
      std::printf(" |");
    }
    std::printf("\n");
  }
}

int run_tables(int threads, int steps) {
  omp_set_num_threads(threads);
  brigade::nn::GPT model(model_config(), 1);
  model.to(g_device);
  std::printf(
      "pipeline scaling: GPT 8 x 128, T %lld, vocab %lld, batch %lld; %d OpenMP thread(s) per stage; "
      "every stage on %s; this machine has %u hardware threads\n",
      static_cast<long long>(kT), static_cast<long long>(kVocab), static_cast<long long>(kBatch), threads,
      g_device.str().c_str(), std::thread::hardware_concurrency());
  double load[3] = {0, 0, 0};
  if (getloadavg(load, 3) == 3)
    std::printf("load average at the start: %.2f %.2f %.2f\n", load[0], load[1], load[2]);
  std::map<std::pair<int, int>, double> sim_tput, sim_bubble, meas_tput, meas_ms;
  std::map<std::pair<int, int>, pl::Partition> parts;
  for (int M : kMicrobatches) {
    const pl::ModelProfile profile = profile_at(model, kBatch / M, 15);
    if (M == 4) {
      std::printf("\n%s", profile.table().c_str());
      for (const char* method : {"params", "time", "memory"}) {
        pl::PartitionOptions po;
        po.method = pl::parse_partition_method(method);
        po.stages = 4;
        std::printf("\n%s", pl::make_partition(profile, po).table().c_str());
      }
    }
    double serial = 0.0;
    for (const pl::LayerProfile& l : profile.layers) serial += l.time_ms();
    for (int S : kStages) {
      pl::Partition part;
      const double T = simulated_ms(profile, S, M, &part);
      parts[{S, M}] = part;
      sim_tput[{S, M}] = kBatch / T;
      // Idle fraction of S processors: 1 - (all work) / (S x step time).
      sim_bubble[{S, M}] = std::max(0.0, 1.0 - M * serial / (S * T));
    }
  }
  const double base = sim_tput.at({1, 1}), base2 = sim_tput.at({2, 1});
  std::map<std::pair<int, int>, double> norm, norm2;
  for (auto& [key, v] : sim_tput) norm[key] = v / base, norm2[key] = v / base2;
  print_table("simulated throughput, relative to S = 1, M = 1 (idle fraction of the S processors)", norm,
              sim_bubble);
  print_table("simulated throughput, relative to S = 2, M = 1 (GPipe's normalisation)", norm2, {});

  std::map<std::pair<int, int>, double> meas_replay, meas_share;
  for (int M : kMicrobatches) {
    for (int S : kStages) {
      const Measured m = measure(parts.at({S, M}), M, threads, steps);
      meas_tput[{S, M}] = kBatch / m.ms;
      meas_ms[{S, M}] = m.ms;
      meas_replay[{S, M}] = m.replay_ms;
      meas_share[{S, M}] = m.cpu_share;
    }
  }
  const double mbase = meas_tput.at({1, 1});
  std::map<std::pair<int, int>, double> mnorm;
  for (auto& [key, v] : meas_tput) mnorm[key] = v / mbase;
  print_table("measured throughput (executor, CPU threads), relative to S = 1, M = 1", mnorm, {});
  print_table("measured step times (ms)", meas_ms, {});
  print_table("the measured steps replayed with their own mean action costs (simulate_measured, ms)",
              meas_replay, {});
  print_table(
      "CPU share in compute actions, lowest stage (thread CPU time / wall time; 1: the stage had a "
      "core whenever it worked; below 1: it waited for one: more stages than cores, or a busy machine)",
      meas_share, {});
  if (getloadavg(load, 3) == 3)
    std::printf("\nload average at the end: %.2f %.2f %.2f\n", load[0], load[1], load[2]);
  std::map<std::pair<int, int>, double> sim_ms;
  for (auto& [key, v] : sim_tput) sim_ms[key] = kBatch / v;
  print_table("simulated step times (ms)", sim_ms, {});
  return 0;
}

// Google Benchmark: one measured pipelined forward_backward per iteration. Args: S, M.
void PipelineStep(benchmark::State& state) {
  const int S = static_cast<int>(state.range(0)), M = static_cast<int>(state.range(1));
  brigade::nn::GPT model(model_config(), 1);
  pl::PipelineConfig pc;
  pc.schedule = "gpipe";
  pc.stages = S;
  pc.microbatches = M;
  pc.threads_per_stage = 1;
  model.to(g_device);
  pl::Pipeline pipe(model, pc);
  const Data d = batch_of(kBatch);
  double bubble = 0.0;
  for (auto _ : state) {
    model.zero_grad();
    bubble = pipe.forward_backward(d.ids, d.targets).bubble;
  }
  state.counters["samples/s"] =
      benchmark::Counter(static_cast<double>(kBatch * state.iterations()), benchmark::Counter::kIsRate);
  state.counters["bubble"] = bubble;
}
BENCHMARK(PipelineStep)
    ->ArgsProduct({{1, 2, 4, 8}, {1, 4, 32}})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace

int main(int argc, char** argv) {
  bool table = false;
  int threads = 1, steps = 5;
  std::vector<char*> rest{argv[0]};
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--table") == 0) {
      table = true;
    } else if (std::strcmp(argv[i], "--threads") == 0 && i + 1 < argc) {
      threads = std::max(1, std::atoi(argv[++i]));
    } else if (std::strcmp(argv[i], "--steps") == 0 && i + 1 < argc) {
      steps = std::max(1, std::atoi(argv[++i]));
    } else if (std::strcmp(argv[i], "--device") == 0 && i + 1 < argc) {
      g_device = brigade::Device::parse(argv[++i]);
    } else {
      rest.push_back(argv[i]);
    }
  }
  try {
    if (table) return run_tables(threads, steps);
    int n = static_cast<int>(rest.size());
    benchmark::Initialize(&n, rest.data());
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "pipeline_scaling_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
