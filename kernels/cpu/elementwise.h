// What other CPU files share of kernels/cpu/elementwise.cpp: the float GELU over contiguous arrays, so that
// a fused op (kernels/cpu/bias_gelu.cpp) gives the bits of unary(Gelu) and unary_backward(Gelu).
#pragma once

#include <cstdint>

#include "kernels/elementwise_versions.h"

namespace brigade::kernels::cpu {

/// Whether `kernel` (a CPU ElementwiseKernel) runs the 8-lane AVX2 GELU here: v2 on a CPU with AVX2.
bool runs_avx2(ElementwiseKernel kernel);
/// out[k] = gelu(a[k]) for k in [0, n): with avx2 true, 16 lanes where the CPU has AVX-512, else 8; with
/// avx2 false, 4; lane-wise, so the same bits either way and for any split of an array into calls.
void gelu_array(float* out, const float* a, int64_t n, bool avx2);
/// out[k] = g[k] * gelu'(a[k]) for k in [0, n), as gelu_array.
void gelu_grad_array(float* out, const float* g, const float* a, int64_t n, bool avx2);

}  // namespace brigade::kernels::cpu
