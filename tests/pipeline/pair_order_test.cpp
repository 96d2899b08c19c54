// The pair order and the rendezvous dry run (pipeline/schedule/pair_order.h), through validate().
#include "pipeline/schedule/pair_order.h"

#include <gtest/gtest.h>

#include "pipeline/schedule/generators.h"
#include "pipeline/schedule/validate.h"
#include "test_support.h"

namespace brigade::pipeline {
namespace {

// Two stages, two microbatches, GPipe-like, written by hand.
Schedule two_stage_gpipe() {
  Schedule s;
  s.name = "hand";
  s.stages = 2;
  s.microbatches = 2;
  s.actions = {
      {F(0), send_activation(0, 0, 1), F(1), send_activation(1, 0, 1), recv_grad(1, 0, 1), B(1),
       recv_grad(0, 0, 1), B(0), optimizer_step()},
      {recv_activation(0, 0, 0), F(0), recv_activation(1, 0, 0), F(1), B(1), send_grad(1, 0, 0), B(0),
       send_grad(0, 0, 0), optimizer_step()},
  };
  return s;
}

TEST(PairOrder, GPipeRunsOnRendezvousTransportsAndOneFOneBNeedsBufferedSends) {
  for (int S : {2, 3, 4}) {
    const Schedule gpipe = make_schedule("gpipe", S, 2 * S, 1, Recompute::ExceptLast);
    EXPECT_FALSE(find_issue(gpipe, TransferModel::Rendezvous).has_value()) << "gpipe S=" << S;
  }
  // 1F1B's steady state sends an activation and a gradient towards each other at once: with sends that
  // wait for their receive, both stages wait in their send. Valid with buffered sends (MPI, in process).
  const Schedule one_f_one_b = make_schedule("1f1b", 2, 4);
  EXPECT_FALSE(find_issue(one_f_one_b, TransferModel::Buffered).has_value());
  const auto deadlock = find_issue(one_f_one_b, TransferModel::Rendezvous);
  ASSERT_TRUE(deadlock.has_value());
  EXPECT_NE(deadlock->message.find("stage 0 is blocked at step 3 (send F1 ->s1), while stage 1 stands at "
                                   "`send B0 ->s0`"),
            std::string::npos)
      << deadlock->message;
}

TEST(PairOrder, MismatchedOrderIsRejectedNamingThePairAndTheActions) {
  Schedule s = two_stage_gpipe();
  // Stage 1 receives microbatch 1 first while stage 0 sends microbatch 0 first.
  std::swap(s.actions[1][0], s.actions[1][2]);
  std::swap(s.actions[1][1], s.actions[1][3]);
  EXPECT_FALSE(find_issue(s, TransferModel::Buffered).has_value());  // a tag-matched transport runs it
  const std::string message =
      testing::message_of<ScheduleError>([&] { validate(s, TransferModel::Rendezvous); });
  EXPECT_NE(message.find("stages 0 -> 1"), std::string::npos) << message;
  EXPECT_NE(message.find("send F0 ->s1"), std::string::npos) << message;
  EXPECT_NE(message.find("recv F1 <-s0"), std::string::npos) << message;
}

TEST(PairOrder, RendezvousDeadlockIsFoundWhereBufferedSendsWouldRun) {
  // 1F1B-like by hand: with sends that wait for their receive, stage 0 blocks sending F1 while stage 1
  // blocks sending B0.
  Schedule s;
  s.name = "hand";
  s.stages = 2;
  s.microbatches = 2;
  s.actions = {
      {F(0), send_activation(0, 0, 1), F(1), send_activation(1, 0, 1), recv_grad(0, 0, 1), B(0),
       recv_grad(1, 0, 1), B(1), optimizer_step()},
      {recv_activation(0, 0, 0), F(0), B(0), send_grad(0, 0, 0), recv_activation(1, 0, 0), F(1), B(1),
       send_grad(1, 0, 0), optimizer_step()},
  };
  EXPECT_FALSE(find_issue(s, TransferModel::Buffered).has_value());
  const auto deadlock = find_rendezvous_deadlock(s);
  ASSERT_TRUE(deadlock.has_value());
  EXPECT_NE(deadlock->message.find("stage 0 is blocked at step 3 (send F1 ->s1)"), std::string::npos)
      << deadlock->message;
  EXPECT_NE(deadlock->message.find("stage 1 is blocked at step 3 (send B0 ->s0)"), std::string::npos)
      << deadlock->message;
  const std::string message =
      testing::message_of<ScheduleError>([&] { validate(s, TransferModel::Rendezvous); });
  EXPECT_NE(message.find("deadlock when a send waits for its receive"), std::string::npos) << message;
}

}  // namespace
}  // namespace brigade::pipeline
