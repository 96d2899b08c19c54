// Partition by depth: the exact min-max cut against brute force on random costs, the even tie-break,
// balance parsing and its errors, parameter/time/memory costs on a GPT, tied weights across stages,
// interleaved chunk layout, and the per-layer profile (memory figures exact where they can be, linear in
// the microbatch size).
#include "pipeline/plan/partition.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <numeric>
#include <random>

#include "nn/gpt.h"
#include "nn/layers.h"
#include "pipeline/plan/profile.h"
#include "pipeline/plan/simulator.h"
#include "pipeline/plan/stage_costs.h"
#include "pipeline/schedule/generators.h"
#include "tensor/error.h"
#include "tensor/tensor.h"

namespace brigade::pipeline {
namespace {

using ::testing::HasSubstr;

// Every cut of `costs` into `parts` non-empty parts: calls fn(bounds).
void for_each_cut(int L, int parts, const std::function<void(const std::vector<int>&)>& fn) {
  std::vector<int> bounds{0};
  std::function<void(int)> rec = [&](int from) {
    const int placed = static_cast<int>(bounds.size()) - 1;
    if (placed == parts - 1) {
      bounds.push_back(L);
      fn(bounds);
      bounds.pop_back();
      return;
    }
    for (int b = from + 1; b <= L - (parts - 1 - placed); ++b) {
      bounds.push_back(b);
      rec(b);
      bounds.pop_back();
    }
  };
  rec(0);
}

double sum_of_squares(const std::vector<double>& costs, const std::vector<int>& bounds) {
  double total = 0.0;
  for (size_t p = 0; p + 1 < bounds.size(); ++p) {
    double sum = 0.0;
    for (int i = bounds[p]; i < bounds[p + 1]; ++i) sum += costs[static_cast<size_t>(i)];
    total += sum * sum;
  }
  return total;
}

TEST(MinMaxCut, MatchesBruteForceOnRandomCosts) {
  std::mt19937 rng(7);
  int checked = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const int L = 1 + static_cast<int>(rng() % 11);
    const int K = 1 + static_cast<int>(rng() % L);
    // Integers (exact in double) from a small range so that ties are common: the tie-break is tested too.
    std::vector<double> costs(static_cast<size_t>(L));
    const int range = trial % 2 == 0 ? 4 : 100;
    for (double& c : costs) c = static_cast<double>(rng() % range);
    double best = 1e300, best_even = 1e300;
    std::vector<int> best_bounds;
    for_each_cut(L, K, [&](const std::vector<int>& b) { best = std::min(best, max_part_cost(costs, b)); });
    // Among the optimal cuts: the smallest sum of squares, then the first in lexicographic order (the
    // enumeration is lexicographic, so the first one found with a strictly smaller value wins).
    for_each_cut(L, K, [&](const std::vector<int>& b) {
      if (max_part_cost(costs, b) != best) return;
      const double even = sum_of_squares(costs, b);
      if (even < best_even) {
        best_even = even;
        best_bounds = b;
      }
    });
    const std::vector<int> got = min_max_cut(costs, K);
    ASSERT_EQ(got.size(), static_cast<size_t>(K) + 1);
    EXPECT_EQ(got.front(), 0);
    EXPECT_EQ(got.back(), L);
    for (int k = 0; k < K; ++k) EXPECT_LT(got[static_cast<size_t>(k)], got[static_cast<size_t>(k) + 1]);
    EXPECT_EQ(max_part_cost(costs, got), best) << "trial " << trial << " L=" << L << " K=" << K;
    EXPECT_EQ(got, best_bounds) << "trial " << trial << " L=" << L << " K=" << K;
    ++checked;
  }
  EXPECT_EQ(checked, 300);
}

TEST(MinMaxCut, RealValuedCostsMatchBruteForceBottleneck) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<double> u(0.0, 10.0);
  for (int trial = 0; trial < 100; ++trial) {
    const int L = 2 + static_cast<int>(rng() % 9);
    const int K = 1 + static_cast<int>(rng() % L);
    std::vector<double> costs(static_cast<size_t>(L));
    for (double& c : costs) c = u(rng);
    double best = 1e300;
    for_each_cut(L, K, [&](const std::vector<int>& b) { best = std::min(best, max_part_cost(costs, b)); });
    EXPECT_NEAR(max_part_cost(costs, min_max_cut(costs, K)), best, 1e-12 * best) << "trial " << trial;
  }
}

TEST(MinMaxCut, BeatsTheGreedyFillToTheMean) {
  // Greedy "close a part once it reaches the mean (12)" takes {5,5,5} = 15 first; the optimum is 13.
  const std::vector<double> costs{5, 5, 5, 8, 8, 5};
  const std::vector<int> cut = min_max_cut(costs, 3);
  EXPECT_EQ(max_part_cost(costs, cut), 13.0);
  EXPECT_EQ(cut, (std::vector<int>{0, 2, 4, 6}));  // {5,5} {5,8} {8,5}
}

TEST(MinMaxCut, PrefersTheEvenestOfTheOptimalCuts) {
  // Bottleneck 6 is forced by the last layer; {2} {2,2,2} {6} reaches it too (and comes first in
  // lexicographic order), but {2,2} {2,2} {6} is more even.
  const std::vector<double> costs{2, 2, 2, 2, 6};
  EXPECT_EQ(min_max_cut(costs, 3), (std::vector<int>{0, 2, 4, 5}));
}

TEST(MinMaxCut, RejectsBadInput) {
  EXPECT_THROW(min_max_cut({1, 2}, 0), ValueError);
  try {
    min_max_cut({1, 2}, 3);
    FAIL() << "expected ValueError";
  } catch (const ValueError& e) {
    EXPECT_THAT(e.what(), HasSubstr("cannot cut 2 layers into 3"));
  }
  EXPECT_THROW(min_max_cut({1, -1}, 1), ValueError);
  EXPECT_THROW(min_max_cut({1, std::nan("")}, 1), ValueError);
}

TEST(ParseBalance, ReadsListsAndNamesBadItems) {
  EXPECT_EQ(parse_balance("3,3,2"), (std::vector<int>{3, 3, 2}));
  EXPECT_EQ(parse_balance("10"), (std::vector<int>{10}));
  auto message = [](const std::string& text) {
    try {
      parse_balance(text);
    } catch (const ValueError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_THAT(message(""), HasSubstr("empty list"));
  EXPECT_THAT(message("3,,2"), HasSubstr("item 1 of \"3,,2\" is ''"));
  EXPECT_THAT(message("3,x"), HasSubstr("item 1 of \"3,x\" is 'x'"));
  EXPECT_THAT(message("3,-1"), HasSubstr("is '-1'"));
  EXPECT_THAT(message("3,0,2"), HasSubstr("item 1 of \"3,0,2\" is 0"));
}

TEST(PartitionMethodName, ParsesAndListsValidNames) {
  EXPECT_EQ(parse_partition_method("params"), PartitionMethod::Parameters);
  EXPECT_EQ(parse_partition_method("time"), PartitionMethod::Time);
  EXPECT_EQ(parse_partition_method("memory"), PartitionMethod::Memory);
  EXPECT_EQ(parse_partition_method("balance"), PartitionMethod::Balance);
  try {
    parse_partition_method("flops");
    FAIL() << "expected ValueError";
  } catch (const ValueError& e) {
    EXPECT_THAT(e.what(), HasSubstr("'flops' (valid: params, time, memory, balance)"));
  }
}

// A hand-made profile: layer i has costs[i] parameters (one tensor "l<i>.w" of float32), measured times
// and activations as given.
ModelProfile hand_profile(const std::vector<int64_t>& params, const std::vector<double>& ms = {},
                          const std::vector<int64_t>& activations = {}) {
  ModelProfile p;
  for (size_t i = 0; i < params.size(); ++i) {
    LayerProfile l;
    l.name = std::string("l").append(std::to_string(i));
    l.type = "Layer";
    l.parameter_list.push_back({l.name + ".w", params[i], 4 * params[i]});
    l.parameters = params[i];
    l.parameter_bytes = 4 * params[i];
    if (!ms.empty()) l.forward_ms = ms[i] / 3, l.backward_ms = 2 * ms[i] / 3;
    if (!activations.empty()) l.activation_bytes = activations[i], l.output_bytes = 100, l.input_bytes = 100;
    p.layers.push_back(l);
  }
  p.measured = !ms.empty();
  p.microbatch_size = p.measured ? 1 : 0;
  return p;
}

TEST(MakePartition, CutsOnTheChosenCost) {
  // Parameters say cut after layer 1; time says after layer 2; memory says after layer 0.
  const ModelProfile p = hand_profile({10, 10, 1, 1}, {1, 1, 1, 3}, {30, 1, 1, 1});
  auto cut = [&](PartitionMethod m) {
    PartitionOptions o;
    o.method = m;
    o.stages = 2;
    return make_partition(p, o).balance();
  };
  EXPECT_EQ(cut(PartitionMethod::Parameters), "1,3");
  EXPECT_EQ(cut(PartitionMethod::Time), "3,1");
  EXPECT_EQ(cut(PartitionMethod::Memory), "1,3");

  PartitionOptions o;
  o.method = PartitionMethod::Time;
  o.stages = 2;
  const Partition part = make_partition(p, o);
  EXPECT_EQ(part.cost_unit, "ms");
  ASSERT_EQ(part.stage_plans.size(), 2u);
  EXPECT_NEAR(part.stage_plans[0].cost, 3.0, 1e-12);
  EXPECT_NEAR(part.stage_plans[1].cost, 3.0, 1e-12);
  EXPECT_NEAR(part.imbalance, 1.0, 1e-12);
  EXPECT_EQ(part.stage_plans[0].parameters, 21);
  EXPECT_EQ(part.stage_plans[0].parameter_bytes, 84);
  EXPECT_EQ(part.stage_plans[0].activation_bytes, 32);
  EXPECT_EQ(part.chunks[1].begin, 3);
  EXPECT_EQ(part.chunks[1].end, 4);
}

// Four layers of F 1 and B 2 whose split halves were measured (Bi 1.25, Bw 1.05), except the last's.
ModelProfile profile_with_measured_halves() {
  ModelProfile p = hand_profile({1, 1, 1, 1, 1, 1}, {3, 3, 3, 3, 3, 3});  // F 1, B 2 per layer
  for (LayerProfile& l : p.layers) l.backward_input_ms = 1.25, l.backward_weight_ms = 1.05;
  p.layers[5].backward_input_ms = p.layers[5].backward_weight_ms = -1.0;
  return p;
}

// The per-chunk costs of `p` cut into three stages by time (two layers each).
Costs three_stage_costs_by_time(const ModelProfile& p) {
  PartitionOptions o;
  o.method = PartitionMethod::Time;
  o.stages = 3;
  const Partition part = make_partition(p, o);
  EXPECT_EQ(part.balance(), "2,2,2");
  return profile_costs(p, part);
}

// A chunk's Bi and Bw are its layers' measured halves; one layer without them prices the chunk's split at
// its B, half each, as before the halves were measured. The first chunk, whose input is the token ids, has
// a Bi that computes nothing and a Bw that runs its whole backward, halves measured or not.
TEST(ProfileCosts, TheSplitBackwardCostsWhatItsHalvesMeasured) {
  ModelProfile p = profile_with_measured_halves();
  const Costs c = three_stage_costs_by_time(p);
  ASSERT_EQ(c.per_chunk.size(), 3u);
  EXPECT_NEAR(c.per_chunk[0].backward, 4.0, 1e-12);
  EXPECT_EQ(c.per_chunk[0].backward_input(), 0.0);
  EXPECT_NEAR(c.per_chunk[0].weight, 4.0, 1e-12);
  EXPECT_NEAR(c.per_chunk[1].backward, 4.0, 1e-12);
  EXPECT_NEAR(c.per_chunk[1].backward_input(), 2.5, 1e-12);
  EXPECT_NEAR(c.per_chunk[1].weight, 2.1, 1e-12);
  EXPECT_LT(c.per_chunk[2].input, 0.0);
  EXPECT_NEAR(c.per_chunk[2].backward_input(), 2.0, 1e-12);
  EXPECT_NEAR(c.per_chunk[2].weight, 2.0, 1e-12);
}

// The executor's factors over the layers timed alone scale a chunk's F and R (forward factor) and its B,
// Bi and Bw (backward factor), measured halves or not.
TEST(ProfileCosts, TheExecutorsFactorsScaleEveryAction) {
  ModelProfile p = profile_with_measured_halves();
  p.action_forward_factor = 1.5;
  p.action_backward_factor = 1.2;
  const Costs c = three_stage_costs_by_time(p);
  ASSERT_EQ(c.per_chunk.size(), 3u);
  EXPECT_NEAR(c.per_chunk[0].forward, 3.0, 1e-12);
  EXPECT_NEAR(c.per_chunk[0].recompute, 3.0, 1e-12);
  EXPECT_NEAR(c.per_chunk[0].backward, 4.8, 1e-12);
  EXPECT_NEAR(c.per_chunk[0].weight, 4.8, 1e-12);  // the first chunk: Bw is the whole backward
  EXPECT_NEAR(c.per_chunk[1].backward_input(), 3.0, 1e-12);
  EXPECT_NEAR(c.per_chunk[1].weight, 2.52, 1e-12);
  EXPECT_NEAR(c.per_chunk[2].backward_input(), 2.4, 1e-12);  // no halves: half of B each
  EXPECT_NEAR(c.per_chunk[2].weight, 2.4, 1e-12);
}

// A deferred Bw: the first chunk's (its whole backward) times deferred_first_weight_factor, the others'
// times deferred_weight_factor; without factors it costs what Bw costs.
TEST(ProfileCosts, DeferredWeightGradientsArePricedByTheirFactors) {
  ModelProfile p = profile_with_measured_halves();
  const Costs plain = three_stage_costs_by_time(p);
  for (const ChunkCosts& chunk : plain.per_chunk) EXPECT_NEAR(chunk.weight_deferred, chunk.weight, 1e-12);
  p.deferred_first_weight_factor = 1.1;
  p.deferred_weight_factor = 1.3;
  const Costs c = three_stage_costs_by_time(p);
  EXPECT_NEAR(c.per_chunk[0].weight_deferred, 1.1 * c.per_chunk[0].weight, 1e-12);
  EXPECT_NEAR(c.per_chunk[1].weight_deferred, 1.3 * c.per_chunk[1].weight, 1e-12);
  EXPECT_NEAR(c.per_chunk[2].weight_deferred, 1.3 * c.per_chunk[2].weight, 1e-12);
  // The cold backward's factor goes to every chunk as it is (a ratio: a stage's factor leaves it).
  for (const ChunkCosts& chunk : plain.per_chunk) EXPECT_EQ(chunk.cold, 1.0);
  p.cold_backward_factor = 1.07;
  for (const ChunkCosts& chunk : three_stage_costs_by_time(p).per_chunk) EXPECT_EQ(chunk.cold, 1.07);
  // A stage's factor (scale_stage_costs) scales the deferred Bw with the rest.
  const ChunkLayout layout = make_schedule("1f1b", 3, 3).layout();
  const Costs scaled = scale_stage_costs(c, layout, {1.0, 2.0, 1.0});
  EXPECT_NEAR(scaled.per_chunk[1].weight_deferred, 2.0 * c.per_chunk[1].weight_deferred, 1e-12);
  EXPECT_NEAR(scaled.per_chunk[0].weight_deferred, c.per_chunk[0].weight_deferred, 1e-12);
}

TEST(MakePartition, ExplicitBalanceAndItsErrors) {
  const ModelProfile p = hand_profile({1, 2, 3, 4, 5, 6, 7, 8});
  PartitionOptions o;
  o.method = PartitionMethod::Balance;
  o.stages = 3;
  o.balance = {3, 3, 2};
  const Partition part = make_partition(p, o);
  EXPECT_EQ(part.balance(), "3,3,2");
  EXPECT_EQ(part.layer_counts(), (std::vector<int>{3, 3, 2}));
  EXPECT_EQ(part.cost_unit, "params");  // not measured: the table shows parameters
  EXPECT_EQ(part.stage_plans[0].cost, 6.0);
  EXPECT_EQ(part.stage_plans[1].cost, 15.0);
  EXPECT_EQ(part.stage_plans[2].cost, 15.0);
  EXPECT_NEAR(part.imbalance, 15.0 / 12.0, 1e-12);

  auto message = [&](std::vector<int> balance, int stages) {
    PartitionOptions bad = o;
    bad.balance = std::move(balance);
    bad.stages = stages;
    try {
      make_partition(p, bad);
    } catch (const ValueError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_THAT(message({3, 3}, 3), HasSubstr("balance has 2 entries, expected 3"));
  EXPECT_THAT(message({3, 3, 3}, 3), HasSubstr("balance sums to 9 layers, the model has 8"));
  EXPECT_THAT(message({4, 0, 4}, 3), HasSubstr("balance entry 1 is 0"));
  EXPECT_THAT(message({1, 1, 1, 1, 1, 1, 1, 1, 1}, 9), HasSubstr("need at least 9 layers, the model has 8"));
}

TEST(MakePartition, MeasuredMethodsNeedAMeasuredProfile) {
  const ModelProfile p = hand_profile({1, 2, 3});
  PartitionOptions o;
  o.method = PartitionMethod::Time;
  o.stages = 2;
  try {
    make_partition(p, o);
    FAIL() << "expected ValueError";
  } catch (const ValueError& e) {
    EXPECT_THAT(e.what(), HasSubstr("partition by time needs measured layers"));
  }
  o.stages = 0;
  EXPECT_THROW(make_partition(p, o), ValueError);
}

TEST(MakePartition, InterleavedChunksGoRoundRobin) {
  const ModelProfile p = hand_profile({1, 1, 1, 1, 1, 1, 1, 1});
  PartitionOptions o;
  o.stages = 2;
  o.virtual_chunks = 2;
  const Partition part = make_partition(p, o);
  ASSERT_EQ(part.model_chunks(), 4);
  EXPECT_EQ(part.balance(), "2,2,2,2");
  EXPECT_EQ(part.chunk(0, 0).begin, 0);
  EXPECT_EQ(part.chunk(1, 0).begin, 2);
  EXPECT_EQ(part.chunk(0, 1).begin, 4);
  EXPECT_EQ(part.chunk(1, 1).begin, 6);
  EXPECT_EQ(part.stage_plans[0].chunks, (std::vector<int>{0, 2}));
  EXPECT_EQ(part.stage_plans[0].cost, 4.0);
  EXPECT_THAT(part.table(), HasSubstr("stage 1"));
  EXPECT_THROW(part.chunk(2, 0), ValueError);
}

nn::GPTConfig small_config(int64_t layers) {
  nn::GPTConfig c;
  c.vocab_size = 65;
  c.block_size = 16;
  c.n_layer = layers;
  c.n_head = 2;
  c.n_embd = 16;
  return c;
}

TEST(GPTPartition, ByParametersReportsTheTiedEmbedding) {
  nn::GPT model(small_config(8), 1);
  const ModelProfile profile = count_parameters(model);
  ASSERT_EQ(profile.num_layers(), 10);
  EXPECT_EQ(profile.layers[0].name, "embed");
  EXPECT_EQ(profile.layers[9].name, "head");
  EXPECT_EQ(profile.total_parameters(), model.num_parameters());
  // The head uses the embedding's matrix (65 x 16) and its LayerNorm (2 x 16).
  EXPECT_EQ(profile.layers[9].parameters, 65 * 16 + 2 * 16);

  PartitionOptions o;
  o.stages = 4;
  const Partition part = make_partition(profile, o);
  const std::vector<double> costs = layer_costs(profile, PartitionMethod::Parameters);
  std::vector<int> bounds{0};
  for (const ChunkPlan& c : part.chunks) bounds.push_back(c.end);
  double best = 1e300;
  for_each_cut(10, 4, [&](const std::vector<int>& b) { best = std::min(best, max_part_cost(costs, b)); });
  EXPECT_EQ(max_part_cost(costs, bounds), best);

  ASSERT_EQ(part.shared.size(), 1u);
  EXPECT_EQ(part.shared[0].name, "embed.wte.weight");
  EXPECT_EQ(part.shared[0].numel, 65 * 16);
  EXPECT_EQ(part.shared[0].stages, (std::vector<int>{0, 3}));
  EXPECT_EQ(part.shared[0].layers, (std::vector<std::string>{"embed", "head"}));
  // Stage parameters add up to the model's, plus the tied tensor counted once more on the last stage.
  int64_t sum = 0;
  for (const StagePlan& s : part.stage_plans) sum += s.parameters;
  EXPECT_EQ(sum, model.num_parameters() + 65 * 16);
  double worst = 0, total = 0;
  for (const StagePlan& s : part.stage_plans) worst = std::max(worst, s.cost), total += s.cost;
  EXPECT_NEAR(part.imbalance, worst / (total / 4), 1e-12);

  const std::string table = part.table();
  EXPECT_THAT(table, HasSubstr("partition by params: 10 layers on 4 stages"));
  EXPECT_THAT(table, HasSubstr("imbalance"));
  EXPECT_THAT(table, HasSubstr("shared: embed.wte.weight"));
  EXPECT_THAT(table, HasSubstr("on stages 0 3"));

  // On one stage nothing is shared across stages.
  o.stages = 1;
  EXPECT_TRUE(make_partition(profile, o).shared.empty());
}

// What partition by params cuts on: the embedding's tables are lookups (one row per token each, tied or
// not), the head's matmul uses the whole tied matrix and the loss adds kLossWorkPerLogit per logit.
TEST(GPTPartition, ByParametersTheEmbeddingIsALookupAndTheHeadPaysForTheLoss) {
  nn::GPT model(small_config(2), 1);
  const ModelProfile profile = count_parameters(model);
  const std::vector<double> costs = layer_costs(profile, PartitionMethod::Parameters);
  ASSERT_EQ(costs.size(), 4u);
  EXPECT_EQ(costs[0], 16 + 16);  // one row of wte (65 x 16) and one of wpe (16 x 16)
  EXPECT_EQ(costs[1], static_cast<double>(profile.layers[1].parameters));  // a block: its parameters
  EXPECT_EQ(costs[3], 65 * 16 + 2 * 16 + kLossWorkPerLogit * 65);
  EXPECT_FALSE(profile.layers[0].has_attention);
  EXPECT_TRUE(profile.layers[1].has_attention);
  // A heavy head moves the cut: with a vocabulary as large as a block's parameters, the last stage of
  // three takes the head alone rather than a block with it.
  nn::GPTConfig big = small_config(4);
  big.vocab_size = 4000;
  nn::GPT wide(big, 1);
  PartitionOptions o;
  o.stages = 3;
  EXPECT_EQ(make_partition(count_parameters(wide), o).balance(), "3,2,1");
}

TEST(GPTPartition, UntiedModelSharesNothing) {
  nn::GPTConfig c = small_config(4);
  c.tie_weights = false;
  nn::GPT model(c, 1);
  PartitionOptions o;
  o.stages = 3;
  EXPECT_TRUE(make_partition(count_parameters(model), o).shared.empty());
}

Tensor random_ids(int64_t batch, int64_t T, int64_t vocab, uint64_t seed) {
  std::mt19937 rng(static_cast<unsigned>(seed));
  std::vector<int64_t> ids(static_cast<size_t>(batch * T));
  for (auto& id : ids) id = static_cast<int64_t>(rng() % static_cast<unsigned>(vocab));
  return from_vector(ids, {batch, T});
}

TEST(Profile, MeasuresEveryLayerOfAGPT) {
  const nn::GPTConfig c = small_config(2);
  nn::GPT model(c, 1);
  const int64_t B = 2, T = 8;
  const Tensor ids = random_ids(B, T, c.vocab_size, 1);
  const Tensor targets = random_ids(B, T, c.vocab_size, 2);
  ProfileOptions options;
  options.repeats = 3;
  options.loss = [&](const Tensor& logits) { return nn::GPT::loss(logits, targets); };
  const ModelProfile p = profile_layers(model, ids, options);
  ASSERT_EQ(p.num_layers(), 4);
  EXPECT_TRUE(p.measured);
  EXPECT_EQ(p.microbatch_size, B);
  EXPECT_EQ(p.repeats, 3);
  const int64_t hidden = B * T * c.n_embd * 4;
  for (int i = 0; i < 4; ++i) {
    const LayerProfile& l = p.layers[static_cast<size_t>(i)];
    EXPECT_GT(l.forward_ms, 0.0) << l.name;
    EXPECT_GT(l.backward_ms, 0.0) << l.name;
    EXPECT_EQ(l.output_bytes, i == 3 ? B * T * c.vocab_size * 4 : hidden) << l.name;
    EXPECT_EQ(l.input_bytes, i == 0 ? B * T * 8 : hidden) << l.name;  // ids are int64
    EXPECT_GE(l.activation_bytes, l.output_bytes) << l.name;
    EXPECT_GT(l.backward_workspace_bytes, 0) << l.name;
    // The split backward's halves, timed: the embedding's input is token ids, so its Bi has nothing to do.
    ASSERT_TRUE(l.split_measured()) << l.name;
    EXPECT_GT(l.backward_weight_ms, 0.0) << l.name;
    if (i > 0) {
      EXPECT_GT(l.backward_input_ms, 0.0) << l.name;
    }
  }
  // A block saves several [B, T, C] tensors (LayerNorm inputs, q/k/v, attention probabilities, MLP
  // hidden [B, T, 4C], ...): more than its output.
  EXPECT_GT(p.layers[1].activation_bytes, 4 * hidden);
  EXPECT_THAT(p.table(), HasSubstr("blocks.1"));
}

TEST(Profile, ActivationsScaleLinearlyWithTheMicrobatch) {
  const nn::GPTConfig c = small_config(2);
  nn::GPT model(c, 1);
  const int64_t T = 8;
  auto profile = [&](int64_t batch) {
    const Tensor ids = random_ids(batch, T, c.vocab_size, 1);
    const Tensor targets = random_ids(batch, T, c.vocab_size, 2);
    ProfileOptions options;
    options.repeats = 1;
    options.loss = [&](const Tensor& logits) { return nn::GPT::loss(logits, targets); };
    return profile_layers(model, ids, options);
  };
  const ModelProfile a = profile(2), b = profile(4);
  for (int i = 0; i < 4; ++i) {
    const LayerProfile &x = a.layers[static_cast<size_t>(i)], &y = b.layers[static_cast<size_t>(i)];
    // Every activation is [B, ...] except the attention's causal mask [T, T] (float32) in a block and
    // the scalar loss in the head: those do not scale, and are all the difference.
    const double fixed = x.type == "Block" ? T * T * 4.0 : 64.0;
    EXPECT_NEAR(static_cast<double>(y.activation_bytes), 2.0 * static_cast<double>(x.activation_bytes), fixed)
        << x.name;
    EXPECT_EQ(y.output_bytes, 2 * x.output_bytes) << x.name;
  }
}

TEST(Profile, ThreadCpuTimeCountsTheLayersWork) {
  const nn::GPTConfig c = small_config(1);
  nn::GPT model(c, 1);
  ProfileOptions o;
  o.repeats = 3;
  o.thread_cpu_time = true;
  const ModelProfile p = profile_layers(model, random_ids(2, 8, c.vocab_size, 1), o);
  for (const LayerProfile& l : p.layers) {
    EXPECT_GT(l.forward_ms, 0.0) << l.name;
    EXPECT_GT(l.backward_ms, 0.0) << l.name;
    EXPECT_LT(l.time_ms(), 1000.0) << l.name;  // milliseconds, not nanoseconds
  }
}

TEST(Profile, RejectsBadOptions) {
  nn::GPT model(small_config(1), 1);
  const Tensor ids = random_ids(1, 4, 65, 1);
  ProfileOptions o;
  o.repeats = 0;
  EXPECT_THROW(profile_layers(model, ids, o), ValueError);
  nn::Sequential empty;
  EXPECT_THROW(profile_layers(empty, ids), ValueError);
}

}  // namespace
}  // namespace brigade::pipeline
