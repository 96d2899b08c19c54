// GPT: parameter names and closed-form counts, GPT-2 initialisation, weight tying (shared storage, summed
// gradients), causality, float64 gradcheck, overfitting one batch with AdamW, generation, config JSON.
#include "nn/gpt.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "autograd/gradcheck.h"
#include "autograd/ops.h"
#include "nn/optim.h"
#include "test_support.h"

using brigade::Tensor;
using brigade::testing::allclose;
namespace nn = brigade::nn;

namespace {

nn::GPTConfig tiny_config() {
  nn::GPTConfig c;
  c.vocab_size = 11;
  c.block_size = 8;
  c.n_layer = 2;
  c.n_head = 2;
  c.n_embd = 8;
  return c;
}

// Closed form: wte V*C + wpe T*C + L * (ln 2*2C + qkv 3C*C + 3C + proj C*C + C + fc 4C*C + 4C + proj 4C*C +
// C)
// + ln_f 2C + (untied) lm_head V*C; without bias every Linear/LayerNorm bias goes.
int64_t closed_form_params(const nn::GPTConfig& c) {
  const int64_t C = c.n_embd, V = c.vocab_size, T = c.block_size, L = c.n_layer;
  const int64_t per_block = c.bias ? 12 * C * C + 13 * C : 12 * C * C + 2 * C;
  return V * C + T * C + L * per_block + (c.bias ? 2 * C : C) + (c.tie_weights ? 0 : V * C);
}

double stddev(const Tensor& t) {
  std::vector<double> v = t.to_vector<double>();
  double mean = 0, var = 0;
  for (double x : v) mean += x / v.size();
  for (double x : v) var += (x - mean) * (x - mean) / v.size();
  return std::sqrt(var);
}

Tensor random_ids(int64_t B, int64_t T, int64_t V, uint64_t seed) {
  brigade::Generator gen(seed);
  std::vector<double> u = brigade::rand({B * T}, brigade::kFloat64, &gen).to_vector<double>();
  std::vector<int64_t> ids;
  for (double x : u) ids.push_back(static_cast<int64_t>(x * V));
  return brigade::from_vector(ids, {B, T});
}

}  // namespace

TEST(GPT, ParameterNamesAndClosedFormCounts) {
  nn::GPTConfig c = tiny_config();
  nn::GPT model(c);
  std::vector<std::string> names;
  for (auto& [name, p] : model.named_parameters()) names.push_back(name);
  std::vector<std::string> expected = {"embed.wte.weight", "embed.wpe.weight"};
  for (int i = 0; i < 2; ++i) {
    const std::string b = "blocks." + std::to_string(i) + ".";
    for (const char* n :
         {"ln1.weight", "ln1.bias", "attn.qkv.weight", "attn.qkv.bias", "attn.proj.weight", "attn.proj.bias",
          "ln2.weight", "ln2.bias", "mlp.fc.weight", "mlp.fc.bias", "mlp.proj.weight", "mlp.proj.bias"}) {
      expected.push_back(b + n);
    }
  }
  expected.push_back("head.ln_f.weight");
  expected.push_back("head.ln_f.bias");
  EXPECT_EQ(names, expected);  // tied: no head.lm_head.weight
  EXPECT_EQ(model.size(), 4);  // embed, 2 blocks, head: the pipeline's layers
  EXPECT_EQ(model.name_at(1), "blocks.0");
  EXPECT_EQ(model.state_dict().at("blocks.1.attn.qkv.weight").shape(), (brigade::Shape{24, 8}));

  for (bool tie : {true, false}) {
    for (bool bias : {true, false}) {
      c.tie_weights = tie;
      c.bias = bias;
      nn::GPT m(c);
      EXPECT_EQ(m.num_parameters(), closed_form_params(c)) << "tie " << tie << " bias " << bias;
      EXPECT_EQ(m.state_dict().count("head.lm_head.weight"), tie ? 0u : 1u);
    }
  }
  // The GPT-2 small shape, as a sanity check of the formula: 124,439,808 with tied weights (block 1024).
  nn::GPTConfig gpt2;
  gpt2.vocab_size = 50257;
  gpt2.block_size = 1024;
  gpt2.n_layer = 12;
  gpt2.n_head = 12;
  gpt2.n_embd = 768;
  EXPECT_EQ(closed_form_params(gpt2), 124439808);
}

TEST(GPT, Gpt2InitialisationIsSeededAndScaled) {
  nn::GPTConfig c = tiny_config();
  c.n_embd = 64;
  c.n_head = 4;
  c.vocab_size = 200;
  c.n_layer = 2;
  nn::GPT a(c, 42), b(c, 42), other(c, 43);
  auto sa = a.state_dict(), sb = b.state_dict(), so = other.state_dict();
  for (auto& [name, t] : sa) EXPECT_EQ(t.to_vector<float>(), sb.at(name).to_vector<float>()) << name;
  EXPECT_NE(sa.at("embed.wte.weight").to_vector<float>(), so.at("embed.wte.weight").to_vector<float>());

  // Normal(0, 0.02) on 12,800+ draws: the sample sd is within a few percent.
  EXPECT_NEAR(stddev(sa.at("embed.wte.weight")), 0.02, 0.001);
  EXPECT_NEAR(stddev(sa.at("blocks.0.mlp.fc.weight")), 0.02, 0.001);
  EXPECT_NEAR(stddev(sa.at("blocks.1.attn.qkv.weight")), 0.02, 0.001);
  const double residual = 0.02 / std::sqrt(2.0 * 2);
  EXPECT_NEAR(stddev(sa.at("blocks.0.attn.proj.weight")), residual, residual * 0.06);
  EXPECT_NEAR(stddev(sa.at("blocks.1.mlp.proj.weight")), residual, residual * 0.06);
  for (const char* name :
       {"blocks.0.attn.qkv.bias", "blocks.1.mlp.proj.bias", "head.ln_f.bias", "blocks.0.ln1.bias"}) {
    for (float v : sa.at(name).to_vector<float>()) ASSERT_EQ(v, 0.0f) << name;
  }
  for (const char* name : {"blocks.0.ln1.weight", "blocks.1.ln2.weight", "head.ln_f.weight"}) {
    for (float v : sa.at(name).to_vector<float>()) ASSERT_EQ(v, 1.0f) << name;
  }
  // Building a model does not draw from the process-wide generator.
  const brigade::GeneratorState before = brigade::default_generator().state();
  nn::GPT unused(c, 1);
  EXPECT_EQ(brigade::default_generator().state(), before);
}

TEST(GPT, TiedWeightsShareStorageAndSumGradients) {
  nn::GPTConfig c = tiny_config();
  nn::GPT tied(c, 3);
  Tensor wte = tied.embeddings().wte()->weight();
  EXPECT_EQ(tied.head().lm_head()->weight().unsafe_impl_id(), wte.unsafe_impl_id());
  EXPECT_EQ(tied.head().lm_head()->weight().data_ptr(), wte.data_ptr());

  c.tie_weights = false;
  nn::GPT untied(c, 3);
  nn::StateDict state = tied.state_dict();
  state["head.lm_head.weight"] = state.at("embed.wte.weight");
  untied.load_state_dict(state);

  Tensor ids = random_ids(2, 6, c.vocab_size, 1), targets = random_ids(2, 6, c.vocab_size, 2);
  Tensor loss_tied = nn::GPT::loss(tied.forward(ids), targets);
  Tensor loss_untied = nn::GPT::loss(untied.forward(ids), targets);
  EXPECT_NEAR(loss_tied.item(), loss_untied.item(), 1e-6);
  loss_tied.backward();
  loss_untied.backward();
  Tensor sum = untied.embeddings().wte()->weight().grad() + untied.head().lm_head()->weight().grad();
  EXPECT_TRUE(allclose(tied.embeddings().wte()->weight().grad(), sum, 1e-5, 1e-7));
  // Both parts are really there: the head's share is not negligible.
  EXPECT_GT(stddev(untied.head().lm_head()->weight().grad()), 1e-4);
  EXPECT_GT(stddev(untied.embeddings().wte()->weight().grad()), 1e-5);
}

TEST(GPT, OutputAtTDoesNotDependOnLaterTokens) {
  nn::GPT model(tiny_config(), 4);
  Tensor ids = random_ids(2, 8, 11, 5);
  Tensor logits = model.forward(ids);
  ASSERT_EQ(logits.shape(), (brigade::Shape{2, 8, 11}));
  for (int64_t t = 0; t < 7; ++t) {
    std::vector<int64_t> changed = ids.to_vector<int64_t>();
    for (int64_t b = 0; b < 2; ++b) {
      for (int64_t u = t + 1; u < 8; ++u) changed[b * 8 + u] = (changed[b * 8 + u] + 1 + u) % 11;
    }
    Tensor other = model.forward(brigade::from_vector(changed, {2, 8}));
    EXPECT_EQ(other.narrow(1, 0, t + 1).contiguous().to_vector<float>(),
              logits.narrow(1, 0, t + 1).contiguous().to_vector<float>())
        << "t = " << t;
    EXPECT_NE(other.narrow(1, t + 1, 1).contiguous().to_vector<float>(),
              logits.narrow(1, t + 1, 1).contiguous().to_vector<float>())
        << "t = " << t;
  }
}

TEST(GPT, ForwardRangeSplitEqualsFullForward) {
  nn::GPT model(tiny_config(), 6);
  Tensor ids = random_ids(2, 5, 11, 7);
  Tensor full = model.forward(ids);
  Tensor h = model.forward_range(ids, 0, 2);
  EXPECT_EQ(h.shape(), (brigade::Shape{2, 5, 8}));
  EXPECT_EQ(model.forward_range(h, 2, model.size()).to_vector<float>(), full.to_vector<float>());
  std::vector<std::string> names;
  for (auto& [name, p] : model.named_parameters_range(3, 4)) names.push_back(name);
  // The head's slice names the tied weight as state_dict() does.
  EXPECT_EQ(names, (std::vector<std::string>{"head.ln_f.weight", "head.ln_f.bias", "embed.wte.weight"}));
}

TEST(GPT, GradcheckInFloat64) {
  nn::GPTConfig c = tiny_config();
  c.vocab_size = 5;
  c.n_layer = 1;
  c.n_embd = 4;
  c.block_size = 4;
  nn::GPT model(c, 8);
  model.to(brigade::kFloat64);
  Tensor ids = brigade::from_vector<int64_t>({0, 3, 1, 4, 2, 2}, {2, 3});
  Tensor targets = brigade::from_vector<int64_t>({3, 1, 4, 2, 2, 0}, {2, 3});
  auto& blk = model.block(0);
  std::vector<Tensor*> slots = {&model.embeddings().wte()->weight(), &blk.attn()->qkv()->weight(),
                                &blk.mlp()->fc()->weight(), &model.head().ln_f()->weight()};
  std::vector<Tensor> inputs;
  for (Tensor* s : slots) inputs.push_back(s->detach().clone().set_requires_grad());
  auto set = [&](const std::vector<Tensor>& in) {
    model.embeddings().wte()->set_parameter("weight", in[0]);
    model.head().lm_head()->set_parameter("weight", in[0]);  // keep the tie
    blk.attn()->qkv()->set_parameter("weight", in[1]);
    blk.mlp()->fc()->set_parameter("weight", in[2]);
    model.head().ln_f()->set_parameter("weight", in[3]);
  };
  auto logits = brigade::autograd::gradcheck(
      [&](const std::vector<Tensor>& in) {
        set(in);
        return model.forward(ids);
      },
      inputs);
  EXPECT_TRUE(logits.ok) << logits.message;
  EXPECT_EQ(logits.checked, 20 + 48 + 64 + 4);
  auto loss = brigade::autograd::gradcheck(
      [&](const std::vector<Tensor>& in) {
        set(in);
        return nn::GPT::loss(model.forward(ids), targets);
      },
      inputs);
  EXPECT_TRUE(loss.ok) << loss.message;
}

TEST(GPT, EvalIsDeterministicTrainAppliesDropout) {
  nn::GPTConfig c = tiny_config();
  c.dropout = 0.2;
  nn::GPT model(c, 9);
  brigade::Generator gen(10);
  nn::set_dropout_generator(model, &gen);
  Tensor ids = random_ids(2, 8, 11, 11);
  model.eval();
  for (auto& [name, m] : model.named_modules()) ASSERT_FALSE(m->is_training()) << name;
  const brigade::GeneratorState before = gen.state();
  std::vector<float> a = model.forward(ids).to_vector<float>();
  EXPECT_EQ(model.forward(ids).to_vector<float>(), a);
  EXPECT_EQ(gen.state(), before);  // eval draws nothing
  model.train();
  std::vector<float> t1 = model.forward(ids).to_vector<float>();
  std::vector<float> t2 = model.forward(ids).to_vector<float>();
  EXPECT_NE(t1, a);
  EXPECT_NE(t1, t2);
  // Replaying the generator state replays the masks exactly.
  gen.set_state(before);
  EXPECT_EQ(model.forward(ids).to_vector<float>(), t1);
}

TEST(GPT, OverfitsOneBatchWithAdamW) {
  nn::GPTConfig c;
  c.vocab_size = 16;
  c.block_size = 16;
  c.n_layer = 2;
  c.n_head = 2;
  c.n_embd = 32;
  nn::GPT model(c, 1337);
  Tensor ids = random_ids(4, 16, c.vocab_size, 21), targets = random_ids(4, 16, c.vocab_size, 22);
  nn::AdamW opt(nn::decay_groups(model, 0.0), nn::AdamWOptions{.lr = 1e-2, .beta2 = 0.99});
  const auto start = std::chrono::steady_clock::now();
  double first = 0, last = 0;
  int steps = 0;
  for (; steps < 300; ++steps) {
    opt.zero_grad();
    Tensor loss = nn::GPT::loss(model.forward(ids), targets);
    if (steps == 0) first = loss.item();
    last = loss.item();
    if (last < 0.05) break;
    loss.backward();
    nn::clip_grad_norm(model.parameters(), 1.0);
    opt.step();
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  // Random targets: the initial loss is about ln(16) = 2.77.
  EXPECT_NEAR(first, std::log(16.0), 0.3);
  EXPECT_LT(last, 0.05) << "after " << steps << " steps";
  EXPECT_LT(seconds, 10.0);
  RecordProperty("steps", steps);
}

TEST(GPT, GenerateGreedyMatchesArgmaxAndCropsContext) {
  nn::GPTConfig c = tiny_config();
  c.block_size = 4;
  nn::GPT model(c, 12);
  Tensor prompt = brigade::from_vector<int64_t>({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor out = model.generate(prompt, 5, /*temperature=*/0.0);
  ASSERT_EQ(out.shape(), (brigade::Shape{2, 8}));
  EXPECT_TRUE(model.is_training());  // mode restored
  std::vector<int64_t> got = out.to_vector<int64_t>();
  EXPECT_EQ(std::vector<int64_t>(got.begin(), got.begin() + 3), (std::vector<int64_t>{1, 2, 3}));
  // Replay by hand: feed the last block_size tokens, take the argmax of the last row.
  model.eval();
  for (int64_t b = 0; b < 2; ++b) {
    std::vector<int64_t> seq(got.begin() + b * 8, got.begin() + b * 8 + 3);
    for (int step = 0; step < 5; ++step) {
      const int64_t n = std::min<int64_t>(seq.size(), 4);
      std::vector<int64_t> ctx(seq.end() - n, seq.end());
      std::vector<float> row =
          model.forward(brigade::from_vector(ctx, {1, n})).select(1, n - 1).to_vector<float>();
      seq.push_back(std::max_element(row.begin(), row.end()) - row.begin());
    }
    EXPECT_EQ(seq, std::vector<int64_t>(got.begin() + b * 8, got.begin() + b * 8 + 8)) << "row " << b;
  }
  // top_k = 1 is greedy whatever the temperature; sampling is reproducible from a generator.
  brigade::Generator g1(5), g2(5);
  EXPECT_EQ(model.generate(prompt, 5, 1.0, 1, &g1).to_vector<int64_t>(), got);
  Tensor s1 = model.generate(prompt, 6, 1.0, 0, &g1);
  brigade::Generator g3(5);
  model.generate(prompt, 5, 1.0, 1, &g3);
  EXPECT_EQ(model.generate(prompt, 6, 1.0, 0, &g3).to_vector<int64_t>(), s1.to_vector<int64_t>());
  EXPECT_THROW(model.generate(prompt, 1, -1.0), brigade::ValueError);
  EXPECT_THROW(model.forward(brigade::zeros({1, 5}, brigade::kInt64)),
               brigade::ValueError);  // T > block_size
}

TEST(GPT, SampleTokenRules) {
  const std::vector<float> logits = {0.0f, 2.0f, 1.0f, 2.0f};
  EXPECT_EQ(nn::sample_token(logits, 0.0, 0, 0.99), 1);  // argmax, first of the ties
  // Softmax at temperature 1: weights e^0, e^2, e^1, e^2 (total 1 + 2e^2 + e); invert the CDF.
  const double e = std::exp(1.0), total = 1 + 2 * e * e + e;
  EXPECT_EQ(nn::sample_token(logits, 1.0, 0, 0.5 / total), 0);
  EXPECT_EQ(nn::sample_token(logits, 1.0, 0, (1 + 0.5) / total), 1);
  EXPECT_EQ(nn::sample_token(logits, 1.0, 0, (1 + e * e + 0.5) / total), 2);
  EXPECT_EQ(nn::sample_token(logits, 1.0, 0, 0.999999), 3);
  // top_k = 2 keeps the two 2.0s only: half each.
  EXPECT_EQ(nn::sample_token(logits, 1.0, 2, 0.0), 1);
  EXPECT_EQ(nn::sample_token(logits, 1.0, 2, 0.49), 1);
  EXPECT_EQ(nn::sample_token(logits, 1.0, 2, 0.51), 3);
  // A high temperature flattens: at T = 1000 each of the 4 is ~1/4.
  EXPECT_EQ(nn::sample_token(logits, 1000.0, 0, 0.2), 0);
}

TEST(GPTConfig, ValidationAndJson) {
  nn::GPTConfig c = tiny_config();
  c.dropout = 0.125;
  c.bias = false;
  EXPECT_EQ(nn::GPTConfig::from_json(c.to_json()), c);
  auto message = [](const std::function<void()>& f) -> std::string {
    try {
      f();
    } catch (const brigade::ValueError& e) {
      return e.what();
    }
    return "no error";
  };
  nn::GPTConfig bad = c;
  bad.n_head = 3;
  EXPECT_NE(message([&] { bad.validate(); }).find("n_head (3) must divide n_embd (8)"), std::string::npos);
  bad = c;
  bad.n_layer = -2;
  EXPECT_NE(message([&] { bad.validate(); }).find("n_layer must be positive, found -2"), std::string::npos);
  bad = c;
  bad.vocab_size = 0;
  EXPECT_NE(message([&] { nn::GPT m(bad); }).find("vocab_size must be positive, found 0"), std::string::npos);
  bad = c;
  bad.dropout = 1.0;
  EXPECT_NE(message([&] { bad.validate(); }).find("dropout"), std::string::npos);
  EXPECT_NE(message([] {
              nn::GPTConfig::from_json(R"({"vocab_size": 5, "n_layers": 2})");
            }).find("unknown field 'n_layers'"),
            std::string::npos);
  EXPECT_NE(message([] {
              nn::GPTConfig::from_json(R"({"vocab_size": "5"})");
            }).find("'vocab_size' must be an integer"),
            std::string::npos);
  EXPECT_NE(message([] { nn::GPTConfig::from_json("{not json"); }).find("not valid JSON"), std::string::npos);
  nn::GPTConfig partial = nn::GPTConfig::from_json(R"({"vocab_size": 7})");
  EXPECT_EQ(partial.vocab_size, 7);
  EXPECT_EQ(partial.n_embd, nn::GPTConfig{}.n_embd);
}
