// The elementwise kernel versions (unary ops and their backward, binary ops with a tensor or a scalar), on
// each backend (the shape of every kernels/<op>_versions.h: kernels/kernel_versions.h). Every version
// computes each element with the formulas of kernels/elementwise_formulas.h.
#pragma once

#include <vector>

#include "kernels/kernel_versions.h"
#include "kernels/kernels.h"

namespace brigade::kernels {

enum class ElementwiseKernel {
  /// CPU v1 (kernels/cpu/elementwise.cpp): loops over the runs of tensor/strided_loop.h that g++
  /// vectorises; float32 GELU and its gradient through the 4-lane code of kernels/cpu/vector_math.h
  /// (plain x86-64). v2 improves: 8 lanes for GELU.
  CpuBaseline,
  /// CPU v2 (kernels/cpu/elementwise.cpp): v1 with float32 GELU and its gradient on 8 AVX2 lanes, 16 where
  /// the
  /// CPU has AVX-512 (the same bits; the other ops are v1's loops); on CPUs with AVX2 (others run v1); the
  /// CPU default where no v3 runs.
  CpuAvx2,
  /// CPU v3 (kernels/cpu/gelu_avx512.cpp): v2 with float32 GELU and its gradient in AVX-512 intrinsics with
  /// FMAs and a table-driven exp (kernels/cpu/exp_avx512.h): about half v2's instructions, its own bits
  /// (within v2's error bound of the formula); and float32 (and bfloat16) exp, log, sqrt, 1/sqrt, tanh and
  /// sigmoid on 16 lanes (kernels/cpu/unary_avx512.cpp) where v1 and v2 call libm: sqrt and 1/sqrt with
  /// v1's bits, the others their own, within 1-3 ulp of the formula. On CPUs with AVX-512F and FMA (others
  /// run v2, then v1); the CPU default where it runs.
  CpuAvx512,
  /// CUDA v1 (kernels/cuda/elementwise.cu): one element per thread, any strides. v2 improves: 16-byte loads
  /// and stores.
  CudaScalar,
  /// CUDA v2 (kernels/cuda/elementwise_vec.cu): 16-byte loads and stores (4 float, 8 bf16, 2 double) with a
  /// scalar head and tail; contiguous operands, plus broadcast rows (a bias) for binary; other layouts run
  /// v1. The same arithmetic per element as v1: the CUDA default.
  CudaVector128,
};

/// "v1-baseline", "v2-avx2", "v3-avx512" (CPU); "v1-scalar", "v2-vector128" (CUDA).
const char* elementwise_kernel_name(ElementwiseKernel kernel);

/// DeviceKind::CPU or DeviceKind::CUDA.
DeviceKind elementwise_kernel_backend(ElementwiseKernel kernel);

/// Every ElementwiseKernel, in enum order.
const std::vector<ElementwiseKernel>& all_elementwise_kernels();

/// Whether `kernel` runs itself here (CpuAvx2: whether this CPU has AVX2; CpuAvx512: AVX-512F and FMA; the
/// others: always). A version
/// still hands the layouts it does not vectorise to v1 of its backend.
bool elementwise_kernel_supports(ElementwiseKernel kernel);

/// What kernels::unary, unary_backward, binary, add_ and mul_ run on `backend`: the newest CPU version that
/// runs here (CpuAvx512, CpuAvx2, CpuBaseline); CudaVector128.
ElementwiseKernel default_elementwise_kernel(DeviceKind backend);

/// unary, unary_backward, binary, binary_scalar of kernels/backend.h (tensors on the version's backend) by
/// one version.
#define BRIGADE_UNARY_VERSION_FUNCTIONS                                                                 \
  void unary_with(ElementwiseKernel kernel, UnaryOp op, const Tensor& x, const Tensor& out);            \
  void unary_backward_with(ElementwiseKernel kernel, UnaryOp op, const Tensor& grad_y, const Tensor& x, \
                           const Tensor& y, const Tensor& out);
#define BRIGADE_BINARY_VERSION_FUNCTIONS                                                         \
  void binary_with(ElementwiseKernel kernel, BinaryOp op, const Tensor& a, const Tensor& b,      \
                   const Tensor& out);                                                           \
  void binary_scalar_with(ElementwiseKernel kernel, BinaryOp op, const Tensor& a, double scalar, \
                          bool scalar_first, const Tensor& out);
BRIGADE_UNARY_VERSION_FUNCTIONS
BRIGADE_BINARY_VERSION_FUNCTIONS

// The backends' sides of the functions above: `kernel` is a version of that backend. Call those instead.
namespace cpu {
// kernels/cpu/elementwise.cpp (binary and binary_scalar run the same loops in both CPU versions:
// cpu::binary).
BRIGADE_UNARY_VERSION_FUNCTIONS
}  // namespace cpu
namespace cuda {
// kernels/cuda/elementwise_vec.cu
BRIGADE_UNARY_VERSION_FUNCTIONS
BRIGADE_BINARY_VERSION_FUNCTIONS
}  // namespace cuda

}  // namespace brigade::kernels
