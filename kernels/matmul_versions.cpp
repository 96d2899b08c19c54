// The matmul version registry (kernels/matmul_versions.h): names, backends, what each version supports,
// the defaults, and gemm_with, which routes a version to its backend.
#include "kernels/matmul_versions.h"

#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/peak_loops.h"

#if BRIGADE_WITH_CUDA
#include "kernels/cuda/matmul.h"
#endif

namespace brigade::kernels {

const char* matmul_kernel_name(MatmulKernel kernel) {
  switch (kernel) {
    case MatmulKernel::CpuBlocked:
      return "v1-blocked";
    case MatmulKernel::CpuAvx2Fma:
      return "v2-avx2-fma";
    case MatmulKernel::CpuAvx512:
      return "v3-avx512";
    case MatmulKernel::CpuAvx512Bf16:
      return "v4-avx512-bf16";
    case MatmulKernel::CudaNaive:
      return "v1-naive";
    case MatmulKernel::CudaTiled:
      return "v2-tiled";
    case MatmulKernel::CudaVectorized:
      return "v3-vectorized";
    case MatmulKernel::CudaWarptiled:
      return "v4-warptiled";
    case MatmulKernel::CudaWmma:
      return "v5-wmma";
    case MatmulKernel::CudaWmmaAsync:
      return "v6-wmma-async";
    case MatmulKernel::CudaMmaSync:
      return "v7-mma-sync";
    case MatmulKernel::CudaWgmma:
      return "v8-wgmma";
  }
  return "?";
}

DeviceKind matmul_kernel_backend(MatmulKernel kernel) {
  switch (kernel) {
    case MatmulKernel::CpuBlocked:
    case MatmulKernel::CpuAvx2Fma:
    case MatmulKernel::CpuAvx512:
    case MatmulKernel::CpuAvx512Bf16:
      return DeviceKind::CPU;
    default:
      return DeviceKind::CUDA;
  }
}

const std::vector<MatmulKernel>& all_matmul_kernels() {
  static const std::vector<MatmulKernel> kernels = {
      MatmulKernel::CpuBlocked,     MatmulKernel::CpuAvx2Fma,    MatmulKernel::CpuAvx512,
      MatmulKernel::CpuAvx512Bf16,  MatmulKernel::CudaNaive,     MatmulKernel::CudaTiled,
      MatmulKernel::CudaVectorized, MatmulKernel::CudaWarptiled, MatmulKernel::CudaWmma,
      MatmulKernel::CudaWmmaAsync,  MatmulKernel::CudaMmaSync,   MatmulKernel::CudaWgmma};
  return kernels;
}

bool matmul_kernel_supports(MatmulKernel kernel, DType dtype) {
  const bool floating = dtype == DType::Float32 || dtype == DType::BFloat16 || dtype == DType::Float64;
  const cpu::CpuFeatures& cpu_has = cpu::cpu_features();
  switch (kernel) {
    case MatmulKernel::CpuAvx2Fma:
      return (dtype == DType::Float32 || dtype == DType::BFloat16) && cpu_has.avx2 && cpu_has.fma;
    case MatmulKernel::CpuAvx512:  // its narrow tiles use ymm FMA3 (every AVX-512 CPU has it)
      return (dtype == DType::Float32 || dtype == DType::BFloat16) && cpu_has.avx512f && cpu_has.fma;
    case MatmulKernel::CpuAvx512Bf16:
      return dtype == DType::BFloat16 && cpu_has.avx512_bf16;
    case MatmulKernel::CpuBlocked:
    case MatmulKernel::CudaNaive:
    case MatmulKernel::CudaTiled:
      return floating;
    case MatmulKernel::CudaVectorized:
    case MatmulKernel::CudaWarptiled:
      return dtype == DType::Float32;
    case MatmulKernel::CudaWmma:
    case MatmulKernel::CudaWmmaAsync:
    case MatmulKernel::CudaMmaSync:
      return dtype == DType::BFloat16;
    case MatmulKernel::CudaWgmma:
#if BRIGADE_WITH_CUDA
      return dtype == DType::BFloat16 && cuda::current_device_runs_wgmma();
#else
      return false;
#endif
  }
  return false;
}

MatmulKernel default_matmul_kernel(DeviceKind backend, DType dtype) {
  if (backend == DeviceKind::CPU) {
    if (dtype == DType::Float64) return MatmulKernel::CpuBlocked;
    // v4 only where vdpbf16ps computes clearly faster than the FMAs that v3 runs on widened bf16: about
    // twice as fast on Zen 4, half as fast on Intel's cores without AMX (kernels/cpu/peak_loops.h measures
    // it, once, ~1 ms, at the first bf16 product). The margin keeps a noisy measurement of a core near 1x
    // from choosing differently between runs (v3 and v4 round differently).
    if (dtype == DType::BFloat16 && cpu::dpbf16_over_fma() > 1.25) return MatmulKernel::CpuAvx512Bf16;
    for (MatmulKernel fastest : {MatmulKernel::CpuAvx512, MatmulKernel::CpuAvx2Fma}) {
      if (matmul_kernel_supports(fastest, dtype)) return fastest;
    }
    return MatmulKernel::CpuBlocked;
  }
  // Measured on an H200 at GPT-2's layer shapes (docs/kernels.md): v7 at 0.35-0.45 of v5's time in
  // bfloat16, v4 at 0.6-0.9 of v2's in float32. cuBLAS (MatmulBackend::Cublas) is faster still.
  if (dtype == DType::BFloat16) return MatmulKernel::CudaMmaSync;
  return dtype == DType::Float32 ? MatmulKernel::CudaWarptiled : MatmulKernel::CudaTiled;
}

void gemm_with(MatmulKernel kernel, const GemmArgs& args) {
  const char* name = matmul_kernel_name(kernel);
  if (matmul_kernel_backend(kernel) == DeviceKind::CPU) {
    BRIGADE_CHECK_DTYPE(matmul_kernel_supports(kernel, args.dtype), "matmul: the CPU kernel '", name,
                        "' does not implement ", dtype_name(args.dtype));
    cpu::gemm_with(kernel, args);
    return;
  }
  BRIGADE_RUN_CUDA_VERSION("matmul", name, gemm_native(args, kernel));
}

}  // namespace brigade::kernels
