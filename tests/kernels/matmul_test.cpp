// kernels::matmul on the CPU beyond its values: determinism across thread counts, the errors, and the
// backend switch. Its values (every shape of the op table x all four trans combinations x float32 /
// float64 / bfloat16, batches, views, size-0 dims) are checked by the op table (tests/ops/op_cases_matmul.h)
// against kernels/reference.
#include <gtest/gtest.h>
#include <omp.h>

#include <string>

#include "kernels/kernels.h"
#include "tests/kernels/matmul_check.h"
#include "tests/test_support.h"

namespace brigade {
namespace {

using kernels::matmul;
using testing::matmul_matches_reference;
using testing::random_matrix;

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
