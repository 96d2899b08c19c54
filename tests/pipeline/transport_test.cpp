// The in-process transport (mailboxes, blocking receive, abort, timeout, traffic) and the split backward
// (Bi then Bw gives exactly B's gradients, and Bi really leaves the parameters alone), and the in-process
// link's measured hand-off.
#include "pipeline/run/transport.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "autograd/engine.h"
#include "nn/block.h"
#include "nn/gpt.h"
#include "pipeline/backward/split_backward.h"
#include "pipeline/run/hand_off.h"
#include "pipeline_fixtures.h"

namespace brigade::pipeline {
namespace {

using ::testing::HasSubstr;
using testing::relative_error;
using testing::Watchdog;

TransferTag tag(int microbatch, bool gradient = false) {
  return first_boundary_tag(microbatch, gradient);
}

TEST(InProcessTransport, DeliversByTagAndCountsTraffic) {
  InProcessTransport transport;
  const Tensor a = full({2, 3}, 1.0), g = full({4}, 2.0);
  transport.send(tag(0), a, recorded_cpu_event());
  transport.send(tag(1), full({2, 3}, 3.0), recorded_cpu_event());
  transport.send(tag(0, true), g, recorded_cpu_event());
  EXPECT_EQ(transport.pending(), 3u);
  const Message m1 = transport.recv(tag(1));
  EXPECT_EQ(m1.tensor.to_vector<float>(), std::vector<float>(6, 3.0f));
  const Message m0 = transport.recv(tag(0));
  EXPECT_EQ(m0.tensor.data_ptr(), a.data_ptr());  // in process: the tensor itself, no copy
  EXPECT_TRUE(m0.ready.is_recorded());
  transport.recv(tag(0, true));
  EXPECT_EQ(transport.pending(), 0u);
  const Traffic t = transport.traffic();
  EXPECT_EQ(t.activation_bytes, 2 * 6 * 4);
  EXPECT_EQ(t.gradient_bytes, 4 * 4);
  EXPECT_EQ(t.activation_messages, 2);
  EXPECT_EQ(t.gradient_messages, 1);
  EXPECT_EQ(t.total_bytes(), 64);
  transport.reset();
  EXPECT_EQ(transport.traffic().total_bytes(), 0);
  EXPECT_EQ(to_string(tag(3, true)), "gradient mb3 s1.c0->s0.c0");
}

TEST(InProcessTransport, RejectsDuplicatesAndUnrecordedEvents) {
  InProcessTransport transport;
  transport.send(tag(0), full({1}, 1.0), recorded_cpu_event());
  try {
    transport.send(tag(0), full({1}, 1.0), recorded_cpu_event());
    ADD_FAILURE() << "a second message with one tag was accepted";
  } catch (const ValueError& e) {
    EXPECT_THAT(e.what(), HasSubstr("already waiting"));
  }
  EXPECT_THROW(transport.send(tag(1), full({1}, 1.0), Event()), ValueError);
}

TEST(InProcessTransport, RecvBlocksUntilTheMessageIsSent) {
  Watchdog watchdog(30, "blocking recv");
  InProcessTransport transport;
  std::atomic<bool> sent{false};
  std::thread producer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    sent = true;
    transport.send(tag(0), full({1}, 7.0), recorded_cpu_event());
  });
  const Message m = transport.recv(tag(0));
  EXPECT_TRUE(sent.load());
  EXPECT_EQ(m.tensor.item(), 7.0);
  producer.join();
}

TEST(InProcessTransport, AbortWakesEveryBlockedReceiverWithTheReason) {
  Watchdog watchdog(30, "abort");
  InProcessTransport transport;
  std::atomic<int> woken{0};
  std::vector<std::thread> receivers;
  for (int i = 0; i < 3; ++i) {
    receivers.emplace_back([&, i] {
      try {
        transport.recv(tag(i));
      } catch (const TransportAborted& e) {
        if (std::string(e.what()) == "stage 2, action 7 (B3): boom") ++woken;
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  transport.abort("stage 2, action 7 (B3): boom");
  transport.abort("a later reason is ignored");
  for (auto& t : receivers) t.join();
  EXPECT_EQ(woken.load(), 3);
  EXPECT_TRUE(transport.aborted());
  EXPECT_EQ(transport.abort_reason(), "stage 2, action 7 (B3): boom");
  EXPECT_THROW(transport.send(tag(5), full({1}, 1.0), recorded_cpu_event()), TransportAborted);
  transport.reset();
  EXPECT_FALSE(transport.aborted());
}

TEST(InProcessTransport, TimeoutFailsTheReceiverAndAbortsTheRest) {
  Watchdog watchdog(30, "timeout");
  InProcessTransport transport(0.05);
  try {
    transport.recv(tag(0));
    ADD_FAILURE() << "no timeout";
  } catch (const TransportTimeout& e) {
    EXPECT_THAT(e.what(), HasSubstr("activation mb0 s0.c0->s1.c0: no message after 0.05 s"));
  }
  EXPECT_TRUE(transport.aborted());
  EXPECT_THROW(InProcessTransport(-1.0), ValueError);
}

// ---- split backward
// ----------------------------------------------------------------------------------------

/// A two-block chunk with a LayerNorm'ed input: gradients of input and parameters, by B and by Bi + Bw.
struct Chunk {
  nn::Block a{32, 4, 0.0, true}, b{32, 4, 0.0, true};
  Tensor x = randn({2, 8, 32});
  Tensor dy = randn({2, 8, 32});
  Tensor forward(const Tensor& input) { return b.forward(a.forward(input)); }
  std::vector<Tensor> params() {
    auto p = a.parameters();
    for (const Tensor& t : b.parameters()) p.push_back(t);
    return p;
  }
};

TEST(SplitBackward, InputThenWeightGivesTheFullBackwardsGradients) {
  Chunk chunk;
  // B: the engine.
  Tensor x1 = chunk.x.detach().set_requires_grad(true);
  autograd::backward(chunk.forward(x1), chunk.dy);
  std::vector<Tensor> expected;
  for (Tensor p : chunk.params()) {
    expected.push_back(p.grad().clone());
    p.set_grad(Tensor());
  }

  Tensor x2 = chunk.x.detach().set_requires_grad(true);
  Tensor y2 = chunk.forward(x2);
  SplitBackward split;
  const Tensor dx = split.backward_input(y2, chunk.dy, x2);
  EXPECT_TRUE(split.pending());
  ASSERT_TRUE(dx.defined());
  EXPECT_LE(relative_error(dx, x1.grad()), 1e-6);
  EXPECT_FALSE(x2.grad().defined());  // Bi returns the input gradient, it does not accumulate it
  for (const Tensor& p : chunk.params()) EXPECT_FALSE(p.grad().defined()) << "Bi computed a weight gradient";
  split.backward_weight();
  EXPECT_FALSE(split.pending());
  const auto params = chunk.params();
  for (size_t i = 0; i < params.size(); ++i) {
    ASSERT_TRUE(params[i].grad().defined());
    EXPECT_LE(relative_error(params[i].grad(), expected[i]), 1e-6) << "parameter " << i;
  }
  // The graph is released: a second backward is refused.
  EXPECT_THROW(autograd::backward(y2, chunk.dy), AutogradError);
}

TEST(SplitBackward, MisuseIsRefused) {
  Chunk chunk;
  SplitBackward split;
  EXPECT_THROW(split.backward_weight(), AutogradError);
  EXPECT_THROW(split.backward_input(chunk.x, chunk.dy, chunk.x), AutogradError);  // nothing to differentiate
  Tensor x = chunk.x.detach().set_requires_grad(true);
  Tensor y = chunk.forward(x);
  split.backward_input(y, chunk.dy, x);
  EXPECT_THROW(split.backward_input(y, chunk.dy, x), AutogradError);
}

TEST(SplitBackward, ARootIndependentOfTheInputIsAllWeightGradient) {
  // The first chunk of a GPT: its input is token ids, so everything is weight gradient and Bi returns none.
  nn::GPT model(testing::tiny_config(1), 1);
  const testing::Batch batch = testing::make_batch(2, 8, 20, 1);
  Tensor y = model.forward_range(batch.ids, 0, 2);
  SplitBackward split;
  const Tensor dy = randn(y.shape());
  EXPECT_FALSE(split.backward_input(y, dy, batch.ids).defined());
  for (const Tensor& p : model.parameters()) EXPECT_FALSE(p.grad().defined());
  split.backward_weight();
  EXPECT_TRUE(model.embeddings().wte()->parameter("weight").grad().defined());
}

// One hand-off is a latency (a send and a wake-up: positive, far below a second even on a loaded machine)
// with no bandwidth term: stages in one process pass tensors without a copy. 5 rounds: about 1 ms.
TEST(InProcessLink, OneHandOffIsALatencyWithoutABandwidthTerm) {
  const LinkModel link = in_process_link(5);
  EXPECT_GT(link.latency_ms, 0.0);
  EXPECT_LT(link.latency_ms, 1000.0);
  EXPECT_EQ(link.transfer_ms(1 << 30), link.latency_ms);
  EXPECT_THROW((void)measure_hand_off_ms(0), ValueError);
}

}  // namespace
}  // namespace brigade::pipeline
