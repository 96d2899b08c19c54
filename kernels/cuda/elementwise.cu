// Elementwise CUDA kernels: unary (neg, exp, log, sqrt, rsqrt, tanh, sigmoid, relu, gelu, abs) and their
// backward, binary (add ... ge, tensor-tensor and tensor-scalar) and where.
//
// Launch shape: one thread per element, 256 threads per block, grid-stride loop over numel (grid capped at
// kMaxGridBlocks). Every operand is a StridedView: element i in row-major order of the output shape, so
// broadcast (stride 0), transposed and sliced inputs need no copy; contiguous operands skip the index math.
// The op is a kernel argument and the switch on it is uniform across the grid (no divergence).
// Math happens in acc_t: float for float32/bfloat16, double for float64; the scalar formulas are
// kernels/elementwise_formulas.h, the same code as the CPU backend's.
// This is version 1 (ElementwiseKernel::CudaScalar, kernels/elementwise_versions.h). v2 improves: 16-byte
// loads and stores, kernels/cuda/elementwise_vec.cu, which falls back here for the layouts it does not take.
//
// Napkin math (H200, ~4.3 TB/s): memory-bound, ~1 FLOP per byte at most. A float32 unary op over
// N = 64M elements moves 2 x 4 x 64M = 512 MiB -> ~125 us; a binary op 768 MiB -> ~190 us; bfloat16 halves
// the bytes. Strided operands cost integer divisions per dim per element (a few ns of ALU, hidden behind
// memory for <= 4 dims).
#include "kernels/backend.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/v1_launchers.h"
#include "kernels/elementwise_formulas.h"

namespace brigade::kernels::cuda {
namespace {

// The formulas (kernels/elementwise_formulas.h) are shared with the CPU backend; the op is chosen at run time
// by a switch that is uniform across the grid.
using formulas::apply_binary;
using formulas::apply_unary;
using formulas::apply_unary_grad;

// ---- kernels --------------------------------------------------------------------------------------------

template <typename T>
__global__ void unary_kernel(UnaryOp op, StridedView<const T> x, StridedView<T> out, int64_t n) {
  using A = acc_t<T>;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    out[i] = static_cast<T>(apply_unary(op, static_cast<A>(x[i])));
  }
}

/// x_data / y_data may be null when the op does not need them (checked on the host).
template <typename T>
__global__ void unary_backward_kernel(UnaryOp op, StridedView<const T> grad_y, StridedView<const T> x,
                                      StridedView<const T> y, StridedView<T> out, int64_t n) {
  using A = acc_t<T>;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    A xi = x.data != nullptr ? static_cast<A>(x[i]) : A(0);
    A yi = y.data != nullptr ? static_cast<A>(y[i]) : A(0);
    out[i] = static_cast<T>(apply_unary_grad(op, static_cast<A>(grad_y[i]), xi, yi));
  }
}

template <typename T>
__global__ void binary_kernel(BinaryOp op, StridedView<const T> a, StridedView<const T> b, StridedView<T> out,
                              int64_t n) {
  using A = acc_t<T>;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    out[i] = static_cast<T>(apply_binary(op, static_cast<A>(a[i]), static_cast<A>(b[i])));
  }
}

template <typename T>
__global__ void binary_scalar_kernel(BinaryOp op, StridedView<const T> a, acc_t<T> scalar, bool scalar_first,
                                     StridedView<T> out, int64_t n) {
  using A = acc_t<T>;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    A ai = static_cast<A>(a[i]);
    out[i] = static_cast<T>(scalar_first ? apply_binary(op, scalar, ai) : apply_binary(op, ai, scalar));
  }
}

/// Non-zero test that works for every dtype (bfloat16 through its float value).
template <typename C>
__device__ bool is_true(C c) {
  if constexpr (std::is_same_v<C, bfloat16>) {
    return static_cast<float>(c) != 0.0f;
  } else {
    return c != C(0);
  }
}

template <typename C, typename T>
__global__ void where_kernel(StridedView<const C> cond, StridedView<const T> a, StridedView<const T> b,
                             StridedView<T> out, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    out[i] = is_true(cond[i]) ? a[i] : b[i];
  }
}

/// Which of x and y the backward formula of `op` reads.
bool backward_needs_x(UnaryOp op) {
  return formulas::grad_needs_x(op);
}
bool backward_needs_y(UnaryOp op) {
  return formulas::grad_needs_y(op);
}

}  // namespace

// v1 entry points (v1_launchers.h); the backend functions unary, binary, ... are in elementwise_vec.cu.

void unary_v1(UnaryOp op, const Tensor& x, const Tensor& out) {
  const int64_t n = out.numel();
  if (n == 0) return;
  cudaStream_t stream = stream_for(out);
  BRIGADE_DISPATCH_FLOATING(x.dtype(), unary_op_name(op), [&] {
    unary_kernel<scalar_t><<<grid_for(n, kElementwiseThreads), kElementwiseThreads, 0, stream>>>(
        op, make_view<const scalar_t>(x, unary_op_name(op)), make_view<scalar_t>(out, unary_op_name(op)), n);
    BRIGADE_CUDA_CHECK_LAUNCH("unary_kernel");
  });
}

void unary_backward_v1(UnaryOp op, const Tensor& grad_y, const Tensor& x, const Tensor& y,
                       const Tensor& out) {
  const int64_t n = out.numel();
  if (n == 0) return;
  const char* name = unary_op_name(op);
  BRIGADE_CHECK(!backward_needs_x(op) || x.defined(), name, "_backward: the input x is required");
  BRIGADE_CHECK(!backward_needs_y(op) || y.defined(), name, "_backward: the output y is required");
  cudaStream_t stream = stream_for(out);
  BRIGADE_DISPATCH_FLOATING(grad_y.dtype(), name, [&] {
    StridedView<const scalar_t> none{nullptr, StridedIndex{}, true};
    StridedView<const scalar_t> xv = backward_needs_x(op) ? make_view<const scalar_t>(x, name) : none;
    StridedView<const scalar_t> yv = backward_needs_y(op) ? make_view<const scalar_t>(y, name) : none;
    unary_backward_kernel<scalar_t><<<grid_for(n, kElementwiseThreads), kElementwiseThreads, 0, stream>>>(
        op, make_view<const scalar_t>(grad_y, name), xv, yv, make_view<scalar_t>(out, name), n);
    BRIGADE_CUDA_CHECK_LAUNCH("unary_backward_kernel");
  });
}

void binary_v1(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out) {
  const int64_t n = out.numel();
  if (n == 0) return;
  const char* name = binary_op_name(op);
  cudaStream_t stream = stream_for(out);
  BRIGADE_DISPATCH_FLOATING(a.dtype(), name, [&] {
    binary_kernel<scalar_t><<<grid_for(n, kElementwiseThreads), kElementwiseThreads, 0, stream>>>(
        op, make_view<const scalar_t>(a, name), make_view<const scalar_t>(b, name),
        make_view<scalar_t>(out, name), n);
    BRIGADE_CUDA_CHECK_LAUNCH("binary_kernel");
  });
}

void binary_scalar_v1(BinaryOp op, const Tensor& a, double scalar, bool scalar_first, const Tensor& out) {
  const int64_t n = out.numel();
  if (n == 0) return;
  const char* name = binary_op_name(op);
  cudaStream_t stream = stream_for(out);
  BRIGADE_DISPATCH_FLOATING(a.dtype(), name, [&] {
    binary_scalar_kernel<scalar_t><<<grid_for(n, kElementwiseThreads), kElementwiseThreads, 0, stream>>>(
        op, make_view<const scalar_t>(a, name), static_cast<acc_t<scalar_t>>(scalar), scalar_first,
        make_view<scalar_t>(out, name), n);
    BRIGADE_CUDA_CHECK_LAUNCH("binary_scalar_kernel");
  });
}

void where(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out) {
  const int64_t n = out.numel();
  if (n == 0) return;
  cudaStream_t stream = stream_for(out);
  BRIGADE_DISPATCH_ALL(cond.dtype(), "where", [&] {
    using cond_t = scalar_t;
    BRIGADE_DISPATCH_ALL(a.dtype(), "where", [&] {
      where_kernel<cond_t, scalar_t><<<grid_for(n, kElementwiseThreads), kElementwiseThreads, 0, stream>>>(
          make_view<const cond_t>(cond, "where"), make_view<const scalar_t>(a, "where"),
          make_view<const scalar_t>(b, "where"), make_view<scalar_t>(out, "where"), n);
      BRIGADE_CUDA_CHECK_LAUNCH("where_kernel");
    });
  });
}

}  // namespace brigade::kernels::cuda
