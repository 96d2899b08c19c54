// Schedule IR, generators and validator: every generated schedule is valid, has the documented shape,
// and hand-broken schedules are refused with a readable message and a marked grid.
#include "pipeline/schedule/schedule.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "pipeline/schedule/generators.h"
#include "pipeline/schedule/render_schedule.h"
#include "pipeline/schedule/v_shape.h"
#include "pipeline/schedule/validate.h"

namespace brigade::pipeline {
namespace {

using ::testing::HasSubstr;

std::vector<Action> compute_only(const std::vector<Action>& list) {
  std::vector<Action> out;
  std::copy_if(list.begin(), list.end(), std::back_inserter(out),
               [](const Action& a) { return is_compute(a.kind) && a.kind != ActionKind::OptimizerStep; });
  return out;
}

int count(const std::vector<Action>& list, ActionKind kind) {
  return static_cast<int>(
      std::count_if(list.begin(), list.end(), [&](const Action& a) { return a.kind == kind; }));
}

std::string error_of(const Schedule& schedule) {
  try {
    validate(schedule);
  } catch (const ScheduleError& e) {
    return e.what();
  }
  return "";
}

// A schedule from compute-only lists, completed with the generators' transfer pass and the step.
Schedule hand_written(int stages, int microbatches, std::vector<std::vector<Action>> lists) {
  Schedule s;
  s.name = "hand";
  s.stages = stages;
  s.microbatches = microbatches;
  s.actions = std::move(lists);
  insert_transfers(s);
  for (auto& list : s.actions) list.push_back(optimizer_step());
  return s;
}

TEST(ScheduleIR, LabelsReadLikeThePictures) {
  EXPECT_EQ(to_string(F(3)), "F3");
  EXPECT_EQ(to_string(B(3)), "B3");
  EXPECT_EQ(to_string(Bi(3)), "Bi3");
  EXPECT_EQ(to_string(Bw(3)), "Bw3");
  EXPECT_EQ(to_string(R(3)), "R3");
  EXPECT_EQ(to_string(F(3, 1)), "F3.c1");
  EXPECT_EQ(to_string(F(3), true), "F3.c0");
  EXPECT_EQ(to_string(send_activation(3, 0, 2)), "send F3 ->s2");
  EXPECT_EQ(to_string(recv_activation(3, 0, 0)), "recv F3 <-s0");
  EXPECT_EQ(to_string(send_grad(3, 1, 1)), "send B3.c1 ->s1");
  EXPECT_EQ(to_string(recv_grad(3, 0, 3)), "recv B3 <-s3");
  EXPECT_EQ(to_string(optimizer_step()), "step");
}

TEST(ScheduleIR, InterleavedLayoutAndTransferTags) {
  Schedule s = make_schedule("interleaved", 4, 4, 2);
  EXPECT_EQ(s.model_chunks(), 8);
  EXPECT_EQ(s.model_chunk(3, 1), 7);
  EXPECT_EQ(s.stage_of(4), 0);
  EXPECT_EQ(s.chunk_of(4), 1);
  // Stage 3's chunk 0 (model chunk 3) feeds stage 0's chunk 1 (model chunk 4); both ends name one message.
  const TransferTag sent = transfer_tag(s, 3, send_activation(2, 0, 0));
  const TransferTag received = transfer_tag(s, 0, recv_activation(2, 1, 3));
  EXPECT_EQ(sent, received);
  EXPECT_EQ(sent.from_stage, 3);
  EXPECT_EQ(sent.to_chunk, 1);
  EXPECT_FALSE(sent.gradient);
  EXPECT_EQ(transfer_tag(s, 0, send_grad(2, 1, 3)), transfer_tag(s, 3, recv_grad(2, 0, 0)));
  EXPECT_THROW(transfer_tag(s, 0, send_grad(2, 0, 3)), ValueError);  // model chunk 0 has no producer
}

TEST(ScheduleIR, VPlacementRunsDownAndBackUp) {
  const ChunkLayout v{Placement::V, 4, 2};
  // Stage s holds model chunks s and 7 - s: chunk 0 runs down the stages, chunk 1 back up.
  for (int s = 0; s < 4; ++s) {
    EXPECT_EQ(v.model_chunk(s, 0), s);
    EXPECT_EQ(v.model_chunk(s, 1), 7 - s);
  }
  for (int k = 0; k < v.model_chunks(); ++k) EXPECT_EQ(v.model_chunk(v.stage_of(k), v.chunk_of(k)), k);
  // With more chunks the path zigzags: chunk 2 runs down again.
  const ChunkLayout w{Placement::V, 3, 3};
  EXPECT_EQ(w.model_chunk(0, 2), 6);
  EXPECT_EQ(w.model_chunk(2, 1), 3);
  EXPECT_EQ(w.stage_of(5), 0);
  // Interleaved is Megatron's round robin.
  const ChunkLayout i{Placement::Interleaved, 4, 2};
  EXPECT_EQ(i.model_chunk(3, 1), 7);
  EXPECT_EQ(i.stage_of(5), 1);
  EXPECT_EQ(parse_placement("v"), Placement::V);
  EXPECT_EQ(std::string(to_string(Placement::Interleaved)), "interleaved");
  EXPECT_THROW(parse_placement("w"), ValueError);
}

TEST(ScheduleIR, TheTurnOfAVAndItsLossNeedNoTransfer) {
  const Schedule s = make_schedule("zb-v", 4, 4);
  EXPECT_EQ(s.placement, Placement::V);
  EXPECT_EQ(s.virtual_chunks, 2);
  EXPECT_THAT(s.describe(), HasSubstr("2 virtual chunks, V placement"));
  // Stage 3 holds model chunks 3 and 4: the activation and the gradient cross between them locally.
  for (const Action& a : s.actions[3]) {
    if (is_transfer(a.kind)) {
      EXPECT_EQ(a.peer, 2) << to_string(a, true);
    }
  }
  // Stage 0 holds model chunks 0 and 7: it receives chunk 7's input from stage 1 and computes the loss, so
  // its chunk-1 backward waits for no gradient.
  const auto& s0 = s.actions[0];
  EXPECT_NE(std::find(s0.begin(), s0.end(), recv_activation(0, 1, 1)), s0.end());
  EXPECT_EQ(std::count_if(s0.begin(), s0.end(),
                          [](const Action& a) { return a.kind == ActionKind::RecvGrad && a.chunk == 1; }),
            0);
  EXPECT_EQ(transfer_tag(s, 1, send_activation(0, 1, 0)), transfer_tag(s, 0, recv_activation(0, 1, 1)));
}

// Every generator, on every shape it takes, gives lists the validator accepts, with one F and one backward
// per (chunk, microbatch) on every stage and an R wherever the policy recomputes.
TEST(Generators, EveryScheduleIsValidForEveryShape) {
  const Recompute policies[] = {Recompute::Never, Recompute::Always, Recompute::ExceptLast};
  int checked = 0;
  for (const std::string& name : schedule_names()) {
    const int fixed = schedule_traits(name).chunks_per_stage;
    for (int S : {1, 2, 3, 4, 8}) {
      for (int M : {1, 2, 4, 7, 8, 16, 32}) {
        if (M < smallest_microbatches(name, S) || (name == "interleaved" && M % S != 0)) continue;
        for (int asked : {1, 2, 3}) {
          if (fixed != 0 && asked > 1) continue;
          for (Recompute policy : policies) {
            SCOPED_TRACE(name + " S=" + std::to_string(S) + " M=" + std::to_string(M) +
                         " v=" + std::to_string(asked) + " recompute " + to_string(policy));
            const Schedule s = make_schedule(name, S, M, asked, policy);
            const int v = fixed == 0 ? asked : fixed;
            ASSERT_EQ(s.virtual_chunks, v);
            EXPECT_EQ(s.placement, schedule_traits(name).placement);
            const auto found = find_issue(s);
            ASSERT_FALSE(found.has_value()) << found->message << "\n"
                                            << render_order_grid(s, found->marks, 16);
            for (int st = 0; st < S; ++st) {
              const auto& list = s.actions[st];
              EXPECT_EQ(count(list, ActionKind::Forward), v * M);
              EXPECT_EQ(count(list, ActionKind::Backward) + count(list, ActionKind::BackwardInput), v * M);
              EXPECT_EQ(count(list, ActionKind::BackwardInput), count(list, ActionKind::BackwardWeight));
              const int recomputed = policy == Recompute::Never ? 0 : policy == Recompute::Always ? M : M - 1;
              EXPECT_EQ(count(list, ActionKind::Recompute), v * recomputed);
              EXPECT_EQ(list.back(), optimizer_step());
            }
            ++checked;
          }
        }
      }
    }
  }
  EXPECT_GT(checked, 800);
}

TEST(Generators, GPipeFillsThenDrainsNewestFirst) {
  const Schedule s = make_schedule("gpipe", 2, 3);
  EXPECT_EQ(compute_only(s.actions[0]), (std::vector<Action>{F(0), F(1), F(2), B(2), B(1), B(0)}));
  EXPECT_EQ(s.actions[1],
            (std::vector<Action>{recv_activation(0, 0, 0), F(0), recv_activation(1, 0, 0), F(1),
                                 recv_activation(2, 0, 0), F(2), B(2), send_grad(2, 0, 0), B(1),
                                 send_grad(1, 0, 0), B(0), send_grad(0, 0, 0), optimizer_step()}));
}

TEST(Generators, OneFOneBWarmsUpSteadiesAndCoolsDown) {
  const Schedule s = make_schedule("1f1b", 4, 8);
  EXPECT_EQ(compute_only(s.actions[0]),
            (std::vector<Action>{F(0), F(1), F(2), F(3), B(0), F(4), B(1), F(5), B(2), F(6), B(3), F(7), B(4),
                                 B(5), B(6), B(7)}));
  EXPECT_EQ(compute_only(s.actions[2]),
            (std::vector<Action>{F(0), F(1), B(0), F(2), B(1), F(3), B(2), F(4), B(3), F(5), B(4), F(6), B(5),
                                 F(7), B(6), B(7)}));
  // Stage 1: recv before F, send after; recv of the gradient before B, send after.
  const auto& s1 = s.actions[1];
  EXPECT_EQ(std::vector<Action>(s1.begin(), s1.begin() + 6),
            (std::vector<Action>{recv_activation(0, 0, 0), F(0), send_activation(0, 0, 2),
                                 recv_activation(1, 0, 0), F(1), send_activation(1, 0, 2)}));
  // Fewer microbatches than the warm-up: all forwards, then all backwards.
  EXPECT_EQ(compute_only(make_schedule("1f1b", 8, 2).actions[0]),
            (std::vector<Action>{F(0), F(1), B(0), B(1)}));
}

TEST(Generators, InterleavedRunsGroupsOfSMicrobatchesPerChunk) {
  const Schedule s = make_schedule("interleaved", 2, 4, 2);
  // Stage 1 warms up with 2 (S - s - 1) + (v - 1) S = 2 forwards; forward order: (0,c0) (1,c0) (0,c1) (1,c1)
  // (2,c0) ...; backward order reverses the chunks: (0,c1) (1,c1) (0,c0) (1,c0) (2,c1) ...
  EXPECT_EQ(compute_only(s.actions[1]),
            (std::vector<Action>{F(0, 0), F(1, 0), F(0, 1), B(0, 1), F(1, 1), B(1, 1), F(2, 0), B(0, 0),
                                 F(3, 0), B(1, 0), F(2, 1), B(2, 1), F(3, 1), B(3, 1), B(2, 0), B(3, 0)}));
  // The last stage's chunk 0 sends to stage 0's chunk 1.
  const auto& s1 = s.actions[1];
  EXPECT_NE(std::find(s1.begin(), s1.end(), send_activation(0, 0, 0)), s1.end());
  EXPECT_NE(std::find(s.actions[0].begin(), s.actions[0].end(), recv_activation(0, 1, 1)),
            s.actions[0].end());
  // One stage: chunks hand over locally, no transfers at all.
  const Schedule one = make_schedule("interleaved", 1, 4, 3);
  for (const Action& a : one.actions[0]) EXPECT_FALSE(is_transfer(a.kind));
}

TEST(Generators, ZeroBubbleH1DefersWeightGradientsOnLaterStages) {
  const Schedule s = make_schedule("zb-h1", 4, 6);
  // Stage 0 sends no gradient and keeps the full backward, in 1F1B order.
  EXPECT_EQ(compute_only(s.actions[0]), compute_only(make_schedule("1f1b", 4, 6).actions[0]));
  // Stage 2 warms up with 1 forward and keeps 2 Bw pending; the pending ones end the list.
  EXPECT_EQ(compute_only(s.actions[2]),
            (std::vector<Action>{F(0), F(1), Bi(0), F(2), Bi(1), F(3), Bi(2), Bw(0), F(4), Bi(3), Bw(1), F(5),
                                 Bi(4), Bw(2), Bi(5), Bw(3), Bw(4), Bw(5)}));
}

// How many forwards each stage runs before its first backward.
int warmup_forwards(const std::vector<Action>& list) {
  int n = 0;
  for (const Action& a : list) {
    if (a.kind == ActionKind::Backward || a.kind == ActionKind::BackwardInput) break;
    n += a.kind == ActionKind::Forward;
  }
  return n;
}

TEST(Generators, LoopedBfsRunsEveryForwardOfAChunkBeforeTheNext) {
  const Schedule s = make_schedule("looped-bfs", 2, 3, 2);
  EXPECT_EQ(compute_only(s.actions[1]),
            (std::vector<Action>{F(0, 0), F(1, 0), F(2, 0), F(0, 1), F(1, 1), F(2, 1), B(2, 1), B(1, 1),
                                 B(0, 1), B(2, 0), B(1, 0), B(0, 0)}));
  // With one chunk it is GPipe.
  EXPECT_EQ(make_schedule("looped-bfs", 3, 4).actions, make_schedule("gpipe", 3, 4).actions);
}

TEST(Generators, ZeroBubbleH2WarmsUpWithTwiceTheForwards) {
  // Stage s runs 2(S - s) - 1 forwards before its first input gradient, and splits every backward.
  const Schedule s = make_schedule("zb-h2", 4, 8);
  for (int st = 0; st < 4; ++st) {
    EXPECT_EQ(warmup_forwards(s.actions[st]), 2 * (4 - st) - 1) << "stage " << st;
    EXPECT_EQ(count(s.actions[st], ActionKind::Backward), 0);
  }
  // The last stage defers every weight gradient it can: they end its list.
  const auto last = compute_only(s.actions[3]);
  EXPECT_EQ(std::vector<Action>(last.end() - 6, last.end()),
            (std::vector<Action>{Bw(2), Bw(3), Bw(4), Bw(5), Bw(6), Bw(7)}));
}

TEST(Generators, ZeroBubbleVWarmsUpOnChunkZeroThenTurns) {
  const Schedule s = make_schedule("zb-v", 4, 8);
  // Stage 0: 2S - 1 = 7 forwards of chunk 0, then the triples (F, Bi, Bw) of chunk 1.
  const auto s0 = compute_only(s.actions[0]);
  for (int i = 0; i < 7; ++i) EXPECT_EQ(s0[static_cast<size_t>(i)], F(i, 0));
  EXPECT_EQ(std::vector<Action>(s0.begin() + 7, s0.begin() + 10),
            (std::vector<Action>{F(0, 1), Bi(0, 1), Bw(0, 1)}));
  // Stage 3 (the turn): 1 forward of chunk 0, then 3 pairs (F chunk 1, F chunk 0).
  const auto s3 = compute_only(s.actions[3]);
  EXPECT_EQ(std::vector<Action>(s3.begin(), s3.begin() + 7),
            (std::vector<Action>{F(0, 0), F(0, 1), F(1, 0), F(1, 1), F(2, 0), F(2, 1), F(3, 0)}));
  // Fewer microbatches than the warm-up: the same shape with the missing microbatches left out.
  EXPECT_FALSE(find_issue(make_schedule("zb-v", 4, 3)).has_value());
}

TEST(Generators, VHalfAndVMinRepeatTheirBuildingBlock) {
  // In the steady state a stage runs the block's four passes for consecutive microbatches, 6 units apart,
  // with the weight gradients between them.
  const Schedule s = make_schedule("v-min", 4, 16);
  const auto s1 = compute_only(s.actions[1]);
  const BuildingBlock block = v_min_block(4);
  const auto& o = block.stages[1];
  // Block offsets of stage 1: F0 at 1, F1 at 6, Bi1 at 9, Bi0 at 14 -> the steady order F0 F1 Bi1 Bi0 per
  // microbatch, each shifted by one microbatch per 6 units.
  EXPECT_EQ(o.forward0, 1);
  EXPECT_EQ(o.forward1, 6);
  EXPECT_EQ(o.input_grad1, 9);
  EXPECT_EQ(o.input_grad0, 14);
  const auto position = [&](const Action& a) { return std::find(s1.begin(), s1.end(), a) - s1.begin(); };
  for (int m = 4; m < 12; ++m) {
    EXPECT_LT(position(F(m, 1)), position(Bi(m, 1)));
    EXPECT_LT(position(Bi(m - 1, 0)), position(Bi(m, 1)));    // microbatch m-1 finishes as m turns back
    EXPECT_EQ(position(F(m + 1, 0)) - position(F(m, 0)), 6);  // one block (6 passes) per microbatch
  }
  // A block whose passes collide is refused.
  BuildingBlock bad = v_half_block(2);
  bad.stages[0].forward1 = bad.stages[0].forward0 + 6;
  EXPECT_THROW(schedule_from_block("bad", bad, 4), ValueError);
}

TEST(Generators, DualPipeVPairsForwardsWithBackwardsInTheSteadyState) {
  const Schedule s = make_schedule("dualpipev", 2, 6);
  // Stage 0 (S = 2): 2 forwards of chunk 0, one pair (F c0, F c1), one (Bi c1, Bw, F c1), then the steady
  // pairs (F c0, B c1) (F c1, B c0).
  const auto s0 = compute_only(s.actions[0]);
  EXPECT_EQ(std::vector<Action>(s0.begin(), s0.begin() + 11),
            (std::vector<Action>{F(0, 0), F(1, 0), F(2, 0), F(0, 1), Bi(0, 1), Bw(0, 1), F(1, 1), F(3, 0),
                                 B(1, 1), F(2, 1), B(0, 0)}));
}

TEST(Generators, RecomputeRunsWhileTheGradientIsOnItsWay) {
  const Schedule s = make_schedule("1f1b", 2, 3, 1, Recompute::ExceptLast);
  // Stage 0: R(j) right after the forward that precedes B(j), in front of the Recv of j's gradient.
  EXPECT_EQ(s.actions[0],
            (std::vector<Action>{F(0), send_activation(0, 0, 1), F(1), send_activation(1, 0, 1), R(0),
                                 recv_grad(0, 0, 1), B(0), F(2), send_activation(2, 0, 1), R(1),
                                 recv_grad(1, 0, 1), B(1), recv_grad(2, 0, 1), B(2), optimizer_step()}));
  // The last stage produces its gradient from the loss: R comes right before B.
  const auto last = compute_only(s.actions[1]);
  EXPECT_EQ(last, (std::vector<Action>{F(0), R(0), B(0), F(1), R(1), B(1), F(2), B(2)}));
}

TEST(Generators, BadArgumentsAreRefusedByName) {
  try {
    make_schedule("pipedream", 4, 8);
    FAIL() << "expected ValueError";
  } catch (const ValueError& e) {
    const std::string message = e.what();
    EXPECT_THAT(message, HasSubstr("unknown name 'pipedream'"));
    for (const std::string& name : schedule_names()) EXPECT_THAT(message, HasSubstr(name));
  }
  try {
    make_schedule("interleaved", 4, 6, 2);
    FAIL() << "expected ValueError";
  } catch (const ValueError& e) {
    EXPECT_THAT(std::string(e.what()), HasSubstr("microbatches (6) must be a multiple of stages (4)"));
  }
  EXPECT_THROW(make_schedule("1f1b", 0, 8), ValueError);
  EXPECT_THROW(make_schedule("gpipe", 2, 0), ValueError);
  EXPECT_THROW(make_schedule("interleaved", 2, 4, 0), ValueError);
  try {
    make_schedule("1f1b", 2, 4, 2);
    FAIL() << "expected ValueError";
  } catch (const ValueError& e) {
    EXPECT_THAT(std::string(e.what()), HasSubstr("are for interleaved and looped-bfs; 1f1b holds 1 chunk"));
  }
  try {
    make_schedule("zb-v", 2, 4, 3);
    FAIL() << "expected ValueError";
  } catch (const ValueError& e) {
    EXPECT_THAT(std::string(e.what()), HasSubstr("zb-v holds 2 chunks per stage"));
  }
  EXPECT_EQ(make_schedule("zb-v", 2, 4, 2).virtual_chunks, 2);  // asking for its own count is fine
  try {
    make_schedule("dualpipev", 4, 7);
    FAIL() << "expected ValueError";
  } catch (const ValueError& e) {
    EXPECT_THAT(std::string(e.what()), HasSubstr("microbatches (7) must be at least 2 x stages (8)"));
  }
  EXPECT_THROW(parse_recompute("sometimes"), ValueError);
  EXPECT_EQ(parse_recompute("except-last"), Recompute::ExceptLast);
}

TEST(Validator, BackwardBeforeForwardIsMarked) {
  const Schedule s = hand_written(2, 2, {{F(0), F(1), B(0), B(1)}, {B(0), F(0), F(1), B(1)}});
  const std::string message = error_of(s);
  EXPECT_THAT(message, HasSubstr("stage 1 step 0: B0 comes before its F0 (step 3)"));
  EXPECT_THAT(message, HasSubstr("[B0]"));  // the grid marks the offending action
  EXPECT_THAT(message, HasSubstr("s1   |"));
}

TEST(Validator, MissingRecvAndSendAreNamed) {
  Schedule s = make_schedule("1f1b", 2, 4);
  auto& s1 = s.actions[1];
  s1.erase(std::find(s1.begin(), s1.end(), recv_activation(2, 0, 0)));
  EXPECT_THAT(error_of(s),
              HasSubstr("F2 needs its input from stage 0, but there is no `recv F2 <-s0` before it"));

  Schedule t = make_schedule("1f1b", 2, 4);
  auto& t0 = t.actions[0];
  t0.erase(std::find(t0.begin(), t0.end(), send_activation(1, 0, 1)));
  EXPECT_THAT(error_of(t), HasSubstr("F1 feeds stage 1, but there is no `send F1 ->s1` after it"));

  Schedule u = make_schedule("1f1b", 3, 2);
  std::replace(u.actions[1].begin(), u.actions[1].end(), send_activation(0, 0, 2), send_activation(0, 0, 0));
  EXPECT_THAT(error_of(u), HasSubstr("names peer stage 0, but model chunk 2 is on stage 2"));
}

TEST(Validator, DeadlockIsFoundByTheDryRun) {
  // Stage 1 wants F1 before it returns B0; stage 0 sends F1 only after it got B0.
  Schedule s;
  s.name = "hand";
  s.stages = 2;
  s.microbatches = 2;
  s.actions = {{F(0), send_activation(0, 0, 1), recv_grad(0, 0, 1), B(0), F(1), send_activation(1, 0, 1),
                recv_grad(1, 0, 1), B(1), optimizer_step()},
               {recv_activation(0, 0, 0), F(0), recv_activation(1, 0, 0), F(1), B(0), send_grad(0, 0, 0),
                B(1), send_grad(1, 0, 0), optimizer_step()}};
  const std::string message = error_of(s);
  EXPECT_THAT(message, HasSubstr("deadlock"));
  EXPECT_THAT(message, HasSubstr("stage 0 waits at step 2 (recv B0 <-s1) for send B0 ->s0 on stage 1"));
  EXPECT_THAT(message, HasSubstr("stage 1 waits at step 2 (recv F1 <-s0) for send F1 ->s1 on stage 0"));
  EXPECT_THAT(message, HasSubstr("[B0<s1]"));
  EXPECT_THAT(message, HasSubstr("[F1<s0]"));
}

TEST(Validator, CountsOrderAndRecomputeAreChecked) {
  EXPECT_THAT(error_of(hand_written(1, 2, {{F(0), F(0), B(0)}})),
              HasSubstr("F0 appears twice (steps 0 and 1)"));
  EXPECT_THAT(error_of(hand_written(1, 2, {{F(0), F(1), B(0)}})), HasSubstr("has F1 but no backward"));
  EXPECT_THAT(error_of(hand_written(1, 1, {{F(0), Bw(0), Bi(0)}})), HasSubstr("Bw0 comes before its Bi0"));
  EXPECT_THAT(error_of(hand_written(1, 1, {{F(0), B(0), Bw(0)}})), HasSubstr("runs both B0 and the split"));
  Schedule s = make_schedule("gpipe", 2, 2, 1, Recompute::Always);
  auto& s0 = s.actions[0];
  s0.erase(std::find(s0.begin(), s0.end(), R(0)));
  EXPECT_THAT(error_of(s), HasSubstr("recompute always needs R0 before B0, and there is none"));
  Schedule t = make_schedule("gpipe", 1, 2);
  t.actions[0].insert(t.actions[0].begin() + 2, R(0));
  EXPECT_THAT(error_of(t), HasSubstr("R0 but recompute never keeps microbatch 0's activations"));
  Schedule u = make_schedule("gpipe", 1, 1);
  u.actions[0].pop_back();
  EXPECT_THAT(error_of(u), HasSubstr("no optimizer step"));
  Schedule w = make_schedule("gpipe", 2, 2);
  w.actions.pop_back();
  EXPECT_THAT(error_of(w), HasSubstr("1 instruction lists for 2 stages"));
}

TEST(Render, OrderGridWindowsAroundTheMark) {
  const Schedule s = make_schedule("1f1b", 2, 32);
  // Stage 1 runs recv Fj, Fj, Bj, send Bj: step 62 is B15; the window is steps 58..65.
  const std::string grid = render_order_grid(s, {{1, 62}}, 8);
  EXPECT_THAT(grid, HasSubstr("..."));
  EXPECT_THAT(grid, HasSubstr(" 58 "));
  EXPECT_THAT(grid, HasSubstr("[B15]"));
  EXPECT_EQ(grid.find(" 0 "), std::string::npos);
  EXPECT_EQ(std::count(grid.begin(), grid.end(), '\n'), 3);
}

}  // namespace
}  // namespace brigade::pipeline
