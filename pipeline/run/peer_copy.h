// A copy between two GPUs enqueued on a chosen stream: how the executor moves an activation or a gradient
// to the next stage's device on that stage's copy stream, without blocking the host.
#pragma once

#include "tensor/stream.h"
#include "tensor/tensor.h"

namespace brigade::pipeline::detail {

/// Enqueues dst <- src on `stream` (a stream of dst's device). Both contiguous CUDA tensors with the same
/// shape and dtype, on two GPUs or one. The caller orders `stream` after the producer (Stream::wait on
/// its event) and keeps src alive until the copy has run. DeviceError in a build without CUDA.
void peer_copy_async(const Tensor& dst, const Tensor& src, const Stream& stream);

}  // namespace brigade::pipeline::detail
