// CPU training-step benchmarks: one full GPT step (forward, cross-entropy, backward, grad-norm clip, AdamW)
// at small shapes, and the hot kernels of that step one by one, at the shapes the model gives them.
//
//   ./train_step_bench --benchmark_filter=TrainStep                       # ms per step, tokens/s
//   OMP_NUM_THREADS=1 ./train_step_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
//   ./train_step_bench --benchmark_filter=Kernel --benchmark_min_time=0.05  # the kernels
//   ./train_step_bench --step-median --layers 2 --embd 64 --heads 4 --block 13 --batch 128 --vocab 13
//       --threads 1 [--steps 20 --warmup 3] [--bf16 1]   # one line: median ms/step (the PyTorch
//                                          # comparison's format); --bf16 1: under a bf16 autocast
//   ./train_step_bench --cpu-info          # one line: CPU features, caches, default GEMM versions
//
// --step-median mode is brigade's half of scripts/bench_cpu_vs_torch.sh: the same model, batch and step as
// bench/torch_train_step.py (AdamW lr 1e-3, betas (0.9, 0.99), eps 1e-8, weight decay 0.1 on >= 2-d
// parameters; clip at 1.0; the `brigade train` step), each step timed alone, and one line printed:
//     brigade ms/step median M min A max B steps N threads T cpu_ms/step median C
// (C: the CPU time of all the process's threads per step, which a loaded machine inflates far less).
//
// TrainStep/L/C/T/B: L layers, n_embd C, 4 heads, context T, batch B, vocabulary 16 (the default corpus
// of `brigade train` is a 14-character reversed-addition task: its line is 13 tokens, its model 2 x 128).
// Counters: tokens/s (B * T per step over wall time). Every case runs with OpenMP's thread count
// (set OMP_NUM_THREADS to compare 1 and 2 threads), and wall time is reported (UseRealTime), since
// that is what a training run waits for.
//
// Kernel cases use N = B * T rows of width C (or 4C for the MLP, V for the logits), i.e. what one step of
// the 2 x 128, T = 64, B = 16 model feeds each kernel. Counters: bytes/s (the bytes the kernel must read
// and write once, a memory-bandwidth view) or FLOP/s for matmuls.
#include <benchmark/benchmark.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <random>
#include <string>
#include <vector>

#include "autograd/autocast.h"
#include "autograd/ops.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/kernels.h"
#include "kernels/matmul_versions.h"
#include "nn/gpt.h"
#include "nn/optim.h"
#include "nn/statistics.h"
#include "tensor/grad_mode.h"
#include "tensor/tensor.h"

namespace {

using brigade::Tensor;
namespace kernels = brigade::kernels;

constexpr int64_t kVocab = 16;

Tensor random_ids(int64_t rows, int64_t cols, int64_t vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int64_t> pick(0, vocab - 1);
  std::vector<int64_t> ids(static_cast<size_t>(rows * cols));
  for (auto& id : ids) id = pick(rng);
  return brigade::from_vector(ids, {rows, cols});
}

void set_bytes_rate(benchmark::State& state, double bytes_per_iteration) {
  state.counters["bytes/s"] = benchmark::Counter(
      bytes_per_iteration * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}

// ---- the whole step --------------------------------------------------------------------------------------

void BM_TrainStep(benchmark::State& state) {
  const int64_t layers = state.range(0), embd = state.range(1), T = state.range(2), B = state.range(3);
  brigade::nn::GPTConfig config;
  config.vocab_size = kVocab;
  config.block_size = T;
  config.n_layer = layers;
  config.n_head = 4;
  config.n_embd = embd;
  brigade::nn::GPT model(config, /*seed=*/1337);
  brigade::nn::AdamW opt(brigade::nn::decay_groups(model, 0.1), brigade::nn::AdamWOptions{.lr = 1e-3});
  const Tensor x = random_ids(B, T, kVocab, 1);
  const Tensor y = random_ids(B, T, kVocab, 2);
  auto step = [&] {
    opt.zero_grad();
    Tensor loss = brigade::nn::GPT::loss(model.forward(x), y);
    loss.backward();
    brigade::nn::clip_grad_norm(model.parameters(), 1.0);
    opt.step();
    return loss;
  };
  step();  // warm-up: optimizer state, allocator, OpenMP pool
  for (auto _ : state) {
    Tensor loss = step();
    benchmark::DoNotOptimize(loss.data_ptr());
  }
  state.counters["tokens/s"] =
      benchmark::Counter(static_cast<double>(B * T * state.iterations()), benchmark::Counter::kIsRate);
}
// {layers, embd, T, B}: the default `brigade train` model (2 x 128, T 13, B 64), the profiled 0.8M model
// (T 64, B 16), a narrower and a deeper one.
BENCHMARK(BM_TrainStep)
    ->ArgNames({"L", "C", "T", "B"})
    ->Args({2, 128, 13, 64})
    ->Args({2, 128, 64, 16})
    ->Args({2, 64, 32, 32})
    ->Args({4, 128, 64, 32})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

// ---- kernels at the model's shapes ---------------------------------------------------------------------

// Rows of the 2 x 128, T = 64, B = 16 model.
constexpr int64_t kRows = 16 * 64, kEmbd = 128;

void BM_KernelGelu(benchmark::State& state) {
  const int64_t cols = state.range(0);
  Tensor x = brigade::randn({kRows, cols});
  for (auto _ : state) benchmark::DoNotOptimize(kernels::unary(kernels::UnaryOp::Gelu, x).data_ptr());
  set_bytes_rate(state, 8.0 * kRows * cols);
}
BENCHMARK(BM_KernelGelu)->Arg(4 * kEmbd)->UseRealTime()->Unit(benchmark::kMicrosecond);

void BM_KernelGeluBackward(benchmark::State& state) {
  const int64_t cols = state.range(0);
  Tensor x = brigade::randn({kRows, cols}), g = brigade::randn({kRows, cols});
  Tensor y = kernels::unary(kernels::UnaryOp::Gelu, x);
  for (auto _ : state) {
    benchmark::DoNotOptimize(kernels::unary_backward(kernels::UnaryOp::Gelu, g, x, y).data_ptr());
  }
  set_bytes_rate(state, 16.0 * kRows * cols);
}
BENCHMARK(BM_KernelGeluBackward)->Arg(4 * kEmbd)->UseRealTime()->Unit(benchmark::kMicrosecond);

void BM_KernelExp(benchmark::State& state) {
  const int64_t n = state.range(0);
  Tensor x = brigade::randn({n});
  for (auto _ : state) benchmark::DoNotOptimize(kernels::unary(kernels::UnaryOp::Exp, x).data_ptr());
  set_bytes_rate(state, 8.0 * n);
}
BENCHMARK(BM_KernelExp)->Arg(kRows* kEmbd)->UseRealTime()->Unit(benchmark::kMicrosecond);

void BM_KernelAdd(benchmark::State& state) {  // residual add, contiguous
  const int64_t n = state.range(0);
  Tensor a = brigade::randn({n}), b = brigade::randn({n});
  for (auto _ : state) benchmark::DoNotOptimize(kernels::binary(kernels::BinaryOp::Add, a, b).data_ptr());
  set_bytes_rate(state, 12.0 * n);
}
BENCHMARK(BM_KernelAdd)
    ->Arg(kRows* kEmbd)
    ->Arg(kRows * 4 * kEmbd)
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

void BM_KernelAddInPlace(benchmark::State& state) {  // gradient accumulation
  const int64_t n = state.range(0);
  Tensor a = brigade::randn({n}), b = brigade::randn({n});
  for (auto _ : state) {
    kernels::add_(a, b);
    benchmark::ClobberMemory();
  }
  set_bytes_rate(state, 12.0 * n);
}
BENCHMARK(BM_KernelAddInPlace)->Arg(kRows* kEmbd)->UseRealTime()->Unit(benchmark::kMicrosecond);

void BM_KernelBiasAdd(benchmark::State& state) {  // [N, C] + [C]
  const int64_t cols = state.range(0);
  Tensor a = brigade::randn({kRows, cols}), b = brigade::randn({cols});
  for (auto _ : state) benchmark::DoNotOptimize(kernels::binary(kernels::BinaryOp::Add, a, b).data_ptr());
  set_bytes_rate(state, 8.0 * kRows * cols);
}
BENCHMARK(BM_KernelBiasAdd)->Arg(3 * kEmbd)->Arg(4 * kEmbd)->UseRealTime()->Unit(benchmark::kMicrosecond);

void BM_KernelMulScalar(benchmark::State& state) {
  const int64_t n = state.range(0);
  Tensor a = brigade::randn({n});
  for (auto _ : state) benchmark::DoNotOptimize(kernels::binary(kernels::BinaryOp::Mul, a, 0.5).data_ptr());
  set_bytes_rate(state, 8.0 * n);
}
BENCHMARK(BM_KernelMulScalar)->Arg(kRows* kEmbd)->UseRealTime()->Unit(benchmark::kMicrosecond);

void BM_KernelMaskedFill(benchmark::State& state) {  // attention scores [B*H, T, T] with the causal mask
  const int64_t bh = 16 * 4, t = 64;
  Tensor scores = brigade::randn({bh, t, t});
  Tensor mask = kernels::causal_mask(t);
  for (auto _ : state) benchmark::DoNotOptimize(kernels::masked_fill(scores, mask, -1e30).data_ptr());
  set_bytes_rate(state, 8.0 * bh * t * t);
}
BENCHMARK(BM_KernelMaskedFill)->UseRealTime()->Unit(benchmark::kMicrosecond);

void BM_KernelZeros(benchmark::State& state) {  // zero-filled allocation
  const int64_t n = state.range(0);
  for (auto _ : state) benchmark::DoNotOptimize(brigade::zeros({n}).data_ptr());
  set_bytes_rate(state, 4.0 * n);
}
BENCHMARK(BM_KernelZeros)->Arg(kRows* kEmbd)->Arg(1 << 19)->UseRealTime()->Unit(benchmark::kMicrosecond);

void BM_KernelCopyContiguous(benchmark::State& state) {
  const int64_t n = state.range(0);
  Tensor a = brigade::randn({n});
  for (auto _ : state) benchmark::DoNotOptimize(a.clone().data_ptr());
  set_bytes_rate(state, 8.0 * n);
}
BENCHMARK(BM_KernelCopyContiguous)->Arg(kRows* kEmbd)->UseRealTime()->Unit(benchmark::kMicrosecond);

void BM_KernelCopyHeads(benchmark::State& state) {  // [B, T, H, D] -> [B, H, T, D] (attention head split)
  const int64_t b = 16, t = 64, h = 4, d = kEmbd / 4;
  Tensor a = brigade::randn({b, t, h, d});
  for (auto _ : state) benchmark::DoNotOptimize(a.permute({0, 2, 1, 3}).contiguous().data_ptr());
  set_bytes_rate(state, 8.0 * b * t * h * d);
}
BENCHMARK(BM_KernelCopyHeads)->UseRealTime()->Unit(benchmark::kMicrosecond);

void BM_KernelCopyTranspose(benchmark::State& state) {  // [N, C] -> [C, N] (bias gradients sum rows)
  const int64_t cols = state.range(0);
  Tensor a = brigade::randn({kRows, cols});
  for (auto _ : state) benchmark::DoNotOptimize(a.t().contiguous().data_ptr());
  set_bytes_rate(state, 8.0 * kRows * cols);
}
BENCHMARK(BM_KernelCopyTranspose)->Arg(kEmbd)->Arg(4 * kEmbd)->UseRealTime()->Unit(benchmark::kMicrosecond);

void BM_KernelBiasGrad(benchmark::State& state) {  // sum_to([N, C] -> [C])
  const int64_t cols = state.range(0);
  Tensor g = brigade::randn({kRows, cols});
  for (auto _ : state) benchmark::DoNotOptimize(kernels::sum_to(g, {cols}).data_ptr());
  set_bytes_rate(state, 4.0 * kRows * cols);
}
BENCHMARK(BM_KernelBiasGrad)->Arg(kEmbd)->Arg(4 * kEmbd)->UseRealTime()->Unit(benchmark::kMicrosecond);

void BM_KernelSoftmax(benchmark::State& state) {  // attention rows
  const int64_t rows = 16 * 4 * 64, t = 64;
  Tensor x = brigade::randn({rows, t});
  for (auto _ : state) benchmark::DoNotOptimize(kernels::softmax(x).data_ptr());
  set_bytes_rate(state, 8.0 * rows * t);
}
BENCHMARK(BM_KernelSoftmax)->UseRealTime()->Unit(benchmark::kMicrosecond);

void BM_KernelSoftmaxBackward(benchmark::State& state) {
  const int64_t rows = 16 * 4 * 64, t = 64;
  Tensor x = brigade::randn({rows, t}), g = brigade::randn({rows, t});
  Tensor y = kernels::softmax(x);
  for (auto _ : state) benchmark::DoNotOptimize(kernels::softmax_backward(g, y).data_ptr());
  set_bytes_rate(state, 12.0 * rows * t);
}
BENCHMARK(BM_KernelSoftmaxBackward)->UseRealTime()->Unit(benchmark::kMicrosecond);

void BM_KernelLayerNorm(benchmark::State& state) {
  Tensor x = brigade::randn({kRows, kEmbd}), w = brigade::randn({kEmbd}), b = brigade::randn({kEmbd});
  for (auto _ : state) benchmark::DoNotOptimize(kernels::layernorm(x, w, b).y.data_ptr());
  set_bytes_rate(state, 8.0 * kRows * kEmbd);
}
BENCHMARK(BM_KernelLayerNorm)->UseRealTime()->Unit(benchmark::kMicrosecond);

void BM_KernelLayerNormBackward(benchmark::State& state) {
  Tensor x = brigade::randn({kRows, kEmbd}), w = brigade::randn({kEmbd}), b = brigade::randn({kEmbd});
  Tensor dy = brigade::randn({kRows, kEmbd});
  kernels::LayerNormOutput fwd = kernels::layernorm(x, w, b);
  for (auto _ : state) {
    benchmark::DoNotOptimize(kernels::layernorm_backward(dy, x, w, fwd.mean, fwd.rstd, true).dx.data_ptr());
  }
  set_bytes_rate(state, 12.0 * kRows * kEmbd);
}
BENCHMARK(BM_KernelLayerNormBackward)->UseRealTime()->Unit(benchmark::kMicrosecond);

void BM_KernelCrossEntropy(benchmark::State& state) {
  const int64_t vocab = state.range(0);
  Tensor logits = brigade::randn({kRows, vocab});
  Tensor targets = random_ids(kRows, 1, vocab, 3).view({kRows});
  for (auto _ : state) {
    benchmark::DoNotOptimize(kernels::cross_entropy(logits, targets).grad_logits.data_ptr());
  }
  set_bytes_rate(state, 8.0 * kRows * vocab);
}
BENCHMARK(BM_KernelCrossEntropy)->Arg(kVocab)->Arg(65)->UseRealTime()->Unit(benchmark::kMicrosecond);

void BM_KernelAdamW(benchmark::State& state) {  // the MLP's fc weight
  const int64_t n = 4 * kEmbd * kEmbd;
  Tensor p = brigade::randn({n}), g = brigade::randn({n}), m = brigade::zeros({n}), v = brigade::zeros({n});
  kernels::AdamWStep s;
  for (auto _ : state) {
    kernels::adamw_update(p, g, m, v, s);
    benchmark::ClobberMemory();
  }
  set_bytes_rate(state, 28.0 * n);
}
BENCHMARK(BM_KernelAdamW)->UseRealTime()->Unit(benchmark::kMicrosecond);

// Matmuls of one step: {M, N, K, trans_a, trans_b, batch}. Linear forward is x [N, in] @ W^T; its
// backward is dy @ W (dx) and dy^T @ x (dW); attention is batched over B * H with T x T scores.
void BM_KernelMatmul(benchmark::State& state) {
  const int64_t m = state.range(0), n = state.range(1), k = state.range(2), batch = state.range(5);
  const bool ta = state.range(3) != 0, tb = state.range(4) != 0;
  auto shape = [batch](int64_t r, int64_t c) {
    return batch > 1 ? brigade::Shape{batch, r, c} : brigade::Shape{r, c};
  };
  Tensor a = brigade::randn(ta ? shape(k, m) : shape(m, k));
  Tensor b = brigade::randn(tb ? shape(n, k) : shape(k, n));
  for (auto _ : state) benchmark::DoNotOptimize(kernels::matmul(a, b, ta, tb).data_ptr());
  state.counters["FLOP/s"] = benchmark::Counter(
      2.0 * m * n * k * batch * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_KernelMatmul)
    ->ArgNames({"M", "N", "K", "ta", "tb", "batch"})
    ->Args({kRows, 3 * kEmbd, kEmbd, 0, 1, 1})  // qkv forward
    ->Args({kRows, 4 * kEmbd, kEmbd, 0, 1, 1})  // fc forward
    ->Args({kRows, kEmbd, 4 * kEmbd, 0, 1, 1})  // mlp proj forward
    ->Args({kRows, kEmbd, 4 * kEmbd, 0, 0, 1})  // fc backward dx = dy @ W
    ->Args({4 * kEmbd, kEmbd, kRows, 1, 0, 1})  // fc backward dW = dy^T @ x
    ->Args({kRows, kVocab, kEmbd, 0, 1, 1})     // lm head forward
    ->Args({64, 64, kEmbd / 4, 0, 1, 16 * 4})   // scores q @ k^T
    ->Args({64, kEmbd / 4, 64, 0, 0, 16 * 4})   // att @ v
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

// ---- --step-median: the PyTorch comparison ---------------------------------------------------------------

struct StepMedianArgs {
  int64_t layers = 2, embd = 64, heads = 4, block = 13, batch = 128, vocab = 13, threads = 1, steps = 20,
          warmup = 3;
  int64_t bf16 = 0;  ///< 1: the step under a bf16 autocast, as `brigade train --dtype bf16` runs it
  int64_t dropout_percent = 0;  ///< the GPT's dropout (embeddings, attention weights, residuals), in percent
};

/// Parses "--name value" pairs after --step-median; exits with status 2 and a usage line on a bad flag.
StepMedianArgs parse_step_median(int argc, char** argv) {
  StepMedianArgs a;
  const std::vector<std::pair<const char*, int64_t*>> flags = {{"--layers", &a.layers},
                                                               {"--embd", &a.embd},
                                                               {"--heads", &a.heads},
                                                               {"--block", &a.block},
                                                               {"--batch", &a.batch},
                                                               {"--vocab", &a.vocab},
                                                               {"--threads", &a.threads},
                                                               {"--steps", &a.steps},
                                                               {"--warmup", &a.warmup},
                                                               {"--bf16", &a.bf16},
                                                               {"--dropout-percent", &a.dropout_percent}};
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--step-median") == 0) continue;
    auto flag = std::find_if(flags.begin(), flags.end(),
                             [&](const auto& f) { return std::strcmp(argv[i], f.first) == 0; });
    char* end = nullptr;
    const long long value = (flag != flags.end() && i + 1 < argc) ? std::strtoll(argv[i + 1], &end, 10) : 0;
    const bool is_bf16 = flag != flags.end() && flag->second == &a.bf16;
    const bool is_dropout = flag != flags.end() && flag->second == &a.dropout_percent;
    const bool in_range = is_bf16      ? value >= 0 && value <= 1
                          : is_dropout ? value >= 0 && value <= 99
                                       : value > 0;
    if (flag == flags.end() || end == nullptr || *end != '\0' || !in_range) {
      std::fprintf(stderr,
                   "usage: train_step_bench --step-median [--layers N] [--embd N] [--heads N] [--block N] "
                   "[--batch N] [--vocab N] [--threads N] [--steps N] [--warmup N] (positive integers) "
                   "[--bf16 0|1] [--dropout-percent 0..99]; bad "
                   "argument '%s'\n",
                   argv[i]);
      std::exit(2);
    }
    *flag->second = value;
    ++i;
  }
  return a;
}

/// CPU time of every thread of this process, in ms (what a loaded machine does not inflate, unlike wall
/// time).
double process_cpu_ms() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return 1e3 * static_cast<double>(t.tv_sec) + 1e-6 * static_cast<double>(t.tv_nsec);
}

int run_step_median(const StepMedianArgs& a) {
  omp_set_num_threads(static_cast<int>(a.threads));
  brigade::nn::GPTConfig config;
  config.vocab_size = a.vocab;
  config.block_size = a.block;
  config.n_layer = a.layers;
  config.n_head = a.heads;
  config.n_embd = a.embd;
  config.dropout = static_cast<double>(a.dropout_percent) / 100.0;
  brigade::nn::GPT model(config, /*seed=*/1337);
  brigade::nn::AdamW opt(
      brigade::nn::decay_groups(model, 0.1),
      brigade::nn::AdamWOptions{.lr = 1e-3, .beta1 = 0.9, .beta2 = 0.99, .eps = 1e-8, .weight_decay = 0.1});
  // --bf16 1: bf16 GEMMs with fp32 master weights, norms, softmax and loss (autograd/autocast.h).
  brigade::autograd::AutocastGuard autocast(a.bf16 ? std::optional<brigade::DType>(brigade::kBFloat16)
                                                   : std::nullopt);
  const Tensor x = random_ids(a.batch, a.block, a.vocab, 1);
  const Tensor y = random_ids(a.batch, a.block, a.vocab, 2);
  auto step = [&] {
    opt.zero_grad();
    Tensor loss = brigade::nn::GPT::loss(model.forward(x), y);
    loss.backward();
    brigade::nn::clip_grad_norm(model.parameters(), 1.0);
    opt.step();
  };
  for (int64_t i = 0; i < a.warmup; ++i) step();
  std::vector<double> ms, cpu_ms;
  for (int64_t i = 0; i < a.steps; ++i) {
    const auto start = std::chrono::steady_clock::now();
    const double cpu_start = process_cpu_ms();
    step();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
    cpu_ms.push_back(process_cpu_ms() - cpu_start);
  }
  std::vector<double> sorted = ms;
  std::sort(sorted.begin(), sorted.end());
  std::printf("brigade ms/step median %.3f min %.3f max %.3f steps %zu threads %d cpu_ms/step median %.3f\n",
              brigade::nn::median(ms), sorted.front(), sorted.back(), sorted.size(), omp_get_max_threads(),
              brigade::nn::median(cpu_ms));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 2 && std::strcmp(argv[1], "--cpu-info") == 0) {  // one line for scripts/bench_cpu_vs_torch.sh
    std::printf("%s; matmul float32 %s, bfloat16 %s; OpenMP threads %d\n",
                brigade::kernels::cpu::cpu_features_summary().c_str(),
                kernels::matmul_kernel_name(
                    kernels::default_matmul_kernel(brigade::DeviceKind::CPU, brigade::kFloat32)),
                kernels::matmul_kernel_name(
                    kernels::default_matmul_kernel(brigade::DeviceKind::CPU, brigade::kBFloat16)),
                omp_get_max_threads());
    return 0;
  }
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--step-median") == 0) return run_step_median(parse_step_median(argc, argv));
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
