// Dispatch of the fused causal attention: checks q, k, v (and dout, out, lse for backward), brings every
// [B, H, T, D] input to stride 1 on D (the only layout rule of the backends; a head split made with
// views, e.g. q = qkv.view({B, T, 3, H, D}).permute(...).select(...), is used without a copy), allocates
// the outputs (or checks the caller's, for the *_out forms) and calls cpu:: or cuda::. Degenerate shapes are
// answered here: T == 0 or B * H == 0 give empty results; D == 0 gives an empty out and lse_i = log(i + 1)
// (every score is 0).
#include <cmath>
#include <initializer_list>
#include <utility>

#include "kernels/attention_versions.h"
#include "kernels/backend.h"
#include "kernels/kernels.h"
#include "kernels/op_checks.h"
#include "tensor/grad_mode.h"

namespace brigade::kernels {

namespace {

DType lse_dtype(DType x) {
  return x == kFloat64 ? kFloat64 : kFloat32;
}

void check_operand(const char* op, const char* name, const Tensor& t, const Tensor& q) {
  detail::check_defined(op, name, t);
  detail::check_same_device(op, "q", q, name, t);
  detail::check_same_dtype(op, "q", q, name, t);
  BRIGADE_CHECK_SHAPE(t.shape() == q.shape(), op, ": ", name, " has shape ", shape_str(t.shape()),
                      " but q has shape ", shape_str(q.shape()),
                      " (expected q, k, v, out and dout all [B, H, T, D] alike)");
}

void check_q(const char* op, const Tensor& q) {
  detail::check_defined(op, "q", q);
  detail::check_floating(op, "q", q);
  BRIGADE_CHECK_SHAPE(q.dim() == 4, op, ": expected q [B, H, T, D] (4 dims), found shape ",
                      shape_str(q.shape()));
}

void check_scale(const char* op, double scale) {
  BRIGADE_CHECK_VALUE(std::isfinite(scale), op, ": scale must be finite, found ", scale);
}

/// An output view: q's shape, dtype and device, stride 1 on D, no broadcast dims (written in place).
void check_output(const char* op, const char* name, const Tensor& t, const Tensor& q) {
  check_operand(op, name, t, q);
  BRIGADE_CHECK_VALUE(t.size(-1) <= 1 || t.stride(-1) == 1, op, ": ", name,
                      " must have stride 1 on its last dim (D), found stride ", t.stride(-1));
  detail::check_writable(op, name, t);
}

/// The outputs must not share storage with the inputs: the CPU's AVX-512 version reads q, k, v (and dout,
/// out) where they lie while it writes its outputs, so an output over an input would be read half written.
void check_outputs_apart(const char* op, std::initializer_list<std::pair<const char*, const Tensor*>> outputs,
                         std::initializer_list<std::pair<const char*, const Tensor*>> inputs) {
  for (const auto& [out_name, out] : outputs) {
    if (out->numel() == 0 || !out->storage()) continue;
    for (const auto& [in_name, in] : inputs) {
      BRIGADE_CHECK_VALUE(in->numel() == 0 || out->storage() != in->storage(), op, ": ", out_name,
                          " shares storage with ", in_name, " (outputs must not overlap the inputs)");
    }
  }
}

/// lse: [B, H, T] of q, float32 (float64 for float64 q); contiguous when written.
void check_lse(const char* op, const Tensor& lse, const Tensor& q, bool output) {
  detail::check_defined(op, "lse", lse);
  detail::check_same_device(op, "q", q, "lse", lse);
  const Shape lse_shape{q.size(0), q.size(1), q.size(2)};
  BRIGADE_CHECK_SHAPE(lse.shape() == lse_shape, op, ": lse has shape ", shape_str(lse.shape()),
                      " but expected ", shape_str(lse_shape), " ([B, H, T] of q, which has shape ",
                      shape_str(q.shape()), ")");
  BRIGADE_CHECK_DTYPE(lse.dtype() == lse_dtype(q.dtype()), op, ": lse has dtype ", dtype_name(lse.dtype()),
                      " but expected ", dtype_name(lse_dtype(q.dtype())), " for ", dtype_name(q.dtype()),
                      " q (what causal_attention returns)");
  BRIGADE_CHECK_VALUE(!output || lse.is_contiguous(), op, ": lse must be contiguous (it is written)");
}

/// t itself when its last dim has stride 1 (or size <= 1), else a contiguous copy.
Tensor unit_last_stride(const Tensor& t) {
  return t.size(-1) <= 1 || t.stride(-1) == 1 ? t : t.contiguous();
}

bool empty_problem(const Tensor& q) {
  return q.size(0) * q.size(1) * q.size(2) == 0;
}

/// lse of D == 0: every score is 0, so lse_i = log(i + 1).
void fill_lse_without_features(const Tensor& lse_out) {
  Tensor lse = lse_out;
  const int64_t T = lse.size(2);
  Tensor row = empty({T}, TensorOptions(kFloat64));
  auto* p = row.data<double>();
  for (int64_t i = 0; i < T; ++i) p[i] = std::log(static_cast<double>(i + 1));
  lse.copy_(row.to(lse.dtype()).to(lse.device()).view({1, 1, T}).expand(lse.shape()));
}

}  // namespace

void causal_attention_out(const Tensor& q, const Tensor& k, const Tensor& v, double scale, const Tensor& out,
                          const Tensor& lse, const AttentionDropout& dropout) {
  NoGradGuard no_grad;
  const char* op = "causal_attention";
  check_q(op, q);
  check_operand(op, "k", k, q);
  check_operand(op, "v", v, q);
  check_scale(op, scale);
  check_output(op, "out", out, q);
  check_lse(op, lse, q, /*output=*/true);
  check_attention_dropout_p(op, dropout);
  check_outputs_apart(op, {{"out", &out}, {"lse", &lse}}, {{"q", &q}, {"k", &k}, {"v", &v}});
  if (empty_problem(q)) return;
  if (q.size(3) == 0) {
    fill_lse_without_features(lse);
    return;
  }
  if (dropout.p > 0.0) {
    causal_attention_forward_with(default_attention_kernel(q.device().kind, q.dtype(), q.size(3)),
                                  unit_last_stride(q), unit_last_stride(k), unit_last_stride(v), scale, out,
                                  lse, dropout);
    return;
  }
  BRIGADE_ON_BACKEND(q.device(), causal_attention_forward(unit_last_stride(q), unit_last_stride(k),
                                                          unit_last_stride(v), scale, out, lse));
}

AttentionOutput causal_attention(const Tensor& q, const Tensor& k, const Tensor& v, double scale,
                                 const AttentionDropout& dropout) {
  check_q("causal_attention", q);
  AttentionOutput result{
      empty(q.shape(), detail::output_options(q)),
      empty({q.size(0), q.size(1), q.size(2)}, detail::output_options(q, lse_dtype(q.dtype())))};
  causal_attention_out(q, k, v, scale, result.out, result.lse, dropout);
  return result;
}

void causal_attention_backward_out(const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v,
                                   const Tensor& out, const Tensor& lse, double scale, const Tensor& dq,
                                   const Tensor& dk, const Tensor& dv, const AttentionDropout& dropout) {
  NoGradGuard no_grad;
  const char* op = "causal_attention_backward";
  check_q(op, q);
  check_operand(op, "k", k, q);
  check_operand(op, "v", v, q);
  check_operand(op, "out", out, q);
  check_operand(op, "dout", dout, q);
  check_scale(op, scale);
  check_lse(op, lse, q, /*output=*/false);
  check_output(op, "dq", dq, q);
  check_output(op, "dk", dk, q);
  check_output(op, "dv", dv, q);
  check_attention_dropout_p(op, dropout);
  check_outputs_apart(op, {{"dq", &dq}, {"dk", &dk}, {"dv", &dv}},
                      {{"dout", &dout}, {"q", &q}, {"k", &k}, {"v", &v}, {"out", &out}, {"lse", &lse}});
  if (empty_problem(q) || q.size(3) == 0) return;
  if (dropout.p > 0.0) {
    causal_attention_backward_with(default_attention_kernel(q.device().kind, q.dtype(), q.size(3)),
                                   unit_last_stride(dout), unit_last_stride(q), unit_last_stride(k),
                                   unit_last_stride(v), unit_last_stride(out), lse.contiguous(), scale, dq,
                                   dk, dv, dropout);
    return;
  }
  BRIGADE_ON_BACKEND(
      q.device(), causal_attention_backward(unit_last_stride(dout), unit_last_stride(q), unit_last_stride(k),
                                            unit_last_stride(v), unit_last_stride(out), lse.contiguous(),
                                            scale, dq, dk, dv));
}

AttentionGrads causal_attention_backward(const Tensor& dout, const Tensor& q, const Tensor& k,
                                         const Tensor& v, const Tensor& out, const Tensor& lse, double scale,
                                         const AttentionDropout& dropout) {
  check_q("causal_attention_backward", q);
  const TensorOptions options = detail::output_options(q);
  AttentionGrads grads{empty(q.shape(), options), empty(q.shape(), options), empty(q.shape(), options)};
  causal_attention_backward_out(dout, q, k, v, out, lse, scale, grads.dq, grads.dk, grads.dv, dropout);
  return grads;
}

}  // namespace brigade::kernels
