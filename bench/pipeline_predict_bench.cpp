// Predicted vs measured step time of a pipeline run: does the simulator, fed with per-layer costs
// measured on this machine, predict what the executor then does?
//
//   ./pipeline_predict_bench                      # the default pipeline run of `brigade train`
//   ./pipeline_predict_bench --steps 30 --microbatches 8 --schedule gpipe
//   ./pipeline_predict_bench --device cuda        # every stage on one GPU, a compute + copy stream each
//
// The configuration is `brigade train`'s default (nn::TrainOptions: the default addition corpus and its
// vocabulary, GPT 2 layers x 4 heads x 64, block 13, batch 128, AdamW, one OpenMP thread) with the
// pipeline defaults of the default run: 2 stages, 4 microbatches, 1f1b, recompute never, partition by
// parameters, one OpenMP thread per stage. Flags change the pipeline part (and --batch).
//
// What it does:
//   1. profiles every layer (profile.h) at the microbatch the stages will run (batch / M sequences), on
//      one thread (--threads), median of --repeats after warm-up, in thread CPU time (one thread: exact);
//   2. cuts the model (partition.h) and simulates the schedule (simulator.h) with each stage's costs the
//      sums of its layers' forward and backward times, and the transfer time (Costs::transfer) one
//      hand-off between two threads takes on this machine, measured apart by passing a small tensor back
//      and forth through an InProcessTransport: the prediction;
//   3. runs --steps train_step()s of the executor (after --warmup untimed ones) and takes the median of the
//      pipeline's span (StepResult::step_ms: first action start to last action end, the quantity the
//      simulator predicts; the optimizer step after the barrier is reported apart);
//   4. replays each measured step's own action durations through the simulator (simulate_measured), which
//      splits the gap:
//        replay - predicted   the actions took longer (or shorter) than their layers did when profiled;
//        measured - replay    time the schedule does not contain: waking a stage, hand-offs, bookkeeping
//                             between actions.
//      It also prints where the time between actions went: how long the stages that waited for a message
//      took from its send to their recv's return (the wake-up), and the gaps between consecutive actions.
// The relative difference is |measured - predicted| / measured.
//
// Rounds. A shared virtual machine's cores change speed from one second to the next (another tenant, a
// sibling hyper-thread): a profile taken while a core is fast predicts a step measured while it is slow
// badly, whatever the model. So the bench repeats 1-3 --rounds times (default 5), each round profiling,
// predicting and measuring afresh, and reports each round's difference and their median — the same pairing a
// side-by-side benchmark uses against drift. The first round is printed in full.
//
// On a GPU (--device cuda) the layers are profiled and the compute actions timed with CUDA events; the
// stages' host threads only enqueue, so the CPU share and the thread-CPU replay do not apply (no cpu_ms).
//
// A shared machine. The comparison is fair only when every stage has a core whenever it works. Each
// stage's CPU share (its thread CPU time over the wall time of its compute actions) says whether it had:
// below 0.95 the bench warns, and the replay in thread CPU time (trace.h, TraceEvent::cpu_ms) gives what
// the step costs without the waits for a core. The layers are profiled with the thread CPU clock (exact
// with one thread per stage, and blind to the waits for a core); --wall-clock times them with events.
// On Linux with autogroup scheduling (/proc/sys/kernel/sched_autogroup_enabled = 1) `nice` only ranks
// processes within one autogroup (one per setsid): other autogroups' `nice -n 19` builds still take their
// equal share of the cores. docs/pipeline.md says how the figures there were taken. The load average is
// printed at the start and the end.
#include <omp.h>
#include <sched.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "bench/bench_support.h"
#include "nn/data.h"
#include "nn/gpt.h"
#include "nn/optim.h"
#include "nn/statistics.h"
#include "nn/trainer.h"
#include "pipeline/plan/partition.h"
#include "pipeline/plan/profile.h"
#include "pipeline/plan/simulator.h"
#include "pipeline/run/executor.h"
#include "pipeline/run/hand_off.h"
#include "pipeline/run/trace.h"
#include "pipeline/run/transport.h"
#include "pipeline/schedule/generators.h"
#include "tensor/generator.h"
#include "tensor/stream.h"
#include "tensor/tensor.h"

namespace {

using brigade::Tensor;
namespace nn = brigade::nn;
namespace pl = brigade::pipeline;

struct Flags {
  int stages = 2;
  int microbatches = 4;
  std::string schedule = "1f1b";
  std::string recompute = "never";
  std::string partition = "params";
  int threads = 1;    // OpenMP threads per stage (and for the profile)
  int64_t batch = 0;  // 0: TrainOptions' default
  int steps = 30;
  int warmup = 3;
  int repeats = 10;
  bool cpu_clock = true;       // profile with the thread CPU clock (--wall-clock: events on the wall clock)
  bool per_step = false;       // print each measured step's hand-off figures
  int rounds = 5;              // profile + predict + measure this many times; report the median difference
  std::string device = "cpu";  // cpu, or cuda[:N]: every stage on that device (a stream pair per stage)
};

// Only the first round prints its details (print); every round prints its summary line (std::printf).
bool g_verbose = true;
template <typename... Args>
void print(const char* format, Args... args) {
  if (g_verbose) std::printf(format, args...);
}

void print_load(const char* when) {
  double load[3] = {0, 0, 0};
  if (getloadavg(load, 3) == 3)
    print("load average %s: %.2f %.2f %.2f (%u hardware threads)\n", when, load[0], load[1], load[2],
          std::thread::hardware_concurrency());
}

// Where a measured step's time between actions went.
struct HandOffs {
  double wake_ms = 0.0;      // recvs that waited: from the message's send to the recv's return, summed
  int waited = 0;            // how many recvs waited (the message was not there when they began)
  double gaps_ms = 0.0;      // between one action's end and the next one's start on a stage, summed
  double max_wake_ms = 0.0;  // the longest single wake-up
  double max_gap_ms = 0.0;   // the longest gap between two actions, and where it was
  std::string max_gap_at;
  double late_start_ms = 0.0;  // how much later than the earliest stage the first stage began its list
};

HandOffs hand_offs(const pl::ExecutionTrace& trace) {
  HandOffs h;
  const pl::Schedule& schedule = trace.schedule;
  auto same = [](const pl::TransferTag& a, const pl::TransferTag& b) {
    return a.gradient == b.gradient && a.microbatch == b.microbatch && a.from_stage == b.from_stage &&
           a.from_chunk == b.from_chunk && a.to_stage == b.to_stage && a.to_chunk == b.to_chunk;
  };
  double earliest = 1e300;
  for (const auto& events : trace.stages) {
    if (!events.empty()) earliest = std::min(earliest, events.front().start_ms);
  }
  if (!trace.stages.empty() && !trace.stages.front().empty())
    h.late_start_ms = trace.stages.front().front().start_ms - earliest;
  for (size_t s = 0; s < trace.stages.size(); ++s) {
    const auto& events = trace.stages[s];
    for (size_t i = 0; i < events.size(); ++i) {
      const pl::TraceEvent& e = events[i];
      if (i > 0) {
        const double gap = std::max(0.0, e.start_ms - events[i - 1].end_ms);
        h.gaps_ms += gap;
        if (gap > h.max_gap_ms) {
          h.max_gap_ms = gap;
          h.max_gap_at = "stage " + std::to_string(s) + ": " + pl::to_string(events[i - 1].action, false) +
                         " -> " + pl::to_string(e.action, false);
        }
      }
      if (e.action.kind != pl::ActionKind::RecvActivation && e.action.kind != pl::ActionKind::RecvGrad)
        continue;
      const pl::TransferTag tag = pl::transfer_tag(schedule, static_cast<int>(s), e.action);
      for (const pl::TraceEvent& sent : trace.stages[static_cast<size_t>(tag.from_stage)]) {
        if (sent.action.kind != pl::ActionKind::SendActivation &&
            sent.action.kind != pl::ActionKind::SendGrad)
          continue;
        if (!same(pl::transfer_tag(schedule, tag.from_stage, sent.action), tag)) continue;
        // The message was posted inside the send's interval; its end is when the sender moved on.
        if (sent.end_ms > e.start_ms) {
          const double wake = std::max(0.0, e.end_ms - sent.end_ms);
          h.wake_ms += wake;
          h.max_wake_ms = std::max(h.max_wake_ms, wake);
          ++h.waited;
        }
        break;
      }
    }
  }
  return h;
}

/// One round: profile, predict, measure. Returns |measured - simulated| / measured.
double run(const Flags& f) {
  nn::TrainOptions to;  // brigade train's defaults
  if (f.batch > 0) to.batch = f.batch;
  omp_set_num_threads(f.threads);
  const int64_t block = to.resolved_block();
  const nn::TrainData data = nn::load_train_data(to, block);
  nn::GPTConfig config;
  config.vocab_size = data.tokenizer.vocab_size();
  config.block_size = block;
  config.n_layer = to.layers;
  config.n_head = to.heads;
  config.n_embd = to.embd;
  config.dropout = to.dropout;
  const brigade::Device device = brigade::Device::parse(f.device);
  nn::GPT model(config, to.seed);
  model.to(device);
  model.train();
  brigade::Generator generator(to.seed);
  const nn::Batch batch = nn::random_batch(data.train, to.batch, block, generator, device, data.train_starts);
  const int M = f.microbatches, S = f.stages;
  if (to.batch % M != 0) {
    throw std::invalid_argument("batch " + std::to_string(to.batch) + " does not divide into " +
                                std::to_string(M) + " microbatches");
  }
  const int64_t per = to.batch / M;

  print(
      "pipeline prediction: GPT %lld layers x %lld heads x %lld, block %lld, vocab %lld, batch %lld; "
      "%s, %d stages, %d microbatches of %lld, recompute %s, partition by %s; %d OpenMP thread(s) "
      "per stage; on %s\n",
      static_cast<long long>(config.n_layer), static_cast<long long>(config.n_head),
      static_cast<long long>(config.n_embd), static_cast<long long>(block),
      static_cast<long long>(config.vocab_size), static_cast<long long>(to.batch), f.schedule.c_str(), S, M,
      static_cast<long long>(per), f.recompute.c_str(), f.partition.c_str(), f.threads, device.str().c_str());
  print_load("at the start");

  // 1. Profile at the stages' microbatch.
  const Tensor ids_mb = batch.x.narrow(0, 0, per).contiguous();
  const Tensor targets_mb = batch.y.narrow(0, 0, per).contiguous();
  pl::ProfileOptions po;
  po.repeats = f.repeats;
  po.warmup = 2;
  po.loss = [&](const Tensor& logits) { return nn::GPT::loss(logits, targets_mb); };
  // The calling thread's CPU clock misses the work of other OpenMP threads: only with one thread.
  po.thread_cpu_time = f.cpu_clock && f.threads == 1 && device.is_cpu();
  const pl::ModelProfile profile = pl::profile_layers(model, ids_mb, po);
  print("\n%s", profile.table().c_str());

  // 2. Partition and predict.
  pl::PartitionOptions parto;
  parto.method = pl::parse_partition_method(f.partition);
  parto.stages = S;
  const pl::Partition part = pl::make_partition(profile, parto);
  print("\n%s", part.table().c_str());
  const pl::Recompute recompute = pl::parse_recompute(f.recompute);
  const pl::Schedule schedule = pl::make_schedule(f.schedule, S, M, 1, recompute);
  pl::Costs predicted_costs = pl::profile_costs(profile, part);
  const pl::Timeline compute_only = pl::simulate(schedule, predicted_costs);
  const double hand_off = pl::measure_hand_off_ms(200);
  predicted_costs.transfer = hand_off;
  const pl::Timeline predicted = pl::simulate(schedule, predicted_costs);

  // 3. Run the executor.
  pl::PipelineConfig pc;
  pc.schedule = f.schedule;
  pc.stages = S;
  pc.microbatches = M;
  pc.recompute = recompute;
  pc.threads_per_stage = f.threads;
  pc.grad_clip = to.grad_clip;
  pc.seed = to.seed;
  for (const pl::ChunkPlan& c : part.chunks) pc.balance.push_back(c.layers());
  pl::Pipeline pipe(model, pc);
  nn::AdamW optimizer(
      nn::decay_groups(model, to.weight_decay),
      nn::AdamWOptions{
          .lr = to.lr, .beta1 = 0.9, .beta2 = 0.99, .eps = 1e-8, .weight_decay = to.weight_decay});
  std::vector<double> span, replay, replay_cpu, optimizer_ms, whole, faults, switches, wake, waited, gaps,
      max_wake, late;
  std::vector<std::vector<double>> fwd(static_cast<size_t>(S)), bwd(static_cast<size_t>(S)),
      busy(static_cast<size_t>(S)), share(static_cast<size_t>(S));
  for (int i = 0; i < f.warmup + f.steps; ++i) {
    rusage before{}, after{};
    getrusage(RUSAGE_SELF, &before);
    const auto start = std::chrono::steady_clock::now();
    const pl::StepResult r = pipe.train_step(batch.x, batch.y, optimizer);
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    getrusage(RUSAGE_SELF, &after);
    if (i < f.warmup) continue;
    span.push_back(r.step_ms);
    replay.push_back(pl::simulate_measured(r.trace).step_time);
    replay_cpu.push_back(pl::simulate_measured(r.trace, /*thread_cpu_time=*/true).step_time);
    optimizer_ms.push_back(r.optimizer_ms);
    whole.push_back(ms);
    faults.push_back(static_cast<double>(after.ru_minflt - before.ru_minflt));
    switches.push_back(static_cast<double>(after.ru_nivcsw - before.ru_nivcsw));
    const HandOffs h = hand_offs(r.trace);
    wake.push_back(h.wake_ms);
    waited.push_back(h.waited);
    gaps.push_back(h.gaps_ms);
    max_wake.push_back(h.max_wake_ms);
    late.push_back(h.late_start_ms);
    if (f.per_step)
      print(
          "step %d: span %.2f, replay %.2f, stage 0 late by %.3f, wake %.3f (longest %.3f), gaps %.3f "
          "(longest %.3f at %s)\n",
          i, r.step_ms, replay.back(), h.late_start_ms, h.wake_ms, h.max_wake_ms, h.gaps_ms, h.max_gap_ms,
          h.max_gap_at.c_str());
    const pl::Costs c = pl::measured_costs(r.trace);
    for (int s = 0; s < S; ++s) {
      fwd[static_cast<size_t>(s)].push_back(c.per_chunk[static_cast<size_t>(s)].forward);
      bwd[static_cast<size_t>(s)].push_back(c.per_chunk[static_cast<size_t>(s)].backward);
      busy[static_cast<size_t>(s)].push_back(r.stages[static_cast<size_t>(s)].busy_ms);
      // How much of its compute actions' wall time the stage's thread actually ran: below 1, it waited for
      // a core (a busy machine) and the wall-clock figures overstate the work.
      double cpu = 0.0, wall = 0.0;
      for (const pl::TraceEvent& e : r.trace.stages[static_cast<size_t>(s)]) {
        if (!pl::is_compute(e.action.kind) || e.cpu_ms < 0.0) continue;
        cpu += e.cpu_ms;
        wall += e.end_ms - e.start_ms;
      }
      share[static_cast<size_t>(s)].push_back(wall > 0.0 ? cpu / wall : 1.0);
    }
  }

  // 4. Report.
  print(
      "\nper stage, one microbatch (ms): profiled layers vs the executor's actions (median of %d "
      "steps)\n",
      f.steps);
  print("%6s %12s %12s %12s %12s %14s %14s %10s\n", "stage", "F profiled", "F measured", "B profiled",
        "B measured", "busy predicted", "busy measured", "CPU share");
  for (int s = 0; s < S; ++s) {
    const pl::ChunkCosts& p = predicted_costs.per_chunk[static_cast<size_t>(s)];
    print("%6d %12.3f %12.3f %12.3f %12.3f %14.2f %14.2f %10.2f\n", s, p.forward,
          nn::median(fwd[static_cast<size_t>(s)]), p.backward, nn::median(bwd[static_cast<size_t>(s)]),
          predicted.stats[static_cast<size_t>(s)].busy, nn::median(busy[static_cast<size_t>(s)]),
          nn::median(share[static_cast<size_t>(s)]));
  }
  const double measured = nn::median(span), simulated = predicted.step_time, replayed = nn::median(replay);
  print("\nstep (pipeline span, no optimizer), median of %d after %d warm-up:\n", f.steps, f.warmup);
  print("  measured                          %9.2f ms\n", measured);
  print(
      "  simulated from the layer profile  %9.2f ms   (bubble %.1f%%; hand-offs of %.3f ms measured "
      "apart; %.2f ms with free hand-offs)\n",
      simulated, 100.0 * predicted.bubble, hand_off, compute_only.step_time);
  print("  replay of the measured actions    %9.2f ms   (simulate_measured; in thread CPU time %.2f ms)\n",
        replayed, nn::median(replay_cpu));
  print("  relative difference |measured - simulated| / measured: %.1f%%\n",
        100.0 * std::abs(measured - simulated) / measured);
  print("  gap split: actions vs profile %+.2f ms, scheduling/hand-off overhead %+.2f ms\n",
        replayed - simulated, measured - replayed);
  print(
      "hand-offs: %.0f recvs waited for their message, %.3f ms in all from send to recv's return "
      "(longest %.3f ms); %.3f ms between actions on all stages; the first stage started %.3f ms after "
      "the earliest (medians per step)\n",
      nn::median(waited), nn::median(wake), nn::median(max_wake), nn::median(gaps), nn::median(late));
  print("whole train_step (span + clip + AdamW + bookkeeping): %.2f ms, of which optimizer %.2f ms\n",
        nn::median(whole), nn::median(optimizer_ms));
  print("per step: %.0f minor page faults, %.0f involuntary context switches (medians)\n", nn::median(faults),
        nn::median(switches));
  double lowest_share = 1.0;
  for (const auto& v : share) lowest_share = std::min(lowest_share, nn::median(v));
  if (lowest_share < 0.95)
    print(
        "warning: a stage ran only %.0f%% of the wall time of its compute actions: it waited for a "
        "core (a busy machine, or more stages x threads than cores), so the measured step is not "
        "what the pipeline costs; compare the replay in thread CPU time\n",
        100.0 * lowest_share);
  print_load("at the end");
  const double difference = std::abs(measured - simulated) / measured;
  std::printf("round: measured %.2f ms, simulated %.2f ms, replay %.2f ms, difference %.1f%%\n", measured,
              simulated, replayed, 100.0 * difference);
  return difference;
}

}  // namespace

int main(int argc, char** argv) {
  Flags f;
  auto usage = [&] {
    std::fprintf(stderr,
                 "usage: %s [--stages S] [--microbatches M] [--schedule gpipe|1f1b|zb-h1] [--recompute "
                 "never|always|except-last] [--partition params|time|memory] [--threads N] [--batch B] "
                 "[--steps N] [--warmup N] [--repeats N] [--rounds N] [--wall-clock] [--per-step] [--device "
                 "cpu|cuda[:N]]\n",
                 argv[0]);
    return 2;
  };
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--wall-clock") {
      f.cpu_clock = false;
    } else if (a == "--per-step") {
      f.per_step = true;
    } else if (!has_value) {
      return usage();
    } else if (a == "--stages") {
      f.stages = std::atoi(argv[++i]);
    } else if (a == "--microbatches") {
      f.microbatches = std::atoi(argv[++i]);
    } else if (a == "--schedule") {
      f.schedule = argv[++i];
    } else if (a == "--recompute") {
      f.recompute = argv[++i];
    } else if (a == "--device") {
      f.device = argv[++i];
    } else if (a == "--partition") {
      f.partition = argv[++i];
    } else if (a == "--threads") {
      f.threads = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--batch") {
      f.batch = std::atoll(argv[++i]);
    } else if (a == "--steps") {
      f.steps = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--warmup") {
      f.warmup = std::max(0, std::atoi(argv[++i]));
    } else if (a == "--rounds") {
      f.rounds = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--repeats") {
      f.repeats = std::max(1, std::atoi(argv[++i]));
    } else {
      return usage();
    }
  }
  if (f.stages < 1 || f.microbatches < 1) return usage();
  try {
    std::vector<double> differences;
    for (int round = 0; round < f.rounds; ++round) {
      g_verbose = round == 0;
      differences.push_back(run(f));
    }
    std::printf("relative difference |measured - simulated| / measured over %d rounds:", f.rounds);
    for (double d : differences) std::printf(" %.1f%%", 100.0 * d);
    std::printf("; median %.1f%%\n", 100.0 * nn::median(differences));
    return 0;
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "pipeline_predict_bench: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "pipeline_predict_bench: %s\n", e.what());
    return 1;
  }
}
