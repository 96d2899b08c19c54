// The data-movement primitives every tensor needs: strided copy with dtype conversion, fill, and random
// fill. They live in the tensor layer (not kernels/) because views, contiguous(), to() and the factories
// are built on them. Internal: users call Tensor::copy_, Tensor::fill_, randn, rand.
#pragma once

#include "tensor/generator.h"
#include "tensor/tensor.h"

namespace brigade::detail {

enum class RandomKind { Uniform, Normal };

/// dst = src converted to dst's dtype. Same shape (src may have stride-0 broadcast dims), same device.
void copy_same_device(const Tensor& dst, const Tensor& src);
/// Every element of dst (any strides) = value.
void fill(const Tensor& dst, double value);
/// dst (contiguous) element i = uniform/normal(state.seed, state.offset, i).
void fill_random(const Tensor& dst, RandomKind kind, const GeneratorState& state);

namespace cuda {
void copy_same_device(const Tensor& dst, const Tensor& src);
void fill(const Tensor& dst, double value);
void fill_random(const Tensor& dst, RandomKind kind, const GeneratorState& state);
/// Contiguous bytes between host and device on the current stream of the device side; synchronises that
/// stream when the destination is the host (so the bytes are there when it returns).
void copy_bytes(void* dst, const Device& dst_device, const void* src, const Device& src_device, size_t nbytes);
}  // namespace cuda

}  // namespace brigade::detail
