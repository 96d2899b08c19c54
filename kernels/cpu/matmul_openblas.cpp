// The OpenBLAS baseline behind MatmulBackend::Blas (kernels/cpu/matmul.h): cblas_sgemm / cblas_dgemm, one
// call per batch entry, row-major, on OpenBLAS's own threads. In Debian's OpenMP build (libopenblas0-openmp,
// which scripts/install_deps.sh installs) those are the same OpenMP threads brigade uses, so OpenBLAS follows
// omp_set_num_threads and the two never oversubscribe the cores. Built where CMake finds OpenBLAS
// (BRIGADE_OPENBLAS=AUTO|ON|OFF).
#include <algorithm>
#include <cctype>
#include <string>

#include "kernels/cpu/cpu_features.h"  // BRIGADE_CPU_X86
#include "kernels/cpu/matmul.h"

#ifndef BRIGADE_WITH_OPENBLAS
#define BRIGADE_WITH_OPENBLAS 0
#endif
#if BRIGADE_WITH_OPENBLAS
#include <cblas.h>
#endif

namespace brigade::kernels::cpu {

bool openblas_built() {
  return BRIGADE_WITH_OPENBLAS != 0;
}

std::string openblas_core() {
#if BRIGADE_WITH_OPENBLAS
  const char* name = openblas_get_corename();
  return name != nullptr ? std::string(name) : std::string();
#else
  return {};
#endif
}

std::string openblas_vector_core_for(std::string core, bool avx512, bool avx2_fma) {
  if (core.empty()) return {};
  std::transform(core.begin(), core.end(), core.begin(), [](unsigned char c) { return std::tolower(c); });
  for (const char* vector_core :
       {"haswell", "excavator", "zen", "skylakex", "cooperlake", "sapphirerapids"}) {
    if (core == vector_core) return {};
  }
  if (avx512) return "SkylakeX";
  return avx2_fma ? "Haswell" : "";
}

std::string openblas_better_core() {
  bool avx512 = false, avx2_fma = false;
#if BRIGADE_CPU_X86
  // SkylakeX's kernels use AVX-512 F, BW, DQ and VL, which every AVX-512 core but Xeon Phi has.
  avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
  avx2_fma = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#endif
  return openblas_vector_core_for(openblas_core(), avx512, avx2_fma);
}

void gemm_openblas(const GemmArgs& args) {
#if BRIGADE_WITH_OPENBLAS
  BRIGADE_CHECK_DTYPE(args.dtype == DType::Float32 || args.dtype == DType::Float64,
                      "matmul: the OpenBLAS baseline runs float32 and float64, found ",
                      dtype_name(args.dtype),
                      " (Debian's OpenBLAS has no bfloat16 GEMM; use the native backend)");
  if (args.m <= 0 || args.n <= 0 || args.batch <= 0) return;
  const CBLAS_TRANSPOSE ta = args.trans_a ? CblasTrans : CblasNoTrans;
  const CBLAS_TRANSPOSE tb = args.trans_b ? CblasTrans : CblasNoTrans;
  const auto m = static_cast<blasint>(args.m), n = static_cast<blasint>(args.n),
             k = static_cast<blasint>(args.k);
  const auto lda = static_cast<blasint>(args.lda), ldb = static_cast<blasint>(args.ldb),
             ldc = static_cast<blasint>(args.ldc);
  for (int64_t item = 0; item < args.batch; ++item) {
    if (args.dtype == DType::Float32) {
      const float* a = static_cast<const float*>(args.a) + item * args.stride_a;
      const float* b = static_cast<const float*>(args.b) + item * args.stride_b;
      float* c = static_cast<float*>(args.c) + item * args.stride_c;
      cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, 1.0f, a, lda, b, ldb, 0.0f, c, ldc);
    } else {
      const double* a = static_cast<const double*>(args.a) + item * args.stride_a;
      const double* b = static_cast<const double*>(args.b) + item * args.stride_b;
      double* c = static_cast<double*>(args.c) + item * args.stride_c;
      cblas_dgemm(CblasRowMajor, ta, tb, m, n, k, 1.0, a, lda, b, ldb, 0.0, c, ldc);
    }
  }
#else
  (void)args;
  BRIGADE_THROW(
      DeviceError,
      "matmul: MatmulBackend::Blas needs OpenBLAS, and this build has none (install libopenblas-dev "
      "and reconfigure: scripts/install_deps.sh, CMake option BRIGADE_OPENBLAS)");
#endif
}

}  // namespace brigade::kernels::cpu
