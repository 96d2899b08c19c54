// The engine and its promises: accumulation, graph shapes, retain_graph, errors, no-grad, detach, release
// of saved tensors, threads, checkpointing. Values are float64 on the CPU; exact expectations use
// tolerance 1e-12 unless stated.
#include "autograd/engine.h"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "autograd/checkpoint.h"
#include "autograd/node.h"
#include "autograd/ops.h"
#include "tensor/memory.h"
#include "test_support.h"

namespace brigade {
namespace {

using testing::allclose;
using testing::message_of;

constexpr double kTol = 1e-12;

Tensor values(const std::vector<double>& v, const Shape& shape) {
  return from_vector<double>(v, shape);
}

Tensor leaf(const std::vector<double>& v, const Shape& shape) {
  return values(v, shape).set_requires_grad();
}

Tensor random_leaf(const Shape& shape, uint64_t seed) {
  Generator gen(seed);
  return randn(shape, kFloat64, &gen).set_requires_grad();
}

// ---- accumulation and graph shapes ------------------------------------------------------------------------

TEST(Engine, LeafUsedTwiceAccumulates) {
  Tensor x = leaf({1, -2, 3}, {3});
  Tensor y = sum(x * x + x * 3.0);  // dy/dx = 2x + 3
  y.backward();
  EXPECT_TRUE(allclose(x.grad(), values({5, -1, 9}, {3}), 0, kTol));
}

TEST(Engine, SecondBackwardOnANewGraphAddsIntoGrad) {
  Tensor x = leaf({1, 2}, {2});
  sum(x * x).backward();     // 2x
  sum(x * 10.0).backward();  // + 10
  EXPECT_TRUE(allclose(x.grad(), values({12, 14}, {2}), 0, kTol));
}

TEST(Engine, DiamondGraphSumsBothPaths) {
  // b = exp(a); c = b * 2; d = b * b; e = c + d  ->  de/da = (2 + 2b) * b
  Tensor a = leaf({0.5, -1.0}, {2});
  Tensor b = exp(a);
  Tensor e = sum(b * 2.0 + b * b);
  e.backward();
  std::vector<double> expected;
  for (double v : {0.5, -1.0}) expected.push_back((2 + 2 * std::exp(v)) * std::exp(v));
  EXPECT_TRUE(allclose(a.grad(), values(expected, {2}), 0, kTol));
}

TEST(Engine, SameTensorAsBothInputs) {
  Tensor x = leaf({3}, {1});
  (x * x).backward();  // 2x, delivered through both edges of one node
  EXPECT_TRUE(allclose(x.grad(), values({6}, {1}), 0, kTol));
}

TEST(Engine, ExplicitGradientForNonScalarOutput) {
  Tensor x = leaf({1, 2, 3, 4}, {2, 2});
  Tensor y = x * x;
  backward(y, values({1, 0, 2, -1}, {2, 2}));  // as a pipeline stage receives it
  EXPECT_TRUE(allclose(x.grad(), values({2, 0, 12, -8}, {2, 2}), 0, kTol));
}

TEST(Engine, SeveralRootsRunSharedNodesOnce) {
  Tensor x = leaf({1, 2}, {2});
  Tensor h = x * x;
  Tensor a = sum(h * 2.0);
  Tensor b = sum(h);
  backward(std::vector<Tensor>{a, b}, std::vector<Tensor>{Tensor(), Tensor()});
  EXPECT_TRUE(allclose(x.grad(), values({6, 12}, {2}), 0, kTol));  // 3 * 2x
}

TEST(Engine, BackwardOnALeafAccumulatesTheSeed) {
  Tensor x = leaf({7}, {1});
  x.backward();
  EXPECT_TRUE(allclose(x.grad(), values({1}, {1}), 0, kTol));
}

TEST(Engine, GradIsAFreshTensor) {
  // add passes one gradient tensor to both inputs; each .grad must be its own copy.
  Tensor a = leaf({1, 2}, {2});
  Tensor b = leaf({3, 4}, {2});
  sum(a + b).backward();
  EXPECT_NE(a.grad().storage(), b.grad().storage());
  sum(a * 5.0).backward();
  EXPECT_TRUE(allclose(a.grad(), values({6, 6}, {2}), 0, kTol));
  EXPECT_TRUE(allclose(b.grad(), values({1, 1}, {2}), 0, kTol));
}

TEST(Engine, DeepChainDoesNotRecurse) {
  Tensor x = leaf({0.0}, {1});
  Tensor y = x;
  for (int i = 0; i < 100000; ++i) y = y + 1.0;  // building, running and freeing it must not recurse
  y.backward();
  EXPECT_TRUE(allclose(x.grad(), values({1}, {1}), 0, kTol));
}

TEST(Engine, HooksCanRewriteTheLeafGradient) {
  Tensor x = leaf({1, 2}, {2});
  int calls = 0;
  autograd::register_hook(x, [&calls](const Tensor& g) {
    ++calls;
    return g * 10.0;  // runs under NoGradGuard: not recorded
  });
  sum(x * x).backward();
  EXPECT_EQ(calls, 1);
  EXPECT_TRUE(allclose(x.grad(), values({20, 40}, {2}), 0, kTol));
  Tensor y = x * 2.0;
  EXPECT_THROW(autograd::register_hook(y, [](const Tensor& g) { return g; }), AutogradError);
}

TEST(Engine, ViewOfALeafAndConversionsRouteGradientsBack) {
  Tensor x = leaf({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor y = x.transpose(0, 1).contiguous().to(kFloat32);  // [3, 2] float32
  Tensor loss = sum(y * y);
  loss.backward();
  ASSERT_EQ(x.grad().dtype(), kFloat64);
  EXPECT_TRUE(allclose(x.grad(), values({2, 4, 6, 8, 10, 12}, {2, 3}), 0, 1e-6));  // float32 path
}

TEST(Engine, MaximumSplitsTiesAndMaxPicksTheFirst) {
  Tensor a = leaf({1, 2, 5}, {3});
  Tensor b = leaf({1, 3, 4}, {3});
  sum(maximum(a, b)).backward();
  EXPECT_TRUE(allclose(a.grad(), values({0.5, 0, 1}, {3}), 0, kTol));
  EXPECT_TRUE(allclose(b.grad(), values({0.5, 1, 0}, {3}), 0, kTol));

  Tensor x = leaf({1, 3, 3, 2, 7, 7}, {2, 3});
  max(x, {1}).backward(values({1, 2}, {2}));
  EXPECT_TRUE(allclose(x.grad(), values({0, 1, 0, 0, 2, 0}, {2, 3}), 0, kTol));
  Tensor z = leaf({1, 9, 9, 2}, {2, 2});
  max(z).backward();  // over every dim: the first 9 in row-major order
  EXPECT_TRUE(allclose(z.grad(), values({0, 1, 0, 0}, {2, 2}), 0, kTol));
}

// ---- retain_graph and errors ------------------------------------------------------------------------------

TEST(Engine, RetainGraphAllowsASecondBackward) {
  Tensor x = leaf({1, 2}, {2});
  Tensor y = sum(exp(x) * x);
  y.backward(Tensor(), /*retain_graph=*/true);
  Tensor first = x.grad().clone();
  y.backward();
  EXPECT_TRUE(allclose(x.grad(), first * 2.0, 0, kTol));
}

TEST(Engine, SecondBackwardWithoutRetainGraphThrows) {
  Tensor x = leaf({1, 2}, {2});
  Tensor y = sum(exp(x));
  y.backward();
  std::string message = message_of<AutogradError>([&] { y.backward(); });
  EXPECT_NE(message.find("retain_graph=true"), std::string::npos) << message;
  EXPECT_NE(message.find("'sum'"), std::string::npos) << message;  // names the node
}

TEST(Engine, NonScalarWithoutGradientThrowsNamingTheShape) {
  Tensor x = random_leaf({2, 3}, 1);
  Tensor y = x * 2.0;
  std::string message = message_of<AutogradError>([&] { y.backward(); });
  EXPECT_NE(message.find("[2, 3]"), std::string::npos) << message;
  EXPECT_NE(message.find("scalar"), std::string::npos) << message;
}

TEST(Engine, GradientOfTheWrongShapeThrows) {
  Tensor x = random_leaf({2, 3}, 1);
  Tensor y = x * 2.0;
  std::string message = message_of<AutogradError>([&] { y.backward(zeros({3, 2}, kFloat64)); });
  EXPECT_NE(message.find("[3, 2]"), std::string::npos) << message;
  EXPECT_NE(message.find("[2, 3]"), std::string::npos) << message;
}

TEST(Engine, RootThatDoesNotRequireGradThrows) {
  Tensor x = values({1, 2}, {2});
  Tensor y = sum(x * 2.0);
  EXPECT_FALSE(y.requires_grad());
  EXPECT_THROW(y.backward(), AutogradError);
}

// ---- no-grad and detach -----------------------------------------------------------------------------------

TEST(Engine, NoGradGuardRecordsNothing) {
  Tensor x = random_leaf({3}, 2);
  {
    NoGradGuard no_grad;
    Tensor y = exp(x) * 2.0 + sum(x.view({3, 1}).expand({3, 2}), {1});
    EXPECT_FALSE(y.requires_grad());
    EXPECT_EQ(y.grad_fn(), nullptr);
    EXPECT_FALSE(GradMode::is_enabled());
  }
  EXPECT_TRUE(GradMode::is_enabled());
  Tensor z = x * 2.0;
  EXPECT_TRUE(z.requires_grad());
  ASSERT_NE(z.grad_fn(), nullptr);
  EXPECT_STREQ(z.grad_fn()->name(), "mul");
}

TEST(Engine, DetachCutsTheGraph) {
  Tensor x = leaf({1, 2, 3}, {3});
  Tensor d = (x * 2.0).detach();  // constant 2x
  EXPECT_FALSE(d.requires_grad());
  sum(d * x).backward();  // d/dx (c * x) = c = 2x, not 4x
  EXPECT_TRUE(allclose(x.grad(), values({2, 4, 6}, {3}), 0, kTol));
}

TEST(Engine, ComparisonsAreNotDifferentiable) {
  Tensor x = random_leaf({4}, 3);
  EXPECT_FALSE(gt(x, 0.0).requires_grad());
  EXPECT_FALSE(eq(x, x).requires_grad());
}

// ---- saved tensors are released ---------------------------------------------------------------------------

TEST(Engine, SavedTensorsAreFreedByBackward) {
  Tensor x = random_leaf({64}, 4);
  std::weak_ptr<Storage> saved_storage;
  Tensor loss;
  {
    Tensor h = exp(x);  // exp saves its output
    saved_storage = h.storage();
    loss = sum(h);
  }
  EXPECT_FALSE(saved_storage.expired()) << "the exp node should hold its output until backward";
  loss.backward();
  EXPECT_TRUE(saved_storage.expired()) << "backward should release the saved output";
}

TEST(Engine, RetainGraphKeepsSavedTensors) {
  Tensor x = random_leaf({64}, 4);
  std::weak_ptr<Storage> saved_storage;
  Tensor loss;
  {
    Tensor h = exp(x);
    saved_storage = h.storage();
    loss = sum(h);
  }
  loss.backward(Tensor(), /*retain_graph=*/true);
  EXPECT_FALSE(saved_storage.expired());
}

TEST(Engine, MemoryInUseDropsDuringBackward) {
  const int64_t n = 256 * 256;
  const int64_t bytes = n * 8;
  Tensor x = random_leaf({256, 256}, 5);
  Tensor loss = sum(tanh(exp(tanh(x))));  // three nodes, each saving a [256, 256] output (and input)
  const int64_t before = memory_stats(Device::cpu()).in_use_bytes;
  loss.backward();
  const int64_t after = memory_stats(Device::cpu()).in_use_bytes;
  // Freed: the three saved outputs (the inputs x and the outputs are the same buffers); allocated: x.grad.
  EXPECT_LE(after, before - 2 * bytes + 4096) << "before " << before << " after " << after;
}

// ---- threads ----------------------------------------------------------------------------------------------

struct Mlp {
  Tensor x, w1, w2;
  explicit Mlp(uint64_t seed)
      : x(random_leaf({8, 16}, seed)),
        w1(random_leaf({16, 32}, seed + 1)),
        w2(random_leaf({32, 4}, seed + 2)) {}
  std::vector<Tensor> run() {
    for (Tensor* p : {&x, &w1, &w2}) p->set_grad(Tensor());
    Tensor logits = matmul(gelu(matmul(x, w1)), w2);
    Tensor loss = mean(softmax(logits) * logits) + sum(layer_norm(logits, Tensor(), Tensor()) * logits);
    loss.backward();
    return {x.grad(), w1.grad(), w2.grad()};
  }
};

TEST(Engine, ConcurrentBackwardOnDisjointGraphs) {
  std::vector<std::vector<Tensor>> reference;
  for (uint64_t t = 0; t < 4; ++t) reference.push_back(Mlp(100 * t).run());

  std::atomic<int> mismatches{0};
  std::vector<std::thread> threads;
  for (uint64_t t = 0; t < 4; ++t) {
    threads.emplace_back([t, &reference, &mismatches] {
      Mlp mlp(100 * t);
      for (int iteration = 0; iteration < 50; ++iteration) {
        std::vector<Tensor> grads = mlp.run();
        for (size_t i = 0; i < grads.size(); ++i) {
          if (!allclose(grads[i], reference[t][i], 1e-12, 1e-12)) ++mismatches;
        }
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(mismatches.load(), 0);
}

// ---- checkpoint -------------------------------------------------------------------------------------------

struct Block {
  Tensor w1 = random_leaf({16, 32}, 11);
  Tensor w2 = random_leaf({32, 16}, 12);
  double p = 0.0;
  int calls = 0;
  std::vector<Tensor> operator()(const std::vector<Tensor>& in) {
    ++calls;
    Tensor h = dropout(gelu(matmul(in[0], w1)), p, /*training=*/true);
    return {tanh(matmul(h, w2)) + in[0]};
  }
  void zero() {
    w1.set_grad(Tensor());
    w2.set_grad(Tensor());
  }
};

/// Gradients of x, w1, w2 for loss = sum(block(x)^2), with or without checkpointing.
std::vector<Tensor> block_grads(Block& block, bool use_checkpoint, bool ahead = false) {
  Tensor x = random_leaf({8, 16}, 10);
  block.zero();
  auto fn = [&block](const std::vector<Tensor>& in) { return block(in); };
  Tensor y = use_checkpoint ? checkpoint(fn, {x})[0] : fn({x})[0];
  if (ahead) recompute_ahead({y});
  sum(y * y).backward();
  return {x.grad(), block.w1.grad(), block.w2.grad()};
}

TEST(Checkpoint, SameGradientsAsWithout) {
  Block block;
  std::vector<Tensor> expected = block_grads(block, false);
  std::vector<Tensor> actual = block_grads(block, true);
  for (size_t i = 0; i < 3; ++i)
    EXPECT_TRUE(allclose(actual[i], expected[i], 1e-12, 1e-12)) << "gradient " << i;
  EXPECT_EQ(block.calls, 3);  // plain, checkpoint forward, recompute
}

TEST(Checkpoint, DropoutMasksMatchAndTheGeneratorIsRestored) {
  Block block;
  block.p = 0.5;
  manual_seed(77);
  std::vector<Tensor> expected = block_grads(block, false);
  const GeneratorState after_plain = default_generator().state();

  manual_seed(77);
  Tensor x = random_leaf({8, 16}, 10);
  block.zero();
  auto fn = [&block](const std::vector<Tensor>& in) { return block(in); };
  Tensor y = checkpoint(fn, {x})[0];
  EXPECT_EQ(default_generator().state(), after_plain);  // the forward drew once
  Tensor r = rand({1}, kFloat64);                       // someone draws between forward and backward
  ASSERT_EQ(r.numel(), 1);
  const GeneratorState before_backward = default_generator().state();
  sum(y * y).backward();
  EXPECT_EQ(default_generator().state(), before_backward);  // the replay put the generator back
  std::vector<Tensor> actual = {x.grad(), block.w1.grad(), block.w2.grad()};
  for (size_t i = 0; i < 3; ++i)
    EXPECT_TRUE(allclose(actual[i], expected[i], 1e-12, 1e-12)) << "gradient " << i;
}

TEST(Checkpoint, RecomputeAheadIsUsedByBackward) {
  Block block;
  std::vector<Tensor> expected = block_grads(block, false);
  block.calls = 0;
  std::vector<Tensor> actual = block_grads(block, true, /*ahead=*/true);
  EXPECT_EQ(block.calls, 2);  // forward + the recompute ahead; backward reused it
  for (size_t i = 0; i < 3; ++i)
    EXPECT_TRUE(allclose(actual[i], expected[i], 1e-12, 1e-12)) << "gradient " << i;
  Tensor plain = random_leaf({2}, 1) * 2.0;
  EXPECT_THROW(recompute_ahead({plain}), AutogradError);
}

TEST(Checkpoint, SeveralOutputsEachGetTheirGradient) {
  Tensor a = leaf({0.5, -1, 2}, {3});
  auto fn = [](const std::vector<Tensor>& in) { return std::vector<Tensor>{in[0] * 2.0, exp(in[0])}; };
  std::vector<Tensor> out = checkpoint(fn, {a});
  ASSERT_EQ(out.size(), 2u);
  sum(out[0] + out[1] * 3.0).backward();  // 2 + 3 exp(a)
  std::vector<double> expected;
  for (double v : {0.5, -1.0, 2.0}) expected.push_back(2 + 3 * std::exp(v));
  EXPECT_TRUE(allclose(a.grad(), values(expected, {3}), 0, kTol));

  Tensor b = leaf({1, 2}, {2});
  std::vector<Tensor> out_b = checkpoint(fn, {b});
  sum(out_b[1]).backward();  // only the second output takes part
  EXPECT_TRUE(allclose(b.grad(), values({std::exp(1.0), std::exp(2.0)}, {2}), 0, kTol));
}

TEST(Checkpoint, InputsThatDoNotRequireGradStillTrainTheParameters) {
  Block block;
  Tensor x = random_leaf({8, 16}, 10).detach();  // like token embeddings entering stage 0
  auto fn = [&block](const std::vector<Tensor>& in) { return block(in); };
  Tensor y = checkpoint(fn, {x})[0];
  sum(y).backward();
  ASSERT_TRUE(block.w1.grad().defined());
  Tensor y2 = fn({x})[0];
  Tensor w1_grad = block.w1.grad().clone();
  block.zero();
  sum(y2).backward();
  EXPECT_TRUE(allclose(w1_grad, block.w1.grad(), 1e-12, 1e-12));
}

TEST(Checkpoint, HoldsLessMemoryBetweenForwardAndBackward) {
  Tensor w = random_leaf({128, 128}, 21);
  auto fn = [&w](const std::vector<Tensor>& in) {
    Tensor h = in[0];
    for (int i = 0; i < 4; ++i) h = tanh(matmul(h, w));  // each step saves two [128, 128] tensors
    return std::vector<Tensor>{h};
  };
  auto held = [&](bool use_checkpoint) {
    Tensor x = random_leaf({128, 128}, 22);
    const int64_t before = memory_stats(Device::cpu()).in_use_bytes;
    Tensor y = use_checkpoint ? checkpoint(fn, {x})[0] : fn({x})[0];
    const int64_t between = memory_stats(Device::cpu()).in_use_bytes - before;
    sum(y).backward();
    w.set_grad(Tensor());
    return between;
  };
  const int64_t bytes = 128 * 128 * 8;
  const int64_t plain = held(false);
  const int64_t checkpointed = held(true);
  EXPECT_GE(plain, 4 * bytes);            // intermediates kept for backward
  EXPECT_LE(checkpointed, bytes + 4096);  // only the output
}

TEST(Checkpoint, SecondBackwardWithoutRetainGraphThrows) {
  Tensor a = leaf({1, 2}, {2});
  auto fn = [](const std::vector<Tensor>& in) { return std::vector<Tensor>{exp(in[0])}; };
  Tensor y = checkpoint(fn, {a})[0];
  y.backward(ones({2}, kFloat64), /*retain_graph=*/true);
  y.backward(ones({2}, kFloat64));  // retained: recomputes again
  EXPECT_TRUE(allclose(a.grad(), values({2 * std::exp(1.0), 2 * std::exp(2.0)}, {2}), 0, kTol));
  std::string message = message_of<AutogradError>([&] { y.backward(ones({2}, kFloat64)); });
  EXPECT_NE(message.find("checkpoint"), std::string::npos) << message;
  EXPECT_NE(message.find("retain_graph=true"), std::string::npos) << message;
}

TEST(Checkpoint, UnderNoGradItJustRunsTheFunction) {
  Tensor a = leaf({1, 2}, {2});
  NoGradGuard no_grad;
  Tensor y =
      checkpoint([](const std::vector<Tensor>& in) { return std::vector<Tensor>{in[0] * 3.0}; }, {a})[0];
  EXPECT_FALSE(y.requires_grad());
  EXPECT_TRUE(allclose(y, values({3, 6}, {2}), 0, kTol));
}

}  // namespace
}  // namespace brigade
