// What the version registries of the ops share. Every op family with more than one kernel version has one
// header kernels/<op>_versions.h of the same shape:
//
//   enum class <Op>Kernel { ... };                 one enumerator per version, CPU versions first, each in
//                                                  version order and doc-commented with its file, what it
//                                                  does and what the next version improves
//   const char* <op>_kernel_name(<Op>Kernel);      "v2-tiled": stable, unique within the op (tests,
//                                                  benchmark case names, the emulator's EMU_*_ONLY)
//   DeviceKind <op>_kernel_backend(<Op>Kernel);    the backend tag: which device the version's tensors
//                                                  live on (CPU or CUDA)
//   const std::vector<<Op>Kernel>& all_<op>_kernels();               every version, in enum order
//   bool <op>_kernel_supports(<Op>Kernel, what decides);             whether the version runs itself
//   <Op>Kernel default_<op>_kernel(DeviceKind backend, what decides);  what the op runs on that backend
//   <op>_with(<Op>Kernel, ...)                     runs one version on preallocated outputs, with the
//                                                  arguments and preconditions of kernels/backend.h
//
// So a test can run "every registered version of this op on each backend":
//   for (SoftmaxKernel k : all_softmax_kernels()) { device of softmax_kernel_backend(k); softmax_rows_with(k,
//   ...); }
// A version that does not run some input itself (a layout, a width, a dtype) hands it to v1 of its backend,
// so every (version, input) pair is valid and the supported ones are the interesting ones.
// The *_with functions check that the tensors live on the version's backend (DeviceError otherwise) and
// throw DeviceError for a CUDA version in a build without CUDA. They route to the backend's side, declared
// at the end of each header under the same name in namespace cpu or cuda: code in those namespaces calls
// it qualified (cuda::softmax_rows_with), since argument-dependent lookup also finds kernels::'s.
#pragma once

#include <initializer_list>

#include "tensor/device.h"
#include "tensor/tensor.h"

namespace brigade::kernels {

/// "cpu" or "cuda".
const char* backend_name(DeviceKind backend);

namespace detail {

/// Whether the CPU versions compiled for AVX2 run here: the build has them (x86-64, GCC or Clang) and this
/// CPU has AVX2.
bool cpu_runs_avx2();

/// Whether the CPU versions written with AVX-512 intrinsics and FMA run here: the build has them (x86-64,
/// GCC or Clang) and this CPU has AVX-512F and FMA.
bool cpu_runs_avx512_fma();

/// Throws DeviceError unless every defined tensor of `tensors` lives on `backend`, naming the op and version.
void check_version_device(const char* op, const char* version, DeviceKind backend,
                          std::initializer_list<const Tensor*> tensors);

/// Throws DeviceError: `version` of `op` is a CUDA kernel and this build has no CUDA backend.
[[noreturn]] void throw_cuda_version_unbuilt(const char* op, const char* version);

}  // namespace detail
}  // namespace brigade::kernels

/// In a *_with function: `return call;` (a kernels::cuda entry point) in a CUDA build, else the DeviceError
/// of throw_cuda_version_unbuilt.
#if BRIGADE_WITH_CUDA
#define BRIGADE_RUN_CUDA_VERSION(op, version, call) return ::brigade::kernels::cuda::call
#else
#define BRIGADE_RUN_CUDA_VERSION(op, version, call) \
  ::brigade::kernels::detail::throw_cuda_version_unbuilt(op, version)
#endif
