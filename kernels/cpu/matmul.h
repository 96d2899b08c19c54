// Entry points of the CPU GEMMs, one per version of kernels/matmul_versions.h plus the OpenBLAS baseline,
// all with the arguments and preconditions of cpu::gemm (kernels/backend.h). cpu::gemm itself
// (kernels/cpu/matmul_dispatch.cpp) runs the OpenBLAS baseline under MatmulBackend::Blas and otherwise
// default_matmul_kernel(CPU, dtype). Callers check dtype and CPU support first (cpu::gemm_with does).
#pragma once

#include <string>

#include "kernels/backend.h"

namespace brigade::kernels::cpu {

/// v1 (kernels/cpu/matmul.cpp): packed and blocked, no FMA (the bits of the plain x86-64 build); every dtype.
void gemm_blocked(const GemmArgs& args);

/// v2 (kernels/cpu/matmul_avx2_fma.cpp): BLIS's five loops, 6 x 16 AVX2/FMA micro-kernel; float32 and
/// bfloat16 (widened while packing). Needs avx2 and fma.
void gemm_avx2_fma(const GemmArgs& args);

/// v3 (kernels/cpu/matmul_avx512.cpp): the five loops with a 12 x 32 AVX-512 micro-kernel; float32 and
/// bfloat16 (widened). Needs avx512f.
void gemm_avx512(const GemmArgs& args);

/// v4 (kernels/cpu/matmul_avx512_bf16.cpp): bfloat16 pairs through vdpbf16ps, float accumulation; bfloat16
/// only. Needs avx512f and avx512_bf16.
void gemm_avx512_bf16(const GemmArgs& args);

/// Whether this build links OpenBLAS (CMake option BRIGADE_OPENBLAS).
bool openblas_built();

/// The core whose kernels OpenBLAS picked at load time ("SkylakeX", "Haswell", "Zen", "Prescott", ...; its
/// own spelling); "" in a build without OpenBLAS.
std::string openblas_core();

/// The OPENBLAS_CORETYPE that gives OpenBLAS this CPU's vector kernels ("SkylakeX" with AVX-512, "Haswell"
/// with AVX2 and FMA) where it picked a core without them: an OpenBLAS older than the CPU does not know its
/// model and falls back to its SSE3 "Prescott" kernels (Debian's 0.3.21 on Emerald Rapids runs at a fifth
/// of the speed). "" where its choice already has AVX2 or AVX-512 kernels, or without OpenBLAS.
/// OpenBLAS reads the variable when it loads, so it must be set before the process starts.
std::string openblas_better_core();

/// The rule behind openblas_better_core(), for a core name and a CPU's vector units: "SkylakeX" with
/// AVX-512 (F, BW, DQ, VL), else "Haswell" with AVX2 and FMA, where `core` (any case) is none of OpenBLAS's
/// AVX2 or AVX-512 cores (Haswell, Excavator, Zen, SkylakeX, Cooperlake, SapphireRapids); "" otherwise.
std::string openblas_vector_core_for(std::string core, bool avx512, bool avx2_fma);

/// cblas_sgemm / cblas_dgemm once per batch entry (kernels/cpu/matmul_openblas.cpp): the baseline behind
/// MatmulBackend::Blas; float32 and float64. DeviceError in a build without OpenBLAS, DTypeError for
/// bfloat16 (Debian's OpenBLAS has no bfloat16 GEMM).
void gemm_openblas(const GemmArgs& args);

}  // namespace brigade::kernels::cpu
