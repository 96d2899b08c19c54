// CUDA data-movement primitives of the tensor layer (declared in tensor/device_ops.h):
//   copy_same_device  dst[i] = convert(src[i]) for every row-major index i, any strides on both sides
//                     (StridedIndex gather/scatter), any pair of the five dtypes; a plain cudaMemcpyAsync
//                     when both sides are contiguous and of one dtype.
//   fill              dst[i] = value, any strides.
//   fill_random       dst[i] = philox::uniform/normal(seed, offset, i): the very formula the CPU uses
//                     (tensor/philox.h), so one seed gives the same numbers on both devices.
//   copy_bytes        host <-> device (and device <-> device) byte copies on the current stream.
//
// Launch shape: one thread per element in a grid-stride loop, 256 threads per block, at most
// kMaxBlocks blocks (enough to fill an H200's 132 SMs many times over; larger tensors loop).
//
// Napkin math (H200, ~4.3 TB/s copy bandwidth): copying 64 Mi float32 elements to bfloat16 moves
// 64 Mi * (4 + 2) B = 403 MB -> ~94 us at the roofline. The strided index costs two 64-bit div/mod per
// non-trivial dim per side, so a 4-d permuted copy is closer to integer-ALU bound (~2-3x the roofline);
// contiguous sides use a 1-d index and stay memory bound. A fill writes N * sizeof(T) bytes (256 MiB in
// ~62 us). Philox4x32-10 is ~10 rounds x 2 mul.hi ~ 40 integer ops per element plus, for normal, a double
// log/sqrt/cos (~100+ FP64 ops): fill_random of float32 is compute bound at roughly 0.2-0.5 ms per
// 64 Mi elements, well off the ~60 us write roofline, which is fine for weight initialisation and dropout.
#include <cuda_runtime.h>

#include <cstring>
#include <type_traits>

#include "tensor/convert.h"
#include "tensor/cuda/cuda_check.h"
#include "tensor/device_ops.h"
#include "tensor/philox.h"
#include "tensor/strided_index.h"

namespace brigade::detail::cuda {

using cuda_detail::current_stream;
using cuda_detail::set_device;

namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 65536;

int blocks_for(int64_t n) {
  int64_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<int>(blocks < kMaxBlocks ? blocks : kMaxBlocks);
}

/// The index of a row-major contiguous tensor: one dim, stride 1 (one div/mod per element instead of one
/// per dim).
StridedIndex linear_index(int64_t numel) {
  StridedIndex index;
  index.ndim = 1;
  index.sizes[0] = numel;
  index.strides[0] = 1;
  return index;
}

template <typename TensorLike>
StridedIndex index_of(const TensorLike& t, const char* op) {
  return t.is_contiguous() ? linear_index(t.numel()) : make_strided_index(t, op);
}

template <typename Dst, typename Src>
__global__ void copy_kernel(Dst* dst, StridedIndex dst_index, const Src* src, StridedIndex src_index,
                            int64_t numel) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < numel; i += step) {
    dst[dst_index.offset(i)] = convert<Dst>(src[src_index.offset(i)]);
  }
}

template <typename T>
__global__ void fill_kernel(T* dst, StridedIndex dst_index, T value, int64_t numel) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < numel; i += step) {
    dst[dst_index.offset(i)] = value;
  }
}

template <typename T>
__global__ void fill_random_kernel(T* dst, StridedIndex dst_index, bool normal, uint64_t seed,
                                   uint64_t offset, int64_t numel) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < numel; i += step) {
    const auto index = static_cast<uint64_t>(i);
    const float value = normal ? philox::normal(seed, offset, index) : philox::uniform(seed, offset, index);
    dst[dst_index.offset(i)] = convert<T>(value);
  }
}

void check_cuda_tensor(const Tensor& t, const char* op, const char* role) {
  BRIGADE_CHECK_DEVICE(t.device().is_cuda(), op, ": expected ", role, " on a CUDA device, found ",
                       t.device().str());
}

bool is_pinned_host(const void* ptr) {
  cudaPointerAttributes attributes{};
  if (cudaPointerGetAttributes(&attributes, ptr) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return attributes.type == cudaMemoryTypeHost;
}

}  // namespace

void copy_same_device(const Tensor& dst, const Tensor& src) {
  constexpr const char* kOp = "copy (CUDA)";
  check_cuda_tensor(dst, kOp, "the destination");
  BRIGADE_CHECK_DEVICE(src.device() == dst.device(), kOp, ": source on ", src.device().str(),
                       ", destination on ", dst.device().str());
  BRIGADE_CHECK_SHAPE(src.shape() == dst.shape(), kOp, ": source shape ", shape_str(src.shape()),
                      " differs from destination shape ", shape_str(dst.shape()));
  const int64_t numel = dst.numel();
  if (numel == 0) return;
  const int device = dst.device().index;
  set_device(device);
  cudaStream_t stream = current_stream(device);

  if (dst.dtype() == src.dtype() && dst.is_contiguous() && src.is_contiguous()) {
    BRIGADE_CUDA_CHECK(
        cudaMemcpyAsync(dst.data_ptr(), src.data_ptr(), dst.nbytes(), cudaMemcpyDeviceToDevice, stream));
    return;
  }
  const StridedIndex dst_index = index_of(dst, kOp);
  const StridedIndex src_index = index_of(src, kOp);
  BRIGADE_DISPATCH_ALL(dst.dtype(), kOp, [&] {
    using dst_t = scalar_t;
    BRIGADE_DISPATCH_ALL(src.dtype(), kOp, [&] {
      using src_t = scalar_t;
      copy_kernel<dst_t, src_t><<<blocks_for(numel), kThreads, 0, stream>>>(
          static_cast<dst_t*>(dst.data_ptr()), dst_index, static_cast<const src_t*>(src.data_ptr()),
          src_index, numel);
      BRIGADE_CUDA_CHECK_LAUNCH("copy_kernel");
    });
  });
}

void fill(const Tensor& dst, double value) {
  constexpr const char* kOp = "fill (CUDA)";
  check_cuda_tensor(dst, kOp, "the tensor");
  const int64_t numel = dst.numel();
  if (numel == 0) return;
  const int device = dst.device().index;
  set_device(device);
  cudaStream_t stream = current_stream(device);
  const StridedIndex index = index_of(dst, kOp);
  BRIGADE_DISPATCH_ALL(dst.dtype(), kOp, [&] {
    // Converted on the host exactly as the CPU fill does (bfloat16 through float).
    scalar_t typed;
    if constexpr (std::is_same_v<scalar_t, bfloat16>) {
      typed = bfloat16(static_cast<float>(value));
    } else {
      typed = static_cast<scalar_t>(value);
    }
    fill_kernel<scalar_t><<<blocks_for(numel), kThreads, 0, stream>>>(static_cast<scalar_t*>(dst.data_ptr()),
                                                                      index, typed, numel);
    BRIGADE_CUDA_CHECK_LAUNCH("fill_kernel");
  });
}

void fill_random(const Tensor& dst, RandomKind kind, const GeneratorState& state) {
  constexpr const char* kOp = "fill_random (CUDA)";
  check_cuda_tensor(dst, kOp, "the tensor");
  const int64_t numel = dst.numel();
  if (numel == 0) return;
  const int device = dst.device().index;
  set_device(device);
  cudaStream_t stream = current_stream(device);
  // Element i is the i-th in row-major order whatever the strides, so any layout gets the same numbers.
  const StridedIndex index = index_of(dst, kOp);
  const bool normal = kind == RandomKind::Normal;
  BRIGADE_DISPATCH_FLOATING(dst.dtype(), kOp, [&] {
    fill_random_kernel<scalar_t><<<blocks_for(numel), kThreads, 0, stream>>>(
        static_cast<scalar_t*>(dst.data_ptr()), index, normal, state.seed, state.offset, numel);
    BRIGADE_CUDA_CHECK_LAUNCH("fill_random_kernel");
  });
}

void copy_bytes(void* dst, const Device& dst_device, const void* src, const Device& src_device,
                size_t nbytes) {
  if (nbytes == 0) return;
  if (dst_device.is_cpu() && src_device.is_cpu()) {
    std::memcpy(dst, src, nbytes);
    return;
  }
  if (dst_device.is_cuda() && src_device.is_cuda()) {
    if (dst_device.index == src_device.index) {
      set_device(dst_device.index);
      BRIGADE_CUDA_CHECK(
          cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyDeviceToDevice, current_stream(dst_device.index)));
      return;
    }
    // Between two GPUs: order after the work queued on both sides, copy on the source's stream, and wait,
    // so that neither side's stream needs to know about the other. Rare path; the pipeline has its own.
    set_device(dst_device.index);
    BRIGADE_CUDA_CHECK(cudaStreamSynchronize(current_stream(dst_device.index)));
    set_device(src_device.index);
    cudaStream_t stream = current_stream(src_device.index);
    BRIGADE_CUDA_CHECK(cudaMemcpyPeerAsync(dst, dst_device.index, src, src_device.index, nbytes, stream));
    BRIGADE_CUDA_CHECK(cudaStreamSynchronize(stream));
    return;
  }
  if (dst_device.is_cuda()) {
    // Host -> device. From pageable memory, wait as well, so the caller may free or reuse the host buffer.
    set_device(dst_device.index);
    cudaStream_t stream = current_stream(dst_device.index);
    BRIGADE_CUDA_CHECK(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyHostToDevice, stream));
    if (!is_pinned_host(src)) BRIGADE_CUDA_CHECK(cudaStreamSynchronize(stream));
    return;
  }
  // Device -> host: the bytes must be there when this returns.
  set_device(src_device.index);
  cudaStream_t stream = current_stream(src_device.index);
  BRIGADE_CUDA_CHECK(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyDeviceToHost, stream));
  BRIGADE_CUDA_CHECK(cudaStreamSynchronize(stream));
}

}  // namespace brigade::detail::cuda
