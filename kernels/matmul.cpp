// kernels::matmul: validation, layout normalisation and dispatch to cpu::gemm / cuda::gemm.
//
// Layouts. A GEMM backend reads a matrix through (pointer, leading dim, trans flag). An operand whose last
// two dims are row-major (unit stride along the last dim) is passed as it is; one that is column-major
// (unit stride along the second-to-last dim, e.g. x.transpose(-2, -1) of a contiguous x) is the row-major
// storage of its transpose, so it is passed with its trans flag flipped — no copy either way. Anything
// else (e.g. a slice with step 2 along the last dim) is made contiguous first.
//
// The matmul backend switch (Native | Cublas | Blas) is one process-wide atomic: Cublas changes what CUDA
// matmuls run, Blas what CPU matmuls run. Its initial value comes from the environment variable
//   BRIGADE_MATMUL_BACKEND=native|cublas|blas   (unset: native; "openblas" is read as blas)
// read once, on first use.
#include "kernels/cpu/matmul.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdlib>
#include <string>

#include "kernels/backend.h"
#include "kernels/kernels.h"

namespace brigade::kernels {
namespace {

MatmulBackend backend_from_environment() {
  const char* value = std::getenv("BRIGADE_MATMUL_BACKEND");
  if (value == nullptr || *value == '\0') return MatmulBackend::Native;
  std::string text(value);
  std::transform(text.begin(), text.end(), text.begin(), [](unsigned char ch) { return std::tolower(ch); });
  if (text == "native") return MatmulBackend::Native;
  if (text == "cublas") return MatmulBackend::Cublas;
  if (text == "blas" || text == "openblas") {
    BRIGADE_CHECK_DEVICE(cpu::openblas_built(), "BRIGADE_MATMUL_BACKEND=", value,
                         ": this build has no OpenBLAS (install libopenblas-dev and reconfigure)");
    return MatmulBackend::Blas;
  }
  BRIGADE_THROW(ValueError, "BRIGADE_MATMUL_BACKEND: expected 'native', 'cublas' or 'blas', found '", value,
                "'");
}

std::atomic<MatmulBackend>& backend_slot() {
  static std::atomic<MatmulBackend> slot{backend_from_environment()};
  return slot;
}

/// One operand as a backend sees it: the (batched) storage of op(X) in BLAS terms.
struct GemmOperand {
  Tensor storage;  // keeps a contiguous copy alive when one was needed
  const void* data = nullptr;
  int64_t ld = 0;
  bool trans = false;
  int64_t batch_stride = 0;
};

// `x` is [R, C] or [B, R, C] and is used as op(x) = trans ? x^T : x.
GemmOperand normalise(const Tensor& x, bool trans) {
  const int64_t rows = x.size(-2), cols = x.size(-1);
  const int64_t row_stride = x.stride(-2), col_stride = x.stride(-1);
  // The stride of a size-1 dim never moves the pointer, so such a dim fits any layout; its leading
  // dimension is then reported as the smallest legal one (BLAS requires ld >= the row length, >= 1).
  const bool row_major =
      (cols <= 1 || col_stride == 1) && (rows <= 1 || row_stride >= std::max<int64_t>(cols, 1));
  const bool col_major =
      (rows <= 1 || row_stride == 1) && (cols <= 1 || col_stride >= std::max<int64_t>(rows, 1));
  GemmOperand out;
  if (row_major) {
    out.storage = x;
    out.ld = rows <= 1 ? std::max<int64_t>(cols, 1) : row_stride;
    out.trans = trans;
  } else if (col_major) {
    out.storage = x;  // x is the row-major storage of x^T ([C, R], leading dim col_stride)
    out.ld = cols <= 1 ? std::max<int64_t>(rows, 1) : col_stride;
    out.trans = !trans;
  } else {
    out.storage = x.contiguous();
    out.ld = std::max<int64_t>(cols, 1);
    out.trans = trans;
  }
  out.data = out.storage.data_ptr();
  out.batch_stride = x.dim() == 3 ? out.storage.stride(0) : 0;
  return out;
}

}  // namespace

void set_matmul_backend(MatmulBackend backend) {
  BRIGADE_CHECK_DEVICE(backend != MatmulBackend::Blas || cpu::openblas_built(),
                       "set_matmul_backend(Blas): this build has no OpenBLAS (install libopenblas-dev and "
                       "reconfigure)");
  backend_slot().store(backend);
}

MatmulBackend matmul_backend() {
  return backend_slot().load();
}

const char* matmul_backend_name(MatmulBackend backend) {
  switch (backend) {
    case MatmulBackend::Native:
      return "native";
    case MatmulBackend::Cublas:
      return "cublas";
    case MatmulBackend::Blas:
      return "blas";
  }
  return "?";
}

bool blas_available() {
  return cpu::openblas_built();
}

namespace {

/// matmul and matmul_bias: op(a) @ op(b), plus `bias` [N] on every row when it is defined (checked by the
/// caller).
Tensor matmul_impl(const Tensor& a, const Tensor& b, const Tensor& bias, bool transpose_a, bool transpose_b) {
  BRIGADE_CHECK_VALUE(a.defined() && b.defined(), "matmul: both operands must be defined tensors");
  BRIGADE_CHECK_SHAPE((a.dim() == 2 || a.dim() == 3) && (b.dim() == 2 || b.dim() == 3),
                      "matmul: expected 2-d or 3-d operands, found a ", shape_str(a.shape()), " and b ",
                      shape_str(b.shape()));
  BRIGADE_CHECK_DTYPE(a.dtype() == b.dtype(), "matmul: operands must share a dtype, found a ",
                      dtype_name(a.dtype()), " and b ", dtype_name(b.dtype()));
  BRIGADE_CHECK_DTYPE(is_floating(a.dtype()), "matmul: expected float32, bfloat16 or float64, found ",
                      dtype_name(a.dtype()));
  BRIGADE_CHECK_DEVICE(a.device() == b.device(), "matmul: operands must be on one device, found a on ",
                       a.device().str(), " and b on ", b.device().str());

  const int64_t m = transpose_a ? a.size(-1) : a.size(-2);
  const int64_t k_a = transpose_a ? a.size(-2) : a.size(-1);
  const int64_t k_b = transpose_b ? b.size(-1) : b.size(-2);
  const int64_t n = transpose_b ? b.size(-2) : b.size(-1);
  BRIGADE_CHECK_SHAPE(k_a == k_b, "matmul: inner dims do not match: a ", shape_str(a.shape()),
                      transpose_a ? " (transposed)" : "", " has K = ", k_a, ", b ", shape_str(b.shape()),
                      transpose_b ? " (transposed)" : "", " has K = ", k_b);
  const bool batched = a.dim() == 3 || b.dim() == 3;
  int64_t batch = 1;
  if (a.dim() == 3 && b.dim() == 3) {
    BRIGADE_CHECK_SHAPE(a.size(0) == b.size(0), "matmul: batch sizes differ: a ", shape_str(a.shape()),
                        " and b ", shape_str(b.shape()), " (", a.size(0), " vs ", b.size(0), ")");
    batch = a.size(0);
  } else if (a.dim() == 3) {
    batch = a.size(0);
  } else if (b.dim() == 3) {
    batch = b.size(0);
  }

  const TensorOptions options = TensorOptions().dtype(a.dtype()).device(a.device());
  const Shape out_shape = batched ? Shape{batch, m, n} : Shape{m, n};
  if (bias.defined()) {
    BRIGADE_CHECK_SHAPE(bias.dim() == 1 && bias.size(0) == n, "matmul_bias: expected a bias of shape [", n,
                        "] (the product's columns), found ", shape_str(bias.shape()));
    BRIGADE_CHECK_DTYPE(bias.dtype() == a.dtype(), "matmul_bias: the bias must have the operands' dtype ",
                        dtype_name(a.dtype()), ", found ", dtype_name(bias.dtype()));
    BRIGADE_CHECK_DEVICE(bias.device() == a.device(), "matmul_bias: the bias must be on ", a.device().str(),
                         " with the operands, found ", bias.device().str());
  }
  if (batch == 0 || m == 0 || n == 0) return empty(out_shape, options);
  if (k_a == 0) {  // an empty sum
    Tensor out = zeros(out_shape, options);
    return bias.defined() ? binary(BinaryOp::Add, out, bias) : out;
  }

  const GemmOperand lhs = normalise(a, transpose_a);
  const GemmOperand rhs = normalise(b, transpose_b);
  Tensor out = empty(out_shape, options);

  GemmArgs args;
  args.a = lhs.data;
  args.b = rhs.data;
  args.c = out.data_ptr();
  args.dtype = a.dtype();
  args.m = m;
  args.n = n;
  args.k = k_a;
  args.lda = lhs.ld;
  args.ldb = rhs.ld;
  args.ldc = n;
  args.trans_a = lhs.trans;
  args.trans_b = rhs.trans;
  args.batch = batch;
  args.stride_a = lhs.batch_stride;
  args.stride_b = rhs.batch_stride;
  args.stride_c = m * n;
  const Tensor bias_values = bias.defined() ? bias.contiguous() : Tensor();
  // The CPU GEMMs add the bias as they store C; elsewhere it is an add of its own after the product.
  const bool bias_in_gemm = bias.defined() && a.device().is_cpu();
  if (bias_in_gemm) args.bias = bias_values.data_ptr();
  BRIGADE_ON_BACKEND(a.device(), gemm(args));
  if (bias.defined() && !bias_in_gemm) {
    BRIGADE_ON_BACKEND(a.device(), binary(BinaryOp::Add, out, bias_values.expand(out_shape), out));
  }
  return out;
}

}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b, bool transpose_a, bool transpose_b) {
  return matmul_impl(a, b, Tensor(), transpose_a, transpose_b);
}

Tensor matmul_bias(const Tensor& a, const Tensor& b, const Tensor& bias, bool transpose_a, bool transpose_b) {
  BRIGADE_CHECK_VALUE(bias.defined(), "matmul_bias: the bias must be a defined tensor");
  return matmul_impl(a, b, bias, transpose_a, transpose_b);
}

}  // namespace brigade::kernels
