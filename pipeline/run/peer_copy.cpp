// The CPU-only build's peer copy: there is no second GPU to copy to (the CUDA build compiles
// pipeline/run/cuda/peer_copy.cpp instead).
#include "pipeline/run/peer_copy.h"

#include "tensor/error.h"

#if !BRIGADE_WITH_CUDA
namespace brigade::pipeline::detail {

void peer_copy_async(const Tensor& dst, const Tensor& src, const Stream&) {
  BRIGADE_THROW(DeviceError, "peer_copy_async: brigade was built without CUDA; cannot copy from ",
                src.device().str(), " to ", dst.device().str());
}

}  // namespace brigade::pipeline::detail
#endif
