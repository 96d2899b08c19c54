// Elementwise kernels, version 2: unary, unary backward, binary and binary-with-scalar on contiguous tensors
// with 16-byte loads and stores (v1, one element per thread with any strides, is elementwise.cu; the versions
// are registered in kernels/elementwise_versions.h). The backend entry points (kernels/backend.h: unary,
// unary_backward, binary, binary_scalar) live here and run v2, which falls back to v1 for the layouts it
// does not take.
//
//   v2 takes: out contiguous; every input contiguous with out's shape and the same alignment modulo 16 bytes
//   as out ("full" operands, moved in packs), or, for binary only, a broadcast block: element i of the
//   operand is element i % P of a contiguous array of P elements (a bias [F] broadcast over [N, F] rows,
//   P = F; a scalar tensor, P = 1), read one element at a time (it stays in L1/L2).
//
// Launch shape: 256 threads, grid_for_packs blocks (at most 16384), grid-stride over packs of L = 16 /
// sizeof(T) elements (4 float, 8 bfloat16, 2 double): each thread loads one 16-byte word per full operand,
// computes L results and stores one 16-byte word. The elements before out's first 16-byte boundary (the
// head) and after the last whole pack (the tail) go one per thread to the grid's first threads.
// The arithmetic per element is v1's exactly (kernels/elementwise_formulas.h, math in acc_t), so v1 and v2
// give the same bits; only the memory instructions differ. That is why v2 is the default.
//
// Napkin math (H200, ~4.3 TB/s copy): GPT-2 small, N = B T = 8192, C = 768, F = 3072.
//   GELU forward on [N, F] float32: read 4 + write 4 B/elt, 25.2M elt -> 201 MB -> 47 us at copy rate;
//     ~20 FLOP/elt incl. one expf -> 0.5 GFLOP, nowhere near the FP32/SFU roofs. bfloat16: 24 us.
//   GELU backward: read dy, x, write dx: 12 B/elt -> 302 MB -> 70 us.
//   bias add [N, F] + [F]: 8 B/elt -> 47 us; residual add [N, C]: 12 B/elt, 75 MB -> 18 us.
//   Target: >= 85% of the measured copy rate. v1 issues 4-byte (2-byte for bf16) accesses: 4x
//   (8x) the memory instructions of v2 for the same bytes. Not yet measured on a GPU.
#include <vector>

#include "kernels/backend.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/v1_launchers.h"
#include "kernels/cuda/vec128.cuh"
#include "kernels/elementwise_formulas.h"
#include "kernels/elementwise_versions.h"

namespace brigade::kernels::cuda {
namespace {

using formulas::apply_binary;
using formulas::apply_unary;
using formulas::apply_unary_grad;

/// An input of a binary op: period 0: element i is data[i] (moved in packs); period P > 0: element i is
/// data[i % P] (a broadcast block, read element by element).
template <typename T>
struct Operand {
  const T* data;
  int64_t period;

  __device__ __forceinline__ T at(int64_t i) const { return period == 0 ? data[i] : data[i % period]; }

  template <int L>
  __device__ __forceinline__ Pack<T, L> pack_at(int64_t i) const {
    if (period == 0) return load_pack<L>(data + i);
    Pack<T, L> p;
    int64_t j = i % period;  // one division per pack; the next elements step and wrap
#pragma unroll
    for (int k = 0; k < L; ++k) {
      p.v[k] = data[j];
      j = j + 1 == period ? 0 : j + 1;
    }
    return p;
  }
};

template <typename T>
__global__ void unary_vec_kernel(UnaryOp op, const T* x, T* out, GridPacks range) {
  using A = acc_t<T>;
  constexpr int L = kPack128<T>;
  range.run<L>([&](int64_t i) { out[i] = static_cast<T>(apply_unary(op, static_cast<A>(x[i]))); },
               [&](int64_t i) {
                 Pack<T, L> p = load_pack<L>(x + i);
#pragma unroll
                 for (int k = 0; k < L; ++k) p.v[k] = static_cast<T>(apply_unary(op, static_cast<A>(p.v[k])));
                 store_pack<L>(out + i, p);
               });
}

/// x and y are null when the formula does not read them (formulas::grad_needs_x/y).
template <typename T>
__global__ void unary_backward_vec_kernel(UnaryOp op, const T* grad_y, const T* x, const T* y, T* out,
                                          GridPacks range) {
  using A = acc_t<T>;
  constexpr int L = kPack128<T>;
  range.run<L>(
      [&](int64_t i) {
        const A xi = x != nullptr ? static_cast<A>(x[i]) : A(0);
        const A yi = y != nullptr ? static_cast<A>(y[i]) : A(0);
        out[i] = static_cast<T>(apply_unary_grad(op, static_cast<A>(grad_y[i]), xi, yi));
      },
      [&](int64_t i) {
        const Pack<T, L> g = load_pack<L>(grad_y + i);
        Pack<T, L> xp{}, yp{};
        if (x != nullptr) xp = load_pack<L>(x + i);
        if (y != nullptr) yp = load_pack<L>(y + i);
        Pack<T, L> r;
#pragma unroll
        for (int k = 0; k < L; ++k) {
          const A xi = x != nullptr ? static_cast<A>(xp.v[k]) : A(0);
          const A yi = y != nullptr ? static_cast<A>(yp.v[k]) : A(0);
          r.v[k] = static_cast<T>(apply_unary_grad(op, static_cast<A>(g.v[k]), xi, yi));
        }
        store_pack<L>(out + i, r);
      });
}

/// out may be a's memory (in-place accumulation): each element is read before it is written, by one thread.
template <typename T>
__global__ void binary_vec_kernel(BinaryOp op, Operand<T> a, Operand<T> b, T* out, GridPacks range) {
  using A = acc_t<T>;
  constexpr int L = kPack128<T>;
  range.run<L>(
      [&](int64_t i) {
        out[i] = static_cast<T>(apply_binary(op, static_cast<A>(a.at(i)), static_cast<A>(b.at(i))));
      },
      [&](int64_t i) {
        const Pack<T, L> pa = a.template pack_at<L>(i);
        const Pack<T, L> pb = b.template pack_at<L>(i);
        Pack<T, L> r;
#pragma unroll
        for (int k = 0; k < L; ++k) {
          r.v[k] = static_cast<T>(apply_binary(op, static_cast<A>(pa.v[k]), static_cast<A>(pb.v[k])));
        }
        store_pack<L>(out + i, r);
      });
}

template <typename T>
__global__ void binary_scalar_vec_kernel(BinaryOp op, const T* a, acc_t<T> scalar, bool scalar_first, T* out,
                                         GridPacks range) {
  using A = acc_t<T>;
  constexpr int L = kPack128<T>;
  auto f = [&](T v) {
    const A x = static_cast<A>(v);
    return static_cast<T>(scalar_first ? apply_binary(op, scalar, x) : apply_binary(op, x, scalar));
  };
  range.run<L>([&](int64_t i) { out[i] = f(a[i]); },
               [&](int64_t i) {
                 Pack<T, L> p = load_pack<L>(a + i);
#pragma unroll
                 for (int k = 0; k < L; ++k) p.v[k] = f(p.v[k]);
                 store_pack<L>(out + i, p);
               });
}

// ---- host: which layouts v2 takes -----------------------------------------------------------------------

constexpr int64_t kAlign = 16;

/// 0 when t (expanded to a shape of n elements) is contiguous; P when element i of t is element i % P of a
/// contiguous block of P elements at t's data pointer (leading dims broadcast with stride 0, or of size 1);
/// -1 otherwise.
int64_t operand_period(const Tensor& t, int64_t n) {
  if (t.is_contiguous()) return 0;
  const Shape& shape = t.shape();
  const auto& strides = t.strides();
  int64_t period = 1;
  int64_t d = static_cast<int64_t>(shape.size());
  for (; d > 0; --d) {  // the contiguous trailing dims
    const size_t k = static_cast<size_t>(d - 1);
    if (shape[k] == 1) continue;
    if (strides[k] != period) break;
    period *= shape[k];
  }
  for (int64_t k = 0; k < d; ++k) {  // the leading ones must be broadcast
    if (shape[static_cast<size_t>(k)] != 1 && strides[static_cast<size_t>(k)] != 0) return -1;
  }
  return period == n ? 0 : period;
}

/// The head (elements before out's first 16-byte boundary) when out and every full operand in `full` can be
/// moved in 16-byte packs from there; -1 when v2 does not take this call.
int64_t vec_head(const Tensor& out, std::initializer_list<const Tensor*> full) {
  if (!out.is_contiguous()) return -1;
  const int64_t es = static_cast<int64_t>(dtype_size(out.dtype()));
  const int64_t head = head_elements(out.data_ptr(), es, kAlign);
  for (const Tensor* t : full) {
    if (!t->is_contiguous() || !aligned_at(t->data_ptr(), head, es, kAlign)) return -1;
  }
  return head;
}

template <typename T>
unsigned vec_blocks(int64_t n) {
  return grid_for_packs(n, kPack128<T>, kElementwiseThreads);
}

}  // namespace

void unary_with(ElementwiseKernel kernel, UnaryOp op, const Tensor& x, const Tensor& out) {
  const int64_t n = out.numel();
  if (n == 0) return;
  const int64_t head = kernel == ElementwiseKernel::CudaVector128 ? vec_head(out, {&x}) : -1;
  if (head < 0) return unary_v1(op, x, out);
  cudaStream_t stream = stream_for(out);
  BRIGADE_DISPATCH_FLOATING(x.dtype(), unary_op_name(op), [&] {
    unary_vec_kernel<scalar_t><<<vec_blocks<scalar_t>(n), kElementwiseThreads, 0, stream>>>(
        op, x.data<scalar_t>(), out.data<scalar_t>(), GridPacks{n, head});
    BRIGADE_CUDA_CHECK_LAUNCH("unary_vec_kernel");
  });
}

void unary_backward_with(ElementwiseKernel kernel, UnaryOp op, const Tensor& grad_y, const Tensor& x,
                         const Tensor& y, const Tensor& out) {
  const int64_t n = out.numel();
  if (n == 0) return;
  const bool needs_x = formulas::grad_needs_x(op), needs_y = formulas::grad_needs_y(op);
  const char* name = unary_op_name(op);
  BRIGADE_CHECK(!needs_x || x.defined(), name, "_backward: the input x is required");
  BRIGADE_CHECK(!needs_y || y.defined(), name, "_backward: the output y is required");
  int64_t head = -1;
  if (kernel == ElementwiseKernel::CudaVector128) {
    head = needs_x && needs_y ? vec_head(out, {&grad_y, &x, &y})
           : needs_x          ? vec_head(out, {&grad_y, &x})
           : needs_y          ? vec_head(out, {&grad_y, &y})
                              : vec_head(out, {&grad_y});
  }
  if (head < 0) return unary_backward_v1(op, grad_y, x, y, out);
  cudaStream_t stream = stream_for(out);
  BRIGADE_DISPATCH_FLOATING(grad_y.dtype(), name, [&] {
    unary_backward_vec_kernel<scalar_t><<<vec_blocks<scalar_t>(n), kElementwiseThreads, 0, stream>>>(
        op, grad_y.data<scalar_t>(), needs_x ? x.data<scalar_t>() : nullptr,
        needs_y ? y.data<scalar_t>() : nullptr, out.data<scalar_t>(), GridPacks{n, head});
    BRIGADE_CUDA_CHECK_LAUNCH("unary_backward_vec_kernel");
  });
}

void binary_with(ElementwiseKernel kernel, BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out) {
  const int64_t n = out.numel();
  if (n == 0) return;
  int64_t head = -1;
  const int64_t period_a = operand_period(a, n), period_b = operand_period(b, n);
  if (kernel == ElementwiseKernel::CudaVector128 && period_a >= 0 && period_b >= 0) {
    head = period_a == 0 && period_b == 0 ? vec_head(out, {&a, &b})
           : period_a == 0                ? vec_head(out, {&a})
           : period_b == 0                ? vec_head(out, {&b})
                                          : vec_head(out, {});
  }
  if (head < 0) return binary_v1(op, a, b, out);
  cudaStream_t stream = stream_for(out);
  BRIGADE_DISPATCH_FLOATING(out.dtype(), binary_op_name(op), [&] {
    binary_vec_kernel<scalar_t><<<vec_blocks<scalar_t>(n), kElementwiseThreads, 0, stream>>>(
        op, Operand<scalar_t>{a.data<scalar_t>(), period_a}, Operand<scalar_t>{b.data<scalar_t>(), period_b},
        out.data<scalar_t>(), GridPacks{n, head});
    BRIGADE_CUDA_CHECK_LAUNCH("binary_vec_kernel");
  });
}

void binary_scalar_with(ElementwiseKernel kernel, BinaryOp op, const Tensor& a, double scalar,
                        bool scalar_first, const Tensor& out) {
  const int64_t n = out.numel();
  if (n == 0) return;
  const int64_t head = kernel == ElementwiseKernel::CudaVector128 ? vec_head(out, {&a}) : -1;
  if (head < 0) return binary_scalar_v1(op, a, scalar, scalar_first, out);
  cudaStream_t stream = stream_for(out);
  BRIGADE_DISPATCH_FLOATING(out.dtype(), binary_op_name(op), [&] {
    binary_scalar_vec_kernel<scalar_t><<<vec_blocks<scalar_t>(n), kElementwiseThreads, 0, stream>>>(
        op, a.data<scalar_t>(), static_cast<acc_t<scalar_t>>(scalar), scalar_first, out.data<scalar_t>(),
        GridPacks{n, head});
    BRIGADE_CUDA_CHECK_LAUNCH("binary_scalar_vec_kernel");
  });
}

// ---- the backend entry points ----------------------------------------------------------------------------

void unary(UnaryOp op, const Tensor& x, const Tensor& out) {
  cuda::unary_with(default_elementwise_kernel(DeviceKind::CUDA), op, x, out);
}

void unary_backward(UnaryOp op, const Tensor& grad_y, const Tensor& x, const Tensor& y, const Tensor& out) {
  cuda::unary_backward_with(default_elementwise_kernel(DeviceKind::CUDA), op, grad_y, x, y, out);
}

void binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out) {
  cuda::binary_with(default_elementwise_kernel(DeviceKind::CUDA), op, a, b, out);
}

void binary_scalar(BinaryOp op, const Tensor& a, double scalar, bool scalar_first, const Tensor& out) {
  cuda::binary_scalar_with(default_elementwise_kernel(DeviceKind::CUDA), op, a, scalar, scalar_first, out);
}

}  // namespace brigade::kernels::cuda
