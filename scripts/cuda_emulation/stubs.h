// What the transformed kernel files reference but a harness does not run: the CUDA stream/device helpers of
// tensor/cuda/cuda_check.h, and the v1 launchers (kernels/cuda/v1_launchers.h) the *_with dispatchers fall
// back to (the harnesses call kernels directly, so these only have to link). A harness that compiles a v1
// file itself defines EMU_ATTENTION_V1, EMU_ATTENTION_V3 or EMU_ROWS_V1 to drop the matching stubs.
#pragma once

#include <stdexcept>

#include "kernels/backend.h"
#include "kernels/cuda/attention_flash_tc.h"
#include "kernels/cuda/v1_launchers.h"

namespace brigade::cuda_detail {
inline cudaStream_t current_stream(int) {
  return nullptr;
}
inline void set_device(int) {}
}  // namespace brigade::cuda_detail

namespace brigade::kernels::cuda {
[[noreturn]] inline void not_emulated() {
  throw std::runtime_error("this v1 CUDA launcher is not emulated");
}
#if !defined(EMU_ROWS_V1)
void softmax_rows_v1(const Tensor&, const Tensor&, bool) {
  not_emulated();
}
void softmax_backward_rows_v1(const Tensor&, const Tensor&, const Tensor&, bool) {
  not_emulated();
}
void layernorm_forward_v1(const Tensor&, const Tensor&, const Tensor&, double, const Tensor&, const Tensor&,
                          const Tensor&) {
  not_emulated();
}
void layernorm_backward_v1(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                           const Tensor&, const Tensor&, const Tensor&) {
  not_emulated();
}
#endif
#if !defined(EMU_ATTENTION_V1)
void causal_attention_forward_v1(const Tensor&, const Tensor&, const Tensor&, double, const Tensor&,
                                 const Tensor&) {
  not_emulated();
}
void causal_attention_backward_v1(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                                  const Tensor&, double, const Tensor&, const Tensor&, const Tensor&) {
  not_emulated();
}
#endif
}  // namespace brigade::kernels::cuda

// Attention v3/v4's entry points, which the v2 file's *_with dispatch calls (flash_tc_emu.cpp, which
// compiles them itself, defines EMU_ATTENTION_V3).
#if !defined(EMU_ATTENTION_V3)
namespace brigade::kernels::cuda::attention_detail {
void flash_tc_forward(const Tensor&, const Tensor&, const Tensor&, double, const Tensor&, const Tensor&,
                      bool) {
  not_emulated();
}
void flash_tc_backward(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                       const Tensor&, double, const Tensor&, const Tensor&, const Tensor&, bool) {
  not_emulated();
}
}  // namespace brigade::kernels::cuda::attention_detail
#endif
