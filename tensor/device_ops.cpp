// CPU implementation of the data-movement primitives, and the device dispatch for all three.
#include "tensor/device_ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "tensor/bf16_arrays.h"
#include "tensor/convert.h"
#include "tensor/philox.h"
#include "tensor/random_fill_avx512.h"
#include "tensor/strided_loop.h"

namespace brigade::detail {

namespace {

// Copies and fills move memory and do no math, so a thread team pays off only for large arrays (and a
// team costs far more than its nominal microseconds on a loaded machine): below this many elements (4 MiB
// of float32) they stay on the calling thread. Same as kernels/cpu's kElementwiseGrain.
constexpr int64_t kCopyGrain = int64_t{1} << 20;

#if defined(__GNUC__) && defined(__has_builtin)
#if __has_builtin(__builtin_shufflevector)
#define BRIGADE_TRANSPOSE_4X4 1
#endif
#endif

#ifdef BRIGADE_TRANSPOSE_4X4
using f32x4 = float __attribute__((vector_size(16)));

// out[r + i, c + j] = in[c + j, r + i] for a 4 x 4 block of floats, through registers (4 loads, 8 shuffles,
// 4 stores instead of 16 scalar moves).
inline void transpose_4x4(float* out, int64_t out_row, const float* in, int64_t in_col) {
  f32x4 s[4];
  for (int j = 0; j < 4; ++j) std::memcpy(&s[j], in + j * in_col, sizeof(f32x4));  // s[j][i] = dst(i, j)
  const f32x4 t0 = __builtin_shufflevector(s[0], s[1], 0, 4, 1, 5);
  const f32x4 t1 = __builtin_shufflevector(s[0], s[1], 2, 6, 3, 7);
  const f32x4 t2 = __builtin_shufflevector(s[2], s[3], 0, 4, 1, 5);
  const f32x4 t3 = __builtin_shufflevector(s[2], s[3], 2, 6, 3, 7);
  const f32x4 d[4] = {
      __builtin_shufflevector(t0, t2, 0, 1, 4, 5), __builtin_shufflevector(t0, t2, 2, 3, 6, 7),
      __builtin_shufflevector(t1, t3, 0, 1, 4, 5), __builtin_shufflevector(t1, t3, 2, 3, 6, 7)};
  for (int i = 0; i < 4; ++i) std::memcpy(out + i * out_row, &d[i], sizeof(f32x4));
}
#endif

// dst[i, j] = src[j, i] for a [rows, cols] destination with unit column step whose source walks with unit
// step down the rows: copied in square tiles so that both sides stay in cache (float: 4 x 4 register
// transposes inside a tile).
template <typename To, typename From>
void copy_transposed(To* out, const From* in, int64_t rows, int64_t cols, int64_t out_row, int64_t in_col) {
  constexpr int64_t kTile = 32;
#pragma omp parallel for collapse(2) schedule(static) if (rows * cols >= kCopyGrain)
  for (int64_t r0 = 0; r0 < rows; r0 += kTile) {
    for (int64_t c0 = 0; c0 < cols; c0 += kTile) {
      const int64_t r1 = std::min(rows, r0 + kTile), c1 = std::min(cols, c0 + kTile);
      int64_t r = r0;
#ifdef BRIGADE_TRANSPOSE_4X4
      if constexpr (std::is_same_v<To, float> && std::is_same_v<From, float>) {
        for (; r + 4 <= r1; r += 4) {
          int64_t c = c0;
          for (; c + 4 <= c1; c += 4)
            transpose_4x4(out + r * out_row + c, out_row, in + c * in_col + r, in_col);
          for (; c < c1; ++c) {
            for (int64_t i = 0; i < 4; ++i) out[(r + i) * out_row + c] = in[c * in_col + r + i];
          }
        }
      }
#endif
      for (; r < r1; ++r) {
        for (int64_t c = c0; c < c1; ++c) out[r * out_row + c] = convert<To>(in[c * in_col + r]);
      }
    }
  }
}

template <typename To, typename From>
void copy_typed(const Tensor& dst, const Tensor& src) {
  To* out = static_cast<To*>(dst.data_ptr());
  const From* in = static_cast<const From*>(src.data_ptr());
  const StridedLayout<2> layout = coalesce_dims<2>(dst.shape(), {&dst.strides(), &src.strides()});
  if (layout.sizes.size() == 2 && layout.strides[1][0] == 1 && layout.strides[0][1] == 1 &&
      layout.sizes[0] >= 8 && layout.sizes[1] >= 8) {
    // A transpose (e.g. x.t().contiguous()): src is contiguous down dst's columns.
    copy_transposed(out, in, layout.sizes[0], layout.sizes[1], layout.strides[0][0], layout.strides[1][1]);
    return;
  }
  for_each_run<2>(dst.shape(), {&dst.strides(), &src.strides()}, kCopyGrain,
                  [=](int64_t, int64_t count, const Offsets<2>& off, const Offsets<2>& step) {
                    To* o = out + off[0];
                    const From* a = in + off[1];
                    if (step[0] == 1 && step[1] == 1) {
                      if constexpr (std::is_same_v<To, bfloat16> && std::is_same_v<From, float>) {
                        bf16_from_float_array(o, a, count);  // autocast's casts: 16 lanes where the CPU can
                      } else if constexpr (std::is_same_v<To, float> && std::is_same_v<From, bfloat16>) {
                        float_from_bf16_array(o, a, count);
                      } else {
                        for (int64_t k = 0; k < count; ++k) o[k] = convert<To>(a[k]);
                      }
                    } else if (step[0] == 1 && step[1] == 0) {  // a broadcast source (expand().contiguous())
                      std::fill_n(o, count, convert<To>(a[0]));
                    } else {
                      for (int64_t k = 0; k < count; ++k) o[k * step[0]] = convert<To>(a[k * step[1]]);
                    }
                  });
}

void cpu_copy(const Tensor& dst, const Tensor& src) {
  if (dst.numel() == 0) return;
  if (dst.dtype() == src.dtype() && dst.is_contiguous() && src.is_contiguous()) {
    std::memmove(dst.data_ptr(), src.data_ptr(), dst.nbytes());
    return;
  }
  BRIGADE_DISPATCH_ALL(dst.dtype(), "copy", [&] {
    using dst_t = scalar_t;
    BRIGADE_DISPATCH_ALL(src.dtype(), "copy", [&] { copy_typed<dst_t, scalar_t>(dst, src); });
  });
}

void cpu_fill(const Tensor& dst, double value) {
  if (dst.numel() == 0) return;
  // +0.0 is all zero bits in every dtype (integers, IEEE floats, bfloat16): memset is the fastest fill.
  if (value == 0.0 && !std::signbit(value) && dst.is_contiguous()) {
    std::memset(dst.data_ptr(), 0, dst.nbytes());
    return;
  }
  BRIGADE_DISPATCH_ALL(dst.dtype(), "fill", [&] {
    const scalar_t v = convert<scalar_t>(value);
    scalar_t* out = static_cast<scalar_t*>(dst.data_ptr());
    if (dst.is_contiguous()) {
      std::fill_n(out, dst.numel(), v);
      return;
    }
    for_each_run<1>(dst.shape(), {&dst.strides()}, kCopyGrain,
                    [=](int64_t, int64_t count, const Offsets<1>& off, const Offsets<1>& step) {
                      scalar_t* o = out + off[0];
                      if (step[0] == 1) {
                        std::fill_n(o, count, v);
                      } else {
                        for (int64_t k = 0; k < count; ++k) o[k * step[0]] = v;
                      }
                    });
  });
}

/// Elements per task of the 16-lane fill (a multiple of its lanes).
constexpr int64_t kRandomSpan = 4096;

template <typename T>
void cpu_fill_random_typed(T* out, int64_t n, RandomKind kind, const GeneratorState& state) {
#if defined(__x86_64__) && defined(__GNUC__)
  if constexpr (std::is_same_v<T, float>) {
    static const bool avx512 = __builtin_cpu_supports("avx512f");
    if (avx512) {
      const int64_t spans = (n + kRandomSpan - 1) / kRandomSpan;
#pragma omp parallel for schedule(static) if (n > 65536)
      for (int64_t span = 0; span < spans; ++span) {
        const int64_t first = span * kRandomSpan;
        fill_random_float_avx512(out, first, std::min(kRandomSpan, n - first), kind == RandomKind::Normal,
                                 state.seed, state.offset);
      }
      return;
    }
  }
#endif
#pragma omp parallel for schedule(static) if (n > 65536)
  for (int64_t i = 0; i < n; ++i) {
    float r = kind == RandomKind::Normal
                  ? philox::normal(state.seed, state.offset, static_cast<uint64_t>(i))
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
  BRIGADE_CHECK_DEVICE(dst.device() == src.device(), "copy: destination on ", dst.device().str(),
                       ", source on ", src.device().str());
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
