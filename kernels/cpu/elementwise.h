// What other CPU files share of kernels/cpu/elementwise.cpp: the float GELU over contiguous arrays, so that
// a fused op (kernels/cpu/bias_gelu.cpp) gives the bits of unary(Gelu) and unary_backward(Gelu).
#pragma once

#include <cstdint>

#include "kernels/cpu/cpu_features.h"  // BRIGADE_CPU_X86
#include "kernels/elementwise_versions.h"
#include "kernels/kernels.h"  // UnaryOp

namespace brigade::kernels::cpu {

/// How float32 GELU is computed here by a CPU ElementwiseKernel.
enum class GeluCode {
  /// v1, or v2 on a CPU without AVX2: vector_math.h's gelu_v on 4 lanes.
  Lanes4,
  /// v2: the same code on 8 (AVX2) or 16 (AVX-512) lanes; the bits of Lanes4.
  Wide,
  /// v3 on a CPU with AVX-512F and FMA: gelu_avx512.cpp (exp16, FMAs); its own bits.
  Avx512Fma,
};

/// What `kernel` (a CPU ElementwiseKernel) runs for GELU on this CPU (a version that does not run here
/// falls back to the widest that does, then to Lanes4).
GeluCode gelu_code(ElementwiseKernel kernel);

/// out[k] = gelu(a[k]) for k in [0, n), lane-wise: the same bits for any split of an array into calls.
void gelu_array(float* out, const float* a, int64_t n, GeluCode code);
/// out[k] = g[k] * gelu'(a[k]) for k in [0, n), as gelu_array.
void gelu_grad_array(float* out, const float* g, const float* a, int64_t n, GeluCode code);

namespace detail {
/// GeluCode::Avx512Fma's arrays (kernels/cpu/gelu_avx512.cpp); only where it runs.
void gelu_array_avx512_fma(float* out, const float* a, int64_t n);
void gelu_grad_array_avx512_fma(float* out, const float* g, const float* a, int64_t n);

/// The fused bias + GELU's rows in one loop each (kernels/cpu/bias_gelu.cpp), with Avx512Fma's bits:
/// y[k] = gelu(x[k] + b[k]) and dx[k] = dy[k] * gelu'(x[k] + b[k]) for k in [0, n), the sum x + b rounded
/// to float first, as the unfused add stores it.
void bias_gelu_row_avx512_fma(float* y, const float* x, const float* b, int64_t n);
void bias_gelu_grad_row_avx512_fma(float* dx, const float* dy, const float* x, const float* b, int64_t n);
/// The same rows in bfloat16, with the unfused ops' bits: the sum rounded to bfloat16, the GELU or its
/// derivative in float as above (dy widened), the result rounded to bfloat16.
void bias_gelu_row_avx512_bf16(bfloat16* y, const bfloat16* x, const bfloat16* b, int64_t n);
void bias_gelu_grad_row_avx512_bf16(bfloat16* dx, const bfloat16* dy, const bfloat16* x, const bfloat16* b,
                                    int64_t n);

/// Whether v3 (GeluCode::Avx512Fma) computes float32 `op` in unary_array_avx512
/// (kernels/cpu/unary_avx512.cpp: exp, log, sqrt, 1/sqrt, tanh, sigmoid); false on other CPU families.
bool has_unary_array_avx512(UnaryOp op);
#if BRIGADE_CPU_X86
/// out[k] = op(a[k]) for k in [0, n), lane-wise (the same bits for any split of an array into calls); only
/// where has_unary_array_avx512(op) and v3 runs.
void unary_array_avx512(UnaryOp op, float* out, const float* a, int64_t n);
#endif
}  // namespace detail

}  // namespace brigade::kernels::cpu
