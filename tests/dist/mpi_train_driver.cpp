// The multi-process tests: run under an MPI launcher (tests/CMakeLists.txt registers
// `mpirun -np 2` and `-np 4`, over shared memory and over TCP), one launch per case list, because a
// launch costs more than a tiny model's training.
//
// For every schedule x recompute policy with S = the launcher's process count, rank 0 trains the same
// tiny GPT for a few steps in one process (S stage threads, the reference) and the ranks train it as one
// process per stage; every step's loss must agree within 1e-5 relative. Then data parallelism: S = np/2
// stages x 2 replicas, and (np = 2) 1 stage x 2 replicas, each against the plain single-process loop on
// the full batch over 20 steps, within 1e-5 relative; and with small gradient buckets (several Reduce
// actions per stage) for 1F1B, interleaved and ZB-H1 over 6 steps.
//
// Then resharding: a checkpoint written across processes (a shard per stage, nn/checkpoint_shards.h) resumes
// in one process with another stage count, whose checkpoint resumes across processes as stages x 2
// replicas; the losses of the three legs continue the uninterrupted one-process run's, within 1e-5 relative.
//
// Exit status 0 when every case agrees on every rank; the mismatches are printed by rank 0.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "nn/trainer.h"
#include "pipeline/dist/mpi_world.h"
#include "pipeline/run/train_runner.h"
#include "pipeline/schedule/generators.h"

namespace {

using brigade::nn::TrainOptions;
using brigade::pipeline::PipelineRunner;
using brigade::pipeline::ProcessGroup;

constexpr double kTolerance = 1e-5;  // relative, per step

// A small text corpus (no held-out task: the final evaluation is one validation batch).
std::string write_corpus() {
  const std::string path = "/tmp/brigade_mpi_driver_" + std::to_string(::getpid()) + ".txt";
  std::ofstream out(path);
  for (int i = 0; i < 200; ++i) out << "the brigade passes bucket " << i % 17 << " down the line; ";
  return path;
}

TrainOptions tiny(const std::string& corpus) {
  TrainOptions o;
  o.data = corpus;
  o.layers = 6;  // 8 pipeline layers: 4 stages x 2 chunks
  o.heads = 2;
  o.embd = 16;
  o.block = 8;
  o.batch = 16;
  o.steps = 3;
  o.warmup = 1;
  o.eval_every = 0;
  o.eval_iters = 1;
  o.microbatches = 8;
  o.threads = 1;
  o.timeout = 120.0;  // oversubscribed CI cores
  return o;
}

std::vector<double> train_losses(const TrainOptions& o, ProcessGroup* world) {
  PipelineRunner runner(o, world);
  const bool pipelined = world != nullptr || o.uses_pipeline();
  return brigade::nn::train(o, {}, pipelined ? &runner : nullptr).losses;
}

struct Checker {
  ProcessGroup& world;
  int failures = 0;
  int cases = 0;

  // Rank 0 compares `got` (the ranks' run) with `want` (its single-process run).
  void compare(const std::string& name, const std::vector<double>& got, const std::vector<double>& want) {
    if (world.rank() != 0) return;
    ++cases;
    double worst = 0.0;
    bool ok = got.size() == want.size();
    for (size_t i = 0; ok && i < got.size(); ++i) {
      const double error = std::fabs(got[i] - want[i]) / std::max(std::fabs(want[i]), 1e-12);
      worst = std::max(worst, error);
      if (!(error <= kTolerance)) ok = false;
    }
    std::printf("%-6s %-52s %zu steps, worst relative error %.2e\n", ok ? "ok" : "FAIL", name.c_str(),
                got.size(), worst);
    if (!ok) {
      ++failures;
      for (size_t i = 0; i < std::max(got.size(), want.size()); ++i) {
        std::printf("    step %zu: processes %.9g, one process %.9g\n", i, i < got.size() ? got[i] : NAN,
                    i < want.size() ? want[i] : NAN);
      }
    }
    std::fflush(stdout);
  }
};

void pipeline_cases(Checker& check, const std::string& corpus) {
  const int S = check.world.size();
  for (const std::string& schedule : brigade::pipeline::schedule_names()) {
    for (const char* recompute : {"never", "always", "except-last"}) {
      TrainOptions o = tiny(corpus);
      o.stages = S;
      o.schedule = schedule;
      o.recompute = recompute;
      if (schedule == "interleaved" || schedule == "looped-bfs") o.virtual_chunks = 2;
      const std::vector<double> got = train_losses(o, &check.world);
      std::vector<double> want;
      if (check.world.rank() == 0) want = train_losses(o, nullptr);
      check.compare(schedule + " x " + recompute + ", " + std::to_string(S) + " processes", got, want);
    }
  }
}

// One data-parallel layout: the replicas' gradients are averaged by the schedule's Reduce actions, one per
// gradient bucket (pipeline/schedule/reduce_buckets.h); a small --bucket-mb makes several per chunk.
struct DataParallelCase {
  int stages;
  std::string schedule;
  int virtual_chunks;
  double bucket_mb;
  int steps;
};

void data_parallel_cases(Checker& check, const std::string& corpus) {
  const int N = check.world.size();
  std::vector<DataParallelCase> cases = {{N / 2, "1f1b", 1, 1.0, 20}};
  if (N == 2) cases.push_back({1, "1f1b", 1, 0.002, 6});  // D = 2 alone; a bucket per layer
  if (N == 4) {                                           // 2 stages x 2 replicas
    cases.push_back({2, "interleaved", 2, 0.002, 6});     // chunk 1's buckets final before chunk 0's
    cases.push_back({2, "zb-h1", 1, 0.002, 6});           // final at the deferred Bw
  }
  for (const DataParallelCase& c : cases) {
    TrainOptions o = tiny(corpus);
    o.steps = c.steps;
    o.stages = c.stages;
    o.schedule = c.schedule;
    o.virtual_chunks = c.virtual_chunks;
    o.data_parallel = 2;
    o.bucket_mb = c.bucket_mb;
    o.microbatches = c.stages == 1 ? 1 : 4;
    PipelineRunner runner(o, &check.world);
    const std::vector<double> got = brigade::nn::train(o, {}, &runner).losses;
    // Every stage reduces its gradients through Reduce actions: several of them with the small buckets.
    size_t fewest = 1000;
    for (const auto& buckets : runner.pipeline().schedule().buckets)
      fewest = std::min(fewest, buckets.size());
    std::vector<double> want;
    if (check.world.rank() == 0) {
      TrainOptions plain = tiny(corpus);  // the plain loop on the full batch
      plain.steps = c.steps;
      plain.microbatches = 1;
      want = train_losses(plain, nullptr);
      if (fewest < (c.bucket_mb < 1.0 ? 2u : 1u)) want.push_back(NAN);  // fails the comparison, said below
    }
    check.compare(std::to_string(c.stages) + " stage(s) x 2 replicas, " + c.schedule + ", " +
                      std::to_string(fewest) + "+ buckets/stage vs the full batch",
                  got, want);
  }
}

// Steps options.resume's run (or a fresh one) up to `until`, saves, returns the losses of the steps run.
std::vector<double> run_until(const TrainOptions& o, ProcessGroup* world, int64_t until) {
  PipelineRunner runner(o, world);
  brigade::nn::TrainSession session(o, {}, &runner);
  std::vector<double> losses;
  while (session.steps_completed() < until) losses.push_back(session.step().loss);
  session.save();
  return losses;
}

void resharding_case(Checker& check, const std::string& corpus) {
  ProcessGroup& world = check.world;
  const int N = world.size();
  const std::string dir = world.all_gather("/tmp/brigade_mpi_reshard_" + std::to_string(::getpid()))[0];
  if (world.rank() == 0) std::filesystem::create_directories(dir);
  TrainOptions o = tiny(corpus);
  o.steps = 6;
  o.microbatches = 4;
  o.stages = N;
  std::vector<double> want;
  if (world.rank() == 0) want = train_losses(o, nullptr);  // one process, N stage threads, uninterrupted

  TrainOptions across = o;  // N processes, one stage each
  across.save = dir + "/across.safetensors.index.json";
  std::vector<double> got = run_until(across, &world, 2);
  world.all_gather("");  // every shard and the index are on disk
  if (world.rank() == 0) {
    TrainOptions one = o;  // one process, 2 stage threads
    one.stages = 2;
    one.resume = across.save;
    one.save = dir + "/one.safetensors";
    for (double loss : run_until(one, nullptr, 4)) got.push_back(loss);
  }
  world.all_gather("");
  TrainOptions replicas = o;  // N / 2 stages x 2 replicas
  replicas.stages = N / 2;
  replicas.data_parallel = 2;
  replicas.resume = dir + "/one.safetensors";
  replicas.save = dir + "/replicas.safetensors.index.json";
  for (double loss : run_until(replicas, &world, 6)) got.push_back(loss);
  check.compare(std::to_string(N) + " processes -> 1 process -> " + std::to_string(N / 2) +
                    " stage(s) x 2 replicas, resumed from checkpoints",
                got, want);
  world.all_gather("");
  if (world.rank() == 0) std::filesystem::remove_all(dir);
}

}  // namespace

int main() {
  brigade::pipeline::dist::MpiWorld& mpi = brigade::pipeline::dist::MpiWorld::get();
  std::unique_ptr<ProcessGroup> world = mpi.world_group(600.0);
  const std::string corpus = write_corpus();
  Checker check{*world};
  int status = 0;
  try {
    pipeline_cases(check, corpus);
    data_parallel_cases(check, corpus);
    resharding_case(check, corpus);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d: %s\n", world->rank(), e.what());
    mpi.announce_failure("rank " + std::to_string(world->rank()) + ": " + e.what());
    status = 1;
  }
  std::remove(corpus.c_str());
  if (status == 0) {
    std::vector<double> failures{static_cast<double>(check.failures)};
    world->all_reduce_sum(failures);
    if (world->rank() == 0) std::printf("%d cases, %d failed\n", check.cases, check.failures);
    status = failures[0] == 0.0 ? 0 : 1;
  }
  world.reset();
  return status;
}
