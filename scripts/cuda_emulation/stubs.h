// What the transformed kernel files reference but the emulation does not run: the CUDA stream/device
// helpers of tensor/cuda/cuda_check.h, and the v1 entry points the *_with dispatchers fall back to (the
// harnesses call the v2+ kernels directly, so these stubs only have to link).
#pragma once

#include <stdexcept>

#include "kernels/backend.h"

namespace brigade::cuda_detail {
inline cudaStream_t current_stream(int) {
  return nullptr;
}
inline void set_device(int) {}
}  // namespace brigade::cuda_detail

namespace brigade::kernels::cuda {
[[noreturn]] inline void not_emulated() {
  throw std::runtime_error("the v1 CUDA kernels are not emulated");
}
void softmax_rows(const Tensor&, const Tensor&, bool) {
  not_emulated();
}
void softmax_backward_rows(const Tensor&, const Tensor&, const Tensor&, bool) {
  not_emulated();
}
void layernorm_forward(const Tensor&, const Tensor&, const Tensor&, double, const Tensor&, const Tensor&,
                       const Tensor&) {
  not_emulated();
}
void layernorm_backward(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                        const Tensor&, const Tensor&, const Tensor&) {
  not_emulated();
}
#if !defined(EMU_ATTENTION_V1)  // defined by the harness that compiles attention.cu itself
void causal_attention_forward(const Tensor&, const Tensor&, const Tensor&, double, const Tensor&,
                              const Tensor&) {
  not_emulated();
}
void causal_attention_backward(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                               const Tensor&, double, const Tensor&, const Tensor&, const Tensor&) {
  not_emulated();
}
#endif
}  // namespace brigade::kernels::cuda
