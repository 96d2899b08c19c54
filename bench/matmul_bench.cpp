// matmul benchmarks: on the CPU the public op (kernels::matmul: its default version), every CPU version of
// kernels/matmul_versions.h by name and the OpenBLAS baseline, side by side in one process; on CUDA every
// hand-written CUDA version (all_matmul_kernels() for each dtype it supports, so new versions appear here
// without an edit) side by side with the cuBLAS baseline. Versions and baselines run on preallocated
// operands, so that only the kernel is timed.
//
//   ./matmul_bench                      # full run (CUDA cases only where a GPU is present)
//   ./matmul_bench --smoke              # CI: small models and a small square, quick peaks
//   ./matmul_bench --benchmark_filter=/cpu/ --benchmark_repetitions=5
//       --benchmark_enable_random_interleaving=true   (one line: brigade and OpenBLAS interleaved, medians)
//   scripts/bench_kernels.sh [--smoke] [OUTDIR]
//
// Case names: matmul.<shape>/<model>/<dtype>/<device>/<impl>; impl "brigade" (the public op), the kernel's
// name (matmul_kernel_name: "v1-blocked" ... "v4-avx512-bf16" on the CPU, "v1-naive" ... "v8-wgmma" on
// CUDA), "openblas" (CPU, builds with OpenBLAS) or "cublas". Shapes of one GPT layer (N = B*T rows,
// D = C/H):
//   qkv      [N, C] x [C, 3C]          attn_proj [N, C] x [C, C]
//   fc       [N, C] x [C, 4C]          fc_proj   [N, 4C] x [4C, C]
//   logits   [N, C] x [V, C]^T (tied embedding)
//   scores   [B*H, T, D] x [B*H, T, D]^T (batched)     att_v [B*H, T, T] x [B*H, T, D]
//   square   n x n x n (4096 and 8192 on CUDA, where the peak is measured; 256 ... 4096 on the CPU); on
//            CUDA in bf16 also square<n>_bt, B stored [n, k] (the only layout v8 wgmma runs itself; it
//            skips the rest)
// Work: 2 M N K FLOPs per product; bytes = each operand read once and C written once (the napkin lower
// bound: a GEMM is compute-bound at these sizes, so pct_peak is against the compute peak).
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench/bench_support.h"
#include "kernels/backend.h"
#include "kernels/cpu/matmul.h"
#include "kernels/kernels.h"
#include "kernels/matmul_versions.h"
#include "tensor/tensor.h"
#if BRIGADE_WITH_CUDA
#include "kernels/cuda/matmul.h"
#endif

namespace {

using brigade::Device;
using brigade::DType;
using brigade::Tensor;
using brigade::bench::Target;
using brigade::bench::Work;

struct Model {
  std::string name;
  int64_t B, T, C, H, V;
};

struct Gemm {
  std::string name;
  int64_t batch, m, n, k;
  bool trans_b;  // b stored [n, k] (the logits' tied embedding, the attention scores' keys)
};

std::vector<Gemm> gemms_of(const Model& m) {
  const int64_t N = m.B * m.T, C = m.C, D = m.C / m.H, BH = m.B * m.H;
  return {{"qkv", 1, N, 3 * C, C, false},   {"attn_proj", 1, N, C, C, false},
          {"fc", 1, N, 4 * C, C, false},    {"fc_proj", 1, N, C, 4 * C, false},
          {"logits", 1, N, m.V, C, true},   {"scores", BH, m.T, m.T, D, true},
          {"att_v", BH, m.T, D, m.T, false}};
}

std::vector<Model> models(bool cuda) {
  std::vector<Model> list = {{"addition", 128, 13, 64, 4, 16}, {"char128", 16, 64, 128, 4, 65}};
  // The baby GPT of the CPU training comparison (bench/train_step_bench, scripts/bench_cpu_vs_torch.sh).
  if (!cuda) list.push_back({"baby", 12, 64, 128, 4, 65});
  if (!brigade::bench::smoke()) {
    list.push_back(cuda ? Model{"gpt2", 8, 1024, 768, 12, 50257} : Model{"gpt2-b1", 1, 1024, 768, 12, 50257});
  }
  return list;
}

Work work_of(const Gemm& g, DType dtype) {
  const double b = static_cast<double>(g.batch), es = static_cast<double>(brigade::dtype_size(dtype));
  const double m = static_cast<double>(g.m), n = static_cast<double>(g.n), k = static_cast<double>(g.k);
  return {2.0 * b * m * n * k, b * (m * k + k * n + m * n) * es};
}

const char* short_name(DType dtype) {
  return dtype == brigade::kBFloat16 ? "bf16" : "f32";
}

std::string case_name(const Gemm& g, const std::string& model, DType dtype, bool cuda,
                      const std::string& impl) {
  return "matmul." + g.name + "/" + model + "/" + short_name(dtype) + "/" + (cuda ? "cuda" : "cpu") + "/" +
         impl;
}

/// Operands of one product on `device`: a [batch, m, k], b [batch, k, n] or [batch, n, k] when trans_b.
struct Operands {
  Tensor a, b;
  Operands(const Gemm& g, DType dtype, const Device& device) {
    brigade::Generator gen(1);
    const brigade::TensorOptions options = brigade::TensorOptions(dtype).device(device);
    a = brigade::randn({g.batch, g.m, g.k}, options, &gen);
    b = brigade::randn(g.trans_b ? brigade::Shape{g.batch, g.n, g.k} : brigade::Shape{g.batch, g.k, g.n},
                       options, &gen);
    if (g.batch == 1) {
      a = a.view({g.m, g.k});
      b = g.trans_b ? b.view({g.n, g.k}) : b.view({g.k, g.n});
    }
  }
};

/// GemmArgs of one product on preallocated operands: a [batch, m, k], b [batch, k, n] ([batch, n, k] when
/// trans_b), c [batch, m, n], all contiguous.
brigade::kernels::GemmArgs gemm_args(const Gemm& g, DType dtype, const Operands& ops, const Tensor& c) {
  brigade::kernels::GemmArgs args;
  args.a = ops.a.data_ptr();
  args.b = ops.b.data_ptr();
  args.c = c.data_ptr();
  args.dtype = dtype;
  args.m = g.m;
  args.n = g.n;
  args.k = g.k;
  args.lda = g.k;
  args.ldb = g.trans_b ? g.k : g.n;
  args.ldc = g.n;
  args.trans_b = g.trans_b;
  args.batch = g.batch;
  args.stride_a = g.m * g.k;
  args.stride_b = g.k * g.n;
  args.stride_c = g.m * g.n;
  return args;
}

// ---- CPU: the public op, each CPU version and OpenBLAS ------------------------------------------------

void add_cpu(const Gemm& g, const std::string& model, DType dtype) {
  const std::string name = case_name(g, model, dtype, false, "brigade");
  benchmark::RegisterBenchmark(
      name.c_str(),
      [g, dtype](benchmark::State& state) {
        brigade::bench::run_case(state, work_of(g, dtype), Target::Cpu, [&] {
          auto ops = std::make_shared<Operands>(g, dtype, Device::cpu());
          const bool trans_b = g.trans_b;
          return [ops, trans_b] {
            benchmark::DoNotOptimize(brigade::kernels::matmul(ops->a, ops->b, false, trans_b).data_ptr());
          };
        });
      })
      ->UseRealTime()
      ->Unit(benchmark::kMillisecond);
}

/// impl: a CPU kernel's name (kernel_index its enumerator) or "openblas" (kernel_index -1).
void add_cpu_impl(const Gemm& g, const std::string& model, DType dtype, const std::string& impl,
                  int kernel_index) {
  const std::string name = case_name(g, model, dtype, false, impl);
  benchmark::RegisterBenchmark(
      name.c_str(),
      [g, dtype, kernel_index](benchmark::State& state) {
        brigade::bench::run_case(state, work_of(g, dtype), Target::Cpu, [&] {
          auto ops = std::make_shared<Operands>(g, dtype, Device::cpu());
          Tensor c = brigade::empty({g.batch, g.m, g.n}, brigade::TensorOptions(dtype));
          const brigade::kernels::GemmArgs args = gemm_args(g, dtype, *ops, c);
          return [ops, c, args, kernel_index] {
            if (kernel_index < 0) {
              brigade::kernels::cpu::gemm_openblas(args);
            } else {
              brigade::kernels::gemm_with(static_cast<brigade::kernels::MatmulKernel>(kernel_index), args);
            }
          };
        });
      })
      ->UseRealTime()
      ->Unit(benchmark::kMillisecond);
}

/// The public op, every CPU version that runs `dtype` here, and OpenBLAS (float32, where built).
void add_cpu_all(const Gemm& g, const std::string& model, DType dtype) {
  add_cpu(g, model, dtype);
  for (brigade::kernels::MatmulKernel kernel : brigade::kernels::all_matmul_kernels()) {
    if (brigade::kernels::matmul_kernel_backend(kernel) != brigade::DeviceKind::CPU) continue;
    if (!brigade::kernels::matmul_kernel_supports(kernel, dtype)) continue;
    add_cpu_impl(g, model, dtype, brigade::kernels::matmul_kernel_name(kernel), static_cast<int>(kernel));
  }
  if (brigade::kernels::blas_available() && dtype == brigade::kFloat32)
    add_cpu_impl(g, model, dtype, "openblas", -1);
}

// ---- CUDA: each hand-written kernel and cuBLAS on the same preallocated operands -------------------------

#if BRIGADE_WITH_CUDA
namespace kcuda = brigade::kernels::cuda;

/// impl: a kernel's name or "cublas".
void add_cuda(const Gemm& g, const std::string& model, DType dtype, const std::string& impl,
              int kernel_index) {
  const std::string name = case_name(g, model, dtype, true, impl);
  const Target target = dtype == brigade::kBFloat16 ? Target::CudaBf16 : Target::CudaFp32;
  benchmark::RegisterBenchmark(
      name.c_str(),
      [g, dtype, target, kernel_index](benchmark::State& state) {
        brigade::bench::run_case(state, work_of(g, dtype), target, [&] {
          const Device gpu = Device::cuda(0);
          auto ops = std::make_shared<Operands>(g, dtype, gpu);
          Tensor c = brigade::empty({g.batch, g.m, g.n}, brigade::TensorOptions(dtype).device(gpu));
          const brigade::kernels::GemmArgs args = gemm_args(g, dtype, *ops, c);
          return [ops, c, args, kernel_index] {
            if (kernel_index < 0) {
              kcuda::gemm_cublas(args);
            } else {
              kcuda::gemm_native(args, static_cast<brigade::kernels::MatmulKernel>(kernel_index));
            }
          };
        });
      })
      ->UseManualTime()
      ->Iterations(brigade::bench::cuda_iterations())
      ->Unit(benchmark::kMicrosecond);
}

void register_cuda() {
  std::vector<std::pair<std::string, Gemm>> cases;
  for (const Model& m : models(true)) {
    for (const Gemm& g : gemms_of(m)) cases.push_back({m.name, g});
  }
  const std::vector<int64_t> squares =
      brigade::bench::smoke() ? std::vector<int64_t>{1024} : std::vector<int64_t>{4096, 8192};
  for (int64_t n : squares) cases.push_back({"square", {"square" + std::to_string(n), 1, n, n, n, false}});
  // The squares again with B stored [n, k] (x @ W^T, as nn::Linear's forward calls it): the one layout
  // v8 (wgmma) runs itself; bf16 only.
  std::vector<std::pair<std::string, Gemm>> bt_squares;
  for (int64_t n : squares) {
    bt_squares.push_back({"square", {"square" + std::to_string(n) + "_bt", 1, n, n, n, true}});
  }
  for (DType dtype : {brigade::kFloat32, brigade::kBFloat16}) {
    std::vector<std::pair<std::string, Gemm>> dtype_cases = cases;
    if (dtype == brigade::kBFloat16)
      dtype_cases.insert(dtype_cases.end(), bt_squares.begin(), bt_squares.end());
    for (const auto& [model, g] : dtype_cases) {
      for (brigade::kernels::MatmulKernel kernel : brigade::kernels::all_matmul_kernels()) {
        if (brigade::kernels::matmul_kernel_backend(kernel) != brigade::DeviceKind::CUDA) continue;
        if (!brigade::kernels::matmul_kernel_supports(kernel, dtype)) continue;
        // v8 hands an untransposed B to v6 (wgmma_handles): a row under its name would be v6's time.
        if (kernel == brigade::kernels::MatmulKernel::CudaWgmma && !g.trans_b) continue;
        // The naive kernel at 8192^3 takes seconds per call and teaches nothing new.
        if (kernel == brigade::kernels::MatmulKernel::CudaNaive && g.m * g.n * g.k > (int64_t{1} << 36))
          continue;
        add_cuda(g, model, dtype, brigade::kernels::matmul_kernel_name(kernel), static_cast<int>(kernel));
      }
      add_cuda(g, model, dtype, "cublas", -1);
    }
  }
}
#endif

void register_all() {
  for (const Model& m : models(false)) {
    for (const Gemm& g : gemms_of(m)) add_cpu_all(g, m.name, brigade::kFloat32);
  }
  for (const Gemm& g : gemms_of({"baby", 12, 64, 128, 4, 65})) add_cpu_all(g, "baby", brigade::kBFloat16);
  const std::vector<int64_t> squares =
      brigade::bench::smoke() ? std::vector<int64_t>{256} : std::vector<int64_t>{256, 512, 1024, 2048, 4096};
  for (int64_t n : squares) {
    const Gemm square{"square" + std::to_string(n), 1, n, n, n, false};
    add_cpu_all(square, "square", brigade::kFloat32);
    if (n <= 1024) add_cpu_all(square, "square", brigade::kBFloat16);
  }
#if BRIGADE_WITH_CUDA
  if (brigade::bench::gpu_present()) register_cuda();
#endif
}

}  // namespace

/// An OpenBLAS older than this CPU runs its SSE3 kernels on it (kernels/cpu/matmul.h, openblas_better_core),
/// which would make the baseline a straw man: the bench then runs itself again with OPENBLAS_CORETYPE naming
/// the CPU's vector core, read by OpenBLAS as it loads. A caller's own OPENBLAS_CORETYPE is kept
/// (OPENBLAS_CORETYPE=Prescott measures OpenBLAS as it chose); the context records the core that ran.
void give_openblas_its_vector_kernels(char** argv) {
  const std::string better = brigade::kernels::cpu::openblas_better_core();
  if (better.empty() || std::getenv("OPENBLAS_CORETYPE") != nullptr) return;
  std::fprintf(stderr,
               "matmul_bench: OpenBLAS picked its %s kernels, older than this CPU's; running again with "
               "OPENBLAS_CORETYPE=%s\n",
               brigade::kernels::cpu::openblas_core().c_str(), better.c_str());
  setenv("OPENBLAS_CORETYPE", better.c_str(), 1);
  execv("/proc/self/exe", argv);
  std::perror("matmul_bench: execv");  // returns only on failure: go on with OpenBLAS's own choice
}

int main(int argc, char** argv) {
  give_openblas_its_vector_kernels(argv);
  brigade::bench::init(&argc, argv);
  if (brigade::kernels::cpu::openblas_built()) {
    const bool chosen = std::getenv("OPENBLAS_CORETYPE") != nullptr;
    benchmark::AddCustomContext("openblas_core", brigade::kernels::cpu::openblas_core() +
                                                     (chosen ? " (OPENBLAS_CORETYPE)" : " (its own choice)"));
  }
  register_all();
  return brigade::bench::run_and_finish();
}
