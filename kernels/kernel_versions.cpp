// The checks every version registry's *_with functions share (kernels/kernel_versions.h).
#include "kernels/kernel_versions.h"

#include "kernels/cpu/exp_rows_avx512.h"  // avx512_rows_run
#include "kernels/cpu/vector_math.h"      // BRIGADE_CPU_AVX2, cpu_has_avx2

namespace brigade::kernels {

const char* backend_name(DeviceKind backend) {
  return backend == DeviceKind::CPU ? "cpu" : "cuda";
}

namespace detail {

bool cpu_runs_avx2() {
#if BRIGADE_CPU_AVX2
  return cpu::detail::cpu_has_avx2();
#else
  return false;
#endif
}

bool cpu_runs_avx512_fma() {
  return cpu::detail::avx512_rows_run();
}

void check_version_device(const char* op, const char* version, DeviceKind backend,
                          std::initializer_list<const Tensor*> tensors) {
#if BRIGADE_CUDA_EMULATION
  // The CPU emulator's kernel lab (scripts/kernel_lab.sh) runs CUDA versions on CPU tensors, which stand in
  // for device memory there.
  if (backend == DeviceKind::CUDA) return;
#endif
  for (const Tensor* t : tensors) {
    if (t == nullptr || !t->defined()) continue;
    BRIGADE_CHECK_DEVICE(t->device().kind == backend, op, ": version '", version, "' is a ",
                         backend_name(backend), " kernel, but a tensor is on ", t->device().str());
  }
}

void throw_cuda_version_unbuilt(const char* op, const char* version) {
  BRIGADE_THROW(DeviceError, op, ": version '", version,
                "' is a CUDA kernel and brigade was built without CUDA");
}

}  // namespace detail
}  // namespace brigade::kernels
