// One GPT-2-small-shaped training step, timed: tokens/s and model FLOP utilisation (MFU). brigade's half of
// the GPU comparison with PyTorch; bench/gpt2_step_torch.py is the other half and prints the same line.
//
//   ./gpt2_step_bench --device cuda --dtype bf16                     # GPT-2 small: 12 x 768, T 1024, B 8
//   ./gpt2_step_bench --device cpu --layers 2 --block 64 --batch 2 --vocab 512 --steps 3 --warmup 1
//
// The step is `brigade train`'s: zero_grad, forward (under autocast with --dtype bf16: bf16 GEMMs with fp32
// accumulation, fp32 master weights), cross-entropy, backward, global-norm clip at 1.0, AdamW (lr 6e-4,
// betas (0.9, 0.95), eps 1e-8, weight decay 0.1 on matrices). The model: GPT-2 (pre-norm blocks, GELU
// tanh, biases, tied LM head, learned positions), dropout 0. Inputs are random token ids.
// Each step is timed alone from its start to a device synchronize after the optimizer; the first
// --warmup steps (allocator growth, first-touch) are not counted; the figure is the median.
//
// FLOPs per step (PaLM's appendix B formula, as nanoGPT and llm.c use it):
//   6 * N * tokens  +  12 * L * C * T * tokens
// N = every parameter (the tied embedding counted once: it does the LM head's GEMM; the position table's
// 0.8M of GPT-2's 124M do no matmul and are counted anyway, as the formula does), tokens = B * T; the
// second term is attention's QK^T and AV (forward 4 T C per token and layer, x3 for forward + backward),
// counted over the full T x T as the formula does, although a causal kernel does half the work.
// MFU = FLOPs per step / step time / peak. Peaks (H200 SXM, dense, no sparsity): bf16 989 TFLOP/s on tensor
// cores, fp32 67 TFLOP/s on CUDA cores (brigade's fp32 does not use TF32); --peak-tflops overrides them and
// is required for an MFU on the CPU (printed as 0 otherwise).
//
// Output: one line of key=value pairs (the Python side prints the same keys); --json FILE writes them too.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "autograd/autocast.h"
#include "autograd/ops.h"
#include "kernels/kernels.h"
#include "nn/gpt.h"
#include "nn/optim.h"
#include "nn/statistics.h"
#include "tensor/device.h"
#include "tensor/memory.h"
#include "tensor/stream.h"
#include "tensor/tensor.h"

namespace {

using brigade::Device;
using brigade::Tensor;

struct Options {
  std::string device = "cuda";
  std::string dtype = "fp32";
  std::string matmul = "native";  // CUDA GEMM: brigade's kernels, or cuBLAS (the baseline)
  int64_t layers = 12, heads = 12, embd = 768, block = 1024, vocab = 50257, batch = 8;
  int steps = 10, warmup = 3, threads = 0;
  double peak_tflops = 0.0;  // 0: the H200 figure for the dtype on CUDA, none on the CPU
  std::string json;
};

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr,
               "gpt2_step_bench: %s\nusage: gpt2_step_bench [--device cpu|cuda|cuda:N] [--dtype fp32|bf16] "
               "[--matmul native|cublas] [--layers L] [--heads H] [--embd C] [--block T] [--vocab V] "
               "[--batch B] [--steps N] [--warmup W] [--threads N] [--peak-tflops P] [--json FILE]\n",
               why);
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) usage(("missing a value after " + flag).c_str());
    const std::string value = argv[++i];
    auto integer = [&] {
      char* end = nullptr;
      const long long v = std::strtoll(value.c_str(), &end, 10);
      if (*end != '\0' || v < 0) usage((flag + " expects a non-negative integer, found " + value).c_str());
      return static_cast<int64_t>(v);
    };
    if (flag == "--device")
      o.device = value;
    else if (flag == "--dtype")
      o.dtype = value;
    else if (flag == "--matmul")
      o.matmul = value;
    else if (flag == "--layers")
      o.layers = integer();
    else if (flag == "--heads")
      o.heads = integer();
    else if (flag == "--embd")
      o.embd = integer();
    else if (flag == "--block")
      o.block = integer();
    else if (flag == "--vocab")
      o.vocab = integer();
    else if (flag == "--batch")
      o.batch = integer();
    else if (flag == "--steps")
      o.steps = static_cast<int>(integer());
    else if (flag == "--warmup")
      o.warmup = static_cast<int>(integer());
    else if (flag == "--threads")
      o.threads = static_cast<int>(integer());
    else if (flag == "--peak-tflops")
      o.peak_tflops = std::atof(value.c_str());
    else if (flag == "--json")
      o.json = value;
    else
      usage(("unknown flag " + flag).c_str());
  }
  if (o.dtype != "fp32" && o.dtype != "bf16") usage("--dtype must be fp32 or bf16");
  if (o.matmul != "native" && o.matmul != "cublas") usage("--matmul must be native or cublas");
  if (o.steps < 1) usage("--steps must be >= 1");
  return o;
}

Tensor random_ids(int64_t rows, int64_t cols, int64_t vocab, uint32_t seed, const Device& device) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int64_t> pick(0, vocab - 1);
  std::vector<int64_t> ids(static_cast<size_t>(rows * cols));
  for (auto& id : ids) id = pick(rng);
  return brigade::from_vector(ids, {rows, cols}, device);
}

}  // namespace

static int run(int argc, char** argv) {
  const Options o = parse(argc, argv);
  const Device device = Device::parse(o.device);
  brigade::check_device_exists(device, "--device");
  if (o.threads > 0) omp_set_num_threads(o.threads);
  brigade::kernels::set_matmul_backend(o.matmul == "cublas" ? brigade::kernels::MatmulBackend::Cublas
                                                            : brigade::kernels::MatmulBackend::Native);

  brigade::nn::GPTConfig config;
  config.vocab_size = o.vocab;
  config.block_size = o.block;
  config.n_layer = o.layers;
  config.n_head = o.heads;
  config.n_embd = o.embd;
  config.dropout = 0.0;
  brigade::nn::GPT model(config, /*seed=*/1337);
  model.to(device);
  model.train();
  brigade::nn::AdamW optimizer(
      brigade::nn::decay_groups(model, 0.1),
      brigade::nn::AdamWOptions{.lr = 6e-4, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.1});
  const Tensor x = random_ids(o.batch, o.block, o.vocab, 1, device);
  const Tensor y = random_ids(o.batch, o.block, o.vocab, 2, device);
  const std::optional<brigade::DType> autocast = brigade::autograd::autocast_dtype_from_name(o.dtype);

  double last_loss = 0.0;
  auto step = [&] {
    brigade::autograd::AutocastGuard guard(autocast);
    optimizer.zero_grad();
    Tensor loss = brigade::nn::GPT::loss(model.forward(x), y);
    loss.backward();
    brigade::nn::clip_grad_norm(model.parameters(), 1.0);
    optimizer.step();
    brigade::Stream::current(device).synchronize();
    last_loss = loss.item();
  };

  brigade::reset_peak_memory(device);
  std::vector<double> ms;
  for (int i = 0; i < o.warmup + o.steps; ++i) {
    const auto start = std::chrono::steady_clock::now();
    step();
    const std::chrono::duration<double, std::milli> elapsed = std::chrono::steady_clock::now() - start;
    if (i >= o.warmup) ms.push_back(elapsed.count());
  }

  const double step_ms = brigade::nn::median(ms);
  const double params = static_cast<double>(model.num_parameters());
  const double tokens = static_cast<double>(o.batch * o.block);
  const double attention_flops_per_token = 12.0 * static_cast<double>(o.layers * o.embd * o.block);
  const double flops = 6.0 * params * tokens + attention_flops_per_token * tokens;
  const double achieved_tflops = flops / (step_ms * 1e-3) / 1e12;
  double peak = o.peak_tflops;
  if (peak == 0.0 && device.is_cuda()) peak = o.dtype == "bf16" ? 989.0 : 67.0;
  const double mfu = peak > 0.0 ? achieved_tflops / peak : 0.0;
  const double peak_mib = static_cast<double>(brigade::memory_stats(device).peak_bytes) / (1 << 20);

  // One line of key=value pairs (the Python side prints the same keys), and the same as JSON.
  const std::vector<std::pair<std::string, nlohmann::json>> figures = {
      {"impl", "brigade"},
      {"device", device.str()},
      {"dtype", o.dtype},
      {"matmul", o.matmul},
      {"layers", o.layers},
      {"heads", o.heads},
      {"embd", o.embd},
      {"block", o.block},
      {"vocab", o.vocab},
      {"batch", o.batch},
      {"params", static_cast<int64_t>(params)},
      {"steps", ms.size()},
      {"ms_per_step", step_ms},
      {"ms_min", *std::min_element(ms.begin(), ms.end())},
      {"tokens_per_s", tokens / (step_ms * 1e-3)},
      {"tflops", achieved_tflops},
      {"peak_tflops", peak},
      {"mfu", mfu},
      {"peak_mem_mib", peak_mib},
      {"loss", last_loss},
  };
  nlohmann::json json = nlohmann::json::object();
  std::string line;
  for (const auto& [key, value] : figures) {
    json[key] = value;
    char number[64];
    if (value.is_number_float()) std::snprintf(number, sizeof number, "%.4g", value.get<double>());
    line += (line.empty() ? "" : " ") + key + "=" +
            (value.is_string()         ? value.get<std::string>()
             : value.is_number_float() ? number
                                       : value.dump());
  }
  std::printf("%s\n", line.c_str());
  if (!o.json.empty()) std::ofstream(o.json) << json.dump(2) << "\n";
  return 0;
}

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {  // e.g. no CUDA device: say so instead of aborting
    std::fprintf(stderr, "gpt2_step_bench: %s\n", e.what());
    return 1;
  }
}
