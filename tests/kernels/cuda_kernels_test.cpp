// CUDA kernels (kernels/cuda/*.cu, all but matmul) against the CPU backend, on the cases the shared op
// table does not reach: rows long enough to need many warps per block (C = 50304, 4096), row counts beyond
// one partial per row in the layernorm parameter gradients, reductions with large odd R*C, dropout masks
// that must equal the CPU's bit for bit, embedding gradients with heavily repeated ids, AdamW, the global
// norm, and run-to-run determinism. Each test skips without a GPU.
//
// Tolerances (stated per check) come from where the two backends round differently: the CPU backend
// accumulates in double; the CUDA kernels compute elementwise math in float (float32/bfloat16) and reduce
// in a tree order. float32 results are held to ~1e-5 relative; bfloat16 outputs may differ by one bf16 ulp
// (2^-8 relative) where the float values straddle a rounding boundary, so they get rtol 1e-2.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/kernels.h"
#include "tests/test_support.h"

namespace brigade {
namespace {

using testing::allclose;

Tensor cuda(const Tensor& t) {
  return t.to(Device::cuda());
}

/// Standard normal values times `scale`, made on the CPU (then moved where needed) in `dtype`.
Tensor random_normal(const Shape& shape, uint64_t seed, double scale = 1.0, DType dtype = kFloat32) {
  Generator gen(seed);
  Tensor x = randn(shape, TensorOptions(kFloat32), &gen);
  if (scale != 1.0) x = kernels::binary(kernels::BinaryOp::Mul, x, scale);
  return x.to(dtype);
}

/// Integer ids in [0, V) on the CPU, from the Philox uniform stream.
Tensor random_ids(int64_t N, int64_t V, uint64_t seed, DType dtype = kInt64) {
  Generator gen(seed);
  std::vector<float> u = rand({N}, TensorOptions(kFloat32), &gen).to_vector<float>();
  std::vector<int64_t> ids(static_cast<size_t>(N));
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = std::min<int64_t>(V - 1, static_cast<int64_t>(u[i] * V));
  return from_vector(ids, {N}).to(dtype);
}

/// The bytes of every element, to compare results bit for bit.
template <typename T>
std::vector<T> host_values(const Tensor& t) {
  return t.contiguous().cpu().to_vector<T>();
}

template <typename T>
bool bitwise_equal(const Tensor& a, const Tensor& b) {
  std::vector<T> va = host_values<T>(a), vb = host_values<T>(b);
  return va.size() == vb.size() && std::memcmp(va.data(), vb.data(), va.size() * sizeof(T)) == 0;
}

// ---- softmax ---------------------------------------------------------------------------------------------

TEST(CudaKernelsTest, SoftmaxLongRowsMatchCpu) {
  BRIGADE_REQUIRE_CUDA();
  for (Shape shape : {Shape{6, 50304}, Shape{33, 4096}, Shape{5, 1}, Shape{7, 37}}) {
    Tensor x = random_normal(shape, 11, 4.0);
    Tensor dy = random_normal(shape, 12);
    Tensor x_gpu = cuda(x), dy_gpu = cuda(dy);

    Tensor y = kernels::softmax(x), y_gpu = kernels::softmax(x_gpu);
    // softmax values are ~1/C; float32 exp and a float sum over C terms: relative 1e-5.
    EXPECT_TRUE(allclose(y_gpu, y, 2e-5, 1e-9)) << shape_str(shape);
    Tensor ly = kernels::log_softmax(x), ly_gpu = kernels::log_softmax(x_gpu);
    // log-softmax values ~ -log(C) - 4x: absolute error of the float log-sum-exp.
    EXPECT_TRUE(allclose(ly_gpu, ly, 1e-6, 1e-5)) << shape_str(shape);

    // Backward from the same y on both sides (the CPU's), so only the backward kernel's rounding differs.
    EXPECT_TRUE(
        allclose(kernels::softmax_backward(dy_gpu, cuda(y)), kernels::softmax_backward(dy, y), 1e-4, 1e-6))
        << shape_str(shape);
    EXPECT_TRUE(allclose(kernels::log_softmax_backward(dy_gpu, cuda(ly)),
                         kernels::log_softmax_backward(dy, ly), 1e-4, 1e-5))
        << shape_str(shape);
  }
}

TEST(CudaKernelsTest, SoftmaxBFloat16MatchesCpu) {
  BRIGADE_REQUIRE_CUDA();
  Tensor x16 = random_normal({9, 4096}, 13, 3.0, kBFloat16);
  // Same bf16 input on both sides; one bf16 ulp of output rounding allowed.
  EXPECT_TRUE(allclose(kernels::softmax(cuda(x16)), kernels::softmax(x16), 1e-2, 1e-7));
  EXPECT_TRUE(allclose(kernels::log_softmax(cuda(x16)), kernels::log_softmax(x16), 1e-2, 1e-2));
}

TEST(CudaKernelsTest, SoftmaxExtremeRows) {
  BRIGADE_REQUIRE_CUDA();
  const float inf = INFINITY;
  // Row 0: one -inf among finite values (its probability is 0); row 1: huge values (no overflow thanks to
  // the max shift); row 2: constant row (uniform).
  Tensor x = from_vector<float>({1.0f, -inf, 2.0f, 0.5f,             //
                                 1000.0f, 999.0f, 998.0f, -1000.0f,  //
                                 3.0f, 3.0f, 3.0f, 3.0f},
                                {3, 4});
  Tensor y = kernels::softmax(cuda(x));
  EXPECT_TRUE(allclose(y, kernels::softmax(x), 1e-6, 1e-7));
  std::vector<float> v = host_values<float>(y);
  EXPECT_EQ(v[1], 0.0f);
  EXPECT_NEAR(v[8], 0.25f, 1e-7);
}

// ---- layernorm -------------------------------------------------------------------------------------------

TEST(CudaKernelsTest, LayerNormLongRowsMatchCpu) {
  BRIGADE_REQUIRE_CUDA();
  // {R, C}: long rows, many rows (several rows per dweight partial, R not a multiple of the 128 partials).
  for (Shape shape : {Shape{4, 50304}, Shape{32, 4096}, Shape{1031, 96}, Shape{3, 7}}) {
    const int64_t C = shape[1];
    Tensor x = random_normal(shape, 21, 2.0);
    // A mean offset that a one-pass variance would lose precision on.
    x = kernels::binary(kernels::BinaryOp::Add, x, 3.0);
    Tensor w = random_normal({C}, 22), b = random_normal({C}, 23), dy = random_normal(shape, 24);
    auto ref = kernels::layernorm(x, w, b, 1e-5);
    auto got = kernels::layernorm(cuda(x), cuda(w), cuda(b), 1e-5);
    // y ~ N(0, |w|) + b, float32 statistics: absolute 1e-4.
    EXPECT_TRUE(allclose(got.y, ref.y, 1e-4, 1e-4)) << shape_str(shape);
    EXPECT_TRUE(allclose(got.mean, ref.mean, 1e-5, 1e-5)) << shape_str(shape);
    EXPECT_TRUE(allclose(got.rstd, ref.rstd, 1e-5, 1e-6)) << shape_str(shape);

    auto gref = kernels::layernorm_backward(dy, x, w, ref.mean, ref.rstd, true);
    // Same statistics on both sides (the CPU's), so only the backward kernels' rounding differs.
    auto ggot = kernels::layernorm_backward(cuda(dy), cuda(x), cuda(w), cuda(ref.mean), cuda(ref.rstd), true);
    EXPECT_TRUE(allclose(ggot.dx, gref.dx, 1e-4, 1e-4)) << shape_str(shape);
    // dweight, dbias sum R terms of O(1): absolute error grows like sqrt(R) * 1e-6.
    EXPECT_TRUE(allclose(ggot.dweight, gref.dweight, 1e-4, 1e-4)) << shape_str(shape);
    EXPECT_TRUE(allclose(ggot.dbias, gref.dbias, 1e-4, 1e-4)) << shape_str(shape);
  }
}

TEST(CudaKernelsTest, LayerNormWithoutAffineAndBFloat16) {
  BRIGADE_REQUIRE_CUDA();
  Tensor x = random_normal({65, 4096}, 31);
  auto ref = kernels::layernorm(x, Tensor(), Tensor(), 1e-5);
  auto got = kernels::layernorm(cuda(x), Tensor(), Tensor(), 1e-5);
  EXPECT_TRUE(allclose(got.y, ref.y, 1e-4, 1e-4));
  Tensor dy = random_normal({65, 4096}, 32);
  auto gref = kernels::layernorm_backward(dy, x, Tensor(), ref.mean, ref.rstd, false);
  auto ggot = kernels::layernorm_backward(cuda(dy), cuda(x), Tensor(), cuda(ref.mean), cuda(ref.rstd), false);
  EXPECT_TRUE(allclose(ggot.dx, gref.dx, 1e-4, 1e-4));
  EXPECT_FALSE(ggot.dweight.defined());
  EXPECT_FALSE(ggot.dbias.defined());

  Tensor x16 = random_normal({17, 4096}, 33, 1.0, kBFloat16);
  Tensor w16 = random_normal({4096}, 34, 1.0, kBFloat16), b16 = random_normal({4096}, 35, 1.0, kBFloat16);
  auto r16 = kernels::layernorm(x16, w16, b16, 1e-5);
  auto g16 = kernels::layernorm(cuda(x16), cuda(w16), cuda(b16), 1e-5);
  EXPECT_EQ(g16.mean.dtype(), kFloat32);
  EXPECT_TRUE(allclose(g16.y, r16.y, 1e-2, 2e-2));  // one bf16 ulp of |y| <= ~8
  EXPECT_TRUE(allclose(g16.rstd, r16.rstd, 1e-5, 1e-6));
}

TEST(CudaKernelsTest, LayerNormBackwardIsDeterministic) {
  BRIGADE_REQUIRE_CUDA();
  Tensor x = cuda(random_normal({2051, 768}, 41)), dy = cuda(random_normal({2051, 768}, 42));
  Tensor w = cuda(random_normal({768}, 43)), b = cuda(random_normal({768}, 44));
  auto fwd = kernels::layernorm(x, w, b, 1e-5);
  auto first = kernels::layernorm_backward(dy, x, w, fwd.mean, fwd.rstd, true);
  auto second = kernels::layernorm_backward(dy, x, w, fwd.mean, fwd.rstd, true);
  EXPECT_TRUE(bitwise_equal<float>(first.dweight, second.dweight));
  EXPECT_TRUE(bitwise_equal<float>(first.dbias, second.dbias));
  EXPECT_TRUE(bitwise_equal<float>(first.dx, second.dx));
}

// ---- cross-entropy
// -----------------------------------------------------------------------------------------

TEST(CudaKernelsTest, CrossEntropyLargeVocabMatchesCpu) {
  BRIGADE_REQUIRE_CUDA();
  const int64_t N = 48, V = 50304, kIgnore = -100;
  Tensor logits = random_normal({N, V}, 51, 3.0);
  std::vector<int64_t> t = random_ids(N, V, 52).to_vector<int64_t>();
  t[3] = kIgnore;
  t[17] = kIgnore;
  t[0] = V - 1;  // the last class
  Tensor targets = from_vector(t, {N});
  auto ref = kernels::cross_entropy(logits, targets, kIgnore, true);
  auto got = kernels::cross_entropy(cuda(logits), cuda(targets), kIgnore, true);
  EXPECT_EQ(got.count, N - 2);
  EXPECT_EQ(got.count, ref.count);
  // Mean loss ~ log(V) + O(1) ~ 15: float log-sum-exp over 50304 terms, relative 1e-5.
  EXPECT_TRUE(allclose(got.loss, ref.loss, 1e-5, 1e-5));
  // Gradient entries (p - onehot) / count ~ 1e-7 .. 2e-2: relative 1e-4 of float exp, tiny atol.
  EXPECT_TRUE(allclose(got.grad_logits, ref.grad_logits, 1e-4, 1e-10));
  // Ignored rows have an all-zero gradient.
  std::vector<float> g = host_values<float>(got.grad_logits.select(0, 3));
  for (float v : g) ASSERT_EQ(v, 0.0f);

  // int32 targets and loss only.
  auto got32 = kernels::cross_entropy(cuda(logits), cuda(targets.to(kInt32)), kIgnore, false);
  EXPECT_FALSE(got32.grad_logits.defined());
  EXPECT_TRUE(allclose(got32.loss, ref.loss, 1e-5, 1e-5));
}

TEST(CudaKernelsTest, CrossEntropyBFloat16AndEdgeCases) {
  BRIGADE_REQUIRE_CUDA();
  Tensor logits = random_normal({20, 4096}, 61, 2.0, kBFloat16);
  Tensor targets = random_ids(20, 4096, 62);
  auto ref = kernels::cross_entropy(logits, targets, -100, true);
  auto got = kernels::cross_entropy(cuda(logits), cuda(targets), -100, true);
  EXPECT_EQ(got.loss.dtype(), kFloat32);
  EXPECT_TRUE(allclose(got.loss, ref.loss, 1e-5, 1e-5));  // float32 loss from the same bf16 inputs
  EXPECT_TRUE(allclose(got.grad_logits, ref.grad_logits, 1e-2, 1e-9));

  // Every row ignored: count 0, zero gradient, same loss as the CPU (whatever its convention for 0/0).
  Tensor all_ignored = full({20}, -100.0, TensorOptions(kInt64));
  auto ref0 = kernels::cross_entropy(logits.to(kFloat32), all_ignored, -100, true);
  auto got0 = kernels::cross_entropy(cuda(logits.to(kFloat32)), cuda(all_ignored), -100, true);
  EXPECT_EQ(got0.count, 0);
  EXPECT_TRUE(allclose(got0.loss, ref0.loss, 0.0, 0.0));
  EXPECT_TRUE(allclose(got0.grad_logits, zeros({20, 4096}), 0.0, 0.0));

  // A bad target is a ValueError on both devices, naming the same (first) bad row.
  std::vector<int64_t> t = targets.to_vector<int64_t>();
  t[5] = 4096;
  t[9] = -1;
  Tensor bad = from_vector(t, {20});
  std::string cpu_message, gpu_message;
  try {
    kernels::cross_entropy(logits, bad, -100, true);
  } catch (const ValueError& e) {
    cpu_message = e.what();
  }
  try {
    kernels::cross_entropy(cuda(logits), cuda(bad), -100, true);
  } catch (const ValueError& e) {
    gpu_message = e.what();
  }
  EXPECT_NE(gpu_message.find("position 5"), std::string::npos) << gpu_message;
  EXPECT_EQ(gpu_message, cpu_message);
}

// ---- dropout and causal mask
// ---------------------------------------------------------------------------------

TEST(CudaKernelsTest, DropoutEqualsCpuBitForBit) {
  BRIGADE_REQUIRE_CUDA();
  const GeneratorState state{0xC0FFEEu, 7};
  Tensor x = random_normal({1001, 1037}, 71);  // odd sizes: ~1M elements, not a multiple of any block
  for (double p : {0.1, 0.5, 0.9}) {
    Tensor ref = kernels::dropout(x, p, state);
    Tensor got = kernels::dropout(cuda(x), p, state);
    EXPECT_TRUE(bitwise_equal<float>(got, ref)) << "p = " << p;
    // Sanity of the mask itself: the kept fraction is 1 - p within 5 standard deviations.
    std::vector<float> v = host_values<float>(got);
    int64_t kept = 0;
    for (float e : v) kept += e != 0.0f;
    const double n = static_cast<double>(v.size());
    EXPECT_NEAR(kept / n, 1.0 - p, 5.0 * std::sqrt(p * (1 - p) / n)) << "p = " << p;
  }
  // A different offset gives a different mask.
  EXPECT_FALSE(bitwise_equal<float>(kernels::dropout(cuda(x), 0.5, {0xC0FFEEu, 8}),
                                    kernels::dropout(cuda(x), 0.5, state)));
  // Strided input: the mask follows the row-major order of the (transposed) view on both devices.
  Tensor xt = x.transpose(0, 1);
  EXPECT_TRUE(bitwise_equal<float>(kernels::dropout(cuda(x).transpose(0, 1), 0.3, state),
                                   kernels::dropout(xt, 0.3, state)));
  // bfloat16 too.
  Tensor x16 = x.to(kBFloat16);
  EXPECT_TRUE(bitwise_equal<float>(kernels::dropout(cuda(x16), 0.2, state).to(kFloat32),
                                   kernels::dropout(x16, 0.2, state).to(kFloat32)));
  // p = 1 drops everything, p = 0 keeps everything unchanged.
  EXPECT_TRUE(allclose(kernels::dropout(cuda(x), 1.0, state), zeros({1001, 1037}), 0.0, 0.0));
  EXPECT_TRUE(bitwise_equal<float>(kernels::dropout(cuda(x), 0.0, state), x));
}

TEST(CudaKernelsTest, CausalMaskMatchesCpu) {
  BRIGADE_REQUIRE_CUDA();
  for (int64_t T : {1, 7, 1025}) {
    EXPECT_TRUE(
        allclose(kernels::causal_mask(T, TensorOptions(Device::cuda())), kernels::causal_mask(T), 0.0, 0.0))
        << "T = " << T;
  }
}

// ---- embedding
// -----------------------------------------------------------------------------------------------

TEST(CudaKernelsTest, EmbeddingBackwardWithRepeatedIdsMatchesCpu) {
  BRIGADE_REQUIRE_CUDA();
  const int64_t V = 50, C = 129, N = 20000;  // ~400 repeats of each id: heavy atomic contention
  Tensor ids = random_ids(N, V, 81);
  Tensor grad_out = random_normal({N, C}, 82);
  Tensor ref = kernels::embedding_backward(grad_out, ids, V);
  Tensor got = kernels::embedding_backward(cuda(grad_out), cuda(ids), V);
  // Sums of ~400 N(0,1) terms (|sum| ~ 20) in float32 atomics vs double on the CPU: absolute 1e-4.
  EXPECT_TRUE(allclose(got, ref, 1e-5, 1e-4));
  // int32 ids; an id never drawn keeps a zero row.
  std::vector<int64_t> some(1000, 3);
  some[10] = 7;
  Tensor few = from_vector(some, {1000});
  Tensor g_few = random_normal({1000, C}, 83);
  EXPECT_TRUE(allclose(kernels::embedding_backward(cuda(g_few), cuda(few.to(kInt32)), V),
                       kernels::embedding_backward(g_few, few, V), 1e-5, 1e-4));

  // bfloat16 accumulates in float32 and rounds once, like the CPU's double sum: one bf16 ulp.
  Tensor g16 = grad_out.to(kBFloat16);
  EXPECT_TRUE(allclose(kernels::embedding_backward(cuda(g16), cuda(ids), V),
                       kernels::embedding_backward(g16, ids, V), 1e-2, 1e-2));
}

TEST(CudaKernelsTest, EmbeddingForwardGathersAndReportsFirstBadId) {
  BRIGADE_REQUIRE_CUDA();
  const int64_t V = 1000, C = 77;
  Tensor weight = random_normal({V, C}, 91);
  Tensor ids = random_ids(37 * 111, V, 92).view({37, 111});
  EXPECT_TRUE(
      allclose(kernels::embedding(cuda(weight), cuda(ids)), kernels::embedding(weight, ids), 0.0, 0.0));
  EXPECT_TRUE(allclose(kernels::embedding(cuda(weight.to(kBFloat16)), cuda(ids.to(kInt32))),
                       kernels::embedding(weight.to(kBFloat16), ids), 0.0, 0.0));

  std::vector<int64_t> v = ids.flatten().to_vector<int64_t>();
  v[2000] = V;   // bad, later
  v[1234] = -5;  // bad, first
  Tensor bad = from_vector(v, {37 * 111});
  std::string cpu_message, gpu_message;
  try {
    kernels::embedding(weight, bad);
  } catch (const ValueError& e) {
    cpu_message = e.what();
  }
  try {
    kernels::embedding(cuda(weight), cuda(bad));
  } catch (const ValueError& e) {
    gpu_message = e.what();
  }
  EXPECT_NE(gpu_message.find("-5"), std::string::npos) << gpu_message;
  EXPECT_EQ(gpu_message, cpu_message);
}

// ---- optimizer math
// ----------------------------------------------------------------------------------------

TEST(CudaKernelsTest, AdamWMatchesCpu) {
  BRIGADE_REQUIRE_CUDA();
  const int64_t n = 100003;
  for (DType dtype : {kFloat32, kBFloat16}) {
    const DType moment_dtype = kFloat32;
    Tensor p_cpu = random_normal({n}, 101, 1.0, dtype);
    Tensor m_cpu = zeros({n}, TensorOptions(moment_dtype)), v_cpu = zeros({n}, TensorOptions(moment_dtype));
    Tensor p_gpu = cuda(p_cpu), m_gpu = cuda(m_cpu), v_gpu = cuda(v_cpu);
    kernels::AdamWStep s;
    s.lr = 1e-2;
    s.weight_decay = 0.1;
    for (int64_t step = 1; step <= 3; ++step) {
      s.step = step;
      Tensor g = random_normal({n}, 110 + static_cast<uint64_t>(step), 1.0, dtype);
      kernels::adamw_update(p_cpu, g, m_cpu, v_cpu, s);
      kernels::adamw_update(p_gpu, cuda(g), m_gpu, v_gpu, s);
    }
    // float32 math on the GPU vs double on the CPU; the update is ~lr per step. bfloat16 params: one ulp.
    const double p_rtol = dtype == kBFloat16 ? 1e-2 : 1e-5;
    const double p_atol = dtype == kBFloat16 ? 1e-2 : 1e-6;
    EXPECT_TRUE(allclose(p_gpu, p_cpu, p_rtol, p_atol)) << dtype_name(dtype);
    EXPECT_TRUE(allclose(m_gpu, m_cpu, 1e-5, 1e-7)) << dtype_name(dtype);
    EXPECT_TRUE(allclose(v_gpu, v_cpu, 1e-5, 1e-7)) << dtype_name(dtype);
  }
}

TEST(CudaKernelsTest, GlobalNormMatchesCpu) {
  BRIGADE_REQUIRE_CUDA();
  std::vector<Tensor> cpu_tensors = {random_normal({4099, 1031}, 121), random_normal({7}, 122),
                                     random_normal({513, 3}, 123, 1.0, kBFloat16)};
  std::vector<Tensor> gpu_tensors;
  for (const Tensor& t : cpu_tensors) gpu_tensors.push_back(cuda(t));
  const double ref = kernels::global_l2_norm(cpu_tensors);
  const double got = kernels::global_l2_norm(gpu_tensors);
  // Both sum squares in double; only the order differs.
  EXPECT_NEAR(got, ref, 1e-10 * ref);
  EXPECT_EQ(got, kernels::global_l2_norm(gpu_tensors));  // deterministic
}

// ---- reductions
// --------------------------------------------------------------------------------------------

TEST(CudaKernelsTest, ReductionsLargeOddShapesMatchCpu) {
  BRIGADE_REQUIRE_CUDA();
  Tensor x = random_normal({1031, 4099}, 131, 2.0);
  Tensor xg = cuda(x);
  // Sums in double on both sides, rounded once to float32.
  EXPECT_TRUE(allclose(kernels::sum(xg, {1}), kernels::sum(x, {1}), 1e-6, 1e-5));
  EXPECT_TRUE(allclose(kernels::sum(xg, {0}), kernels::sum(x, {0}), 1e-6, 1e-5));
  EXPECT_TRUE(allclose(kernels::sum(xg), kernels::sum(x), 1e-6, 1e-3));  // one row of 4.2M
  EXPECT_TRUE(allclose(kernels::mean(xg, {1}), kernels::mean(x, {1}), 1e-6, 1e-7));
  // Max and argmax are exact.
  EXPECT_TRUE(allclose(kernels::max(xg, {1}), kernels::max(x, {1}), 0.0, 0.0));
  EXPECT_TRUE(allclose(kernels::max(xg, {0}), kernels::max(x, {0}), 0.0, 0.0));
  EXPECT_EQ(host_values<int64_t>(kernels::argmax(xg, 1)), host_values<int64_t>(kernels::argmax(x, 1)));
  EXPECT_EQ(host_values<int64_t>(kernels::argmax(xg, 0)), host_values<int64_t>(kernels::argmax(x, 0)));
  // Long single rows, bfloat16.
  Tensor y16 = random_normal({3, 1000003}, 132, 1.0, kBFloat16);
  EXPECT_TRUE(allclose(kernels::sum(cuda(y16), {1}), kernels::sum(y16, {1}), 1e-2, 1e-1));
  EXPECT_EQ(host_values<int64_t>(kernels::argmax(cuda(y16), 1)),
            host_values<int64_t>(kernels::argmax(y16, 1)));
}

TEST(CudaKernelsTest, ArgMaxTiesAndNaN) {
  BRIGADE_REQUIRE_CUDA();
  const float nan = NAN;
  // 2000 columns so ties and NaNs land in different threads and warps.
  std::vector<float> v(3 * 2000, 0.0f);
  v[0 * 2000 + 1500] = 5.0f;  // row 0: max 5 at 1500 and at 1700 -> first (1500)
  v[0 * 2000 + 1700] = 5.0f;
  v[1 * 2000 + 10] = 9.0f;  // row 1: NaN at 999 and 1999 beats 9 -> first NaN (999)
  v[1 * 2000 + 999] = nan;
  v[1 * 2000 + 1999] = nan;
  // row 2: all zeros -> index 0
  Tensor x = from_vector(v, {3, 2000});
  EXPECT_EQ(host_values<int64_t>(kernels::argmax(cuda(x), 1)), (std::vector<int64_t>{1500, 999, 0}));
  EXPECT_EQ(host_values<int64_t>(kernels::argmax(cuda(x), 1)), host_values<int64_t>(kernels::argmax(x, 1)));
  std::vector<float> m = host_values<float>(kernels::max(cuda(x), {1}));
  EXPECT_EQ(m[0], 5.0f);
  EXPECT_TRUE(std::isnan(m[1]));
  EXPECT_EQ(m[2], 0.0f);
}

// ---- elementwise on strided operands
// -------------------------------------------------------------------------

TEST(CudaKernelsTest, ElementwiseStridedAndBroadcastOperandsMatchCpu) {
  BRIGADE_REQUIRE_CUDA();
  Tensor a = random_normal({37, 4, 129}, 141);
  Tensor b = random_normal({129, 37}, 142);
  // a permuted (non-contiguous), b transposed and broadcast over the middle dim (stride 0).
  Tensor a_view = a.permute({1, 0, 2});  // [4, 37, 129]
  Tensor b_view = b.t().unsqueeze(0);    // [1, 37, 129]
  Tensor ga = cuda(a).permute({1, 0, 2}), gb = cuda(b).t().unsqueeze(0);
  for (auto op : {kernels::BinaryOp::Add, kernels::BinaryOp::Mul, kernels::BinaryOp::Div,
                  kernels::BinaryOp::Maximum, kernels::BinaryOp::Gt}) {
    EXPECT_TRUE(allclose(kernels::binary(op, ga, gb), kernels::binary(op, a_view, b_view), 1e-6, 1e-6))
        << kernels::binary_op_name(op);
  }
  for (auto op : {kernels::UnaryOp::Exp, kernels::UnaryOp::Tanh, kernels::UnaryOp::Sigmoid,
                  kernels::UnaryOp::Gelu, kernels::UnaryOp::Relu}) {
    EXPECT_TRUE(allclose(kernels::unary(op, ga), kernels::unary(op, a_view), 1e-5, 1e-6))
        << kernels::unary_op_name(op);
    Tensor gy = random_normal({4, 37, 129}, 143);
    EXPECT_TRUE(allclose(kernels::unary_backward(op, cuda(gy), ga, Tensor()),
                         kernels::unary_backward(op, gy, a_view, Tensor()), 1e-5, 1e-6))
        << kernels::unary_op_name(op);
  }
  // In-place accumulation into a strided destination.
  Tensor dst_cpu = a.clone(), dst_gpu = cuda(a);
  kernels::add_(dst_cpu.permute({1, 0, 2}), b_view);
  kernels::add_(dst_gpu.permute({1, 0, 2}), gb);
  EXPECT_TRUE(allclose(dst_gpu, dst_cpu, 1e-6, 1e-6));
  // where with an int64 condition broadcast over rows.
  Tensor cond = from_vector<int64_t>({0, 1, 1, 0}, {4, 1, 1});
  EXPECT_TRUE(allclose(kernels::where(cuda(cond), ga, gb), kernels::where(cond, a_view, b_view), 0.0, 0.0));
}

// ---- from the op table's CUDA run: what a table of values cannot express --------------------------------

TEST(CudaOps, DropoutMaskIsTheCpuMaskBitForBit) {
  BRIGADE_REQUIRE_CUDA();
  // Philox gives element i the same uniform on both devices, so the kept positions must agree exactly.
  Tensor x = ones({513, 257});
  for (double p : {0.1, 0.5, 0.9}) {
    Tensor cpu = kernels::dropout(x, p, {77, 3});
    Tensor gpu = kernels::dropout(x.to(Device::cuda()), p, {77, 3}).cpu();
    EXPECT_TRUE(allclose(kernels::binary(kernels::BinaryOp::Ne, gpu, 0.0),
                         kernels::binary(kernels::BinaryOp::Ne, cpu, 0.0), 0, 0))
        << "p = " << p;
  }
}

TEST(CudaOps, EmbeddingAndCrossEntropyReportBadIndicesLikeTheCpu) {
  BRIGADE_REQUIRE_CUDA();
  const Device gpu = Device::cuda();
  EXPECT_THROW(kernels::embedding(zeros({5, 2}, gpu), from_vector<int64_t>({1, 5}, {2}, gpu)), ValueError);
  EXPECT_THROW(kernels::cross_entropy(zeros({2, 3}, gpu), from_vector<int64_t>({0, 3}, {2}, gpu)),
               ValueError);
  EXPECT_THROW(kernels::embedding_backward(zeros({2, 2}, gpu), from_vector<int64_t>({-1, 0}, {2}, gpu), 4),
               ValueError);
}

}  // namespace
}  // namespace brigade
