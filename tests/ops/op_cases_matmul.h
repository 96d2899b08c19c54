// Op table cases (op_cases.h): matmul. Shapes M x N x K around the CPU blocking (MR 6, NR 8 or 4, MC 96,
// NC 128, KC 256) and the CUDA tiles (64 and 128): exact multiples, one less and one more, odd sizes and
// degenerate vectors; each with all four transpose flags (operands stored so that op(x) has the logical
// shape) in float32, float64 and bfloat16. Then batches (3-d x 3-d, and a 2-d operand shared by the batch),
// views (transposed with and without a flag, narrowed, stepped, permuted and expanded batches, a broadcast
// row) and size-0 dims.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tests/ops/op_case.h"

namespace brigade::testing {

struct MatmulShape {
  int64_t m, n, k;
};

/// "37x53x29" (M x N x K), for messages.
inline std::string shape_name(const MatmulShape& s) {
  return std::to_string(s.m) + "x" + std::to_string(s.n) + "x" + std::to_string(s.k);
}

/// The shapes every backend and every GEMM version runs in every dtype.
inline const std::vector<MatmulShape>& matmul_shapes() {
  static const std::vector<MatmulShape> shapes = {
      {1, 1, 1},    {2, 3, 4},     {37, 53, 29},   {13, 1, 17},    {1, 19, 8},
      {6, 8, 1},    {5, 7, 300},   {96, 128, 256}, {95, 127, 255}, {97, 129, 257},
      {64, 64, 64}, {65, 130, 33}, {129, 67, 520},
  };
  return shapes;
}

inline OpCase matmul_case(DType d, InputSpec a, InputSpec b, bool ta = false, bool tb = false) {
  OpCase c = make_case(Op::Matmul, d, {std::move(a), std::move(b)});
  c.transpose_a = ta;
  c.transpose_b = tb;
  return c;
}

/// op(a) [M, K] @ op(b) [K, N] with a batch of `batch_a` / `batch_b` (0: a 2-d operand).
inline OpCase matmul_case(DType d, const MatmulShape& s, bool ta, bool tb, int64_t batch_a = 0,
                          int64_t batch_b = 0) {
  auto stored = [](int64_t batch, int64_t rows, int64_t cols) {
    return batch > 0 ? Shape{batch, rows, cols} : Shape{rows, cols};
  };
  return matmul_case(d, in(ta ? stored(batch_a, s.k, s.m) : stored(batch_a, s.m, s.k)),
                     in(tb ? stored(batch_b, s.n, s.k) : stored(batch_b, s.k, s.n)), ta, tb);
}

inline void add_matmul_cases(OpTableBuilder& t) {
  const std::vector<DType> dtypes = {kFloat32, kFloat64, kBFloat16};
  for (DType d : dtypes) {
    for (const MatmulShape& s : matmul_shapes()) {
      for (int flags = 0; flags < 4; ++flags) t.add(matmul_case(d, s, flags & 1, flags & 2));
    }
    for (const MatmulShape& s : {MatmulShape{7, 9, 11}, MatmulShape{97, 33, 260}}) {
      for (int flags = 0; flags < 4; ++flags) {
        const bool ta = flags & 1, tb = flags & 2;
        t.add(matmul_case(d, s, ta, tb, 3, 3));
        t.add(matmul_case(d, s, ta, tb, 3, 0));
        t.add(matmul_case(d, s, ta, tb, 0, 3));
      }
    }
    // Narrowed views (a leading dim larger than the row), a narrowed column-major view, a stepped slice (no
    // unit stride at all: copied before the GEMM), with and without flags.
    auto narrow2 = [](Shape base, int64_t r0, int64_t rows, int64_t c0, int64_t cols) {
      return viewed(std::move(base), "N",
                    [=](const Tensor& v) { return v.narrow(0, r0, rows).narrow(1, c0, cols); });
    };
    auto stepped = viewed({40, 50}, "S", [](const Tensor& v) { return v.slice(1, 0, 50, 2); });  // [40, 25]
    t.add(matmul_case(d, narrow2({40, 50}, 2, 33, 5, 41), narrow2({45, 60}, 3, 41, 1, 17)));
    t.add(matmul_case(
        d, narrow2({40, 50}, 2, 33, 5, 41),
        viewed({45, 60}, "TN",
               [](const Tensor& v) { return v.transpose(0, 1).narrow(0, 4, 17).narrow(1, 2, 41); }),
        false, true));
    t.add(matmul_case(d, stepped, in({25, 9})));
    t.add(matmul_case(d, in({25, 9}), stepped, true, true));
    // Batched views: a transposed view with its flag (two transposes cancel), a column-major view without
    // one; a narrowed [33, 41] times a stepped [41, 25] slice; a permuted batch times an expanded one.
    t.add(matmul_case(d, transposed({3, 97, 260}, 1, 2), in({3, 260, 33}), true, false));
    t.add(matmul_case(d, in({3, 97, 260}), transposed({3, 33, 260}, 1, 2)));
    t.add(matmul_case(d, narrow2({40, 50}, 2, 33, 5, 41), viewed({45, 50}, "SN", [](const Tensor& v) {
                        return v.slice(1, 0, 50, 2).narrow(0, 0, 41);
                      })));
    t.add(matmul_case(d,
                      viewed({10, 4, 12}, "P",
                             [](const Tensor& v) {
                               return v.permute({1, 0, 2});
                             }),
                      expanded({1, 12, 6}, {4, 12, 6})));
  }
  // Every shape (and whole 128-tiles, ragged tails in M, N and K) as a batch of 2: what every GEMM version
  // runs (the CUDA versions' vector paths, tails, BK of 8, 16 or 32).
  for (DType d : dtypes) {
    std::vector<MatmulShape> shapes = matmul_shapes();
    shapes.push_back({256, 384, 96});
    shapes.push_back({300, 260, 70});
    shapes.push_back({131, 257, 33});
    for (const MatmulShape& s : shapes) {
      for (int flags = 0; flags < 4; ++flags) t.add(matmul_case(d, s, flags & 1, flags & 2, 2, 2));
    }
  }
  // Transposed views (column-major, no copy) with no flag, and with a flag (two transposes cancel).
  t.add(matmul_case(kFloat32, transposed({29, 37}, 0, 1), transposed({53, 29}, 0, 1)));
  t.add(matmul_case(kFloat32, transposed({29, 37}, 0, 1), in({53, 29}), false, true));
  t.add(matmul_case(kFloat32, transposed({29, 37}, 0, 1), in({29, 37}), true, true));
  t.add(matmul_case(kFloat64, transposed({4, 29, 37}, 1, 2), in({4, 29, 11})));
  // A batch whose batch stride is not the largest stride (a permuted [M, B, K]; times an expanded batch,
  // batch stride 0, above), and a broadcast row (stride 0 along rows: no BLAS takes it as is).
  auto permuted = [] {
    return viewed({10, 4, 12}, "P", [](const Tensor& v) { return v.permute({1, 0, 2}); });
  };
  t.add(matmul_case(kFloat32, permuted(), in({4, 12, 6})));
  t.add(matmul_case(kFloat32, expanded({1, 12}, {10, 12}), in({12, 5})));
  // A transposed view times a stepped slice, transposed (the gradcheck through both views).
  t.add(matmul_case(kFloat64, transposed({4, 3}, 0, 1),
                    viewed({5, 8}, "ST", [](const Tensor& v) { return v.slice(1, 0, 8, 2).t(); })));
  // Size-0 dims: K = 0 is an empty sum (all zeros); M, N or the batch 0 give empty results of the right
  // shape.
  t.add(matmul_case(kFloat32, in({3, 0}), in({0, 4})));
  t.add(matmul_case(kFloat64, in({2, 3, 0}), in({0, 5})));
  t.add(matmul_case(kFloat32, in({0, 5}), in({5, 4})));
  t.add(matmul_case(kFloat32, in({3, 5}), in({5, 0})));
  t.add(matmul_case(kFloat32, in({0, 3, 5}), in({0, 5, 2})));
  t.add(matmul_case(kFloat32, in({0, 3, 5}), in({5, 2})));

  // matmul_bias: the product plus a bias [N] on every row (a Linear's forward). Whole tiles, edges and two K
  // slices in every dtype with a Linear's flags (b transposed) and with a transposed a; a batch sharing b;
  // a bias that is a stepped view (copied first); an empty sum (the bias alone) and an empty product.
  auto bias_case = [](DType d, InputSpec a, InputSpec b, InputSpec bias, bool ta = false, bool tb = false) {
    OpCase c = make_case(Op::MatmulBias, d, {std::move(a), std::move(b), std::move(bias)});
    c.transpose_a = ta;
    c.transpose_b = tb;
    return c;
  };
  for (DType d : dtypes) {
    for (const MatmulShape& s :
         {MatmulShape{37, 53, 29}, MatmulShape{97, 129, 257}, MatmulShape{129, 67, 520}}) {
      t.add(bias_case(d, in({s.m, s.k}), in({s.n, s.k}), in({s.n}), false, true));
      t.add(bias_case(d, in({s.k, s.m}), in({s.k, s.n}), in({s.n}), true, false));
    }
    t.add(bias_case(d, in({2, 37, 29}), in({53, 29}), in({53}), false, true));
  }
  t.add(bias_case(kFloat32, in({13, 17}), in({17, 11}),
                  viewed({22}, "S", [](const Tensor& v) { return v.slice(0, 0, 22, 2); })));
  t.add(bias_case(kFloat32, in({3, 0}), in({0, 4}), in({4})));
  t.add(bias_case(kFloat32, in({0, 5}), in({5, 4}), in({4})));
}

}  // namespace brigade::testing
