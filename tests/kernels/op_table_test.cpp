// Every case of the op table (op_cases.h) on the CPU against a plain loop reference in double written here.
// Checks a table cannot express (finite-difference gradients, dropout statistics, thread-count
// independence, AdamW by hand) are in op_properties_test.cpp.
//
// Tolerances (|actual - expected| <= atol + rtol * |expected|, per element):
//   float32   rtol 1e-5, atol 1e-6   (math in float, sums in double; a few ulps)
//   bfloat16  rtol 1e-2, atol 1e-2   (outputs rounded to 8 significant bits: a step of 2^-8 = 0.4%)
//   float64   rtol 1e-12, atol 1e-12
//   integer outputs (argmax, counts) exactly.
// The references see the inputs after rounding to the case dtype, so only the op's own rounding counts.
// Where a case feeds one op's rounded output into another (softmax -> softmax_backward, op -> op_backward)
// the reference rounds that intermediate to the case dtype as well.
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>
#include <set>
#include <string>
#include <vector>

#include "kernels/kernels.h"
#include "tensor/philox.h"
#include "tests/kernels/op_cases.h"
#include "tests/test_support.h"

namespace brigade::testing {
namespace {

using kernels::BinaryOp;
using kernels::UnaryOp;

// ---- reference helpers ----------------------------------------------------------------------------------

struct Host {
  Shape shape;
  std::vector<double> v;
  DType dtype = kFloat64;  // the dtype the op must return
};

Host host_of(const Tensor& t) {
  return {t.shape(), t.to_vector<double>(), t.dtype()};
}

double round_to(DType dtype, double x) {
  switch (dtype) {
    case DType::Float32:
      return static_cast<double>(static_cast<float>(x));
    case DType::BFloat16:
      return static_cast<double>(static_cast<float>(bfloat16(static_cast<float>(x))));
    default:
      return x;
  }
}

std::vector<int64_t> unravel(const Shape& shape, int64_t i) {
  std::vector<int64_t> coords(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    coords[d] = i % shape[d];
    i /= shape[d];
  }
  return coords;
}

int64_t ravel(const Shape& shape, const std::vector<int64_t>& coords) {
  int64_t i = 0;
  for (size_t d = 0; d < shape.size(); ++d) i = i * shape[d] + coords[d];
  return i;
}

/// Index into an input of shape `in` of element i of the broadcast result of shape `out`.
int64_t broadcast_source(const Shape& out, const Shape& in, int64_t i) {
  std::vector<int64_t> oc = unravel(out, i);
  std::vector<int64_t> ic(in.size());
  const size_t lead = out.size() - in.size();
  for (size_t d = 0; d < in.size(); ++d) ic[d] = in[d] == 1 ? 0 : oc[lead + d];
  return ravel(in, ic);
}

Shape broadcast(const Shape& a, const Shape& b) {
  Shape out(std::max(a.size(), b.size()), 1);
  for (size_t k = 0; k < out.size(); ++k) {
    int64_t da = k < a.size() ? a[a.size() - 1 - k] : 1;
    int64_t db = k < b.size() ? b[b.size() - 1 - k] : 1;
    out[out.size() - 1 - k] = da == 1 ? db : da;
  }
  return out;
}

double unary_ref(UnaryOp op, double x) {
  switch (op) {
    case UnaryOp::Neg:
      return -x;
    case UnaryOp::Exp:
      return std::exp(x);
    case UnaryOp::Log:
      return std::log(x);
    case UnaryOp::Sqrt:
      return std::sqrt(x);
    case UnaryOp::Rsqrt:
      return 1.0 / std::sqrt(x);
    case UnaryOp::Tanh:
      return std::tanh(x);
    case UnaryOp::Sigmoid:
      return 1.0 / (1.0 + std::exp(-x));
    case UnaryOp::Relu:
      return x > 0 ? x : 0.0;
    case UnaryOp::Gelu:
      return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / std::numbers::pi) * (x + 0.044715 * x * x * x)));
    case UnaryOp::Abs:
      return std::fabs(x);
  }
  return 0;
}

/// The derivative as documented: exp, sqrt, rsqrt, tanh and sigmoid from the (rounded) output y, the rest
/// from x.
double unary_grad_ref(UnaryOp op, double x, double y) {
  const double k = std::sqrt(2.0 / std::numbers::pi);
  switch (op) {
    case UnaryOp::Neg:
      return -1.0;
    case UnaryOp::Exp:
      return y;
    case UnaryOp::Log:
      return 1.0 / x;
    case UnaryOp::Sqrt:
      return 0.5 / y;
    case UnaryOp::Rsqrt:
      return -0.5 * y * y * y;
    case UnaryOp::Tanh:
      return 1.0 - y * y;
    case UnaryOp::Sigmoid:
      return y * (1.0 - y);
    case UnaryOp::Relu:
      return x > 0 ? 1.0 : 0.0;
    case UnaryOp::Gelu: {
      const double t = std::tanh(k * (x + 0.044715 * x * x * x));
      return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * k * (1.0 + 3.0 * 0.044715 * x * x);
    }
    case UnaryOp::Abs:
      return x > 0 ? 1.0 : (x < 0 ? -1.0 : 0.0);
  }
  return 0;
}

double binary_ref(BinaryOp op, double a, double b) {
  switch (op) {
    case BinaryOp::Add:
      return a + b;
    case BinaryOp::Sub:
      return a - b;
    case BinaryOp::Mul:
      return a * b;
    case BinaryOp::Div:
      return a / b;
    case BinaryOp::Maximum:
      return a > b ? a : b;
    case BinaryOp::Pow:
      return std::pow(a, b);
    case BinaryOp::Eq:
      return a == b;
    case BinaryOp::Ne:
      return a != b;
    case BinaryOp::Lt:
      return a < b;
    case BinaryOp::Le:
      return a <= b;
    case BinaryOp::Gt:
      return a > b;
    case BinaryOp::Ge:
      return a >= b;
  }
  return 0;
}

/// Sum / mean / max over `dims` (empty: all) by visiting every input element once.
Host reduce_ref(Op op, const Host& x, std::vector<int64_t> dims, bool keepdim, DType dtype) {
  const int64_t nd = static_cast<int64_t>(x.shape.size());
  std::vector<bool> reduced(x.shape.size(), dims.empty());
  for (int64_t d : dims) {
    if (nd > 0) reduced[static_cast<size_t>(d < 0 ? d + nd : d)] = true;
  }
  Shape out_shape, kept_shape;
  for (size_t d = 0; d < x.shape.size(); ++d) {
    if (!reduced[d]) kept_shape.push_back(x.shape[d]);
    if (!reduced[d] || keepdim) out_shape.push_back(reduced[d] ? 1 : x.shape[d]);
  }
  const int64_t out_n = shape_numel(kept_shape);
  Host out{out_shape, std::vector<double>(static_cast<size_t>(out_n), op == Op::Max ? -INFINITY : 0.0),
           dtype};
  std::vector<int64_t> count(static_cast<size_t>(out_n), 0);
  for (int64_t i = 0; i < shape_numel(x.shape); ++i) {
    std::vector<int64_t> c = unravel(x.shape, i), kc;
    for (size_t d = 0; d < c.size(); ++d) {
      if (!reduced[d]) kc.push_back(c[d]);
    }
    const auto o = static_cast<size_t>(ravel(kept_shape, kc));
    const double v = x.v[static_cast<size_t>(i)];
    out.v[o] = op == Op::Max ? std::max(out.v[o], v) : out.v[o] + v;
    ++count[o];
  }
  if (op == Op::Mean) {
    for (size_t o = 0; o < out.v.size(); ++o) out.v[o] /= static_cast<double>(count[o]);  // 0/0 = NaN
  }
  return out;
}

DType stat_dtype(DType d) {
  return d == kFloat64 ? kFloat64 : kFloat32;
}

/// Rows of the last dim: calls f(row_offset, cols) for each row.
template <typename F>
void for_rows(const Shape& shape, F f) {
  const int64_t cols = shape.empty() ? 1 : shape.back();
  const int64_t rows = cols == 0 ? 0 : shape_numel(shape) / cols;
  for (int64_t r = 0; r < rows; ++r) f(r * cols, cols);
}

std::vector<double> softmax_ref(const std::vector<double>& x, const Shape& shape, bool log) {
  std::vector<double> y(x.size());
  for_rows(shape, [&](int64_t off, int64_t n) {
    double m = -INFINITY, s = 0;
    for (int64_t j = 0; j < n; ++j) m = std::max(m, x[off + j]);
    for (int64_t j = 0; j < n; ++j) s += std::exp(x[off + j] - m);
    for (int64_t j = 0; j < n; ++j)
      y[off + j] = log ? x[off + j] - m - std::log(s) : std::exp(x[off + j] - m) / s;
  });
  return y;
}

std::vector<Host> reference(const OpCase& c, const std::vector<Host>& in) {
  const DType dt = c.dtype;
  auto like = [&](const Host& h) { return Host{h.shape, std::vector<double>(h.v.size()), dt}; };
  switch (c.op) {
    case Op::Unary: {
      Host out = like(in[0]);
      for (size_t i = 0; i < out.v.size(); ++i) out.v[i] = unary_ref(c.unary_op, in[0].v[i]);
      return {out};
    }
    case Op::UnaryBackward: {
      Host out = like(in[0]);
      for (size_t i = 0; i < out.v.size(); ++i) {
        const double x = in[0].v[i], y = round_to(dt, unary_ref(c.unary_op, x));
        out.v[i] = in[1].v[i] * unary_grad_ref(c.unary_op, x, y);
      }
      return {out};
    }
    case Op::Binary:
    case Op::Where: {
      Shape shape = broadcast(in[0].shape, in[1].shape);
      if (c.op == Op::Where) shape = broadcast(shape, in[2].shape);
      Host out{shape, std::vector<double>(static_cast<size_t>(shape_numel(shape))), dt};
      for (int64_t i = 0; i < shape_numel(shape); ++i) {
        const double a = in[0].v[static_cast<size_t>(broadcast_source(shape, in[0].shape, i))];
        const double b = in[1].v[static_cast<size_t>(broadcast_source(shape, in[1].shape, i))];
        if (c.op == Op::Binary) {
          out.v[static_cast<size_t>(i)] = binary_ref(c.binary_op, a, b);
        } else {
          const double e = in[2].v[static_cast<size_t>(broadcast_source(shape, in[2].shape, i))];
          out.v[static_cast<size_t>(i)] = a != 0 ? b : e;
        }
      }
      return {out};
    }
    case Op::BinaryScalar:
    case Op::ScalarBinary: {
      Host out = like(in[0]);
      for (size_t i = 0; i < out.v.size(); ++i) {
        out.v[i] = c.op == Op::BinaryScalar ? binary_ref(c.binary_op, in[0].v[i], c.scalar)
                                            : binary_ref(c.binary_op, c.scalar, in[0].v[i]);
      }
      return {out};
    }
    case Op::AddInPlace:
    case Op::MaskedFill: {
      Host out = like(in[0]);
      for (int64_t i = 0; i < shape_numel(out.shape); ++i) {
        const double other = in[1].v[static_cast<size_t>(broadcast_source(out.shape, in[1].shape, i))];
        const double x = in[0].v[static_cast<size_t>(i)];
        out.v[static_cast<size_t>(i)] = c.op == Op::AddInPlace ? x + other : (other != 0 ? c.scalar : x);
      }
      return {out};
    }
    case Op::MulInPlace: {
      Host out = like(in[0]);
      for (size_t i = 0; i < out.v.size(); ++i) out.v[i] = in[0].v[i] * c.scalar;
      return {out};
    }
    case Op::Sum:
    case Op::Mean:
    case Op::Max:
      return {reduce_ref(c.op, in[0], c.dims, c.keepdim, dt)};
    case Op::ArgMax: {
      const Host& x = in[0];
      const auto nd = static_cast<int64_t>(x.shape.size());
      const int64_t dim = c.dims[0] < 0 ? c.dims[0] + nd : c.dims[0];
      Shape out_shape;
      for (int64_t d = 0; d < nd; ++d) {
        if (d != dim)
          out_shape.push_back(x.shape[static_cast<size_t>(d)]);
        else if (c.keepdim)
          out_shape.push_back(1);
      }
      Host out{out_shape, {}, kInt64};
      Shape outer = x.shape;
      outer[static_cast<size_t>(dim)] = 1;
      for (int64_t o = 0; o < shape_numel(outer); ++o) {
        std::vector<int64_t> coords = unravel(outer, o);
        int64_t best = 0;
        for (int64_t j = 0; j < x.shape[static_cast<size_t>(dim)]; ++j) {
          coords[static_cast<size_t>(dim)] = j;
          std::vector<int64_t> bc = coords;
          bc[static_cast<size_t>(dim)] = best;
          if (x.v[static_cast<size_t>(ravel(x.shape, coords))] > x.v[static_cast<size_t>(ravel(x.shape, bc))])
            best = j;
        }
        out.v.push_back(static_cast<double>(best));
      }
      return {out};
    }
    case Op::SumTo: {
      Host out{c.shape, std::vector<double>(static_cast<size_t>(shape_numel(c.shape)), 0.0), dt};
      const size_t lead = in[0].shape.size() - c.shape.size();
      for (int64_t i = 0; i < shape_numel(in[0].shape); ++i) {
        std::vector<int64_t> xc = unravel(in[0].shape, i), oc(c.shape.size());
        for (size_t d = 0; d < c.shape.size(); ++d) oc[d] = c.shape[d] == 1 ? 0 : xc[lead + d];
        out.v[static_cast<size_t>(ravel(c.shape, oc))] += in[0].v[static_cast<size_t>(i)];
      }
      return {out};
    }
    case Op::Softmax:
    case Op::LogSoftmax: {
      Host out = like(in[0]);
      out.v = softmax_ref(in[0].v, in[0].shape, c.op == Op::LogSoftmax);
      return {out};
    }
    case Op::SoftmaxBackward:
    case Op::LogSoftmaxBackward: {
      const bool log = c.op == Op::LogSoftmaxBackward;
      std::vector<double> y = softmax_ref(in[0].v, in[0].shape, log);
      for (double& v : y) v = round_to(dt, v);  // the case feeds the rounded forward output back
      const std::vector<double>& dy = in[1].v;
      Host out = like(in[0]);
      for_rows(in[0].shape, [&](int64_t off, int64_t n) {
        double s = 0;
        for (int64_t j = 0; j < n; ++j) s += log ? dy[off + j] : dy[off + j] * y[off + j];
        for (int64_t j = 0; j < n; ++j) {
          out.v[off + j] = log ? dy[off + j] - std::exp(y[off + j]) * s : y[off + j] * (dy[off + j] - s);
        }
      });
      return {out};
    }
    case Op::LayerNorm: {
      const Host& x = in[0];
      const Host& dy = in[1];
      size_t next = 2;
      const Host* w = c.has_weight ? &in[next++] : nullptr;
      const Host* b = c.has_bias ? &in[next++] : nullptr;
      const int64_t C = x.shape.back();
      Shape stat_shape(x.shape.begin(), x.shape.end() - 1);
      Host y = like(x), dx = like(x);
      Host mean{stat_shape, {}, stat_dtype(dt)}, rstd{stat_shape, {}, stat_dtype(dt)};
      Host dw{{C}, std::vector<double>(static_cast<size_t>(C), 0.0), dt}, db = dw;
      for_rows(x.shape, [&](int64_t off, int64_t n) {
        double mu = 0, var = 0;
        for (int64_t j = 0; j < n; ++j) mu += x.v[off + j] / static_cast<double>(n);
        for (int64_t j = 0; j < n; ++j)
          var += (x.v[off + j] - mu) * (x.v[off + j] - mu) / static_cast<double>(n);
        const double r = 1.0 / std::sqrt(var + c.scalar);
        mean.v.push_back(mu);
        rstd.v.push_back(r);
        double sum_g = 0, sum_gx = 0;
        for (int64_t j = 0; j < n; ++j) {
          const double xhat = (x.v[off + j] - mu) * r;
          const double wj = w ? w->v[j] : 1.0;
          y.v[off + j] = xhat * wj + (b ? b->v[j] : 0.0);
          sum_g += dy.v[off + j] * wj;
          sum_gx += dy.v[off + j] * wj * xhat;
          dw.v[j] += dy.v[off + j] * xhat;
          db.v[j] += dy.v[off + j];
        }
        for (int64_t j = 0; j < n; ++j) {
          const double xhat = (x.v[off + j] - mu) * r;
          const double g = dy.v[off + j] * (w ? w->v[j] : 1.0);
          dx.v[off + j] = r * (g - sum_g / static_cast<double>(n) - xhat * sum_gx / static_cast<double>(n));
        }
      });
      std::vector<Host> out = {y, mean, rstd, dx};
      if (w) out.push_back(dw);
      if (b) out.push_back(db);
      return out;
    }
    case Op::Embedding: {
      const Host& w = in[0];
      const int64_t C = w.shape[1];
      Shape shape = in[1].shape;
      shape.push_back(C);
      Host out{shape, {}, dt};
      for (double id : in[1].v) {
        for (int64_t j = 0; j < C; ++j)
          out.v.push_back(w.v[static_cast<size_t>(static_cast<int64_t>(id) * C + j)]);
      }
      return {out};
    }
    case Op::EmbeddingBackward: {
      const int64_t C = in[0].shape.back();
      Host out{{c.index, C}, std::vector<double>(static_cast<size_t>(c.index * C), 0.0), dt};
      for (size_t n = 0; n < in[1].v.size(); ++n) {
        const auto id = static_cast<int64_t>(in[1].v[n]);
        for (int64_t j = 0; j < C; ++j) out.v[static_cast<size_t>(id * C + j)] += in[0].v[n * C + j];
      }
      return {out};
    }
    case Op::CrossEntropy: {
      const Host& logits = in[0];
      const int64_t V = logits.shape.back();
      std::vector<double> logp = softmax_ref(logits.v, logits.shape, true);
      double total = 0;
      int64_t count = 0;
      for (double t : in[1].v) count += static_cast<int64_t>(t) != c.index;
      Host grad = like(logits);
      for (size_t n = 0; n < in[1].v.size(); ++n) {
        const auto t = static_cast<int64_t>(in[1].v[n]);
        if (t == c.index) continue;
        total -= logp[n * V + t];
        for (int64_t j = 0; j < V; ++j) {
          grad.v[n * V + j] = (std::exp(logp[n * V + j]) - (j == t ? 1.0 : 0.0)) / static_cast<double>(count);
        }
      }
      std::vector<Host> out = {
          Host{{}, {count > 0 ? total / static_cast<double>(count) : 0.0}, stat_dtype(dt)},
          Host{{}, {static_cast<double>(count)}, kInt64}};
      if (c.compute_grad) out.push_back(grad);
      return out;
    }
    case Op::Dropout: {
      Host out = like(in[0]);
      for (size_t i = 0; i < out.v.size(); ++i) {
        const bool keep = philox::uniform(c.rng.seed, c.rng.offset, i) >= c.scalar;
        out.v[i] = keep && c.scalar < 1.0 ? in[0].v[i] / (1.0 - c.scalar) : 0.0;
      }
      return {out};
    }
    case Op::CausalMask: {
      Host out{{c.index, c.index}, {}, dt};
      for (int64_t r = 0; r < c.index; ++r) {
        for (int64_t col = 0; col < c.index; ++col) out.v.push_back(col > r ? 1.0 : 0.0);
      }
      return {out};
    }
    case Op::AdamW: {
      const kernels::AdamWStep& s = c.adamw;
      Host p = like(in[0]), m = in[2], v = in[3];
      for (size_t i = 0; i < p.v.size(); ++i) {
        const double g = in[1].v[i];
        m.v[i] = s.beta1 * in[2].v[i] + (1 - s.beta1) * g;
        v.v[i] = s.beta2 * in[3].v[i] + (1 - s.beta2) * g * g;
        const double mhat = m.v[i] / (1 - std::pow(s.beta1, s.step));
        const double vhat = v.v[i] / (1 - std::pow(s.beta2, s.step));
        p.v[i] = in[0].v[i] - s.lr * (mhat / (std::sqrt(vhat) + s.eps) + s.weight_decay * in[0].v[i]);
      }
      return {p, m, v};
    }
    case Op::GlobalL2Norm: {
      double total = 0;
      for (const Host& h : in) {
        for (double x : h.v) total += x * x;
      }
      return {Host{{}, {std::sqrt(total)}, kFloat64}};
    }
  }
  return {};
}

struct Tolerance {
  double rtol, atol;
};

Tolerance tolerance(DType case_dtype, DType output_dtype) {
  if (!is_floating(output_dtype)) return {0.0, 0.0};
  switch (case_dtype) {
    case DType::BFloat16:
      return {1e-2, 1e-2};
    case DType::Float64:
      return {1e-12, 1e-12};
    default:
      return {1e-5, 1e-6};
  }
}

bool writes_in_place(Op op) {
  return op == Op::AddInPlace || op == Op::MulInPlace || op == Op::AdamW;
}

// ---- the table ----------------------------------------------------------------------------------------

class OpTableTest : public ::testing::TestWithParam<size_t> {};

TEST_P(OpTableTest, CpuMatchesLoopReference) {
  const OpCase& c = op_cases()[GetParam()];
  std::vector<Tensor> inputs = make_inputs(c, Device::cpu());
  std::vector<Host> host_inputs;
  for (const Tensor& t : inputs) host_inputs.push_back(host_of(t));  // before in-place ops change them
  std::vector<Tensor> actual = run_case(c, inputs, Device::cpu());
  std::vector<Host> expected = reference(c, host_inputs);
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t k = 0; k < actual.size(); ++k) {
    SCOPED_TRACE("output " + std::to_string(k));
    ASSERT_TRUE(actual[k].defined());
    EXPECT_EQ(actual[k].dtype(), expected[k].dtype);
    EXPECT_TRUE(actual[k].device().is_cpu());
    if (!writes_in_place(c.op)) {
      EXPECT_TRUE(actual[k].is_contiguous());
    }
    const Tolerance tol = tolerance(c.dtype, actual[k].dtype());
    EXPECT_TRUE(
        allclose(actual[k], from_vector<double>(expected[k].v, expected[k].shape), tol.rtol, tol.atol));
  }
}

INSTANTIATE_TEST_SUITE_P(Table, OpTableTest, ::testing::Range<size_t>(0, op_cases().size()),
                         [](const ::testing::TestParamInfo<size_t>& info) {
                           return op_cases()[info.param].name;
                         });

TEST(OpTable, CoversEveryOpAndDtypeWithUniqueNames) {
  std::set<std::string> names;
  std::set<int> ops;
  std::set<DType> dtypes;
  for (const OpCase& c : op_cases()) {
    EXPECT_TRUE(names.insert(c.name).second) << c.name;
    ops.insert(static_cast<int>(c.op));
    dtypes.insert(c.dtype);
  }
  EXPECT_EQ(ops.size(), static_cast<size_t>(Op::GlobalL2Norm) + 1);
  EXPECT_EQ(dtypes, (std::set<DType>{kFloat32, kBFloat16, kFloat64}));
  EXPECT_GT(op_cases().size(), 300u);
}

}  // namespace
}  // namespace brigade::testing
