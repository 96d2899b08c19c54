// The kernel benchmark: the perf mode of the op table (tests/ops/op_cases_perf.h: the ops of one GPT training
// step at its shapes, the same op definitions the tests check), on the CPU and (when a GPU is present)
// CUDA, by the public op ("brigade": the dispatch, its default version, outputs allocated per call) and,
// on CUDA (on the CPU: attention only), by each registered kernel version of the op's family that runs the
// case itself (tests/ops/op_versions.h over kernels/<op>_versions.h; impl = the version's name; outputs
// allocated once), beside cuDNN where cuDNN has the op (legacy softmax and log-softmax, forward and backward;
// cuDNN's layernorm and fused attention live in its graph/frontend API and are not benchmarked here). The
// versions of softmax, layernorm and attention run at every model; those of the memory-bound families
// (elementwise, AdamW, cross-entropy, embedding backward) at GPT-2's shapes only, which keeps the GPU check's
// bench in budget. Matmul has its own suite (bench/matmul_bench.cpp, beside OpenBLAS and cuBLAS); here only
// a Linear's qkv product, alone and with its bias (matmul_bias), by the public op.
//
//   ./kernels_bench                         # full run: three model shapes, CPU (+ CUDA f32/bf16 with a GPU);
//                                           # on the CPU bf16 for the ops with bf16 loops of their own
//                                           # (GELU, bias + GELU, the bias gradients' column sums)
//   ./kernels_bench --smoke                 # CI: the two small models, quick peaks (use a tiny min time)
//   scripts/bench_kernels.sh [--smoke] [OUTDIR]   # runs every suite, JSON named by date, commit, device
//
// Case names: op/model/dtype/device/impl, op the perf case's label, impl "brigade", a kernel version's name,
// or "cudnn". Models: tests/ops/op_cases_perf.h. The napkin work of each call (FLOPs, bytes) is the op
// table's (tests/ops/op_work.h), from the case's operands and outputs; the counters and the peaks they are
// divided by: bench/bench_support.h.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "bench/bench_support.h"
#include "kernels/kernels.h"
#include "tensor/tensor.h"
#include "tests/ops/op_table.h"
#include "tests/ops/op_versions.h"

#if BRIGADE_WITH_CUDA && BRIGADE_BENCH_CUDNN
#include <cudnn.h>

#include "tensor/cuda/cuda_check.h"
#endif

namespace {

using brigade::Device;
using brigade::DType;
using brigade::Tensor;
using brigade::bench::Target;
using brigade::bench::Work;
using brigade::testing::OpCase;
namespace kernels = brigade::kernels;
namespace table = brigade::testing;

/// Where cases run: the device, the dtype and the model.
struct Where {
  Device device;
  DType dtype;
  table::PerfModel model;
  Target target() const {
    if (device.is_cpu()) return Target::Cpu;
    return dtype == brigade::kBFloat16 ? Target::CudaBf16 : Target::CudaFp32;
  }
  brigade::TensorOptions options() const { return brigade::TensorOptions(dtype).device(device); }
};

using Call = std::function<void()>;

/// Registers op/model/dtype/device/impl. `make` runs when the case runs (inputs live only for that case): it
/// builds the inputs and returns the call to time, and fills `work` (read by run_case after make returns).
void add(const std::string& op, const Where& w, const std::string& impl, std::function<Call(Work&)> make) {
  const std::string name = op + "/" + w.model.name + "/" + table::dtype_short(w.dtype) + "/" +
                           (w.device.is_cpu() ? "cpu" : "cuda") + "/" + impl;
  auto* bench = benchmark::RegisterBenchmark(name.c_str(), [w, make](benchmark::State& state) {
    Work work;
    brigade::bench::run_case(state, work, w.target(), [&] { return make(work); });
  });
  bench->Unit(benchmark::kMicrosecond);
  if (w.device.is_cpu()) {
    bench->UseRealTime();
  } else {
    // A fixed count: each timed call also pays an L2 flush and an event sync (~0.1 ms), so a minimum time
    // would run tiny kernels thousands of times and blow the GPU check's budget.
    bench->UseManualTime()->Iterations(brigade::bench::cuda_iterations());
  }
}

// ---- cuDNN baseline (legacy softmax API) ------------------------------------------------------------------

#if BRIGADE_WITH_CUDA && BRIGADE_BENCH_CUDNN
Tensor random(const Where& w, const brigade::Shape& shape, uint64_t seed) {
  brigade::Generator gen(seed);
  return brigade::randn(shape, w.options(), &gen);
}

void cudnn_check(cudnnStatus_t status, const char* what) {
  if (status == CUDNN_STATUS_SUCCESS) return;
  const std::string message = std::string(what) + ": " + cudnnGetErrorString(status);
  // cuDNN refusing a configuration (e.g. bf16 in the legacy softmax) is "unsupported", not a failure.
  const int category = static_cast<int>(status) / 1000 * 1000;
  if (category == CUDNN_STATUS_NOT_SUPPORTED || category == CUDNN_STATUS_BAD_PARAM) {
    throw brigade::bench::Unavailable(message);
  }
  throw brigade::Error(message);
}

cudnnHandle_t cudnn_handle() {
  static cudnnHandle_t handle = [] {
    cudnnHandle_t h = nullptr;
    const cudnnStatus_t status = cudnnCreate(&h);
    if (status != CUDNN_STATUS_SUCCESS) {
      throw brigade::bench::Unavailable(std::string("cudnnCreate: ") + cudnnGetErrorString(status));
    }
    return h;
  }();
  cudnn_check(cudnnSetStream(handle, brigade::cuda_detail::current_stream(0)), "cudnnSetStream");
  return handle;
}

/// A rows x cols tensor as cuDNN's N x C x 1 x 1 (INSTANCE mode: softmax over C per N).
struct CudnnRows {
  cudnnTensorDescriptor_t desc = nullptr;
  CudnnRows(int64_t rows, int64_t cols, DType dtype) {
    cudnn_check(cudnnCreateTensorDescriptor(&desc), "cudnnCreateTensorDescriptor");
    cudnn_check(
        cudnnSetTensor4dDescriptor(desc, CUDNN_TENSOR_NCHW,
                                   dtype == brigade::kBFloat16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_FLOAT,
                                   static_cast<int>(rows), static_cast<int>(cols), 1, 1),
        "cudnnSetTensor4dDescriptor");
  }
  ~CudnnRows() { cudnnDestroyTensorDescriptor(desc); }
  CudnnRows(const CudnnRows&) = delete;
  CudnnRows& operator=(const CudnnRows&) = delete;
};

/// Forward (or, with dy, backward) softmax of x [rows, cols] through cuDNN, into out.
Call cudnn_softmax(const Where& w, int64_t rows, int64_t cols, bool log, bool backward) {
  auto desc = std::make_shared<CudnnRows>(rows, cols, w.dtype);
  Tensor y = random(w, {rows, cols}, 1), dy = random(w, {rows, cols}, 2);
  Tensor out = brigade::empty({rows, cols}, w.options());
  const cudnnSoftmaxAlgorithm_t algo = log ? CUDNN_SOFTMAX_LOG : CUDNN_SOFTMAX_ACCURATE;
  return [desc, y, dy, out, algo, backward] {
    const float one = 1.0f, zero = 0.0f;
    if (backward) {
      cudnn_check(
          cudnnSoftmaxBackward(cudnn_handle(), algo, CUDNN_SOFTMAX_MODE_INSTANCE, &one, desc->desc,
                               y.data_ptr(), desc->desc, dy.data_ptr(), &zero, desc->desc, out.data_ptr()),
          "cudnnSoftmaxBackward");
    } else {
      cudnn_check(cudnnSoftmaxForward(cudnn_handle(), algo, CUDNN_SOFTMAX_MODE_INSTANCE, &one, desc->desc,
                                      y.data_ptr(), &zero, desc->desc, out.data_ptr()),
                  "cudnnSoftmaxForward");
    }
  };
}
/// cuDNN's softmax / log-softmax over rows x cols, forward and backward, beside the table's cases of the same
/// op and shape (work as the table's: read x, write y, ~5 FLOPs/element; backward read dy and y, write dx,
/// ~4 FLOPs/element).
void add_cudnn_softmax(const Where& w, const std::string& tag, int64_t rows, int64_t cols, bool log) {
  const double n = static_cast<double>(rows * cols), e = static_cast<double>(brigade::dtype_size(w.dtype));
  const std::string base = std::string(log ? "log_softmax" : "softmax");
  for (bool backward : {false, true}) {
    const Work napkin = backward ? Work{4 * n, 3 * n * e} : Work{5 * n, 2 * n * e};
    add(base + (backward ? "_bwd" : "_fwd") + tag, w, "cudnn", [=](Work& work) {
      work = napkin;
      return cudnn_softmax(w, rows, cols, log, backward);
    });
  }
}
#endif

// ---- the op table's perf cases -------------------------------------------------------------------------

/// The perf cases outlive their registrations (the calls refer to them).
std::deque<OpCase>& perf_case_store() {
  static std::deque<OpCase> store;
  return store;
}

/// Which perf cases also time their kernel versions (see the top).
bool times_versions(const OpCase& c, const Where& w) {
  // On the CPU only attention's versions: the others are memory bound and their versions share the bits.
  if (!w.device.is_cuda()) return table::family_of(c.op) == table::Family::Attention;
  static const std::set<std::string> memory_bound = {"gelu_fwd",      "gelu_bwd",     "residual_add",
                                                     "bias_add",      "add_inplace",  "adamw",
                                                     "cross_entropy", "embedding_bwd"};
  const table::Family family = table::family_of(c.op);
  if (family == table::Family::Softmax || family == table::Family::LayerNorm ||
      family == table::Family::Attention) {
    return true;
  }
  return memory_bound.count(c.label) > 0 && w.model.name == "gpt2";
}

/// Registers case c by one implementation: inputs drawn on the device, the forward a backward case needs by
/// the kernel itself, the work from one call's outputs.
void add_case(const OpCase& c, const Where& w, const table::Implementation& impl) {
  const std::string name = impl.version < 0 ? std::string("brigade") : impl.name;
  add(c.label, w, name, [&c, w, impl](Work& work) {
    const std::vector<Tensor> operands =
        table::operands_of(c, table::random_inputs(c, w.device, 1), table::ForwardFrom::Kernel);
    table::OpCall call = table::implementation_call(c, impl, operands, w.device);
    const table::Work napkin = table::work_of(c, operands, call());
    work = Work{napkin.flops, napkin.bytes};
    return Call([call] { call(); });
  });
}

/// The CPU's bfloat16 cases: the ops whose bfloat16 loops are their own (the rest widen to float and run the
/// float32 loops, or run in float32 under autocast).
bool cpu_bf16_case(const std::string& label) {
  static const std::set<std::string> ops = {"bias_gelu_fwd", "bias_gelu_bwd", "gelu_fwd", "gelu_bwd",
                                            "sum_rows.bias_grad"};
  return ops.count(label) > 0;
}

void add_model_ops(const Where& w) {
  const bool d128 = w.device.is_cuda() && w.model.name == "gpt2";
  for (OpCase& c : table::perf_cases(w.model, w.dtype, d128)) {
    if (w.device.is_cpu() && w.dtype == brigade::kBFloat16 && !cpu_bf16_case(c.label)) continue;
    const OpCase& stored = perf_case_store().emplace_back(std::move(c));
    for (const table::Implementation& impl : table::implementations(stored, w.device)) {
      if (impl.version >= 0 && (!impl.runs_itself || !times_versions(stored, w))) continue;
      // The GEMM baselines (cuBLAS, OpenBLAS) are bench/matmul_bench's: it runs OpenBLAS on its best core.
      if (impl.baseline_backend != kernels::MatmulBackend::Native) continue;
      add_case(stored, w, impl);
    }
  }
#if BRIGADE_WITH_CUDA && BRIGADE_BENCH_CUDNN
  if (w.device.is_cuda()) {
    const table::PerfModel& m = w.model;
    add_cudnn_softmax(w, ".attn", m.B * m.H * m.T, m.T, false);
    add_cudnn_softmax(w, ".logits", m.N(), m.V, true);
  }
#endif
}

void register_all() {
  std::vector<Where> places;
  for (const table::PerfModel& m : table::perf_models(false, brigade::bench::smoke())) {
    places.push_back({Device::cpu(), brigade::kFloat32, m});
    places.push_back({Device::cpu(), brigade::kBFloat16, m});
  }
  if (brigade::bench::gpu_present()) {
    for (const table::PerfModel& m : table::perf_models(true, brigade::bench::smoke())) {
      places.push_back({Device::cuda(0), brigade::kFloat32, m});
      places.push_back({Device::cuda(0), brigade::kBFloat16, m});
    }
  }
  for (const Where& w : places) add_model_ops(w);
}

}  // namespace

int main(int argc, char** argv) {
  brigade::bench::init(&argc, argv);
  register_all();
  return brigade::bench::run_and_finish();
}
