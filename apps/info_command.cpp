// `brigade info`: what this build of brigade can do on this machine.
#include <omp.h>

#include <cstdio>
#include <string>
#include <thread>

#include "apps/commands.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/peak_loops.h"
#include "kernels/kernels.h"
#include "kernels/matmul_versions.h"
#include "tensor/memory.h"
#include "tensor/tensor.h"

#if BRIGADE_WITH_CUDA
#include <cuda_runtime.h>
#endif

namespace brigade::apps {

Command add_info_command(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand("info", "Print the build configuration and the devices brigade can use");
  return {
      cmd, [] {
        std::printf("brigade 0.1.0\n");
        std::printf("  C++ standard   : %ld\n", static_cast<long>(__cplusplus));
        std::printf("  CPU threads    : %d OpenMP (hardware: %u)\n", omp_get_max_threads(),
                    std::thread::hardware_concurrency());
        std::printf("  CUDA backend   : %s\n",
                    cuda_compiled() ? "compiled" : "not compiled (BRIGADE_CUDA=OFF or no nvcc)");
#if BRIGADE_WITH_CUDA
        int runtime = 0;
        cudaRuntimeGetVersion(&runtime);
        std::printf("  CUDA runtime   : %d.%d\n", runtime / 1000, (runtime % 1000) / 10);
#endif
        int count = cuda_device_count();
        std::printf("  CUDA devices   : %d%s%s\n", count, count == 0 ? " — " : "",
                    count == 0 ? cuda_unavailable_reason().c_str() : "");
#if BRIGADE_WITH_CUDA
        for (int i = 0; i < count; ++i) {
          cudaDeviceProp prop{};
          if (cudaGetDeviceProperties(&prop, i) != cudaSuccess) continue;
          std::printf("    cuda:%d  %s  sm_%d%d  %d SMs  %.1f GiB\n", i, prop.name, prop.major, prop.minor,
                      prop.multiProcessorCount, static_cast<double>(prop.totalGlobalMem) / (1 << 30));
        }
#endif
        std::printf("  CPU features   : %s\n", kernels::cpu::cpu_features_summary().c_str());
        std::printf("  CPU matmul     : float32 %s, bfloat16 %s (kernels/matmul_versions.h)\n",
                    kernels::matmul_kernel_name(kernels::default_matmul_kernel(DeviceKind::CPU, kFloat32)),
                    kernels::matmul_kernel_name(kernels::default_matmul_kernel(DeviceKind::CPU, kBFloat16)));
        std::printf("  matmul backend : %s (set BRIGADE_MATMUL_BACKEND=native|cublas|blas; OpenBLAS %s)\n",
                    kernels::matmul_backend_name(kernels::matmul_backend()),
                    kernels::blas_available() ? "linked" : "not linked");
        if (const double ratio = kernels::cpu::dpbf16_over_fma(); ratio > 0) {
          std::printf(
              "  vdpbf16ps      : %.2fx the flop rate of zmm FMAs on this core, measured (bfloat16 GEMMs "
              "run on it above 1.25x; below, they widen to float)\n",
              ratio);
        }
        std::printf("  CPU bf16       : %s\n", kernels::cpu::bf16_support_summary().c_str());
        if (kernels::blas_available()) {
          const std::string better = kernels::cpu::openblas_better_core();
          std::printf("  OpenBLAS core  : %s%s%s%s\n", kernels::cpu::openblas_core().c_str(),
                      better.empty() ? "" : " (older than this CPU: run with OPENBLAS_CORETYPE=",
                      better.c_str(), better.empty() ? "" : " for its vector kernels)");
        }
        std::printf("  dtypes         : float32, bfloat16, float64 (CPU), int32, int64\n");
        MemoryStats cpu = memory_stats(Device::cpu());
        std::printf("  CPU memory     : %lld bytes in use, peak %lld\n",
                    static_cast<long long>(cpu.in_use_bytes), static_cast<long long>(cpu.peak_bytes));
        return 0;
      }};
}

}  // namespace brigade::apps
