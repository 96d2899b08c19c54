// kernels::matmul on the CPU beyond its values: determinism across thread counts (the public op and every
// CPU version), the errors, and the backend switch (cuBLAS, OpenBLAS). Its values (every shape of the op
// table x all four trans combinations x float32 / float64 / bfloat16, batches, views, size-0 dims) are
// checked by the op table (tests/ops/op_cases_matmul.h) against kernels/reference.
#include "kernels/cpu/matmul.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/gemm_loops.h"
#include "kernels/cpu/peak_loops.h"
#include "kernels/kernels.h"
#include "kernels/matmul_versions.h"
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

// The K slices of the packed versions: as few as the cache-derived length allows with up to an eighth
// more, made near-equal, so that no pass over C carries a sliver of K.
TEST(Matmul, KSlicesAreEvenAndNeverASliver) {
  using kernels::cpu::detail::slice_length;
  EXPECT_EQ(slice_length(2048, 336), 344);  // 5 x 344 + 328, not 6 x 336 + 32
  EXPECT_EQ(slice_length(768, 336), 256);   // 3 x 256, not 336 + 336 + 96
  EXPECT_EQ(slice_length(700, 336), 352);   // 352 + 348
  EXPECT_EQ(slice_length(300, 336), 300);   // one slice
  for (int64_t k = 1; k <= 5000; k += 7) {
    const int64_t kc = std::min(slice_length(k, 336), k), slices = (k + kc - 1) / kc;  // as run_gemm_task
    EXPECT_LE(slices, (k + 377) / 378) << "k " << k;        // no more slices than kc + kc / 8 needs
    EXPECT_LE(kc, 378 + 3) << "k " << k;                    // at most an eighth (and the rounding) over
    EXPECT_GE(k - (slices - 1) * kc, kc / 2) << "k " << k;  // the last slice at least half the others
  }
}

// The packed versions cut a product into a different number of tasks per thread count (row and column
// ranges, edge tiles in different places); no element may change. 200 x 260 x 700: two K slices and
// edge tiles in both directions; a batch of 3 with a transposed B as well.
TEST(Matmul, EveryCpuVersionIsDeterministicAcrossThreadCounts) {
  Generator gen(17);
  for (DType dtype : {kFloat32, kBFloat16}) {
    Tensor a = random_matrix(3, 200, 700, dtype, gen);
    Tensor b = random_matrix(3, 260, 700, dtype, gen);  // used transposed
    for (kernels::MatmulKernel kernel : kernels::all_matmul_kernels()) {
      if (kernels::matmul_kernel_backend(kernel) != DeviceKind::CPU) continue;
      if (!kernels::matmul_kernel_supports(kernel, dtype)) continue;
      auto run = [&](int threads) {
        Tensor c = empty({3, 200, 260}, dtype);
        kernels::GemmArgs args;
        args.a = a.data_ptr(), args.b = b.data_ptr(), args.c = c.data_ptr(), args.dtype = dtype;
        args.m = 200, args.n = 260, args.k = 700, args.lda = 700, args.ldb = 700, args.ldc = 260;
        args.trans_b = true, args.batch = 3;
        args.stride_a = 200 * 700, args.stride_b = 260 * 700, args.stride_c = 200 * 260;
        const int saved = omp_get_max_threads();
        omp_set_num_threads(threads);
        kernels::gemm_with(kernel, args);
        omp_set_num_threads(saved);
        return c;
      };
      const Tensor one = run(1), three = run(3);
      EXPECT_TRUE(testing::allclose(three, one, 0.0, 0.0)) << kernels::matmul_kernel_name(kernel);
      EXPECT_TRUE(matmul_matches_reference(one, a, b, false, true, testing::matmul_tolerance(dtype)))
          << kernels::matmul_kernel_name(kernel) << " " << dtype_name(dtype);
    }
  }
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

// MatmulBackend::Blas runs OpenBLAS for CPU matmuls where the build links it, and refuses where it does not
// (never a silent fallback to the native kernels); bfloat16 under it is a DTypeError.
TEST(Matmul, BlasBackendRunsOpenBlasOrRefuses) {
  const kernels::MatmulBackend saved = kernels::matmul_backend();
  Generator gen(23);
  Tensor a = random_matrix(2, 33, 70, kFloat32, gen), b = random_matrix(-1, 70, 45, kFloat32, gen);
  if (!kernels::blas_available()) {
    EXPECT_THROW(kernels::set_matmul_backend(kernels::MatmulBackend::Blas), DeviceError);
    EXPECT_EQ(kernels::matmul_backend(), saved);
    GTEST_SKIP() << "built without OpenBLAS";
  }
  kernels::set_matmul_backend(kernels::MatmulBackend::Blas);
  EXPECT_STREQ(kernels::matmul_backend_name(kernels::matmul_backend()), "blas");
  EXPECT_TRUE(matmul_matches_reference(matmul(a, b), a, b, false, false, 1e-5));
  Tensor a64 = random_matrix(-1, 9, 7, kFloat64, gen), b64 = random_matrix(-1, 5, 7, kFloat64, gen);
  EXPECT_TRUE(matmul_matches_reference(matmul(a64, b64, false, true), a64, b64, false, true, 1e-12));
  EXPECT_THROW(matmul(zeros({2, 3}, kBFloat16), zeros({3, 2}, kBFloat16)), DTypeError);
  kernels::set_matmul_backend(saved);
}

// A large product on several threads packs each B block once, all threads together (run_gemm_shared_b),
// instead of cutting independent row tasks that each pack all of B. Its elements must sum in the same order:
// the bits of one thread, for every trans combination. 193 x 700 x 1100: edge rows, two or more column
// blocks, three K slices (bfloat16: one).
TEST(Matmul, ThreadsThatPackBTogetherGiveTheBitsOfOneThread) {
  namespace detail = kernels::cpu::detail;
  using kernels::MatmulKernel;
  constexpr int64_t m = 193, n = 700, k = 1100;
  kernels::GemmArgs shape;
  shape.m = m, shape.n = n, shape.k = k, shape.batch = 1;
  // Whether a version takes that path at 2 and 3 threads on this machine: its tile and the cache blocks it
  // derives (kernels/cpu/matmul_*.cpp); v1 has loops of its own.
  auto shares = [&](MatmulKernel kernel) {
    int64_t mr = 0, nr = 0;
    if (kernel == MatmulKernel::CpuAvx2Fma) mr = 6, nr = 16;
    if (kernel == MatmulKernel::CpuAvx512 || kernel == MatmulKernel::CpuAvx512Bf16) mr = 12, nr = 32;
    if (mr == 0) return false;
    const int64_t bytes = kernel == MatmulKernel::CpuAvx512Bf16 ? 2 : 4;
    const detail::GemmBlocks blocks = detail::blocks_from_caches(mr, nr, bytes);
    return detail::shares_b(shape, blocks, 2, mr) && detail::shares_b(shape, blocks, 3, mr);
  };
  int on_the_path = 0;
  Generator gen(29);
  for (DType dtype : {kFloat32, kBFloat16}) {
    for (bool trans_a : {false, true}) {
      for (bool trans_b : {false, true}) {
        Tensor a = trans_a ? random_matrix(-1, k, m, dtype, gen) : random_matrix(-1, m, k, dtype, gen);
        Tensor b = trans_b ? random_matrix(-1, n, k, dtype, gen) : random_matrix(-1, k, n, dtype, gen);
        for (MatmulKernel kernel : kernels::all_matmul_kernels()) {
          if (kernels::matmul_kernel_backend(kernel) != DeviceKind::CPU) continue;
          if (!kernels::matmul_kernel_supports(kernel, dtype) || !shares(kernel)) continue;
          ++on_the_path;
          auto run = [&](int threads) {
            Tensor c = empty({m, n}, dtype);
            kernels::GemmArgs args = shape;
            args.a = a.data_ptr(), args.b = b.data_ptr(), args.c = c.data_ptr(), args.dtype = dtype;
            args.trans_a = trans_a, args.trans_b = trans_b;
            args.lda = trans_a ? m : k, args.ldb = trans_b ? k : n, args.ldc = n;
            args.stride_a = m * k, args.stride_b = k * n, args.stride_c = m * n;
            const int saved = omp_get_max_threads();
            omp_set_num_threads(threads);
            kernels::gemm_with(kernel, args);
            omp_set_num_threads(saved);
            return c;
          };
          const Tensor one = run(1);
          for (int threads : {2, 3}) {
            EXPECT_TRUE(testing::allclose(run(threads), one, 0.0, 0.0))
                << kernels::matmul_kernel_name(kernel) << " " << dtype_name(dtype) << " trans " << trans_a
                << trans_b << " threads " << threads;
          }
          if (!trans_a && trans_b) {
            EXPECT_TRUE(matmul_matches_reference(one, a, b, false, true, testing::matmul_tolerance(dtype)))
                << kernels::matmul_kernel_name(kernel) << " " << dtype_name(dtype);
          }
        }
      }
    }
  }
  if (on_the_path == 0)
    GTEST_SKIP() << "no CPU version takes the shared-B path for this case on this machine";
}

// One product by one version on one thread (the tasks then run in order, as the bit checks assume).
void gemm_on_one_thread(kernels::MatmulKernel kernel, const kernels::GemmArgs& args) {
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  kernels::gemm_with(kernel, args);
  omp_set_num_threads(saved);
}

// A task of few columns reads an untransposed A where it lies instead of packing it (reads_rows_of_a,
// kernels/cpu/gemm_loops.h); the products and their order are the packed path's, so the bits must be too.
// 100 x 200 x 1300: a partial last row panel (packed even in place), edge column tiles, three K slices. The
// same A stored with its rows 4 KiB apart (lda 2048) takes the packed path, and a transposed copy as well.
TEST(Matmul, ReadingARowsInPlaceGivesThePackedBits) {
  namespace detail = kernels::cpu::detail;
  constexpr int64_t m = 100, n = 200, k = 1300, padded = 2048;
  // The policy, for a kernel that has tile_rows (declared only: the requires-expression does not call it).
  struct WithTileRows {
    static void tile_rows(int64_t, const float*, int64_t, const float*, float*, int64_t, bool, const float*);
  };
  kernels::GemmArgs shape;
  shape.m = m, shape.n = n, shape.k = k, shape.batch = 1, shape.lda = k;
  EXPECT_TRUE((detail::reads_rows_of_a<float, WithTileRows>(shape, n)));
  shape.lda = padded;
  EXPECT_FALSE((detail::reads_rows_of_a<float, WithTileRows>(shape, n)));
  EXPECT_FALSE((detail::reads_rows_of_a<float, WithTileRows>(shape, 513)));
  shape.lda = k, shape.trans_a = true;
  EXPECT_FALSE((detail::reads_rows_of_a<float, WithTileRows>(shape, n)));
  EXPECT_FALSE((detail::reads_rows_of_a<bfloat16, WithTileRows>(shape, n)));

  Generator gen(31);
  const Tensor a = random_matrix(-1, m, k, kFloat32, gen), b = random_matrix(-1, k, n, kFloat32, gen);
  Tensor a_padded = zeros({m, padded});
  a_padded.narrow(1, 0, k).copy_(a);
  const Tensor a_t = a.transpose(0, 1).contiguous();
  for (kernels::MatmulKernel kernel : kernels::all_matmul_kernels()) {
    if (kernels::matmul_kernel_backend(kernel) != DeviceKind::CPU) continue;
    if (!kernels::matmul_kernel_supports(kernel, kFloat32)) continue;
    auto run = [&](const Tensor& a_stored, int64_t lda, bool trans_a) {
      Tensor c = empty({m, n});
      kernels::GemmArgs args = shape;
      args.a = a_stored.data_ptr(), args.b = b.data_ptr(), args.c = c.data_ptr(), args.dtype = kFloat32;
      args.lda = lda, args.ldb = n, args.ldc = n, args.trans_a = trans_a;
      args.stride_a = m * lda, args.stride_b = k * n, args.stride_c = m * n;
      gemm_on_one_thread(kernel, args);
      return c;
    };
    const Tensor in_place = run(a, k, false);
    EXPECT_TRUE(testing::allclose(in_place, run(a_padded, padded, false), 0.0, 0.0))
        << kernels::matmul_kernel_name(kernel);
    EXPECT_TRUE(testing::allclose(in_place, run(a_t, m, true), 0.0, 0.0))
        << kernels::matmul_kernel_name(kernel);
    EXPECT_TRUE(matmul_matches_reference(in_place, a, b, false, false, testing::matmul_tolerance(kFloat32)))
        << kernels::matmul_kernel_name(kernel);
  }
}

// A last micro-panel with few real columns (the baby GPT's logits: N = 65, one column in the last 32) runs
// v3's half tile (12 x 16): each element must keep the bits it has in a whole panel. The same product with
// B padded by zero columns to whole panels is the check, in place and packed (A read transposed), over two
// K slices, with a partial row panel (100 = 8 x 12 + 4), and with the last panel's columns at 1, 6, 16 and
// 17 (past the half).
TEST(Matmul, ANarrowLastPanelGivesTheBitsOfAWholeOne) {
  constexpr int64_t m = 100, k = 700, padded_n = 96;
  Generator gen(43);
  const Tensor a = random_matrix(-1, m, k, kFloat32, gen);
  const Tensor a_t = a.transpose(0, 1).contiguous();
  const Tensor b_full = random_matrix(-1, k, padded_n, kFloat32, gen);
  for (int64_t n : {65, 70, 80, 81}) {
    Tensor b_padded = zeros({k, padded_n});
    b_padded.narrow(1, 0, n).copy_(b_full.narrow(1, 0, n));
    const Tensor b = b_padded.narrow(1, 0, n).contiguous();
    for (kernels::MatmulKernel kernel : kernels::all_matmul_kernels()) {
      if (kernels::matmul_kernel_backend(kernel) != DeviceKind::CPU) continue;
      if (!kernels::matmul_kernel_supports(kernel, kFloat32)) continue;
      auto run = [&](const Tensor& b_stored, int64_t cols, bool trans_a) {
        Tensor c = empty({m, cols});
        kernels::GemmArgs args;
        args.m = m, args.n = cols, args.k = k, args.batch = 1, args.dtype = kFloat32;
        args.a = (trans_a ? a_t : a).data_ptr(), args.b = b_stored.data_ptr(), args.c = c.data_ptr();
        args.lda = trans_a ? m : k, args.ldb = cols, args.ldc = cols, args.trans_a = trans_a;
        args.stride_a = m * k, args.stride_b = k * cols, args.stride_c = m * cols;
        gemm_on_one_thread(kernel, args);
        return c;
      };
      for (bool trans_a : {false, true}) {
        const Tensor narrow = run(b, n, trans_a);
        const Tensor whole = run(b_padded, padded_n, trans_a).narrow(1, 0, n).contiguous();
        EXPECT_TRUE(testing::allclose(narrow, whole, 0.0, 0.0))
            << kernels::matmul_kernel_name(kernel) << ", n " << n << ", trans_a " << trans_a;
      }
    }
  }
}

// GemmArgs::bias: v2-v4 add it as they store a tile's last K slice, v1 and OpenBLAS in a pass afterwards.
// Either way each element must be the product rounded to C's dtype plus the bias, binary(Add)'s bits. The
// shapes take every store path: whole tiles read in place (100 x 200) and packed (a transposed A), edge rows
// and columns (the scratch tile's merge), a narrow last panel (65 and 81 columns), three K slices (k 1300),
// a batch of 2, and one product large enough for threads that pack B together (193 x 700 x 1100), on 1 and
// 2 threads.
TEST(Matmul, EveryCpuVersionAddsTheBiasWithTheBitsOfASeparateAdd) {
  struct Case {
    int64_t batch, m, n, k;
    bool trans_a;
  };
  const std::vector<Case> cases = {{1, 100, 200, 1300, false},
                                   {1, 100, 200, 1300, true},
                                   {2, 37, 65, 70, false},
                                   {1, 24, 81, 700, false},
                                   {1, 193, 700, 1100, false}};
  Generator gen(47);
  for (DType dtype : {kFloat32, kBFloat16, kFloat64}) {
    for (const Case& s : cases) {
      const Tensor a = s.trans_a ? random_matrix(s.batch, s.k, s.m, dtype, gen)
                                 : random_matrix(s.batch, s.m, s.k, dtype, gen);
      const Tensor b = random_matrix(-1, s.k, s.n, dtype, gen);
      const Tensor bias = random_matrix(-1, 1, s.n, dtype, gen).reshape({s.n});
      for (kernels::MatmulKernel kernel : kernels::all_matmul_kernels()) {
        if (kernels::matmul_kernel_backend(kernel) != DeviceKind::CPU) continue;
        if (!kernels::matmul_kernel_supports(kernel, dtype)) continue;
        auto run = [&](bool with_bias, int threads) {
          Tensor c = empty({s.batch, s.m, s.n}, dtype);
          kernels::GemmArgs args;
          args.a = a.data_ptr(), args.b = b.data_ptr(), args.c = c.data_ptr(), args.dtype = dtype;
          args.m = s.m, args.n = s.n, args.k = s.k, args.batch = s.batch, args.trans_a = s.trans_a;
          args.lda = s.trans_a ? s.m : s.k, args.ldb = s.n, args.ldc = s.n;
          args.stride_a = s.m * s.k, args.stride_b = 0, args.stride_c = s.m * s.n;
          args.bias = with_bias ? bias.data_ptr() : nullptr;
          const int saved = omp_get_max_threads();
          omp_set_num_threads(threads);
          kernels::gemm_with(kernel, args);
          omp_set_num_threads(saved);
          return c;
        };
        const Tensor expected = kernels::binary(kernels::BinaryOp::Add, run(false, 1), bias);
        for (int threads : {1, 2}) {
          EXPECT_TRUE(testing::allclose(run(true, threads), expected, 0.0, 0.0))
              << kernels::matmul_kernel_name(kernel) << " " << dtype_name(dtype) << " " << s.batch << "x"
              << s.m << "x" << s.n << "x" << s.k << " trans_a " << s.trans_a << " threads " << threads;
        }
      }
    }
  }
}

// A bfloat16 C's tile store (gemm_loops.h: store_bf16_tile, on AVX-512 lanes where the CPU has them) against
// the scalar casts: sums with round-to-even ties, denormals, Infs, NaNs and values that round up into the
// next binade or to Inf; whole and partial 16-lane column groups, full and short tiles, a first slice and an
// add into C, with and without a bias. Elements outside the tile's rows and columns stay untouched.
TEST(Matmul, Bf16TileStoreRoundsAsTheScalarCastsBitForBit) {
  constexpr int64_t kRows = 12, kNr = 32, kLdc = 40;
  std::mt19937 rng(11);
  auto float_of = [](uint32_t u) {
    float f;
    std::memcpy(&f, &u, sizeof f);
    return f;
  };
  const uint32_t specials[] = {0x00000001u, 0x807fffffu, 0x7f800000u, 0xff800000u, 0x7fc00001u, 0xffa00000u,
                               0x7f7fffffu, 0x3f808000u, 0x3f818000u, 0x3f807fffu, 0x00008000u, 0x80000000u};
  auto random_float = [&] {
    const uint32_t r = static_cast<uint32_t>(rng());
    if (r % 8 == 0) return float_of(specials[rng() % std::size(specials)]);
    if (r % 8 == 1) return float_of((r & 0xffff0000u) | 0x8000u);  // a tie
    return std::ldexp(std::normal_distribution<float>()(rng), static_cast<int>(rng() % 40) - 20);
  };
  auto same = [](bfloat16 a, bfloat16 b) {
    auto nan = [](bfloat16 v) { return (v.bits & 0x7f80) == 0x7f80 && (v.bits & 0x7f) != 0; };
    return a.bits == b.bits || (nan(a) && nan(b));
  };
  std::vector<float> tile(kRows * kNr);
  for (float& t : tile) t = random_float();
  std::vector<bfloat16> old(kRows * kLdc), bias(kNr);
  for (bfloat16& c : old) c = bfloat16(random_float());
  for (bfloat16& b : bias) b = bfloat16(random_float());
  int64_t mismatches = 0;
  for (int64_t rows : {kRows, int64_t{7}}) {
    for (int64_t cols : {kNr, int64_t{23}, int64_t{16}, int64_t{5}}) {
      for (bool first : {true, false}) {
        for (bool with_bias : {false, true}) {
          std::vector<bfloat16> c = old;
          kernels::cpu::detail::store_bf16_tile<kNr>(tile.data(), rows, cols, c.data(), kLdc, first,
                                                     with_bias ? bias.data() : nullptr);
          for (int64_t i = 0; i < kRows; ++i) {
            for (int64_t j = 0; j < kLdc; ++j) {
              bfloat16 want = old[i * kLdc + j];
              if (i < rows && j < cols) {
                const float t = tile[i * kNr + j];
                want = bfloat16(first ? t : float(want) + t);
                if (with_bias) want = bfloat16(float(want) + float(bias[j]));
              }
              if (!same(c[i * kLdc + j], want) && ++mismatches <= 5) {
                ADD_FAILURE() << rows << "x" << cols << " first " << first << " bias " << with_bias << " ("
                              << i << ", " << j << "): 0x" << std::hex << c[i * kLdc + j].bits
                              << ", expected 0x" << want.bits;
              }
            }
          }
        }
      }
    }
  }
  EXPECT_EQ(mismatches, 0);
}

// v4 packs bf16 pairs by vectors where it can (an untransposed A's or a transposed B's rows as 32-bit words,
// transposed, where the leading dimension is even; a transposed A's or an untransposed B's two rows
// interleaved) and by the scalar loop elsewhere (edge panels, odd leading dimensions, an odd K's last
// pair). Every path must pack the same pairs, so the same op(A) @ op(B) stored each way, with even and odd
// leading dimensions, gives the same bits. 37 rows: three whole 12-row panels and an edge; 70 columns: two
// whole 32-column panels and an edge; K even and odd.
TEST(Matmul, Bf16PairsPackTheSameByEveryPath) {
  if (!kernels::matmul_kernel_supports(kernels::MatmulKernel::CpuAvx512Bf16, kBFloat16)) {
    GTEST_SKIP() << "v4-avx512-bf16 does not run on this CPU (it needs AVX512-BF16)";
  }
  constexpr int64_t M = 37, N = 70;
  Generator gen(53);
  for (int64_t K : {70, 71}) {
    const std::vector<bfloat16> a = random_matrix(-1, M, K, kBFloat16, gen).to_vector<bfloat16>();
    const std::vector<bfloat16> b = random_matrix(-1, K, N, kBFloat16, gen).to_vector<bfloat16>();
    // op(X) [rows, cols] stored untransposed (ld >= cols) or transposed (ld >= rows), ld = the minimum + pad.
    auto store = [](const std::vector<bfloat16>& x, int64_t rows, int64_t cols, bool trans, int64_t ld) {
      std::vector<bfloat16> out(static_cast<size_t>((trans ? cols : rows) * ld), bfloat16(7.0f));
      for (int64_t i = 0; i < rows; ++i) {
        for (int64_t j = 0; j < cols; ++j) out[trans ? j * ld + i : i * ld + j] = x[i * cols + j];
      }
      return out;
    };
    std::vector<bfloat16> first;
    for (bool trans_a : {false, true}) {
      for (bool trans_b : {false, true}) {
        for (int64_t pad : {0, 1}) {
          SCOPED_TRACE(::testing::Message()
                       << "K " << K << " trans_a " << trans_a << " trans_b " << trans_b << " pad " << pad);
          const int64_t lda = (trans_a ? M : K) + pad, ldb = (trans_b ? K : N) + pad;
          const std::vector<bfloat16> sa = store(a, M, K, trans_a, lda), sb = store(b, K, N, trans_b, ldb);
          std::vector<bfloat16> c(M * N);
          kernels::GemmArgs args;
          args.a = sa.data(), args.b = sb.data(), args.c = c.data(), args.dtype = kBFloat16;
          args.m = M, args.n = N, args.k = K, args.trans_a = trans_a, args.trans_b = trans_b;
          args.lda = lda, args.ldb = ldb, args.ldc = N;
          kernels::gemm_with(kernels::MatmulKernel::CpuAvx512Bf16, args);
          if (first.empty()) {
            first = c;
            continue;
          }
          int64_t mismatches = 0;
          for (size_t i = 0; i < c.size(); ++i) mismatches += c[i].bits != first[i].bits;
          EXPECT_EQ(mismatches, 0);
        }
      }
    }
  }
}

// kernels::matmul_bias, the public op: matmul then add, bit for bit, on the default version and on the
// OpenBLAS backend, for a 2-d and a batched product and an empty sum (K = 0: the bias alone); a bias of the
// wrong length, dtype or an undefined one is refused by name.
TEST(Matmul, MatmulBiasIsMatmulThenAdd) {
  Generator gen(53);
  const Tensor a = random_matrix(3, 50, 40, kFloat32, gen), w = random_matrix(-1, 70, 40, kFloat32, gen);
  const Tensor bias = random_matrix(-1, 1, 70, kFloat32, gen).reshape({70});
  auto check = [&](const char* what) {
    for (const Tensor& x : {a, a.select(0, 1)}) {
      const Tensor expected = kernels::binary(kernels::BinaryOp::Add, matmul(x, w, false, true), bias);
      EXPECT_TRUE(testing::allclose(kernels::matmul_bias(x, w, bias, false, true), expected, 0.0, 0.0))
          << what;
    }
  };
  check("native");
  if (kernels::blas_available()) {
    const kernels::MatmulBackend saved = kernels::matmul_backend();
    kernels::set_matmul_backend(kernels::MatmulBackend::Blas);
    check("openblas");
    kernels::set_matmul_backend(saved);
  }
  const Tensor empty_sum = kernels::matmul_bias(zeros({4, 0}), zeros({0, 70}), bias);
  EXPECT_TRUE(testing::allclose(empty_sum, bias.reshape({1, 70}).expand({4, 70}).contiguous(), 0.0, 0.0));
  EXPECT_THROW(kernels::matmul_bias(a, w, zeros({69}), false, true), ShapeError);
  EXPECT_THROW(kernels::matmul_bias(a, w, zeros({1, 70}), false, true), ShapeError);
  EXPECT_THROW(kernels::matmul_bias(a, w, zeros({70}, kFloat64), false, true), DTypeError);
  EXPECT_THROW(kernels::matmul_bias(a, w, Tensor(), false, true), ValueError);
}

// An OpenBLAS older than the CPU runs its SSE3 Prescott kernels: the bench and `brigade info` name the core
// that gives it the CPU's vector kernels, and leave a core that has them alone.
TEST(Matmul, OpenBlasIsToldItsVectorCoreOnlyWhereItPickedAnOlderOne) {
  using kernels::cpu::openblas_vector_core_for;
  EXPECT_EQ(openblas_vector_core_for("Prescott", true, true), "SkylakeX");
  EXPECT_EQ(openblas_vector_core_for("Prescott", false, true), "Haswell");
  EXPECT_EQ(openblas_vector_core_for("Nehalem", false, false), "");
  for (const char* has_vectors : {"Haswell", "ZEN", "SkylakeX", "skylakex", "Cooperlake", "SapphireRapids"}) {
    EXPECT_EQ(openblas_vector_core_for(has_vectors, true, true), "") << has_vectors;
  }
  EXPECT_EQ(openblas_vector_core_for("", true, true), "");
  if (!kernels::cpu::openblas_built()) {
    EXPECT_EQ(kernels::cpu::openblas_core(), "");
    GTEST_SKIP() << "built without OpenBLAS";
  }
  EXPECT_FALSE(kernels::cpu::openblas_core().empty());
}

// The bf16 line of `brigade info` for each pair of features: what the CPU has and lacks, and what the bf16
// GEMMs run on as a result.
TEST(Matmul, Bf16SupportLineSaysWhatTheCpuHasAndLacks) {
  auto has = [](const std::string& text, const std::string& part) {
    return text.find(part) != std::string::npos;
  };
  const std::string neither = kernels::cpu::bf16_support_text(false, false);
  EXPECT_TRUE(has(neither, "no AVX512-BF16") && has(neither, "no AMX") && has(neither, "widen")) << neither;
  const std::string dot = kernels::cpu::bf16_support_text(true, false);
  EXPECT_TRUE(has(dot, "AVX512-BF16: ") && has(dot, "vdpbf16ps") && has(dot, "no AMX")) << dot;
  const std::string both = kernels::cpu::bf16_support_text(true, true);
  EXPECT_TRUE(has(both, "AMX present but not used")) << both;
  const std::string amx_only = kernels::cpu::bf16_support_text(false, true);
  EXPECT_TRUE(has(amx_only, "no AVX512-BF16") && has(amx_only, "AMX present but not used")) << amx_only;
  const kernels::cpu::CpuFeatures& f = kernels::cpu::cpu_features();
  EXPECT_EQ(kernels::cpu::bf16_support_summary(), kernels::cpu::bf16_support_text(f.avx512_bf16, f.amx_bf16));
}

// bfloat16 GEMMs run v4 (vdpbf16ps) only where the core computes faster on it than on FMAs: measured, since
// the ratio is about 2 on Zen 4 and 0.5 on Intel cores without AMX.
TEST(Matmul, Bf16DefaultFollowsTheMeasuredVdpbf16psRate) {
  namespace cpu = kernels::cpu;
  const double ratio = cpu::dpbf16_over_fma();
  EXPECT_EQ(ratio > 0, cpu::cpu_features().avx512_bf16);
  EXPECT_EQ(cpu::dpbf16_over_fma(), ratio) << "measured once a process";
  const kernels::MatmulKernel bf16 = kernels::default_matmul_kernel(DeviceKind::CPU, kBFloat16);
  EXPECT_EQ(bf16 == kernels::MatmulKernel::CpuAvx512Bf16, ratio > 1.0) << "ratio " << ratio;
  EXPECT_EQ(bf16 == kernels::MatmulKernel::CpuAvx512, ratio <= 1.0 && cpu::cpu_features().avx512f);
  for (cpu::PeakLoop loop : {cpu::PeakLoop::FmaAvx2, cpu::PeakLoop::FmaAvx512, cpu::PeakLoop::Dpbf16Avx512}) {
    const double rate = cpu::measure_peak_loop(loop, 1000, 2);
    EXPECT_EQ(rate > 0, cpu::peak_loop_runs(loop)) << cpu::peak_loop_name(loop);
  }
}

}  // namespace
}  // namespace brigade
