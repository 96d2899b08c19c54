// CPU emulation of every CUDA GEMM version through the public dispatcher, cuda::gemm_native(args, kernel)
// (kernels/cuda/matmul.h): the CUDA versions of all_matmul_kernels() (kernels/matmul_versions.h) x the
// dtypes each supports (v1 and v2 in float32, bfloat16
// and float64 too). The kernel files are transformed and compiled as separate translation units by
// run.sh and linked here. Cases: tails, all four trans combinations, batch 2 with B broadcast, aligned and
// misaligned operands, padded C rows that must stay untouched, and K = 0; for v7 also K = 136 (five K steps
// through its three-stage ring); for v8 also K = 300 (five K steps through its four-stage ring) and which
// cases its own kernel takes (wgmma_handles) rather than v6. Tolerances on |c - ref| / sum_k |a b| as
// tests/kernels/matmul_cases.h: float32 1e-5, bfloat16 1e-2, float64 1e-12.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/cuda/matmul.h"
#include "kernels/cuda/matmul_launchers.cuh"
#include "kernels/matmul_versions.h"
#include "tensor/bfloat16.h"

namespace brigade::kernels::cuda {
void gemm_cublas(const GemmArgs&) {
  throw std::runtime_error("cuBLAS is not emulated");
}
}  // namespace brigade::kernels::cuda

namespace brigade::cuda_detail {
cudaStream_t current_stream(int) {
  return nullptr;
}
void set_device(int) {}
}  // namespace brigade::cuda_detail

using namespace brigade;
using namespace brigade::kernels;

/// matmul_kernel_supports, except for v8: the registry in the CPU library (built without CUDA) says no to
/// it; the emulated dispatcher's answer is what counts here.
bool supports(MatmulKernel kernel, DType dtype) {
  if (kernel == MatmulKernel::CudaWgmma) return dtype == kBFloat16 && cuda::current_device_runs_wgmma();
  return matmul_kernel_supports(kernel, dtype);
}

template <typename T>
int check(MatmulKernel kernel, double tol) {
  std::mt19937 rng(7);
  std::normal_distribution<float> nd;
  struct S {
    int m, n, k;
  };
  std::vector<S> shapes = {{1, 1, 1}, {37, 53, 29}, {131, 136, 48}, {130, 260, 33}, {70, 45, 0}};
  // v8 stages K in 64-wide steps through a 4-stage ring: a K of 5+ steps with a tail wraps the ring.
  if (kernel == MatmulKernel::CudaWgmma) shapes.push_back({130, 136, 300});
  // v7 stages K in 32-wide steps through a 3-stage ring: 5 steps with a tail wrap it (one block: cheap).
  if (kernel == MatmulKernel::CudaMmaSync) shapes.push_back({70, 40, 136});
  int failures = 0;
  for (auto s : shapes) {
    for (int flags = 0; flags < 4; ++flags) {
      for (int misalign = 0; misalign < 2; ++misalign) {
        const bool ta = flags & 1, tb = flags & 2;
        const int batch = 2;
        const int ar = ta ? s.k : s.m, ac = ta ? s.m : s.k, br = tb ? s.n : s.k, bc = tb ? s.k : s.n;
        const int lda = misalign ? ac + 3 : (ac + 8) / 8 * 8, ldb = misalign ? bc + 1 : (bc + 8) / 8 * 8;
        const int ldc = s.n + 5;
        std::vector<T> abuf(batch * ar * lda + 16), bbuf(br * ldb + 16), cbuf(batch * s.m * ldc + 16);
        for (auto& v : abuf) v = T(nd(rng));
        for (auto& v : bbuf) v = T(nd(rng));
        auto align = [](T* p) {
          return reinterpret_cast<T*>((reinterpret_cast<uintptr_t>(p) + 15) / 16 * 16);
        };
        T* a = align(abuf.data()) + misalign;
        T* b = align(bbuf.data()) + misalign;
        T* c = align(cbuf.data());
        for (int i = 0; i < batch * s.m * ldc; ++i) c[i] = T(7.f);
        GemmArgs args;
        args.a = a, args.b = b, args.c = c, args.dtype = dtype_of<T>();
        args.m = s.m, args.n = s.n, args.k = s.k, args.lda = lda, args.ldb = ldb, args.ldc = ldc;
        args.trans_a = ta, args.trans_b = tb, args.batch = batch;
        args.stride_a = ar * lda, args.stride_b = 0, args.stride_c = s.m * ldc;
        if (kernel == MatmulKernel::CudaWgmma && s.k > 0) {
          // v8's own kernel takes exactly the K-major, 16-byte aligned cases; v6 runs the rest.
          const bool expected = !ta && tb && !misalign;
          if (cuda::gemm_detail::wgmma_handles(args) != expected) {
            ++failures;
            std::printf("  wgmma_handles ta=%d tb=%d misalign=%d: expected %d FAIL\n", ta, tb, misalign,
                        expected);
          }
        }
        cuda::gemm_native(args, kernel);
        double worst = 0;
        int pad_writes = 0;
        for (int bi = 0; bi < batch; ++bi) {
          for (int i = 0; i < s.m; ++i) {
            for (int j = 0; j < s.n; ++j) {
              double ref = 0, mag = 0;
              for (int p = 0; p < s.k; ++p) {
                const double av =
                    double(ta ? a[bi * ar * lda + p * lda + i] : a[bi * ar * lda + i * lda + p]);
                const double bv = double(tb ? b[j * ldb + p] : b[p * ldb + j]);
                ref += av * bv, mag += std::fabs(av * bv);
              }
              const double got = double(c[bi * s.m * ldc + i * ldc + j]);
              const double err = s.k == 0 ? std::fabs(got) : std::fabs(got - ref) / (mag + 1e-300);
              if (!(err <= worst)) worst = std::isnan(err) ? 1e30 : err;
            }
            for (int j = s.n; j < ldc; ++j) pad_writes += double(c[bi * s.m * ldc + i * ldc + j]) != 7.0;
          }
        }
        if (worst > tol || pad_writes != 0) {
          ++failures;
          std::printf("  %s %s %dx%dx%d ta=%d tb=%d misalign=%d: worst %.3g, pad writes %d FAIL\n",
                      matmul_kernel_name(kernel), dtype_name(dtype_of<T>()), s.m, s.n, s.k, ta, tb, misalign,
                      worst, pad_writes);
        }
      }
    }
  }
  return failures;
}

int main() {
  int failures = 0;
  // EMU_GEMM_ONLY=name (matmul_kernel_name, e.g. v7-mma-sync) runs one version: quicker while working on it.
  const char* only = std::getenv("EMU_GEMM_ONLY");
  for (MatmulKernel kernel : all_matmul_kernels()) {
    if (matmul_kernel_backend(kernel) != DeviceKind::CUDA) continue;
    if (only != nullptr && std::string(only) != matmul_kernel_name(kernel)) continue;
    int f = 0;
    if (supports(kernel, kFloat32)) f += check<float>(kernel, 1e-5);
    if (supports(kernel, kBFloat16)) f += check<bfloat16>(kernel, 1e-2);
    if (supports(kernel, kFloat64)) f += check<double>(kernel, 1e-12);
    std::printf("gemm %s: %d failures\n", matmul_kernel_name(kernel), f);
    failures += f;
  }
  std::printf("gemm emulation (every version, via gemm_native): %d failures\n", failures);
  return failures != 0;
}
