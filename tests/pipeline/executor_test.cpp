// The executor on small GPTs on the CPU: a pipelined step equals the unpipelined step for every schedule,
// recompute policy, stage count and microbatch count; memory measured through the stages' scopes behaves as
// the schedules promise; faults end the step with one clear error and leave nothing half-updated; invalid
// configurations are refused; traces and traffic figures match what ran.
#include "pipeline/run/executor.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <omp.h>

#include <chrono>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "autograd/ops.h"
#include "nn/gpt.h"
#include "nn/optim.h"
#include "pipeline/run/stage_thread.h"
#include "pipeline/run/trace.h"
#include "pipeline/schedule/generators.h"
#include "pipeline_fixtures.h"

namespace brigade::pipeline {
namespace {

using testing::Batch;
using testing::expect_same_parameters;
using ::testing::HasSubstr;
using testing::make_batch;
using testing::reference_backward;
using testing::tiny_config;
using testing::Watchdog;

constexpr double kTolerance = 1e-5;  // relative (norm) error of losses, gradients and parameters
constexpr int64_t kBatch = 8, kT = 8, kVocab = 20;

PipelineConfig make_config(const std::string& schedule, int S, int M, Recompute recompute, int v = 1) {
  return testing::equivalence_config(schedule, S, M, recompute, v);
}

nn::AdamWOptions adamw_options() {
  return testing::equivalence_adamw_options();
}

// One configuration: the loss and every gradient of one step, then the parameters after three AdamW steps,
// against the unpipelined model built from the same seed.
void check_equivalence(const std::string& schedule, Recompute recompute, int S, int M, int v) {
  SCOPED_TRACE(schedule + " recompute=" + to_string(recompute) + " S=" + std::to_string(S) +
               " M=" + std::to_string(M) + " v=" + std::to_string(v));
  // Interleaved needs S * v chunks of whole layers: 6 blocks make 8 layers (2 x 2 or 4 x 2 chunks).
  testing::expect_matches_unpipelined(make_config(schedule, S, M, recompute, v), v > 1 ? 6 : 4, kTolerance);
}

void sweep(const std::string& schedule) {
  const int v = schedule == "interleaved" ? 2 : 1;
  for (Recompute recompute : {Recompute::Never, Recompute::Always, Recompute::ExceptLast}) {
    for (int S : {1, 2, 4}) {
      for (int M : {1, 4, 8}) {
        if (schedule == "interleaved" && M % S != 0) continue;  // interleaving goes in groups of S
        check_equivalence(schedule, recompute, S, M, v);
        if (::testing::Test::HasFatalFailure()) return;
      }
    }
  }
}

TEST(PipelineEquivalence, GPipeMatchesTheUnpipelinedStep) {
  sweep("gpipe");
}
TEST(PipelineEquivalence, OneFOneBMatchesTheUnpipelinedStep) {
  sweep("1f1b");
}
TEST(PipelineEquivalence, InterleavedMatchesTheUnpipelinedStep) {
  sweep("interleaved");
}
TEST(PipelineEquivalence, ZeroBubbleH1MatchesTheUnpipelinedStep) {
  sweep("zb-h1");
}

TEST(PipelineEquivalence, ExplicitBalanceAndUnevenChunks) {
  // 4 blocks = 6 layers cut 1,3,2 over three stages, and 2,2,1,1 for interleaved 2 x 2.
  for (auto [schedule, S, v, balance] :
       {std::tuple{std::string("1f1b"), 3, 1, std::vector<int>{1, 3, 2}},
        std::tuple{std::string("interleaved"), 2, 2, std::vector<int>{2, 2, 1, 1}}}) {
    SCOPED_TRACE(schedule);
    nn::GPT reference(tiny_config(4), 3), piped(tiny_config(4), 3);
    const Batch batch = make_batch(kBatch, kT, kVocab, 2);
    const double expected = reference_backward(reference, batch);
    PipelineConfig pc = make_config(schedule, S, 4, Recompute::ExceptLast, v);
    pc.balance = balance;
    Pipeline pipe(piped, pc);
    EXPECT_EQ(pipe.chunk_layers(0, 0), std::make_pair(0, balance[0]));
    const StepResult r = pipe.forward_backward(batch.ids, batch.targets);
    EXPECT_NEAR(r.loss, expected, kTolerance * expected);
    expect_same_parameters(piped, reference, kTolerance, false);
  }
}

TEST(PipelineEquivalence, GradientsAccumulateOverCallsLikeBackward) {
  // Two forward_backward calls without zero_grad add up, as two loss.backward() calls do.
  nn::GPT reference(tiny_config(), 5), piped(tiny_config(), 5);
  const Batch a = make_batch(kBatch, kT, kVocab, 3), b = make_batch(kBatch, kT, kVocab, 4);
  reference.zero_grad();
  nn::GPT::loss(reference.forward(a.ids), a.targets).backward();
  nn::GPT::loss(reference.forward(b.ids), b.targets).backward();
  Pipeline pipe(piped, make_config("1f1b", 2, 4, Recompute::Never));
  pipe.forward_backward(a.ids, a.targets);
  pipe.forward_backward(b.ids, b.targets);
  expect_same_parameters(piped, reference, kTolerance, false);
}

TEST(PipelineEquivalence, TiedEmbeddingIsSummedAcrossStagesAndTheModelIsLeftAsBuilt) {
  nn::GPT model(tiny_config(), 1);
  const auto keys_before = model.state_dict();
  Pipeline pipe(model, make_config("1f1b", 4, 4, Recompute::Never));
  EXPECT_EQ(pipe.tied_parameter_names(), std::vector<std::string>{"embed.wte.weight"});
  const Batch batch = make_batch(kBatch, kT, kVocab, 1);
  pipe.forward_backward(batch.ids, batch.targets);
  const auto keys_after = model.state_dict();
  ASSERT_EQ(keys_after.size(), keys_before.size());  // no replica left behind as a parameter
  // The head uses the embedding's very tensor again.
  EXPECT_EQ(model.head().lm_head()->parameter("weight").unsafe_impl_id(),
            model.embeddings().wte()->parameter("weight").unsafe_impl_id());
  Pipeline single(model, make_config("1f1b", 1, 4, Recompute::Never));
  EXPECT_TRUE(single.tied_parameter_names().empty());
}

TEST(PipelineRecompute, DropoutMasksAreReplayedExactly) {
  // With dropout the masks come from each stage's generator; recomputation must replay them, so the
  // step is the same with and without it (to rounding: the same kernels run on the same values).
  const nn::GPTConfig config = tiny_config(4, /*dropout=*/0.2);
  const Batch batch = make_batch(kBatch, kT, kVocab, 6);
  for (const char* schedule : {"gpipe", "1f1b", "zb-h1"}) {
    SCOPED_TRACE(schedule);
    nn::GPT keep(config, 11), recompute(config, 11);
    PipelineConfig a = make_config(schedule, 2, 4, Recompute::Never), b = a;
    b.recompute = Recompute::Always;
    a.seed = b.seed = 99;
    Pipeline pa(keep, a), pb(recompute, b);
    const StepResult ra = pa.forward_backward(batch.ids, batch.targets);
    const StepResult rb = pb.forward_backward(batch.ids, batch.targets);
    EXPECT_DOUBLE_EQ(ra.loss, rb.loss);
    expect_same_parameters(recompute, keep, 1e-6, false);
    // And dropout really was on: the loss differs from the eval-mode loss.
    nn::GPT eval_model(config, 11);
    eval_model.eval();
    const double eval_loss = nn::GPT::loss(eval_model.forward(batch.ids), batch.targets).item();
    EXPECT_GT(std::fabs(ra.loss - eval_loss), 1e-4);
  }
}

// ---- memory ---------------------------------------------------------------------------------------------

struct MemoryRun {
  StepResult result;
  std::vector<double> per_microbatch;  // per stage: bytes one F leaves alive (activations + output)
  std::vector<double> most_held;       // per stage: most microbatches' activations alive at an action's end
};

// An 8-block GPT on 4 stages with 8 microbatches of 2 sequences of 16 tokens.
MemoryRun run_memory(const std::string& schedule, Recompute recompute) {
  nn::GPTConfig config = tiny_config(8);
  config.block_size = 16;
  nn::GPT model(config, 2);
  const Batch batch = make_batch(16, 16, kVocab, 8);
  Pipeline pipe(model, make_config(schedule, 4, 8, recompute));
  pipe.forward_backward(batch.ids, batch.targets);  // warm-up: allocator and thread-local state
  model.zero_grad();
  MemoryRun run;
  run.result = pipe.forward_backward(batch.ids, batch.targets);
  for (size_t s = 0; s < run.result.trace.stages.size(); ++s) {
    const auto& events = run.result.trace.stages[s];
    // The first F's growth of the scope: what one microbatch keeps until its backward.
    double before = 0.0, per_mb = 0.0;
    for (const TraceEvent& e : events) {
      if (e.action.kind == ActionKind::Forward) {
        per_mb = static_cast<double>(e.scope_bytes) - before;
        break;
      }
      before = static_cast<double>(e.scope_bytes);
    }
    // At the end of every F: live bytes minus the gradients (allocated by the first backward).
    const double grads = static_cast<double>(run.result.stages[s].gradient_bytes);
    bool after_backward = false;
    double most = 0.0;
    for (const TraceEvent& e : events) {
      const ActionKind k = e.action.kind;
      if (k == ActionKind::Backward || k == ActionKind::BackwardWeight) after_backward = true;
      if (k == ActionKind::Forward || k == ActionKind::Recompute) {
        most = std::max(most, static_cast<double>(e.scope_bytes) - (after_backward ? grads : 0.0));
      }
    }
    run.per_microbatch.push_back(per_mb);
    run.most_held.push_back(most / per_mb);
  }
  return run;
}

TEST(PipelineMemory, RecomputeAlwaysCutsEachStagesActivationPeakThreefold) {
  const MemoryRun never = run_memory("gpipe", Recompute::Never);
  const MemoryRun always = run_memory("gpipe", Recompute::Always);
  for (size_t s = 0; s < 4; ++s) {
    const double a = static_cast<double>(never.result.stages[s].activation_peak_bytes);
    const double b = static_cast<double>(always.result.stages[s].activation_peak_bytes);
    std::printf("stage %zu: activation peak never %.0f KiB, always %.0f KiB (%.1fx)\n", s, a / 1024, b / 1024,
                a / b);
    EXPECT_GT(b, 0.0);
    EXPECT_GE(a, 3.0 * b) << "stage " << s;
  }
}

TEST(PipelineMemory, OneFOneBHoldsAtMostStagesMicrobatchesGPipeHoldsAll) {
  const int S = 4, M = 8;
  const MemoryRun gpipe = run_memory("gpipe", Recompute::Never);
  const MemoryRun one_f_one_b = run_memory("1f1b", Recompute::Never);
  for (int s = 0; s < S; ++s) {
    std::printf("stage %d: one microbatch %.0f KiB; most held: gpipe %.2f, 1f1b %.2f microbatches\n", s,
                gpipe.per_microbatch[s] / 1024, gpipe.most_held[s], one_f_one_b.most_held[s]);
    // GPipe: after the last forward every microbatch is alive (allow 3% for allocator rounding).
    EXPECT_GE(gpipe.most_held[s], 0.97 * M) << "stage " << s;
    // 1F1B: stage s has at most S - s in flight (and so never more than S); a quarter of a microbatch of
    // slack for boundary tensors waiting in the next stage's mailbox.
    EXPECT_LE(one_f_one_b.most_held[s], S - s + 0.25) << "stage " << s;
    EXPECT_GE(one_f_one_b.most_held[s], S - s - 0.25) << "stage " << s;
    // The measured peaks say the same.
    EXPECT_GT(gpipe.result.stages[s].activation_peak_bytes,
              one_f_one_b.result.stages[s].activation_peak_bytes);
  }
}

// ---- faults ----------------------------------------------------------------------------------------------

std::vector<Tensor> snapshot(const nn::Module& model) {
  std::vector<Tensor> out;
  for (const Tensor& p : model.parameters()) out.push_back(p.detach().clone());
  return out;
}

void expect_unchanged(const nn::Module& model, const std::vector<Tensor>& before) {
  const auto params = model.parameters();
  ASSERT_EQ(params.size(), before.size());
  for (size_t i = 0; i < params.size(); ++i) {
    EXPECT_EQ(params[i].to_vector<float>(), before[i].to_vector<float>()) << "parameter " << i << " changed";
    EXPECT_FALSE(params[i].grad().defined()) << "parameter " << i << " kept a partial gradient";
  }
}

TEST(PipelineFaults, AnInjectedFaultEndsTheStepWithOneClearErrorForEverySchedule) {
  const Batch batch = make_batch(kBatch, kT, kVocab, 5);
  for (const std::string& schedule : schedule_names()) {
    const int v = schedule == "interleaved" ? 2 : 1;
    const int chunks = chunks_per_stage(schedule, v);  // the V schedules hold two without asking
    const nn::GPTConfig config = tiny_config(chunks > 1 ? 6 : 4);
    const int M = std::max(4, smallest_microbatches(schedule, 4));
    // (stage, kind, microbatch): the first stage's first forward (every other stage is blocked in recv),
    // a middle stage's backward, the last stage's last forward.
    struct Case {
      int stage;
      bool backward;
      int microbatch;
    };
    for (Case c : {Case{0, false, 0}, Case{2, true, 1}, Case{3, false, 3}}) {
      SCOPED_TRACE(schedule + " stage " + std::to_string(c.stage) + " microbatch " +
                   std::to_string(c.microbatch));
      Watchdog watchdog(60, "fault injection in " + schedule);
      nn::GPT model(config, 4);
      Pipeline pipe(model, make_config(schedule, 4, M, Recompute::ExceptLast, v));
      nn::AdamW opt(nn::decay_groups(model, 0.1), adamw_options());
      const std::vector<Tensor> before = snapshot(model);
      // The index of the action that must fail, to check the message against.
      const auto& list = pipe.schedule().actions[static_cast<size_t>(c.stage)];
      int index = -1;
      for (size_t i = 0; i < list.size() && index < 0; ++i) {
        const ActionKind k = list[i].kind;
        const bool is_backward = k == ActionKind::Backward || k == ActionKind::BackwardInput;
        const bool wanted = c.backward ? is_backward : k == ActionKind::Forward;
        if (wanted && list[i].microbatch == c.microbatch) index = static_cast<int>(i);
      }
      ASSERT_GE(index, 0);
      pipe.fail_at(c.stage, list[static_cast<size_t>(index)].kind, c.microbatch);
      const auto start = std::chrono::steady_clock::now();
      try {
        pipe.train_step(batch.ids, batch.targets, opt);
        ADD_FAILURE() << "the step succeeded despite the fault";
      } catch (const PipelineError& e) {
        const std::string expected =
            "stage " + std::to_string(c.stage) + ", action " + std::to_string(index) + " (" +
            to_string(list[static_cast<size_t>(index)], chunks > 1) + "): injected fault";
        EXPECT_EQ(std::string(e.what()), expected);
        EXPECT_EQ(e.stage(), c.stage);
        EXPECT_EQ(e.step(), index);
        EXPECT_EQ(e.action(), list[static_cast<size_t>(index)]);
        EXPECT_THROW(std::rethrow_exception(e.cause()), InjectedFault);
      }
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      EXPECT_LT(seconds, 10.0) << "the other stages did not stop promptly";
      expect_unchanged(model, before);
      EXPECT_EQ(opt.step_count(), 0);

      // The pipeline is usable again once the fault is gone.
      pipe.clear_faults();
      nn::GPT reference(config, 4);
      const double expected_loss = reference_backward(reference, batch);
      const StepResult r = pipe.forward_backward(batch.ids, batch.targets);
      EXPECT_NEAR(r.loss, expected_loss, kTolerance * expected_loss);
    }
  }
}

TEST(PipelineFaults, FaultByActionIndexAndAStagesOwnErrorAreReportedWithTheAction) {
  Watchdog watchdog(60, "fault by index");
  nn::GPT model(tiny_config(), 4);
  const Batch batch = make_batch(kBatch, kT, kVocab, 5);
  Pipeline pipe(model, make_config("1f1b", 2, 4, Recompute::Never));
  pipe.fail_at(1, 5);
  try {
    pipe.forward_backward(batch.ids, batch.targets);
    ADD_FAILURE() << "no error";
  } catch (const PipelineError& e) {
    EXPECT_THAT(e.what(), HasSubstr("stage 1, action 5 ("));
    EXPECT_EQ(e.stage(), 1);
  }
  EXPECT_THROW(pipe.fail_at(1, 1000), ValueError);

  // A real error inside a stage: targets out of the vocabulary make the last stage's loss throw.
  pipe.clear_faults();
  Batch bad = batch;
  bad.targets = full({kBatch, kT}, 1000.0, TensorOptions(kInt64));
  try {
    pipe.forward_backward(bad.ids, bad.targets);
    ADD_FAILURE() << "no error";
  } catch (const PipelineError& e) {
    EXPECT_THAT(e.what(), HasSubstr("stage 1, action"));
    EXPECT_THAT(e.what(), HasSubstr("(F0)"));
    EXPECT_EQ(e.action().kind, ActionKind::Forward);
  }
}

TEST(PipelineFaults, ANonFiniteLossStopsBeforeTheOptimizer) {
  Watchdog watchdog(60, "non-finite loss");
  nn::GPT model(tiny_config(), 4);
  const Batch batch = make_batch(kBatch, kT, kVocab, 5);
  auto nan_loss = [](const Tensor& logits, const Tensor& targets) {
    return nn::GPT::loss(logits, targets) * std::numeric_limits<double>::quiet_NaN();
  };
  Pipeline pipe(model, make_config("gpipe", 2, 2, Recompute::Never), nan_loss);
  nn::AdamW opt(nn::decay_groups(model, 0.1), adamw_options());
  const std::vector<Tensor> before = snapshot(model);
  try {
    pipe.train_step(batch.ids, batch.targets, opt);
    ADD_FAILURE() << "no error";
  } catch (const PipelineError& e) {
    EXPECT_THAT(e.what(), HasSubstr("(step): the loss of microbatch 0"));
    EXPECT_THAT(e.what(), HasSubstr("no optimizer step"));
  }
  expect_unchanged(model, before);
  EXPECT_EQ(opt.step_count(), 0);
}

TEST(PipelineFaults, EarlierGradientsArePutBackAfterAFailure) {
  nn::GPT model(tiny_config(), 4);
  const Batch batch = make_batch(kBatch, kT, kVocab, 5);
  Pipeline pipe(model, make_config("1f1b", 2, 4, Recompute::Never));
  pipe.forward_backward(batch.ids, batch.targets);
  std::vector<std::vector<float>> grads;
  for (const Tensor& p : model.parameters()) grads.push_back(p.grad().to_vector<float>());
  pipe.fail_at(0, ActionKind::Backward, 2);
  EXPECT_THROW(pipe.forward_backward(batch.ids, batch.targets), PipelineError);
  const auto params = model.parameters();
  for (size_t i = 0; i < params.size(); ++i) EXPECT_EQ(params[i].grad().to_vector<float>(), grads[i]);
}

// ---- configuration errors ---------------------------------------------------------------------------------

template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const ValueError& e) {
    return e.what();
  }
  return "no ValueError";
}

TEST(PipelineConfigErrors, InvalidConfigurationsAreRefusedWithClearMessages) {
  nn::GPT model(tiny_config(), 1);  // 6 layers
  EXPECT_THAT(error_of([&] { Pipeline(model, make_config("1f1b", 8, 8, Recompute::Never)); }),
              HasSubstr("8 model chunks, but the model has only 6 layers"));
  EXPECT_THAT(error_of([&] { Pipeline(model, make_config("bubbles", 2, 4, Recompute::Never)); }),
              HasSubstr("gpipe"));
  EXPECT_THAT(error_of([&] { Pipeline(model, make_config("bubbles", 2, 4, Recompute::Never)); }),
              HasSubstr("zb-h1"));
  // 6 layers in 4 chunks: any layer count is cut as evenly as it goes (2, 2, 1, 1).
  EXPECT_EQ(Pipeline(model, make_config("interleaved", 2, 4, Recompute::Never, 2)).chunk_layers(1, 0),
            (std::pair<int, int>{2, 4}));
  EXPECT_THAT(error_of([&] { Pipeline(model, make_config("interleaved", 2, 3, Recompute::Never, 2)); }),
              HasSubstr("multiple"));
  EXPECT_THAT(error_of([&] { Pipeline(model, make_config("1f1b", 2, 4, Recompute::Never, 2)); }),
              HasSubstr("interleaved"));
  PipelineConfig bad_balance = make_config("1f1b", 2, 4, Recompute::Never);
  bad_balance.balance = {3, 2};
  EXPECT_THAT(error_of([&] { Pipeline(model, bad_balance); }),
              HasSubstr("sums to 5 layers, the model has 6"));
  bad_balance.balance = {6, 0};
  EXPECT_THAT(error_of([&] { Pipeline(model, bad_balance); }), HasSubstr("at least one layer"));
  bad_balance.balance = {2, 2, 2};
  EXPECT_THAT(error_of([&] { Pipeline(model, bad_balance); }),
              HasSubstr("has 3 entries, expected 2 (one per model chunk"));
  PipelineConfig bad_devices = make_config("1f1b", 2, 4, Recompute::Never);
  bad_devices.devices = {Device::cpu(), Device::cpu(), Device::cpu()};
  EXPECT_THAT(error_of([&] { Pipeline(model, bad_devices); }), HasSubstr("3 devices for 2 stages"));

  Pipeline pipe(model, make_config("1f1b", 2, 4, Recompute::Never));
  const Batch six = make_batch(6, kT, kVocab, 1);
  EXPECT_THAT(error_of([&] { pipe.forward_backward(six.ids, six.targets); }),
              HasSubstr("a batch of 6 samples does not divide into 4 equal microbatches"));
  const Batch eight = make_batch(8, kT, kVocab, 1);
  EXPECT_THAT(error_of([&] { pipe.forward_backward(eight.ids, six.targets); }), HasSubstr("targets must be"));
}

// ---- the thread budget ----------------------------------------------------------------------------------

// Stage threads x OpenMP threads never exceed the cores: CPU stages share them out, at least 1 each; a GPU
// stage's host thread only launches kernels. An explicit threads_per_stage is kept and reported as set.
TEST(PipelineThreads, StagesShareTheCoresWithoutOversubscription) {
  EXPECT_EQ(stage_thread_budget(true, 2, 16), 8);
  EXPECT_EQ(stage_thread_budget(true, 3, 16), 5);
  EXPECT_EQ(stage_thread_budget(true, 4, 2), 1);
  EXPECT_EQ(stage_thread_budget(false, 4, 16), 1);
  nn::GPT model(tiny_config(), 1), other(tiny_config(), 1);
  Pipeline automatic(model, make_config("1f1b", 2, 4, Recompute::Never));
  const int cores = omp_get_num_procs();
  for (int s = 0; s < 2; ++s) EXPECT_EQ(automatic.threads(s), std::max(1, cores / 2));
  EXPECT_THAT(automatic.thread_budget(), HasSubstr("2 stage threads x "));
  EXPECT_THAT(automatic.thread_budget(), HasSubstr("(automatic) on " + std::to_string(cores) + " cores"));
  PipelineConfig set = make_config("1f1b", 2, 4, Recompute::Never);
  set.threads_per_stage = 3;
  Pipeline fixed(other, set);
  EXPECT_EQ(fixed.threads(1), 3);
  EXPECT_THAT(fixed.thread_budget(), HasSubstr("x 3 OpenMP threads (set)"));
}

// Pinned stage threads (PipelineConfig::pin_stage_threads) run stage s on core s mod the cores and train
// as unpinned ones do; pinning the calling thread to a core that does not exist is refused, not fatal.
TEST(PipelineThreads, PinnedStagesMatchTheUnpipelinedStep) {
  PipelineConfig config = make_config("1f1b", 2, 4, Recompute::Never);
  config.pin_stage_threads = true;
  testing::expect_matches_unpipelined(config, 4, kTolerance);
  EXPECT_FALSE(pin_thread_to_core(-1));
}

// ---- traces, bubble, traffic ----------------------------------------------------------------------------

TEST(PipelineTrace, TraceTrafficAndBubbleDescribeWhatRan) {
  const int S = 4, M = 8;
  nn::GPT model(tiny_config(), 1);
  const Batch batch = make_batch(kBatch, kT, kVocab, 1);
  Pipeline pipe(model, make_config("1f1b", S, M, Recompute::Never));
  nn::AdamW opt(nn::decay_groups(model, 0.1), adamw_options());
  const StepResult r = pipe.train_step(batch.ids, batch.targets, opt);

  // Every action of the IR ran once, in the IR's order.
  for (int s = 0; s < S; ++s) {
    const auto& list = pipe.schedule().actions[static_cast<size_t>(s)];
    const auto& events = r.trace.stages[static_cast<size_t>(s)];
    ASSERT_EQ(events.size(), list.size());
    for (size_t i = 0; i < list.size(); ++i) {
      EXPECT_EQ(events[i].action, list[i]);
      EXPECT_LE(events[i].start_ms, events[i].end_ms);
      // A CPU stage's thread time in the action: never more than its wall time (beyond the few
      // microseconds between the two clocks' reads).
      EXPECT_GE(events[i].cpu_ms, 0.0);
      EXPECT_LE(events[i].cpu_ms, events[i].end_ms - events[i].start_ms + 0.2);
      if (i > 0) {
        EXPECT_GE(events[i].start_ms, events[i - 1].end_ms - 1e-6);
      }
    }
  }
  // Traffic: M activations and M gradients cross each of the S - 1 boundaries, each [b, T, C] float32.
  const int64_t message = (kBatch / M) * kT * 32 * 4;
  EXPECT_EQ(r.traffic.activation_messages, M * (S - 1));
  EXPECT_EQ(r.traffic.gradient_messages, M * (S - 1));
  EXPECT_EQ(r.traffic.activation_bytes, M * (S - 1) * message);
  EXPECT_EQ(r.traffic.gradient_bytes, M * (S - 1) * message);
  EXPECT_EQ(dynamic_cast<InProcessTransport&>(pipe.transport()).pending(), 0u);

  // Bubble: per stage in [0, 1), the mean is the reported figure, busy + idle = the step.
  double sum = 0.0;
  for (const StageReport& st : r.stages) {
    EXPECT_GE(st.bubble, 0.0);
    EXPECT_LT(st.bubble, 1.0);
    EXPECT_NEAR(st.busy_ms + st.bubble * r.step_ms, r.step_ms, 1e-9 * r.step_ms + 1e-12);
    sum += st.bubble;
  }
  EXPECT_NEAR(r.bubble, sum / S, 1e-12);
  EXPECT_GT(r.grad_norm, 0.0);
  EXPECT_GE(r.trace.optimizer_end_ms, r.trace.optimizer_start_ms);
  EXPECT_GE(r.trace.optimizer_start_ms, r.step_ms * 0.5);

  // The Chrome trace: two processes, one slice per executed action (but the step barriers) and per stage's
  // optimizer step, and one flow arrow per message.
  const Timeline simulated = simulate_measured(r.trace);
  const nlohmann::json json = nlohmann::json::parse(chrome_trace_json(r.trace, &simulated));
  int slices = 0, simulated_slices = 0, flow_starts = 0, flow_ends = 0;
  std::vector<std::string> processes;
  for (const auto& e : json["traceEvents"]) {
    const std::string ph = e["ph"];
    if (ph == "M" && e["name"] == "process_name") processes.push_back(e["args"]["name"]);
    if (ph == "X" && e["pid"] == 1) ++slices;
    if (ph == "X" && e["pid"] == 2) ++simulated_slices;
    if (ph == "s") ++flow_starts;
    if (ph == "f") ++flow_ends;
  }
  EXPECT_EQ(processes, (std::vector<std::string>{"measured", "simulated"}));
  size_t actions = 0;
  for (const auto& list : pipe.schedule().actions) actions += list.size() - 1;  // minus the step barrier
  EXPECT_EQ(slices, static_cast<int>(actions) + S);
  EXPECT_EQ(simulated_slices, 2 * M * S);  // F and B of every microbatch on every stage
  EXPECT_EQ(flow_starts, 2 * M * (S - 1));
  EXPECT_EQ(flow_ends, 2 * M * (S - 1));

  // Memory counters: per stage a "stage s memory" track, two points per executed action (its peak at its
  // start, what it holds at its end), whose highest value is the stage's measured peak (allocator scope).
  std::vector<int64_t> counter_peak(S, -1);
  std::vector<size_t> counters(S, 0);
  std::vector<double> simulated_peak(S, -1.0);  // the simulated process's "stage s activations"
  for (const auto& e : json["traceEvents"]) {
    if (e["ph"] != "C") continue;
    if (e["pid"] == 2) {
      const std::string name = e["name"];
      ASSERT_EQ(name.substr(7), " activations") << name;  // "stage s activations"
      const int s = name[6] - '0';
      simulated_peak[s] = std::max(simulated_peak[s], e["args"]["live"].get<double>());
      continue;
    }
    EXPECT_EQ(e["pid"], 1);
    const std::string name = e["name"];
    const int s = name[6] - '0';  // "stage s memory"
    ASSERT_EQ(name, "stage " + std::to_string(s) + " memory");
    ++counters[s];
    counter_peak[s] = std::max<int64_t>(counter_peak[s], e["args"]["live bytes"].get<int64_t>());
  }
  for (int s = 0; s < S; ++s) {
    EXPECT_EQ(counters[s], 2 * r.trace.stages[s].size()) << "stage " << s;
    EXPECT_EQ(counter_peak[s], r.trace.peak_bytes[s]) << "stage " << s;
    EXPECT_EQ(r.trace.peak_bytes[s], r.stages[s].peak_bytes) << "stage " << s;
    EXPECT_GT(counter_peak[s], 0) << "stage " << s;
    for (const TraceEvent& e : r.trace.stages[s]) EXPECT_GE(e.scope_peak_bytes, e.scope_bytes);
    EXPECT_NEAR(simulated_peak[s], simulated.stats[s].peak_memory, 1e-3) << "stage " << s;  // 3 decimals
  }

  // The simulator fed with the measured costs predicts a step of the same order as the measured one.
  EXPECT_GT(simulated.step_time, 0.0);
  const std::string svg = render_measured_svg(r.trace);
  EXPECT_THAT(svg, HasSubstr("<svg"));
  EXPECT_THAT(svg, HasSubstr("(measured)"));
  EXPECT_THAT(svg, HasSubstr("stage 3"));
  EXPECT_THAT(svg, HasSubstr("</svg>"));
}

TEST(PipelineTrace, MeasuredCostsAverageEachChunksActions) {
  ExecutionTrace trace;
  trace.schedule = make_schedule("zb-h1", 2, 2);
  trace.stages.resize(2);
  auto add = [&](int s, Action a, double start, double end) {
    TraceEvent e;
    e.action = a;
    e.start_ms = start;
    e.end_ms = end;
    trace.stages[static_cast<size_t>(s)].push_back(e);
  };
  add(0, F(0), 0, 1), add(0, F(1), 1, 4), add(0, B(0), 4, 8), add(0, B(1), 8, 10);
  add(1, F(0), 1, 2), add(1, Bi(0), 2, 3), add(1, Bw(0), 3, 5);
  const Costs c = measured_costs(trace);
  ASSERT_EQ(c.per_chunk.size(), 2u);
  EXPECT_DOUBLE_EQ(c.per_chunk[0].forward, 2.0);   // (1 + 3) / 2
  EXPECT_DOUBLE_EQ(c.per_chunk[0].backward, 3.0);  // (4 + 2) / 2
  EXPECT_DOUBLE_EQ(c.per_chunk[0].weight, 1.5);    // no Bw ran: half the backward
  EXPECT_DOUBLE_EQ(c.per_chunk[1].backward, 3.0);  // Bi + Bw
  EXPECT_DOUBLE_EQ(c.per_chunk[1].weight, 2.0);
  EXPECT_DOUBLE_EQ(c.per_chunk[1].recompute, 1.0);  // no R: the forward
  EXPECT_DOUBLE_EQ(trace.span_ms(), 10.0);
  EXPECT_EQ(trace.busy_ms(), (std::vector<double>{10.0, 4.0}));

  // In thread CPU time: the actions that have cpu_ms use it, the others keep their wall durations.
  trace.stages[0][0].cpu_ms = 0.5;  // F0 took 1 ms of wall time, 0.5 ms of CPU
  trace.stages[0][1].cpu_ms = 1.5;  // F1: 3 ms, 1.5 ms
  const Costs cpu = measured_costs(trace, /*thread_cpu_time=*/true);
  EXPECT_DOUBLE_EQ(cpu.per_chunk[0].forward, 1.0);   // (0.5 + 1.5) / 2
  EXPECT_DOUBLE_EQ(cpu.per_chunk[0].backward, 3.0);  // no cpu_ms: wall
  EXPECT_DOUBLE_EQ(measured_costs(trace).per_chunk[0].forward, 2.0);
  EXPECT_DOUBLE_EQ(simulate_measured(trace, true).step_time, simulate(trace.schedule, cpu).step_time);

  // The same actions summed per (model chunk, kind), in CPU time where measured.
  const ActionTotals totals = action_totals(trace, /*thread_cpu_time=*/true);
  EXPECT_EQ(totals, (ActionTotals{{{0, ActionKind::Forward}, 2.0},
                                  {{0, ActionKind::Backward}, 6.0},
                                  {{1, ActionKind::Forward}, 1.0},
                                  {{1, ActionKind::BackwardInput}, 1.0},
                                  {{1, ActionKind::BackwardWeight}, 2.0}}));
  EXPECT_DOUBLE_EQ((action_totals(trace).at({0, ActionKind::Forward})), 4.0);  // wall: 1 + 3
}

}  // namespace
}  // namespace brigade::pipeline
