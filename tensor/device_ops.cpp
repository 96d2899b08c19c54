// CPU implementation of the data-movement primitives, and the device dispatch for all three.
#include "tensor/device_ops.h"

#include <algorithm>
#include <cstring>

#include "tensor/philox.h"
#include "tensor/strided_loop.h"

namespace brigade::detail {

namespace {

template <typename To, typename From>
To convert(From value) {
  if constexpr (std::is_same_v<To, From>) {
    return value;
  } else if constexpr (std::is_same_v<To, bfloat16>) {
    return bfloat16(static_cast<float>(value));
  } else if constexpr (std::is_same_v<From, bfloat16>) {
    return static_cast<To>(static_cast<float>(value));
  } else {
    return static_cast<To>(value);
  }
}

void cpu_copy(const Tensor& dst, const Tensor& src) {
  if (dst.numel() == 0) return;
  if (dst.dtype() == src.dtype() && dst.is_contiguous() && src.is_contiguous()) {
    std::memmove(dst.data_ptr(), src.data_ptr(), dst.nbytes());
    return;
  }
  BRIGADE_DISPATCH_ALL(dst.dtype(), "copy", [&] {
    using dst_t = scalar_t;
    dst_t* out = static_cast<dst_t*>(dst.data_ptr());
    BRIGADE_DISPATCH_ALL(src.dtype(), "copy", [&] {
      const scalar_t* in = static_cast<const scalar_t*>(src.data_ptr());
      for_each_offsets<2>(dst.shape(), {&dst.strides(), &src.strides()},
                          [=](int64_t, int64_t o_dst, int64_t o_src) { out[o_dst] = convert<dst_t>(in[o_src]); });
    });
  });
}

void cpu_fill(const Tensor& dst, double value) {
  if (dst.numel() == 0) return;
  BRIGADE_DISPATCH_ALL(dst.dtype(), "fill", [&] {
    scalar_t v = convert<scalar_t>(value);
    scalar_t* out = static_cast<scalar_t*>(dst.data_ptr());
    for_each_offsets<1>(dst.shape(), {&dst.strides()}, [=](int64_t, int64_t o) { out[o] = v; });
  });
}

template <typename T>
void cpu_fill_random_typed(T* out, int64_t n, RandomKind kind, const GeneratorState& state) {
#pragma omp parallel for schedule(static) if (n > 65536)
  for (int64_t i = 0; i < n; ++i) {
    float r = kind == RandomKind::Normal ? philox::normal(state.seed, state.offset, static_cast<uint64_t>(i))
                                         : philox::uniform(state.seed, state.offset, static_cast<uint64_t>(i));
    out[i] = convert<T>(r);
  }
}

void cpu_fill_random(const Tensor& dst, RandomKind kind, const GeneratorState& state) {
  BRIGADE_DISPATCH_FLOATING(dst.dtype(), "fill_random", [&] {
    cpu_fill_random_typed(static_cast<scalar_t*>(dst.data_ptr()), dst.numel(), kind, state);
  });
}

void check_same_shape(const Tensor& dst, const Tensor& src) {
  BRIGADE_CHECK_SHAPE(dst.shape() == src.shape(), "copy: destination shape ", shape_str(dst.shape()),
                      " differs from source shape ", shape_str(src.shape()));
  BRIGADE_CHECK_DEVICE(dst.device() == src.device(), "copy: destination on ", dst.device().str(), ", source on ",
                       src.device().str());
}

}  // namespace

void copy_same_device(const Tensor& dst, const Tensor& src) {
  check_same_shape(dst, src);
  if (dst.device().is_cuda()) {
#if BRIGADE_WITH_CUDA
    cuda::copy_same_device(dst, src);
    return;
#endif
  }
  cpu_copy(dst, src);
}

void fill(const Tensor& dst, double value) {
  if (dst.device().is_cuda()) {
#if BRIGADE_WITH_CUDA
    cuda::fill(dst, value);
    return;
#endif
  }
  cpu_fill(dst, value);
}

void fill_random(const Tensor& dst, RandomKind kind, const GeneratorState& state) {
  BRIGADE_CHECK(dst.is_contiguous(), "fill_random: destination must be contiguous");
  if (dst.device().is_cuda()) {
#if BRIGADE_WITH_CUDA
    cuda::fill_random(dst, kind, state);
    return;
#endif
  }
  cpu_fill_random(dst, kind, state);
}

}  // namespace brigade::detail
