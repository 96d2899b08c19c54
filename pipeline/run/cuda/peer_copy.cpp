// Peer copy between GPUs on the consumer's copy stream (cudaMemcpyPeerAsync). One call moves one stage
// boundary: a [b, T, C] activation or gradient, a few MB at most; NVLink or PCIe bandwidth bounds it, not
// the launch.
#include "pipeline/run/peer_copy.h"

#include <cuda_runtime.h>

#include "tensor/cuda/cuda_check.h"
#include "tensor/error.h"

namespace brigade::pipeline::detail {

void peer_copy_async(const Tensor& dst, const Tensor& src, const Stream& stream) {
  BRIGADE_CHECK_DEVICE(dst.device().is_cuda() && src.device().is_cuda(),
                       "peer_copy_async: expected two CUDA tensors, found ", dst.device().str(), " <- ",
                       src.device().str());
  BRIGADE_CHECK_DEVICE(stream.device() == dst.device(), "peer_copy_async: the stream is on ",
                       stream.device().str(), " but the destination is on ", dst.device().str());
  BRIGADE_CHECK_SHAPE(dst.shape() == src.shape() && dst.dtype() == src.dtype(),
                      "peer_copy_async: destination ", shape_str(dst.shape()), " ", dtype_name(dst.dtype()),
                      " and source ", shape_str(src.shape()), " ", dtype_name(src.dtype()), " differ");
  BRIGADE_CHECK_VALUE(dst.is_contiguous() && src.is_contiguous(),
                      "peer_copy_async: both tensors must be contiguous");
  if (src.nbytes() == 0) return;
  cuda_detail::set_device(dst.device().index);
  BRIGADE_CUDA_CHECK(cudaMemcpyPeerAsync(dst.data_ptr(), dst.device().index, src.data_ptr(),
                                         src.device().index, src.nbytes(),
                                         static_cast<cudaStream_t>(stream.native_handle())));
}

}  // namespace brigade::pipeline::detail
