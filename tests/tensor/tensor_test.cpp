// Tensor geometry, views (aliasing and write-through), copies, conversions, factories and printing.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tensor/tensor.h"
#include "test_support.h"

using namespace brigade;
using ::testing::HasSubstr;

namespace {
Tensor iota(const Shape& shape, DType dtype = kFloat32) {
  return arange(0, shape_numel(shape), 1, TensorOptions(dtype)).view(shape);
}
}  // namespace

TEST(Tensor, FactoriesAndGeometry) {
  Tensor z = zeros({2, 3});
  EXPECT_EQ(z.shape(), (Shape{2, 3}));
  EXPECT_EQ(z.strides(), (Strides{3, 1}));
  EXPECT_EQ(z.numel(), 6);
  EXPECT_EQ(z.dtype(), kFloat32);
  EXPECT_TRUE(z.device().is_cpu());
  EXPECT_TRUE(z.is_contiguous());
  EXPECT_EQ(z.to_vector<float>(), std::vector<float>(6, 0.f));
  EXPECT_EQ(ones({4}, kInt32).to_vector<int32_t>(), std::vector<int32_t>(4, 1));
  EXPECT_EQ(full({2}, 2.5, kFloat64).to_vector<double>(), (std::vector<double>{2.5, 2.5}));
  EXPECT_EQ(arange(2, 11, 3).to_vector<int64_t>(), (std::vector<int64_t>{2, 5, 8}));
  EXPECT_EQ(arange(5, 0, -2).to_vector<int64_t>(), (std::vector<int64_t>{5, 3, 1}));
  EXPECT_EQ(from_vector<float>({1, 2, 3, 4}, {2, 2}).to_vector<double>(), (std::vector<double>{1, 2, 3, 4}));
  Tensor scalar = full({}, 7.0);
  EXPECT_EQ(scalar.dim(), 0);
  EXPECT_EQ(scalar.numel(), 1);
  EXPECT_EQ(scalar.item(), 7.0);
  Tensor empty0 = zeros({3, 0, 2});
  EXPECT_EQ(empty0.numel(), 0);
  EXPECT_TRUE(empty0.to_vector<float>().empty());
}

TEST(Tensor, ViewsAliasStorageAndWriteThrough) {
  Tensor base = iota({3, 4});
  Tensor tr = base.transpose(0, 1);
  EXPECT_EQ(tr.storage(), base.storage());
  EXPECT_EQ(tr.shape(), (Shape{4, 3}));
  EXPECT_EQ(tr.strides(), (Strides{1, 4}));
  EXPECT_FALSE(tr.is_contiguous());
  // write through a narrowed, transposed view: base[1, 2] is tr[2, 1]
  tr.narrow(0, 2, 1).narrow(1, 1, 1).fill_(100.0);
  EXPECT_EQ(base.to_vector<float>()[1 * 4 + 2], 100.f);
  // select, slice with step, squeeze/unsqueeze, expand
  Tensor row = base.select(0, 2);
  EXPECT_EQ(row.to_vector<float>(), (std::vector<float>{8, 9, 10, 11}));
  Tensor stepped = base.slice(1, 0, 4, 2);
  EXPECT_EQ(stepped.to_vector<float>(), (std::vector<float>{0, 2, 4, 100, 8, 10}));  // base[1, 2] = 100
  Tensor un = row.unsqueeze(0);
  EXPECT_EQ(un.shape(), (Shape{1, 4}));
  EXPECT_EQ(un.squeeze(0).shape(), (Shape{4}));
  Tensor ex = un.expand({3, 4});
  EXPECT_EQ(ex.strides()[0], 0);
  EXPECT_EQ(ex.to_vector<float>()[4 * 2 + 3], 11.f);
  stepped.fill_(-1.0);
  EXPECT_EQ(base.to_vector<float>()[0], -1.f);
  EXPECT_EQ(base.to_vector<float>()[1], 1.f);
  // a view of a view keeps the offset
  Tensor inner = base.narrow(0, 1, 2).narrow(1, 1, 2);
  EXPECT_EQ(inner.offset(), 5);
  EXPECT_EQ(inner.contiguous().to_vector<float>(), (std::vector<float>{5, -1, 9, -1}));
}

TEST(Tensor, ViewReshapeAndContiguous) {
  Tensor x = iota({2, 3, 4});
  Tensor v = x.view({6, -1});
  EXPECT_EQ(v.shape(), (Shape{6, 4}));
  EXPECT_EQ(v.storage(), x.storage());
  Tensor p = x.permute({2, 0, 1});
  EXPECT_THROW(p.view({24}), ShapeError);
  Tensor r = p.reshape({24});  // copies
  EXPECT_NE(r.storage(), x.storage());
  EXPECT_EQ(r.to_vector<float>()[1], 4.f);  // p[0,0,1] = x[0,1,0] = 4
  // views that split a contiguous chunk are allowed without a copy
  Tensor t = x.transpose(0, 1);  // [3, 2, 4], strides [4, 12, 1]
  EXPECT_THROW(t.view({3, 8}), ShapeError);
  Tensor split = t.view({3, 2, 2, 2});  // splitting the contiguous last dim needs no copy
  EXPECT_EQ(split.storage(), x.storage());
  EXPECT_EQ(split.strides(), (Strides{4, 12, 2, 1}));
  Tensor merged = x.transpose(1, 2).transpose(1, 2).view({2, 12});
  EXPECT_EQ(merged.storage(), x.storage());
  Tensor c = p.contiguous();
  EXPECT_TRUE(c.is_contiguous());
  EXPECT_EQ(x.contiguous().storage(), x.storage()) << "contiguous() of a contiguous tensor must not copy";
}

TEST(Tensor, ReshapeWithWrongElementCountNamesBothShapes) {
  Tensor x = zeros({2, 3});
  try {
    x.reshape({4, 2});
    FAIL() << "expected ShapeError";
  } catch (const ShapeError& e) {
    EXPECT_THAT(e.what(), HasSubstr("reshape"));
    EXPECT_THAT(e.what(), HasSubstr("[4, 2]"));
    EXPECT_THAT(e.what(), HasSubstr("[2, 3]"));
  }
  EXPECT_THROW(x.view({-1, -1}), ShapeError);
  EXPECT_THROW(x.narrow(1, 2, 2), ValueError);
  EXPECT_THROW(x.permute({0, 0}), ValueError);
  EXPECT_THROW(x.expand({3, 3}), ShapeError);
  EXPECT_THROW(x.select(0, 2), ValueError);
  EXPECT_THROW(x.transpose(0, 2), ValueError);
}

TEST(Tensor, DtypeConversions) {
  Tensor x = from_vector<double>({1.5, -2.25, 3.0e5, 0.1}, {4});
  Tensor f = x.to(kFloat32);
  EXPECT_EQ(f.dtype(), kFloat32);
  EXPECT_EQ(f.to_vector<float>()[3], 0.1f);
  Tensor b = f.to(kBFloat16);
  std::vector<float> back = b.to(kFloat32).to_vector<float>();
  EXPECT_EQ(back[0], 1.5f);
  EXPECT_EQ(back[1], -2.25f);
  EXPECT_NEAR(back[2], 3.0e5f, 3.0e5f * (1.0f / 128));  // 8 significant bits
  EXPECT_NEAR(back[3], 0.1f, 0.1f / 128);
  EXPECT_EQ(x.to(kInt64).to_vector<int64_t>(), (std::vector<int64_t>{1, -2, 300000, 0}));
  // bfloat16 rounds to nearest even: 1 + 2^-8 lies halfway between 1 and 1 + 2^-7
  EXPECT_EQ(static_cast<float>(bfloat16(1.0f + 1.0f / 256)), 1.0f);
  EXPECT_EQ(static_cast<float>(bfloat16(1.0f + 3.0f / 256)), 1.0f + 1.0f / 64);
}

TEST(Tensor, CopyBroadcastsAndConverts) {
  Tensor dst = zeros({2, 3}, kFloat64);
  dst.copy_(from_vector<float>({1, 2, 3}, {3}));
  EXPECT_EQ(dst.to_vector<double>(), (std::vector<double>{1, 2, 3, 1, 2, 3}));
  Tensor t = zeros({3, 2});
  t.transpose(0, 1).copy_(from_vector<int64_t>({1, 2, 3, 4, 5, 6}, {2, 3}));
  EXPECT_EQ(t.to_vector<float>(), (std::vector<float>{1, 4, 2, 5, 3, 6}));
  EXPECT_THROW(dst.copy_(zeros({4})), ShapeError);
  Tensor c = dst.clone();
  EXPECT_NE(c.storage(), dst.storage());
  EXPECT_EQ(c.to_vector<double>(), dst.to_vector<double>());
}

TEST(Tensor, RandomIsSeededAndDistributed) {
  Generator g1(42), g2(42);
  Tensor a = randn({10000}, {}, &g1);
  Tensor b = randn({10000}, {}, &g2);
  EXPECT_EQ(a.to_vector<float>(), b.to_vector<float>());
  Tensor c = randn({10000}, {}, &g1);  // next draw: different numbers
  EXPECT_NE(a.to_vector<float>(), c.to_vector<float>());
  std::vector<double> v = a.to_vector<double>();
  double mean = 0, sq = 0;
  for (double x : v) mean += x;
  mean /= v.size();
  for (double x : v) sq += (x - mean) * (x - mean);
  double stddev = std::sqrt(sq / v.size());
  EXPECT_NEAR(mean, 0.0, 0.05);  // 5 sigma of the sample mean is 0.05 at n = 10000
  EXPECT_NEAR(stddev, 1.0, 0.05);
  Tensor u = rand({10000}, {}, &g2);
  std::vector<float> uv = u.to_vector<float>();
  double umean = 0;
  for (float x : uv) {
    EXPECT_GE(x, 0.f);
    EXPECT_LT(x, 1.f);
    umean += x;
  }
  EXPECT_NEAR(umean / uv.size(), 0.5, 0.02);
  // the same draw replays after restoring the state
  GeneratorState s = g1.state();
  Tensor d1 = rand({16}, {}, &g1);
  g1.set_state(s);
  Tensor d2 = rand({16}, {}, &g1);
  EXPECT_EQ(d1.to_vector<float>(), d2.to_vector<float>());
}

TEST(Tensor, PrintingIsReadable) {
  Tensor x = from_vector<float>({1, 2, 3, 4}, {2, 2});
  std::string s = x.str();
  EXPECT_THAT(s, HasSubstr("[[1.0000, 2.0000],"));
  EXPECT_THAT(s, HasSubstr("dtype=float32"));
  EXPECT_THAT(s, HasSubstr("device=cpu"));
  std::string big = zeros({2000}).str();
  EXPECT_THAT(big, HasSubstr("..."));
  EXPECT_LT(big.size(), 200u);
  EXPECT_THAT(arange(0, 3).str(), HasSubstr("[0, 1, 2]"));
}

TEST(Tensor, DevicesParseAndCudaAbsenceIsATypedError) {
  EXPECT_EQ(Device::parse("cpu"), Device::cpu());
  EXPECT_EQ(Device::parse("cuda:3"), Device::cuda(3));
  EXPECT_THROW(Device::parse("gpu"), DeviceError);
  EXPECT_THROW(Device::parse("cuda:x"), DeviceError);
  if (!cuda_available()) {
    try {
      zeros({2}, Device::cuda(0));
      FAIL() << "expected DeviceError";
    } catch (const DeviceError& e) {
      EXPECT_THAT(e.what(), HasSubstr("cuda:0"));
    }
    EXPECT_FALSE(cuda_unavailable_reason().empty());
  }
}
