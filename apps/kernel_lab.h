// The kernel lab, in the spirit of llm.c's dev/cuda: one version of one kernel on a shape of your choice,
// checked against the CPU reference (kernels/reference/) and timed, with its napkin math.
//
//   brigade kernel layernorm --version 2 --shape 32x1024x768     # CUDA v2 on a GPU: time, GB/s, check
//   brigade kernel layernorm --version 1 --device cpu --shape 8x64x768
//   scripts/kernel_lab.sh layernorm --version 2 --shape 4x64x768  # no GPU: CUDA v2 on the CPU emulator
//   brigade kernel --list                                          # the ops and their versions
//
// Nothing here lists kernels or prices them: the op is a case of the op table's perf mode (tests/ops/
// op_cases_perf.h, the ops of one GPT training step; matmul is an op(a) @ op(b) case of the table), its
// versions are those registered in kernels/<op>_versions.h (tests/ops/op_versions.h), its work (bytes and
// FLOPs) is the table's (tests/ops/op_work.h), the reference is kernels/reference (tests/ops/op_reference.h)
// and the tolerance is the table tests' (tests/ops/op_tolerance.h). The same file builds into the `brigade`
// binary (Native: a CPU version, or a CUDA one on a GPU) and into the emulator's lab
// (scripts/cuda_emulation/kernel_lab_emu.cpp, Emulated: a CUDA version's code run on the CPU, CPU tensors
// standing in for device memory: correctness only, no time).
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

namespace brigade::apps {

struct KernelLabOptions {
  std::string op;       ///< a perf case's label ("layernorm_fwd"), its stem ("layernorm"), or "matmul"
  std::string version;  ///< "2", "v2", "v2-warp-per-row", or "public" (the op as kernels.h dispatches it)
  std::string shape = "8x1024x768";  ///< BxTxC (a GPT step's batch, sequence, width), or MxNxK for matmul
  int heads = 0;                     ///< attention heads (0: C / 64, at least 1)
  int64_t vocab = 50257;             ///< V: the logits' width (GPT-2's)
  std::string dtype = "f32";         ///< f32, bf16, f64
  std::string device;   ///< cpu or cuda; empty: cuda where a GPU is present and the version exists
  int iterations = 20;  ///< timed calls after the checked one (their median is reported)
  bool list = false;    ///< list the ops and their versions instead
};

/// How the lab runs a version.
enum class LabRun {
  Native,    ///< on its own backend (the `brigade` binary)
  Emulated,  ///< a CUDA version on CPU tensors, through the CPU emulator (scripts/kernel_lab.sh)
};

/// Registers the lab's flags (and the positional op) on `app`.
void add_kernel_lab_flags(CLI::App& app, KernelLabOptions& options);

/// Runs the lab and prints its report. Returns 0 when the version's outputs match the reference within the
/// tolerance, 1 when they do not; throws ValueError for an unknown op, version, shape or dtype (naming the
/// valid ones) and DeviceError for a CUDA version where no GPU is usable.
int run_kernel_lab(const KernelLabOptions& options, LabRun run);

}  // namespace brigade::apps
