// The kernel lab on the CPU emulator: `brigade kernel`'s flags and report (apps/kernel_lab.h) for a CUDA
// version on a machine without a GPU. scripts/kernel_lab.sh builds it: the op family's kernel files
// (transformed by transform.py, memory_emu_support.h force-included), its version registry and
// kernels/kernel_versions.cpp compiled with the CUDA side on, this file and apps/kernel_lab.cpp, linked
// against a CPU build's kernels and tensor libraries. CPU tensors stand in for device memory; each CUDA
// thread of a block runs as a fiber on one host thread (scripts/cuda_emulation/run.sh), so keep shapes small.
#include <cuda_runtime.h>

#include <cstring>
#include <exception>

#include "apps/kernel_lab.h"
#include "kernels/cuda/matmul.h"
#include "tensor/device_ops.h"
#include "tensor/error.h"

// What the transformed kernel files reference of tensor/cuda/ (a CPU build has none of it).
namespace brigade::cuda_detail {
cudaStream_t current_stream(int) {
  return nullptr;
}
void set_device(int) {}
}  // namespace brigade::cuda_detail

namespace brigade::kernels::cuda {
void gemm_cublas(const GemmArgs&) {  // the baseline, not a version: not emulated
  BRIGADE_THROW(DeviceError, "cuBLAS is not emulated");
}
}  // namespace brigade::kernels::cuda

namespace brigade::detail::cuda {
void copy_bytes(void* dst, const Device&, const void* src, const Device&, size_t nbytes) {
  std::memcpy(dst, src, nbytes);
}
}  // namespace brigade::detail::cuda

int main(int argc, char** argv) {
  CLI::App app{"the kernel lab on the CPU emulator (brigade kernel's flags)", "kernel_lab_emu"};
  brigade::apps::KernelLabOptions options;
  brigade::apps::add_kernel_lab_flags(app, options);
  CLI11_PARSE(app, argc, argv);
  try {
    return brigade::apps::run_kernel_lab(options, brigade::apps::LabRun::Emulated);
  } catch (const brigade::ValueError& e) {
    std::fprintf(stderr, "kernel_lab: %s\n", e.what());
    return 2;
  }
}
