// kernels::matmul on the CPU against the plain triple loop in double (tests/kernels/matmul_cases.h):
// every shape of the table x all four trans combinations x float32 / float64 / bfloat16, then views
// (transposed, narrowed, strided, permuted batches, expanded batches), broadcasting over the batch,
// size-0 dims, determinism across thread counts, and the errors.
#include <gtest/gtest.h>
#include <omp.h>

#include <string>

#include "kernels/kernels.h"
#include "tests/kernels/matmul_cases.h"
#include "tests/test_support.h"

namespace brigade {
namespace {

using kernels::matmul;
using testing::matmul_matches_reference;
using testing::matmul_shapes;
using testing::matmul_tolerance;
using testing::random_matrix;

class MatmulDTypeTest : public ::testing::TestWithParam<DType> {};

// Every table shape, every trans combination: operands are stored so that op(x) has the logical shape.
TEST_P(MatmulDTypeTest, TableShapesAllTransCombinations) {
  const DType dtype = GetParam();
  Generator gen(17);
  for (const auto& s : matmul_shapes()) {
    for (int flags = 0; flags < 4; ++flags) {
      const bool ta = flags & 1, tb = flags & 2;
      Tensor a = ta ? random_matrix(-1, s.k, s.m, dtype, gen) : random_matrix(-1, s.m, s.k, dtype, gen);
      Tensor b = tb ? random_matrix(-1, s.n, s.k, dtype, gen) : random_matrix(-1, s.k, s.n, dtype, gen);
      Tensor c = matmul(a, b, ta, tb);
      EXPECT_EQ(c.dtype(), dtype);
      EXPECT_TRUE(c.is_contiguous());
      EXPECT_TRUE(matmul_matches_reference(c, a, b, ta, tb, matmul_tolerance(dtype)))
          << testing::shape_name(s) << " ta=" << ta << " tb=" << tb << " " << dtype_name(dtype);
    }
  }
}

TEST_P(MatmulDTypeTest, BatchedAndBroadcastBatch) {
  const DType dtype = GetParam();
  const double tol = matmul_tolerance(dtype);
  Generator gen(23);
  for (const auto& s : {testing::MatmulShape{7, 9, 11}, testing::MatmulShape{97, 33, 260}}) {
    for (int flags = 0; flags < 4; ++flags) {
      const bool ta = flags & 1, tb = flags & 2;
      const int64_t batch = 3;
      auto a_of = [&](int64_t bsz) {
        return ta ? random_matrix(bsz, s.k, s.m, dtype, gen) : random_matrix(bsz, s.m, s.k, dtype, gen);
      };
      auto b_of = [&](int64_t bsz) {
        return tb ? random_matrix(bsz, s.n, s.k, dtype, gen) : random_matrix(bsz, s.k, s.n, dtype, gen);
      };
      Tensor a3 = a_of(batch), b3 = b_of(batch), a2 = a_of(-1), b2 = b_of(-1);
      const std::string where =
          testing::shape_name(s) + " ta=" + std::to_string(ta) + " tb=" + std::to_string(tb);
      Tensor c33 = matmul(a3, b3, ta, tb);
      EXPECT_EQ(c33.shape(), (Shape{batch, s.m, s.n}));
      EXPECT_TRUE(matmul_matches_reference(c33, a3, b3, ta, tb, tol)) << "3-d x 3-d " << where;
      EXPECT_TRUE(matmul_matches_reference(matmul(a3, b2, ta, tb), a3, b2, ta, tb, tol))
          << "3-d x 2-d " << where;
      EXPECT_TRUE(matmul_matches_reference(matmul(a2, b3, ta, tb), a2, b3, ta, tb, tol))
          << "2-d x 3-d " << where;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, MatmulDTypeTest, ::testing::Values(kFloat32, kFloat64, kBFloat16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

// A transposed view (column-major) with no flag, and with a flag (two transposes cancel).
TEST(Matmul, TransposedViewsWithoutCopies) {
  Generator gen(3);
  Tensor a_store = random_matrix(-1, 29, 37, kFloat32, gen);  // a = a_store^T is [37, 29]
  Tensor b_store = random_matrix(-1, 53, 29, kFloat32, gen);  // b = b_store^T is [29, 53]
  Tensor a = a_store.transpose(0, 1), b = b_store.transpose(0, 1);
  ASSERT_FALSE(a.is_contiguous());
  EXPECT_TRUE(matmul_matches_reference(matmul(a, b), a, b, false, false, 1e-5));
  EXPECT_TRUE(matmul_matches_reference(matmul(a, b_store, false, true), a, b_store, false, true, 1e-5));
  // Transposed view and flag: op(a) = a^T = a_store, [29, 37].
  EXPECT_TRUE(matmul_matches_reference(matmul(a, a_store, true, true), a, a_store, true, true, 1e-5));
  // Batched: x.transpose(1, 2) of a contiguous [B, K, M].
  Tensor a3_store = random_matrix(4, 29, 37, kFloat64, gen);
  Tensor b3 = random_matrix(4, 29, 11, kFloat64, gen);
  Tensor a3 = a3_store.transpose(1, 2);
  EXPECT_TRUE(matmul_matches_reference(matmul(a3, b3), a3, b3, false, false, 1e-12));
}

// Narrowed views (row-major with a leading dim larger than the row), a narrowed column-major view, and a
// stepped slice (no unit stride at all: copied before the GEMM).
TEST(Matmul, NonContiguousViews) {
  Generator gen(5);
  for (DType dtype : {kFloat32, kFloat64, kBFloat16}) {
    const double tol = matmul_tolerance(dtype);
    Tensor a_big = random_matrix(-1, 40, 50, dtype, gen);
    Tensor b_big = random_matrix(-1, 45, 60, dtype, gen);
    Tensor a = a_big.narrow(0, 2, 33).narrow(1, 5, 41);  // [33, 41], ld 50
    Tensor b = b_big.narrow(0, 3, 41).narrow(1, 1, 17);  // [41, 17], ld 60
    EXPECT_TRUE(matmul_matches_reference(matmul(a, b), a, b, false, false, tol)) << dtype_name(dtype);
    Tensor bt = b_big.transpose(0, 1).narrow(0, 4, 17).narrow(1, 2, 41);  // [17, 41], column-major
    EXPECT_TRUE(matmul_matches_reference(matmul(a, bt, false, true), a, bt, false, true, tol))
        << dtype_name(dtype);
    Tensor stepped = a_big.slice(1, 0, 50, 2);  // [40, 25], stride 2 along the last dim
    Tensor c = random_matrix(-1, 25, 9, dtype, gen);
    EXPECT_TRUE(matmul_matches_reference(matmul(stepped, c), stepped, c, false, false, tol))
        << dtype_name(dtype);
    EXPECT_TRUE(matmul_matches_reference(matmul(c, stepped, true, true), c, stepped, true, true, tol))
        << dtype_name(dtype);
  }
}

// Batches whose batch stride is not the largest stride (a permuted [M, B, K]), and an expanded batch.
TEST(Matmul, PermutedAndExpandedBatches) {
  Generator gen(7);
  Tensor mbk = random_matrix(10, 4, 12, kFloat32, gen);  // [M=10, B=4, K=12]
  Tensor a = mbk.permute({1, 0, 2});                     // [4, 10, 12], strides (12, 48, 1)
  Tensor b = random_matrix(4, 12, 6, kFloat32, gen);
  EXPECT_TRUE(matmul_matches_reference(matmul(a, b), a, b, false, false, 1e-5));
  Tensor one = random_matrix(1, 12, 6, kFloat32, gen);
  Tensor expanded = one.expand({4, 12, 6});  // batch stride 0
  EXPECT_TRUE(matmul_matches_reference(matmul(a, expanded), a, expanded, false, false, 1e-5));
  // A broadcast row (stride 0 along rows) cannot be handed to a BLAS as is; it must still be right.
  Tensor row = random_matrix(-1, 1, 12, kFloat32, gen).expand({10, 12});
  Tensor w = random_matrix(-1, 12, 5, kFloat32, gen);
  EXPECT_TRUE(matmul_matches_reference(matmul(row, w), row, w, false, false, 1e-5));
}

TEST(Matmul, SizeZeroDims) {
  Generator gen(11);
  // K = 0: an empty sum, all zeros.
  Tensor c = matmul(zeros({3, 0}), zeros({0, 4}));
  EXPECT_EQ(c.shape(), (Shape{3, 4}));
  EXPECT_TRUE(testing::allclose(c, zeros({3, 4}), 0.0, 0.0));
  Tensor cb = matmul(zeros({2, 3, 0}, kFloat64), zeros({0, 5}, kFloat64));
  EXPECT_EQ(cb.shape(), (Shape{2, 3, 5}));
  EXPECT_TRUE(testing::allclose(cb, zeros({2, 3, 5}, kFloat64), 0.0, 0.0));
  // M = 0, N = 0, batch = 0: empty results of the right shape.
  EXPECT_EQ(matmul(zeros({0, 5}), random_matrix(-1, 5, 4, kFloat32, gen)).shape(), (Shape{0, 4}));
  EXPECT_EQ(matmul(random_matrix(-1, 3, 5, kFloat32, gen), zeros({5, 0})).shape(), (Shape{3, 0}));
  EXPECT_EQ(matmul(zeros({0, 3, 5}), zeros({0, 5, 2})).shape(), (Shape{0, 3, 2}));
  EXPECT_EQ(matmul(zeros({0, 3, 5}), zeros({5, 2}), false, false).numel(), 0);
}

// Each element comes from one task in a fixed order, so the thread count must not change a single bit.
TEST(Matmul, DeterministicAcrossThreadCounts) {
  Generator gen(13);
  Tensor a = random_matrix(2, 200, 300, kFloat32, gen);
  Tensor b = random_matrix(-1, 300, 260, kFloat32, gen);
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  Tensor one = matmul(a, b);
  omp_set_num_threads(3);
  Tensor three = matmul(a, b);
  omp_set_num_threads(saved);
  EXPECT_TRUE(testing::allclose(three, one, 0.0, 0.0));
  EXPECT_TRUE(matmul_matches_reference(one, a, b, false, false, 1e-5));
}

TEST(Matmul, MismatchedInnerDimsNameBothShapes) {
  Tensor a = zeros({2, 3}), b = zeros({4, 5});
  try {
    matmul(a, b);
    FAIL() << "expected ShapeError";
  } catch (const ShapeError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("matmul"), std::string::npos) << message;
    EXPECT_NE(message.find("[2, 3]"), std::string::npos) << message;
    EXPECT_NE(message.find("[4, 5]"), std::string::npos) << message;
    EXPECT_NE(message.find("K = 3"), std::string::npos) << message;
    EXPECT_NE(message.find("K = 4"), std::string::npos) << message;
  }
  // With a flag the inner dim of a is its first dim: [3, 2]^T @ [4, 5] has K 3 vs 4 as well.
  try {
    matmul(zeros({3, 2}), b, true, false);
    FAIL() << "expected ShapeError";
  } catch (const ShapeError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("[3, 2] (transposed)"), std::string::npos) << message;
    EXPECT_NE(message.find("K = 3"), std::string::npos) << message;
  }
}

TEST(Matmul, RejectsBadOperands) {
  EXPECT_THROW(matmul(zeros({2, 3, 4}), zeros({3, 4, 5})), ShapeError);  // batch 2 vs 3
  EXPECT_THROW(matmul(zeros({3}), zeros({3, 2})), ShapeError);           // 1-d
  EXPECT_THROW(matmul(zeros({1, 2, 3, 4}), zeros({4, 2})), ShapeError);  // 4-d
  EXPECT_THROW(matmul(zeros({2, 3}), zeros({3, 2}, kFloat64)), DTypeError);
  EXPECT_THROW(matmul(zeros({2, 3}, kInt32), zeros({3, 2}, kInt32)), DTypeError);
  EXPECT_THROW(matmul(Tensor(), zeros({3, 2})), ValueError);
}

TEST(Matmul, BackendSwitchRoundTripsAndLeavesTheCpuAlone) {
  const kernels::MatmulBackend saved = kernels::matmul_backend();
  Generator gen(19);
  Tensor a = random_matrix(-1, 9, 7, kFloat32, gen), b = random_matrix(-1, 7, 5, kFloat32, gen);
  kernels::set_matmul_backend(kernels::MatmulBackend::Cublas);
  EXPECT_EQ(kernels::matmul_backend(), kernels::MatmulBackend::Cublas);
  EXPECT_TRUE(matmul_matches_reference(matmul(a, b), a, b, false, false, 1e-5));
  kernels::set_matmul_backend(kernels::MatmulBackend::Native);
  EXPECT_EQ(kernels::matmul_backend(), kernels::MatmulBackend::Native);
  kernels::set_matmul_backend(saved);
}

}  // namespace
}  // namespace brigade
