#include "tensor/device.h"

#include <mutex>

#include "tensor/error.h"

#if BRIGADE_WITH_CUDA
#include <cuda_runtime.h>
#endif

namespace brigade {

Device Device::parse(const std::string& text) {
  if (text == "cpu") return cpu();
  if (text == "cuda") return cuda(0);
  if (text.rfind("cuda:", 0) == 0 && text.size() > 5) {
    const std::string digits = text.substr(5);
    bool numeric = digits.find_first_not_of("0123456789") == std::string::npos && digits.size() < 6;
    if (numeric) return cuda(std::stoi(digits));
  }
  BRIGADE_THROW(DeviceError, "unknown device '", text, "': expected cpu, cuda or cuda:N");
}

std::string Device::str() const { return is_cpu() ? "cpu" : "cuda:" + std::to_string(index); }

std::ostream& operator<<(std::ostream& out, const Device& device) { return out << device.str(); }

bool cuda_compiled() { return BRIGADE_WITH_CUDA != 0; }

namespace {
struct CudaProbe {
  int count = 0;
  std::string reason;
};
const CudaProbe& probe() {
  static const CudaProbe result = [] {
    CudaProbe p;
#if BRIGADE_WITH_CUDA
    cudaError_t status = cudaGetDeviceCount(&p.count);
    if (status != cudaSuccess) {
      (void)cudaGetLastError();
      p.count = 0;
      p.reason = std::string("CUDA runtime reports: ") + cudaGetErrorString(status);
    } else if (p.count == 0) {
      p.reason = "the CUDA runtime found no device";
    }
#else
    p.reason = "brigade was built without CUDA (BRIGADE_CUDA=OFF or no nvcc at configure time)";
#endif
    return p;
  }();
  return result;
}
}  // namespace

int cuda_device_count() { return probe().count; }
std::string cuda_unavailable_reason() { return probe().reason; }

void check_device_exists(const Device& device, const char* op) {
  if (device.is_cpu()) return;
  BRIGADE_CHECK_DEVICE(cuda_compiled(), op, ": brigade was built without CUDA; cannot use ", device.str());
  int count = cuda_device_count();
  BRIGADE_CHECK_DEVICE(device.index >= 0 && device.index < count, op, ": ", device.str(), " does not exist (",
                       count, " CUDA device(s) visible", count == 0 ? ": " + cuda_unavailable_reason() : "", ")");
}

}  // namespace brigade
