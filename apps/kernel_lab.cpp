// The kernel lab (see kernel_lab.h): find the case and the version in the op table, run the version once and
// check it against the reference, time it, and print the napkin math.
#include "apps/kernel_lab.h"

#include <algorithm>
#include <cstdio>
#include <optional>
#include <sstream>
#include <vector>

#include "tensor/stream.h"
#include "tests/ops/op_cases_perf.h"
#include "tests/ops/op_reference.h"
#include "tests/ops/op_tolerance.h"
#include "tests/ops/op_versions.h"
#include "tests/ops/op_work.h"

namespace brigade::apps {
namespace {

using testing::Implementation;
using testing::OpCase;

std::vector<int64_t> parse_shape(const std::string& text, size_t count, const char* meaning) {
  std::vector<int64_t> dims;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, 'x')) {
    size_t used = 0;
    long long value = 0;
    try {
      value = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    BRIGADE_CHECK_VALUE(used == item.size() && value > 0, "--shape '", text, "': '", item,
                        "' is not a positive integer (expected ", meaning, ")");
    dims.push_back(value);
  }
  BRIGADE_CHECK_VALUE(dims.size() == count, "--shape '", text, "' has ", dims.size(),
                      " dimensions, expected ", meaning);
  return dims;
}

DType parse_dtype(const std::string& name) {
  if (name == "f32" || name == "float32") return kFloat32;
  if (name == "bf16" || name == "bfloat16") return kBFloat16;
  if (name == "f64" || name == "float64") return kFloat64;
  BRIGADE_THROW(ValueError, "unknown --dtype '", name, "' (valid: f32, bf16, f64)");
}

// The op table's perf cases for a GPT step of shape BxTxC (op_cases_perf.h), labels as the benchmark's.
std::vector<OpCase> step_cases(const KernelLabOptions& o, DType dtype) {
  const std::vector<int64_t> d = parse_shape(o.shape, 3, "BxTxC, e.g. 8x1024x768");
  const int64_t C = d[2], H = o.heads > 0 ? o.heads : std::max<int64_t>(1, C / 64);
  BRIGADE_CHECK_VALUE(C % H == 0, "--heads ", H, " does not divide the width C = ", C);
  const testing::PerfModel model{"lab", d[0], d[1], C, H, o.vocab, 1};
  return testing::perf_cases(model, dtype, false);
}

// The case `o` names: "matmul" (MxNxK: [M, K] @ [K, N]) or a perf case by its label ("softmax_bwd.attn"),
// the label without its suffix ("softmax_bwd") or the stem of a forward ("layernorm": layernorm_fwd).
OpCase lab_case(const KernelLabOptions& o) {
  const DType dtype = parse_dtype(o.dtype);
  if (o.op == "matmul") {
    const std::vector<int64_t> d = parse_shape(o.shape, 3, "MxNxK for matmul, e.g. 1024x1024x1024");
    return testing::make_case(testing::Op::Matmul, dtype,
                              {testing::in({d[0], d[2]}), testing::in({d[2], d[1]})});
  }
  const std::vector<OpCase> cases = step_cases(o, dtype);
  std::vector<const OpCase*> found;
  for (const std::string& wanted : {o.op, o.op + "_fwd", o.op + ".", o.op + "_fwd."}) {
    for (const OpCase& c : cases) {
      const std::string label = c.label;
      if (label == wanted || (wanted.back() == '.' && label.rfind(wanted, 0) == 0)) found.push_back(&c);
    }
    if (!found.empty()) return *found.front();
  }
  std::string names = "matmul";
  for (const OpCase& c : cases) names += std::string(", ") + c.label;
  BRIGADE_THROW(ValueError, "unknown op '", o.op, "' (valid: ", names, ")");
}

// The version `version` names among the case's implementations on `backend` (nullopt: none).
std::optional<Implementation> named_version(const OpCase& c, DeviceKind backend, const std::string& version) {
  const std::string prefix = (version.empty() || version[0] == 'v' ? version : "v" + version) + "-";
  for (const Implementation& impl : testing::implementations(c, Device{backend, 0})) {
    if (impl.name == version || impl.name.rfind(prefix, 0) == 0) return impl;
  }
  return std::nullopt;
}

// As named_version, or a ValueError listing the backend's versions (and saying where the version is).
Implementation find_version(const OpCase& c, DeviceKind backend, const std::string& version) {
  if (const auto impl = named_version(c, backend, version)) return *impl;
  std::string names;
  for (const Implementation& impl : testing::implementations(c, Device{backend, 0})) {
    names += (names.empty() ? "" : ", ") + impl.name;
  }
  const DeviceKind other = backend == DeviceKind::CPU ? DeviceKind::CUDA : DeviceKind::CPU;
  const auto elsewhere = named_version(c, other, version);
  BRIGADE_THROW(ValueError, "", c.label[0] ? c.label : "matmul", " has no version '", version, "' on ",
                kernels::backend_name(backend), " (", names, ")",
                elsewhere ? std::string("; ") + elsewhere->name + " is a " + kernels::backend_name(other) +
                                " version" +
                                (other == DeviceKind::CUDA
                                     ? " (no GPU here: scripts/kernel_lab.sh runs it on the CPU emulator)"
                                     : " (--device cpu)")
                          : std::string());
}

std::string shape_text(const Tensor& t) {
  std::string out = "[";
  for (int64_t k = 0; k < t.dim(); ++k) out += (k ? ", " : "") + std::to_string(t.size(k));
  return out + "] " + dtype_name(t.dtype());
}

std::string seconds_text(double ms) {
  char buffer[32];
  if (ms < 1.0) {
    std::snprintf(buffer, sizeof buffer, "%.3g us", 1e3 * ms);
  } else {
    std::snprintf(buffer, sizeof buffer, "%.3f ms", ms);
  }
  return buffer;
}

// Checks every output against the reference; prints one line each; true when all pass.
bool check_outputs(const OpCase& c, const Implementation& impl, DeviceKind backend,
                   const std::vector<Tensor>& outputs, const std::vector<testing::Expected>& expected) {
  bool pass = outputs.size() == expected.size();
  for (size_t k = 0; k < outputs.size() && k < expected.size(); ++k) {
    const DType dt = outputs[k].dtype();
    const testing::Tolerance tol = backend == DeviceKind::CPU ? testing::cpu_tolerance(c, k, dt)
                                                              : testing::cuda_tolerance(c, impl, k, dt);
    const testing::ErrorRatio e = testing::error_ratio(outputs[k], expected[k], tol);
    const bool ok = e.ratio <= 1.0;
    pass = pass && ok;
    std::printf("  output %zu %-26s worst error %.3g of the tolerance", k, shape_text(outputs[k]).c_str(),
                e.ratio);
    if (tol.magnitude_tol > 0) {
      std::printf(" (%g of sum|a*b|)", tol.magnitude_tol);
    } else {
      std::printf(" (rtol %g, atol %g)", tol.rtol, tol.atol);
    }
    if (!ok) std::printf("  at element %zu: %.8g, reference %.8g", e.index, e.actual, e.expected);
    std::printf("  %s\n", ok ? "ok" : "WRONG");
  }
  return pass;
}

// The median time of `iterations` calls, in ms (CUDA events on a GPU, the steady clock on the CPU).
double median_ms(const testing::OpCall& call, const Device& device, int iterations) {
  std::vector<double> times;
  for (int i = 0; i < iterations; ++i) {
    Event start(true), end(true);
    start.record(device);
    call();
    end.record(device);
    end.synchronize();
    times.push_back(start.elapsed_ms(end));
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

// The napkin math: bytes and FLOPs of one call, the measured rates, and the bound on an H200.
void print_napkin(const testing::Work& w, DType dtype, double ms) {
  std::printf("napkin: %.4g MB moved, %.4g MFLOP (%.2f FLOP/byte)\n", w.bytes / 1e6, w.flops / 1e6,
              w.bytes > 0 ? w.flops / w.bytes : 0.0);
  // Datasheet H200 SXM peaks (dense): 4.8 TB/s HBM3e; fp32 67 TFLOP/s, bf16 989 on tensor cores.
  const double flops_peak = dtype == kBFloat16 ? 989e12 : 67e12;
  const double bound_ms = 1e3 * std::max(w.bytes / 4.8e12, w.flops / flops_peak);
  std::printf("        bound on an H200 (4.8 TB/s, %s TFLOP/s): %s\n", dtype == kBFloat16 ? "989" : "67",
              seconds_text(bound_ms).c_str());
  if (ms > 0) {
    std::printf("        measured: %.4g GB/s, %.4g GFLOP/s\n", w.bytes / (ms * 1e6), w.flops / (ms * 1e6));
  }
}

void list_ops(const KernelLabOptions& o) {
  KernelLabOptions matmul = o;
  matmul.op = "matmul", matmul.shape = "64x64x64";
  std::vector<OpCase> cases = step_cases(o, parse_dtype(o.dtype));
  cases.insert(cases.begin(), lab_case(matmul));
  std::printf("%-24s %-52s %s\n", "op", "cpu versions", "cuda versions");
  for (const OpCase& c : cases) {
    auto names = [&](DeviceKind kind) {
      std::string out;
      for (const Implementation& impl : testing::implementations(c, Device{kind, 0})) {
        out += (out.empty() ? "" : " ") + impl.name;
      }
      return out;
    };
    std::printf("%-24s %-52s %s\n", c.label[0] ? c.label : "matmul", names(DeviceKind::CPU).c_str(),
                names(DeviceKind::CUDA).c_str());
  }
}

}  // namespace

void add_kernel_lab_flags(CLI::App& app, KernelLabOptions& o) {
  app.add_option("op", o.op,
                 "the op: layernorm, layernorm_bwd, softmax, attention, gelu, matmul, ... (--list)");
  app.add_option("--version", o.version, "the version: 2, v2, v2-warp-per-row, or public (the dispatch)");
  app.add_option("--shape", o.shape, "BxTxC: a GPT step's batch, sequence and width (matmul: MxNxK)")
      ->capture_default_str();
  app.add_option("--heads", o.heads, "attention heads (default C / 64)");
  app.add_option("--vocab", o.vocab, "vocabulary V (the logits' width)")->capture_default_str();
  app.add_option("--dtype", o.dtype, "f32, bf16 or f64")->capture_default_str();
  app.add_option("--device", o.device, "cpu or cuda (default: cuda where a GPU is present)");
  app.add_option("--iterations", o.iterations, "timed calls after the checked one")->capture_default_str();
  app.add_flag("--list", o.list, "list the ops and their versions on each backend");
}

int run_kernel_lab(const KernelLabOptions& o, LabRun run) {
  if (o.list) {
    list_ops(o);
    return 0;
  }
  BRIGADE_CHECK_VALUE(!o.op.empty() && !o.version.empty(), "name an op and a --version (--list)");
  const OpCase c = lab_case(o);
  DeviceKind backend = o.device == "cpu" ? DeviceKind::CPU : DeviceKind::CUDA;
  if (o.device.empty())
    backend = cuda_available() || run == LabRun::Emulated ? DeviceKind::CUDA : DeviceKind::CPU;
  BRIGADE_CHECK_VALUE(o.device.empty() || o.device == "cpu" || o.device == "cuda", "--device '", o.device,
                      "' (valid: cpu, cuda)");
  const Implementation impl = find_version(c, backend, o.version);
  const bool emulated = run == LabRun::Emulated && backend == DeviceKind::CUDA;
  // The public op and cuBLAS dispatch by the tensors' device, and the emulator's tensors are CPU tensors.
  BRIGADE_CHECK_VALUE(!emulated || impl.version >= 0, "the emulator runs the registered CUDA versions; ",
                      impl.name, " dispatches by device (on a GPU: brigade kernel)");
  BRIGADE_CHECK_DEVICE(backend == DeviceKind::CPU || emulated || cuda_available(), "", impl.name,
                       " is a CUDA version and no GPU is usable here (", cuda_unavailable_reason(),
                       "); scripts/kernel_lab.sh runs it on the CPU emulator");
  const Device device = emulated || backend == DeviceKind::CPU ? Device::cpu() : Device::cuda();

  const std::vector<Tensor> x = testing::random_inputs(c, Device::cpu(), 1234);
  const std::vector<Tensor> host = testing::operands_of(c, x, testing::ForwardFrom::Reference);
  const std::vector<testing::Expected> expected = testing::reference_outputs(c, host);
  std::vector<Tensor> operands;
  for (const Tensor& t : host) operands.push_back(t.defined() ? t.to(device) : t);
  const testing::OpCall call = testing::implementation_call(c, impl, operands, device);

  std::printf("%s %s on %s%s, %s\n", c.label[0] ? c.label : "matmul", impl.name.c_str(),
              kernels::backend_name(backend), emulated ? " (emulated on the CPU)" : "", dtype_name(c.dtype));
  if (!impl.runs_itself) std::printf("  (this version hands this shape to v1 of its backend)\n");
  for (size_t k = 0; k < operands.size(); ++k) {
    std::printf("  operand %zu %s\n", k, operands[k].defined() ? shape_text(operands[k]).c_str() : "none");
  }
  const std::vector<Tensor> outputs = call();
  std::printf("check against kernels/reference:\n");
  const bool pass = check_outputs(c, impl, backend, outputs, expected);
  const double ms = emulated || o.iterations <= 0 ? 0.0 : median_ms(call, device, o.iterations);
  if (ms > 0) std::printf("time: %s (median of %d calls)\n", seconds_text(ms).c_str(), o.iterations);
  if (emulated) std::printf("time: not measured (the emulator checks the code, not its speed)\n");
  print_napkin(testing::work_of(c, operands, outputs), c.dtype, ms);
  std::printf("%s\n", pass ? "PASS" : "FAIL: the version's outputs differ from the reference");
  return pass ? 0 : 1;
}

}  // namespace brigade::apps
