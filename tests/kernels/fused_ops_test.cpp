// The fused ops of kernels.h (bias_gelu, add_layernorm, adamw_update_all) against the unfused CPU ops they
// replace, bit for bit: a model that switches to them trains to the same bits. The op table checks them
// against kernels/reference/ and gradchecks them (tests/ops/op_cases_fused.h); here the shapes reach the
// threading thresholds, the 128-column blocks and the 4096-row chunks of the bias gradient's column sums.
#include <gtest/gtest.h>
#include <omp.h>

#include <functional>
#include <vector>

#include "kernels/kernels.h"
#include "tensor/error.h"
#include "tensor/philox.h"
#include "tests/test_support.h"

namespace brigade::testing {
namespace {

using kernels::BinaryOp;
using kernels::UnaryOp;

Tensor normal_tensor(const Shape& shape, uint64_t seed, DType dtype, double scale = 1.0, double shift = 0.0) {
  std::vector<double> v(static_cast<size_t>(shape_numel(shape)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = shift + scale * philox::normal(seed, 0, i);
  return from_vector<double>(v, shape).to(dtype);
}

void expect_bits(const Tensor& actual, const Tensor& expected, const char* what) {
  EXPECT_EQ(actual.dtype(), expected.dtype()) << what;
  EXPECT_TRUE(allclose(actual, expected, 0, 0)) << what;
}

// Runs `f` on 1 and on 2 threads (a team of 2 even on a 1-core machine).
std::vector<std::vector<Tensor>> on_1_and_2_threads(const std::function<std::vector<Tensor>()>& f) {
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  std::vector<Tensor> one = f();
  omp_set_num_threads(2);
  std::vector<Tensor> two = f();
  omp_set_num_threads(threads);
  return {one, two};
}

// Shapes: the baby GPT's fc activation (768 x 512: parallel, 4 column blocks), a width that is no multiple
// of 8 or 32 (37), and 9000 rows of 3 (two chunks of the column sums and a tail shorter than 8).
TEST(FusedOps, BiasGeluEqualsTheAddThenGeluBitForBit) {
  for (DType dtype : {kFloat32, kBFloat16, kFloat64}) {
    for (const Shape& shape : std::vector<Shape>{{768, 512}, {5, 37}, {9000, 3}, {2, 3, 40}}) {
      SCOPED_TRACE(::testing::Message() << dtype_name(dtype) << " " << shape_str(shape));
      const int64_t C = shape.back();
      // Wide values (scale 3), so that both GELU tails and the clamps are reached.
      const Tensor x = normal_tensor(shape, 1, dtype, 3.0), bias = normal_tensor({C}, 2, dtype);
      const Tensor dy = normal_tensor(shape, 3, dtype);
      const Tensor h = kernels::binary(BinaryOp::Add, x, bias);
      const Tensor y = kernels::unary(UnaryOp::Gelu, h);
      const Tensor dx = kernels::unary_backward(UnaryOp::Gelu, dy, h, y);
      for (const auto& run : on_1_and_2_threads([&] {
             kernels::BiasGeluGrads g = kernels::bias_gelu_backward(dy, x, bias);
             return std::vector<Tensor>{kernels::bias_gelu(x, bias), g.dx, g.dbias};
           })) {
        expect_bits(run[0], y, "y");
        expect_bits(run[1], dx, "dx");
        expect_bits(run[2], kernels::sum_to(dx, {C}), "dbias");
      }
    }
  }
}

TEST(FusedOps, AddLayerNormEqualsTheAddThenLayerNormBitForBit) {
  for (DType dtype : {kFloat32, kBFloat16, kFloat64}) {
    for (const Shape& shape : std::vector<Shape>{{768, 128}, {300, 600}, {2, 3, 7}}) {
      for (bool affine : {true, false}) {
        SCOPED_TRACE(::testing::Message()
                     << dtype_name(dtype) << " " << shape_str(shape) << " affine " << affine);
        const int64_t C = shape.back();
        const Tensor x = normal_tensor(shape, 4, dtype), residual = normal_tensor(shape, 5, dtype, 0.5, 0.3);
        const Tensor w = affine ? normal_tensor({C}, 6, dtype, 0.2, 1.0) : Tensor();
        const Tensor b = affine ? normal_tensor({C}, 7, dtype) : Tensor();
        const Tensor sum = kernels::binary(BinaryOp::Add, x, residual);
        const kernels::LayerNormOutput norm = kernels::layernorm(sum, w, b, 1e-5);
        for (const auto& run : on_1_and_2_threads([&] {
               kernels::AddLayerNormOutput f = kernels::add_layernorm(x, residual, w, b, 1e-5);
               return std::vector<Tensor>{f.sum, f.norm.y, f.norm.mean, f.norm.rstd};
             })) {
          expect_bits(run[0], sum, "sum");
          expect_bits(run[1], norm.y, "y");
          expect_bits(run[2], norm.mean, "mean");
          expect_bits(run[3], norm.rstd, "rstd");
        }
      }
    }
  }
}

// A model's parameter list in one call against one adamw_update per tensor: sizes that fill several 32k
// segments with a tail (70001), small ones, two groups' lr and weight decay, and a transposed gradient.
TEST(FusedOps, AdamWOverAListEqualsOneUpdatePerTensorBitForBit) {
  for (DType dtype : {kFloat32, kBFloat16, kFloat64}) {
    SCOPED_TRACE(dtype_name(dtype));
    const DType moments = dtype == kFloat64 ? kFloat64 : kFloat32;
    const std::vector<Shape> shapes = {{70001}, {128, 384}, {384}, {3}, {64, 7}};
    auto make = [&](uint64_t seed) {
      std::vector<kernels::AdamWTensors> entries;
      for (size_t i = 0; i < shapes.size(); ++i) {
        const uint64_t s = seed + 10 * i;
        kernels::AdamWStep step{1e-3 * static_cast<double>(i + 1), 0.9, 0.99, 1e-8, i % 2 ? 0.0 : 0.1, 7};
        Tensor grad = shapes[i].size() == 2 ? normal_tensor({shapes[i][1], shapes[i][0]}, s + 1, dtype).t()
                                            : normal_tensor(shapes[i], s + 1, dtype);
        entries.push_back({normal_tensor(shapes[i], s, dtype), grad,
                           normal_tensor(shapes[i], s + 2, moments, 0.1),
                           kernels::unary(UnaryOp::Abs, normal_tensor(shapes[i], s + 3, moments)), step});
      }
      return entries;
    };
    const std::vector<kernels::AdamWTensors> one_by_one = make(100);
    for (const kernels::AdamWTensors& e : one_by_one)
      kernels::adamw_update(e.param, e.grad, e.m, e.v, e.step);
    for (const auto& run : on_1_and_2_threads([&] {
           const std::vector<kernels::AdamWTensors> all = make(100);
           kernels::adamw_update_all(all);
           std::vector<Tensor> out;
           for (const auto& e : all) out.insert(out.end(), {e.param, e.m, e.v});
           return out;
         })) {
      for (size_t i = 0; i < one_by_one.size(); ++i) {
        SCOPED_TRACE(::testing::Message() << "entry " << i);
        expect_bits(run[3 * i], one_by_one[i].param, "param");
        expect_bits(run[3 * i + 1], one_by_one[i].m, "m");
        expect_bits(run[3 * i + 2], one_by_one[i].v, "v");
      }
    }
  }
}

TEST(FusedOps, ErrorsNameTheOpAndWhatWasFound) {
  const Tensor x = normal_tensor({4, 6}, 1, kFloat32);
  EXPECT_THROW(kernels::bias_gelu(x, normal_tensor({5}, 2, kFloat32)), ShapeError);
  EXPECT_THROW(kernels::bias_gelu(x, normal_tensor({6}, 2, kFloat64)), DTypeError);
  EXPECT_THROW(
      kernels::bias_gelu_backward(normal_tensor({4, 5}, 3, kFloat32), x, normal_tensor({6}, 2, kFloat32)),
      ShapeError);
  EXPECT_THROW(kernels::add_layernorm(x, normal_tensor({4, 5}, 3, kFloat32), Tensor(), Tensor()), ShapeError);
  EXPECT_THROW(kernels::add_layernorm(x, x, normal_tensor({5}, 3, kFloat32), Tensor()), ShapeError);
  const Tensor p = normal_tensor({3}, 1, kFloat32);
  try {
    kernels::adamw_update_all({{p, p, p.clone(), p.clone(), {}},
                               {p.clone(), normal_tensor({4}, 2, kFloat32), p.clone(), p.clone(), {}}});
    FAIL() << "expected a ShapeError";
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("adamw_update_all (entry 1)"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace brigade::testing
