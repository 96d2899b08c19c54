// The causal attention version registry (kernels/attention_versions.h).
#include "kernels/attention_versions.h"

#include "kernels/cpu/cpu_features.h"
#include "tensor/error.h"

namespace brigade::kernels {

const char* attention_kernel_name(AttentionKernel kernel) {
  switch (kernel) {
    case AttentionKernel::CpuBaseline:
      return "v1-baseline";
    case AttentionKernel::CpuAvx2:
      return "v2-avx2";
    case AttentionKernel::CpuAvx512:
      return "v3-avx512-fma";
    case AttentionKernel::CudaSimple:
      return "v1-simple";
    case AttentionKernel::CudaFlash:
      return "v2-flash";
    case AttentionKernel::CudaFlashTensorCore:
      return "v3-flash-tc";
    case AttentionKernel::CudaFlashTensorCoreAsync:
      return "v4-flash-tc-async";
  }
  return "?";
}

DeviceKind attention_kernel_backend(AttentionKernel kernel) {
  const bool cpu = kernel == AttentionKernel::CpuBaseline || kernel == AttentionKernel::CpuAvx2 ||
                   kernel == AttentionKernel::CpuAvx512;
  return cpu ? DeviceKind::CPU : DeviceKind::CUDA;
}

const std::vector<AttentionKernel>& all_attention_kernels() {
  static const std::vector<AttentionKernel> kernels = {AttentionKernel::CpuBaseline,
                                                       AttentionKernel::CpuAvx2,
                                                       AttentionKernel::CpuAvx512,
                                                       AttentionKernel::CudaSimple,
                                                       AttentionKernel::CudaFlash,
                                                       AttentionKernel::CudaFlashTensorCore,
                                                       AttentionKernel::CudaFlashTensorCoreAsync};
  return kernels;
}

bool attention_kernel_supports(AttentionKernel kernel, DType dtype, int64_t head_dim) {
  const bool floating = dtype == kFloat32 || dtype == kBFloat16 || dtype == kFloat64;
  const bool flash_dim = head_dim == 64 || head_dim == 128;
  switch (kernel) {
    case AttentionKernel::CpuBaseline:
    case AttentionKernel::CudaSimple:
      return floating;
    case AttentionKernel::CpuAvx2:
      return floating && detail::cpu_runs_avx2();
    case AttentionKernel::CpuAvx512:
      return (dtype == kFloat32 || dtype == kBFloat16) && cpu::cpu_features().avx512f;
    case AttentionKernel::CudaFlash:
      return (dtype == kFloat32 || dtype == kBFloat16) && flash_dim;
    case AttentionKernel::CudaFlashTensorCore:
    case AttentionKernel::CudaFlashTensorCoreAsync:
      return dtype == kBFloat16 && flash_dim;
  }
  return false;
}

AttentionKernel default_attention_kernel(DeviceKind backend, DType dtype, int64_t head_dim) {
  if (backend == DeviceKind::CUDA) {
    // Measured on an H200 at GPT-2's shape (B 8, H 12, T 1024, D 64; docs/kernels.md): forward + backward
    // 1.5 ms for v4 in bfloat16 and 6.6 ms for v2 in float32, against 69 ms for v1.
    for (AttentionKernel fastest : {AttentionKernel::CudaFlashTensorCoreAsync, AttentionKernel::CudaFlash}) {
      if (attention_kernel_supports(fastest, dtype, head_dim)) return fastest;
    }
    return AttentionKernel::CudaSimple;
  }
  // v3 measured at 0.27-0.58 of v2's time at the small GPTs' and GPT-2's shapes (docs/kernels.md).
  if (attention_kernel_supports(AttentionKernel::CpuAvx512, dtype, head_dim))
    return AttentionKernel::CpuAvx512;
  return attention_kernel_supports(AttentionKernel::CpuAvx2, dtype, head_dim) ? AttentionKernel::CpuAvx2
                                                                              : AttentionKernel::CpuBaseline;
}

bool attention_kernel_supports_dropout(AttentionKernel kernel) {
  return attention_kernel_backend(kernel) == DeviceKind::CPU;
}

void check_attention_dropout_p(const char* op, const AttentionDropout& dropout) {
  BRIGADE_CHECK_VALUE(dropout.p >= 0.0 && dropout.p < 1.0, op, ": dropout p must lie in [0, 1), found ",
                      dropout.p);
}

namespace {
void check_dropout(const char* op, AttentionKernel kernel, const AttentionDropout& dropout) {
  check_attention_dropout_p(op, dropout);
  BRIGADE_CHECK_VALUE(dropout.p == 0.0 || attention_kernel_supports_dropout(kernel), op, ": version ",
                      attention_kernel_name(kernel),
                      " has no dropout on the attention weights (p = ", dropout.p,
                      "); the CPU versions have it, and on CUDA the weights' dropout runs unfused");
}
}  // namespace

void causal_attention_forward_with(AttentionKernel kernel, const Tensor& q, const Tensor& k, const Tensor& v,
                                   double scale, const Tensor& out, const Tensor& lse,
                                   const AttentionDropout& dropout) {
  const char* name = attention_kernel_name(kernel);
  const DeviceKind backend = attention_kernel_backend(kernel);
  detail::check_version_device("causal_attention", name, backend, {&q, &k, &v, &out, &lse});
  check_dropout("causal_attention", kernel, dropout);
  if (backend == DeviceKind::CPU) {
    return cpu::causal_attention_forward_with(kernel, q, k, v, scale, out, lse, dropout);
  }
  BRIGADE_RUN_CUDA_VERSION("causal_attention", name,
                           causal_attention_forward_with(kernel, q, k, v, scale, out, lse));
}

void causal_attention_backward_with(AttentionKernel kernel, const Tensor& dout, const Tensor& q,
                                    const Tensor& k, const Tensor& v, const Tensor& out, const Tensor& lse,
                                    double scale, const Tensor& dq, const Tensor& dk, const Tensor& dv,
                                    const AttentionDropout& dropout) {
  const char* name = attention_kernel_name(kernel);
  const DeviceKind backend = attention_kernel_backend(kernel);
  detail::check_version_device("causal_attention_backward", name, backend,
                               {&dout, &q, &k, &v, &out, &lse, &dq, &dk, &dv});
  check_dropout("causal_attention_backward", kernel, dropout);
  if (backend == DeviceKind::CPU) {
    return cpu::causal_attention_backward_with(kernel, dout, q, k, v, out, lse, scale, dq, dk, dv, dropout);
  }
  BRIGADE_RUN_CUDA_VERSION(
      "causal_attention_backward", name,
      causal_attention_backward_with(kernel, dout, q, k, v, out, lse, scale, dq, dk, dv));
}

}  // namespace brigade::kernels
