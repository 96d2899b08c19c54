// The elementwise version registry (kernels/elementwise_versions.h).
#include "kernels/elementwise_versions.h"

#include "kernels/backend.h"

namespace brigade::kernels {

const char* elementwise_kernel_name(ElementwiseKernel kernel) {
  switch (kernel) {
    case ElementwiseKernel::CpuBaseline:
      return "v1-baseline";
    case ElementwiseKernel::CpuAvx2:
      return "v2-avx2";
    case ElementwiseKernel::CpuAvx512:
      return "v3-avx512";
    case ElementwiseKernel::CudaScalar:
      return "v1-scalar";
    case ElementwiseKernel::CudaVector128:
      return "v2-vector128";
  }
  return "?";
}

DeviceKind elementwise_kernel_backend(ElementwiseKernel kernel) {
  return kernel == ElementwiseKernel::CpuBaseline || kernel == ElementwiseKernel::CpuAvx2 ||
                 kernel == ElementwiseKernel::CpuAvx512
             ? DeviceKind::CPU
             : DeviceKind::CUDA;
}

const std::vector<ElementwiseKernel>& all_elementwise_kernels() {
  static const std::vector<ElementwiseKernel> kernels = {
      ElementwiseKernel::CpuBaseline, ElementwiseKernel::CpuAvx2, ElementwiseKernel::CpuAvx512,
      ElementwiseKernel::CudaScalar, ElementwiseKernel::CudaVector128};
  return kernels;
}

bool elementwise_kernel_supports(ElementwiseKernel kernel) {
  if (kernel == ElementwiseKernel::CpuAvx512) return detail::cpu_runs_avx512_fma();
  return kernel != ElementwiseKernel::CpuAvx2 || detail::cpu_runs_avx2();
}

ElementwiseKernel default_elementwise_kernel(DeviceKind backend) {
  if (backend == DeviceKind::CUDA) return ElementwiseKernel::CudaVector128;
  if (detail::cpu_runs_avx512_fma()) return ElementwiseKernel::CpuAvx512;
  return detail::cpu_runs_avx2() ? ElementwiseKernel::CpuAvx2 : ElementwiseKernel::CpuBaseline;
}

void unary_with(ElementwiseKernel kernel, UnaryOp op, const Tensor& x, const Tensor& out) {
  const char* name = elementwise_kernel_name(kernel);
  const DeviceKind backend = elementwise_kernel_backend(kernel);
  detail::check_version_device(unary_op_name(op), name, backend, {&x, &out});
  if (backend == DeviceKind::CPU) return cpu::unary_with(kernel, op, x, out);
  BRIGADE_RUN_CUDA_VERSION(unary_op_name(op), name, unary_with(kernel, op, x, out));
}

void unary_backward_with(ElementwiseKernel kernel, UnaryOp op, const Tensor& grad_y, const Tensor& x,
                         const Tensor& y, const Tensor& out) {
  const char* name = elementwise_kernel_name(kernel);
  const DeviceKind backend = elementwise_kernel_backend(kernel);
  detail::check_version_device(unary_op_name(op), name, backend, {&grad_y, &x, &y, &out});
  if (backend == DeviceKind::CPU) return cpu::unary_backward_with(kernel, op, grad_y, x, y, out);
  BRIGADE_RUN_CUDA_VERSION(unary_op_name(op), name, unary_backward_with(kernel, op, grad_y, x, y, out));
}

void binary_with(ElementwiseKernel kernel, BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out) {
  const char* name = elementwise_kernel_name(kernel);
  const DeviceKind backend = elementwise_kernel_backend(kernel);
  detail::check_version_device(binary_op_name(op), name, backend, {&a, &b, &out});
  if (backend == DeviceKind::CPU) return cpu::binary(op, a, b, out);
  BRIGADE_RUN_CUDA_VERSION(binary_op_name(op), name, binary_with(kernel, op, a, b, out));
}

void binary_scalar_with(ElementwiseKernel kernel, BinaryOp op, const Tensor& a, double scalar,
                        bool scalar_first, const Tensor& out) {
  const char* name = elementwise_kernel_name(kernel);
  const DeviceKind backend = elementwise_kernel_backend(kernel);
  detail::check_version_device(binary_op_name(op), name, backend, {&a, &out});
  if (backend == DeviceKind::CPU) return cpu::binary_scalar(op, a, scalar, scalar_first, out);
  BRIGADE_RUN_CUDA_VERSION(binary_op_name(op), name,
                           binary_scalar_with(kernel, op, a, scalar, scalar_first, out));
}

}  // namespace brigade::kernels
