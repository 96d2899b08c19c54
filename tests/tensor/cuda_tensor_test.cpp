// CUDA side of the tensor layer: host<->device round trips, strided copies and fills on the device, Philox
// numbers equal to the CPU's, and the caching allocator (stats, scopes, record_stream, empty_cache, OOM).
// Every test skips without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "tensor/memory.h"
#include "tensor/storage.h"
#include "tensor/stream.h"
#include "tensor/tensor.h"
#include "test_support.h"

using namespace brigade;
using brigade::testing::allclose;

namespace {

const Device kCuda = Device::cuda(0);

/// Distinct values of every dtype (floats from randn, integers from arange around zero).
Tensor sample(DType dtype, const Shape& shape) {
  if (is_floating(dtype)) {
    Generator generator(7);
    return randn(shape, TensorOptions(dtype), &generator);
  }
  return arange(-500, -500 + shape_numel(shape)).to(dtype).view(shape);
}

const std::vector<DType> kAllDTypes = {kFloat32, kBFloat16, kFloat64, kInt32, kInt64};

}  // namespace

TEST(CudaTensor, RoundTripEveryDType) {
  BRIGADE_REQUIRE_CUDA();
  for (DType dtype : kAllDTypes) {
    SCOPED_TRACE(dtype_name(dtype));
    Tensor host = sample(dtype, {37, 19});
    Tensor device = host.to(kCuda);
    EXPECT_EQ(device.device(), kCuda);
    EXPECT_EQ(device.dtype(), dtype);
    Tensor back = device.cpu();
    EXPECT_TRUE(allclose(back, host, 0.0, 0.0));  // bit-exact
    EXPECT_EQ(back.to_vector<double>(), host.to_vector<double>());
  }
}

TEST(CudaTensor, EmptyAndSingleElementTensors) {
  BRIGADE_REQUIRE_CUDA();
  Tensor none = empty({0, 5}, TensorOptions(kCuda));
  EXPECT_EQ(none.numel(), 0);
  EXPECT_EQ(none.cpu().numel(), 0);
  Tensor one = full({1}, 3.25, TensorOptions(kCuda));
  EXPECT_EQ(one.item(), 3.25);
}

TEST(CudaTensor, StridedCopiesOnTheDeviceMatchTheCpu) {
  BRIGADE_REQUIRE_CUDA();
  for (DType dtype : kAllDTypes) {
    SCOPED_TRACE(dtype_name(dtype));
    Tensor host = sample(dtype, {4, 6, 5});
    Tensor device = host.to(kCuda);
    // Transposed, permuted, sliced with a step, and broadcast views, made contiguous on the device.
    EXPECT_TRUE(allclose(device.transpose(0, 2).contiguous().cpu(), host.transpose(0, 2).contiguous(), 0, 0));
    EXPECT_TRUE(
        allclose(device.permute({1, 2, 0}).contiguous().cpu(), host.permute({1, 2, 0}).contiguous(), 0, 0));
    EXPECT_TRUE(
        allclose(device.slice(1, 1, 6, 2).contiguous().cpu(), host.slice(1, 1, 6, 2).contiguous(), 0, 0));
    EXPECT_TRUE(allclose(device.select(2, 3).unsqueeze(0).expand({3, 4, 6}).contiguous().cpu(),
                         host.select(2, 3).unsqueeze(0).expand({3, 4, 6}).contiguous(), 0, 0));
    // Strided destination: write through a transposed view of a device tensor.
    Tensor dst = zeros({5, 6, 4}, TensorOptions(dtype).device(kCuda));
    dst.transpose(0, 2).copy_(device);
    EXPECT_TRUE(allclose(dst.cpu(), host.transpose(0, 2).contiguous(), 0, 0));
  }
}

TEST(CudaTensor, DTypeConversionsOnTheDeviceMatchTheCpu) {
  BRIGADE_REQUIRE_CUDA();
  for (DType from : kAllDTypes) {
    Tensor host = sample(from, {7, 9});
    Tensor device = host.to(kCuda);
    for (DType to : kAllDTypes) {
      SCOPED_TRACE(std::string(dtype_name(from)) + " -> " + dtype_name(to));
      // Same conversion formulas on both devices: bit-exact, also from a transposed (strided) source.
      EXPECT_TRUE(allclose(device.to(to).cpu(), host.to(to), 0, 0));
      EXPECT_TRUE(allclose(device.t().to(to).cpu(), host.t().to(to), 0, 0));
    }
  }
}

TEST(CudaTensor, StridedCopiesBetweenHostAndDevice) {
  BRIGADE_REQUIRE_CUDA();
  Tensor host = sample(kFloat32, {6, 9});
  // Host transposed view -> device.
  EXPECT_TRUE(allclose(host.t().to(kCuda).cpu(), host.t().contiguous(), 0, 0));
  // Host tensor into a transposed device view (copy_ across devices).
  Tensor device = zeros({9, 6}, TensorOptions(kCuda));
  device.t().copy_(host);
  EXPECT_TRUE(allclose(device.cpu(), host.t().contiguous(), 0, 0));
  // Device transposed view into a host tensor, converting to float64 on the way.
  Tensor back = zeros({6, 9}, TensorOptions(kFloat64));
  back.copy_(device.t());
  EXPECT_TRUE(allclose(back, host.to(kFloat64), 0, 0));
  // Broadcast host row into a device matrix.
  Tensor row = sample(kFloat32, {1, 9});
  Tensor filled = zeros({6, 9}, TensorOptions(kCuda));
  filled.copy_(row);
  EXPECT_TRUE(allclose(filled.cpu(), row.expand({6, 9}).contiguous(), 0, 0));
}

TEST(CudaTensor, FillAnyStrides) {
  BRIGADE_REQUIRE_CUDA();
  for (DType dtype : kAllDTypes) {
    SCOPED_TRACE(dtype_name(dtype));
    Tensor device = full({5, 7}, 2.5, TensorOptions(dtype).device(kCuda));
    Tensor host = full({5, 7}, 2.5, TensorOptions(dtype));
    EXPECT_TRUE(allclose(device.cpu(), host, 0, 0));
    // A strided block of a transposed view: columns 1..2 of the transpose = rows 1..2 of the original.
    device.t().narrow(1, 1, 2).fill_(-3);
    host.t().narrow(1, 1, 2).fill_(-3);
    EXPECT_TRUE(allclose(device.cpu(), host, 0, 0));
    device.slice(1, 0, 7, 3).zero_();
    host.slice(1, 0, 7, 3).zero_();
    EXPECT_TRUE(allclose(device.cpu(), host, 0, 0));
  }
}

TEST(CudaTensor, RandomNumbersEqualTheCpuForTheSameSeed) {
  BRIGADE_REQUIRE_CUDA();
  Generator cpu_gen(1234), cuda_gen(1234);
  const Shape shape = {333, 77};
  // Two draws each: the second uses the next offset on both devices.
  for (int draw = 0; draw < 2; ++draw) {
    SCOPED_TRACE(draw);
    Tensor normal_cpu = randn(shape, {}, &cpu_gen);
    Tensor normal_cuda = randn(shape, TensorOptions(kCuda), &cuda_gen);
    // Box-Muller in double on both sides; the CUDA and host math libraries may differ in the last bits.
    EXPECT_TRUE(allclose(normal_cuda.cpu(), normal_cpu, 0.0, 1e-6));
    Tensor uniform_cpu = rand(shape, {}, &cpu_gen);
    Tensor uniform_cuda = rand(shape, TensorOptions(kCuda), &cuda_gen);
    EXPECT_TRUE(allclose(uniform_cuda.cpu(), uniform_cpu, 0.0, 0.0));  // integer arithmetic only: exact
  }
  EXPECT_EQ(cpu_gen.state(), cuda_gen.state());
  // Other floating dtypes convert the same float.
  Generator a(99), b(99);
  EXPECT_TRUE(allclose(randn({1000}, TensorOptions(kFloat64).device(kCuda), &a).cpu(),
                       randn({1000}, TensorOptions(kFloat64), &b), 0.0, 1e-6));
  // bfloat16: a last-bit difference in the float can round to the neighbouring bfloat16 (one ulp, <= 2^-7
  // relative); uniform numbers are exact floats on both devices, so they round identically.
  EXPECT_TRUE(allclose(rand({1000}, TensorOptions(kBFloat16).device(kCuda), &a).cpu(),
                       rand({1000}, TensorOptions(kBFloat16), &b), 0.0, 0.0));
  EXPECT_TRUE(allclose(randn({1000}, TensorOptions(kBFloat16).device(kCuda), &a).cpu(),
                       randn({1000}, TensorOptions(kBFloat16), &b), 1.0 / 128, 1e-6));
}

TEST(CudaTensor, AllocatorStatsAddUp) {
  BRIGADE_REQUIRE_CUDA();
  const MemoryStats before = memory_stats(kCuda);
  {
    Tensor small = empty({1000}, TensorOptions(kCuda));        // 4000 bytes (a 4096-byte block)
    Tensor large = empty({3, 1 << 20}, TensorOptions(kCuda));  // 12 MiB
    Tensor nothing = empty({0}, TensorOptions(kCuda));         // no allocation at all
    EXPECT_EQ(nothing.storage()->data(), nullptr);
    const MemoryStats during = memory_stats(kCuda);
    EXPECT_EQ(during.in_use_bytes - before.in_use_bytes, 4000 + (12 << 20));
    EXPECT_EQ(during.allocations - before.allocations, 2);
    EXPECT_EQ(during.total_allocations - before.total_allocations, 2);
    EXPECT_GE(during.peak_bytes, during.in_use_bytes);
    // Reserved counts whole segments: at least a 2 MiB small segment and the 12 MiB large one.
    EXPECT_GE(during.reserved_bytes, during.in_use_bytes);
    EXPECT_GE(during.reserved_bytes, int64_t{14} << 20);
  }
  const MemoryStats after = memory_stats(kCuda);
  EXPECT_EQ(after.in_use_bytes, before.in_use_bytes);
  EXPECT_EQ(after.allocations, before.allocations);
  EXPECT_GE(after.reserved_bytes, int64_t{14} << 20);  // cached, not returned to the driver
  EXPECT_GE(after.peak_bytes, before.in_use_bytes + 4000 + (12 << 20));
  reset_peak_memory(kCuda);
  EXPECT_EQ(memory_stats(kCuda).peak_bytes, memory_stats(kCuda).in_use_bytes);
  // Reusing the cached block takes no new memory from the driver.
  const int64_t reserved = memory_stats(kCuda).reserved_bytes;
  { Tensor again = empty({3, 1 << 20}, TensorOptions(kCuda)); }
  EXPECT_EQ(memory_stats(kCuda).reserved_bytes, reserved);
  EXPECT_EQ(memory_stats(kCuda).peak_bytes - memory_stats(kCuda).in_use_bytes, 12 << 20);
}

TEST(CudaTensor, MemoryScopesAttributeCudaAllocations) {
  BRIGADE_REQUIRE_CUDA();
  const std::string tag = "cuda-tensor-test-stage0";
  Tensor kept;
  {
    MemoryScope scope(tag);
    Tensor a = empty({256}, TensorOptions(kCuda));  // 1024 bytes
    kept = empty({1 << 20}, TensorOptions(kCuda));  // 4 MiB, outlives the scope
    EXPECT_EQ(scope_memory_stats(kCuda, tag).in_use_bytes, 1024 + (4 << 20));
    EXPECT_EQ(scope_memory_stats(kCuda, tag).allocations, 2);
  }
  EXPECT_EQ(scope_memory_stats(kCuda, tag).in_use_bytes, 4 << 20);
  // Freed on another thread: still subtracted from the scope that allocated it.
  std::thread([t = std::move(kept)]() mutable { t = Tensor(); }).join();
  const MemoryStats scoped = scope_memory_stats(kCuda, tag);
  EXPECT_EQ(scoped.in_use_bytes, 0);
  EXPECT_EQ(scoped.peak_bytes, 1024 + (4 << 20));
  EXPECT_EQ(scoped.reserved_bytes, 0);
  // The CPU's scope of the same name saw nothing.
  EXPECT_EQ(scope_memory_stats(Device::cpu(), tag).peak_bytes, 0);
}

TEST(CudaTensor, RecordStreamDefersReuseUntilTheOtherStreamFinishes) {
  BRIGADE_REQUIRE_CUDA();
  const Stream stream_a = Stream::create(kCuda);
  const Stream stream_b = Stream::create(kCuda);
  const int64_t kElements = int64_t{128} << 20;  // 512 MiB of float32: one fill is ~0.15 ms on an H200
  void* first = nullptr;
  Event b_done;
  {
    // Two blocks cached on A first, so that the reallocation below takes the other one from the cache: a
    // cudaMalloc of 512 MiB there can outlast B's work (seen on an H200), and the check needs B still busy.
    StreamGuard on_a(stream_a);
    { Tensor w1 = empty({kElements}, TensorOptions(kCuda)), w2 = empty({kElements}, TensorOptions(kCuda)); }
    Tensor x = empty({kElements}, TensorOptions(kCuda));  // from stream A's pool
    first = x.data_ptr();
    {
      StreamGuard on_b(stream_b);
      for (int i = 0; i < 80; ++i) x.fill_(i);  // ~10 ms of work queued on B
      b_done.record(stream_b);
    }
    record_stream(*x.storage(), stream_b);
  }  // x is freed while B is still writing to it

  StreamGuard on_a(stream_a);
  Tensor y = empty({kElements}, TensorOptions(kCuda));
  ASSERT_FALSE(b_done.query()) << "stream B finished before the reallocation; the test's work is too short";
  EXPECT_NE(y.data_ptr(), first) << "memory still in use on stream B was handed out again";
  void* second = y.data_ptr();
  y = Tensor();

  stream_b.synchronize();
  const int64_t reserved = memory_stats(kCuda).reserved_bytes;
  Tensor z1 = empty({kElements}, TensorOptions(kCuda));
  Tensor z2 = empty({kElements}, TensorOptions(kCuda));
  std::vector<void*> got = {z1.data_ptr(), z2.data_ptr()};
  std::vector<void*> expected = {first, second};
  std::sort(got.begin(), got.end());
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(got, expected) << "once B finished, both cached blocks should be reused on A";
  EXPECT_EQ(memory_stats(kCuda).reserved_bytes, reserved);
}

TEST(CudaTensor, BlocksAreNotSharedAcrossStreams) {
  BRIGADE_REQUIRE_CUDA();
  const Stream stream_a = Stream::create(kCuda);
  const Stream stream_b = Stream::create(kCuda);
  void* on_a_ptr = nullptr;
  {
    StreamGuard on_a(stream_a);
    Tensor t = empty({1 << 20}, TensorOptions(kCuda));
    on_a_ptr = t.data_ptr();
  }
  StreamGuard on_b(stream_b);
  Tensor u = empty({1 << 20}, TensorOptions(kCuda));
  EXPECT_NE(u.data_ptr(), on_a_ptr);
}

TEST(CudaTensor, EmptyCacheDropsReservedToInUse) {
  BRIGADE_REQUIRE_CUDA();
  // Segments cached by earlier tests of this process first: `keep` must get a segment of its own (a cached
  // larger one would be split, and a segment partly in use is never released).
  empty_cache(kCuda);
  Tensor keep = empty({1 << 20}, TensorOptions(kCuda));  // 4 MiB: exactly one segment, fully used
  {
    Tensor a = empty({5 << 20}, TensorOptions(kCuda));
    Tensor b = empty({100}, TensorOptions(kCuda));
  }
  EXPECT_GT(memory_stats(kCuda).reserved_bytes, memory_stats(kCuda).in_use_bytes);
  empty_cache(kCuda);
  const MemoryStats stats = memory_stats(kCuda);
  EXPECT_EQ(stats.reserved_bytes, stats.in_use_bytes);
  EXPECT_GE(stats.in_use_bytes, 4 << 20);
  // Still usable afterwards.
  keep.fill_(1.5);
  EXPECT_EQ(keep.narrow(0, 12345, 1).item(), 1.5);
}

TEST(CudaTensor, OutOfMemoryNamesTheBytesAndLeavesTheAllocatorUsable) {
  BRIGADE_REQUIRE_CUDA();
  const MemoryStats before = memory_stats(kCuda);
  const int64_t kPiB = int64_t{1} << 50;
  try {
    Tensor huge = empty({kPiB / 4}, TensorOptions(kCuda));
    FAIL() << "allocating 1 PiB on the GPU succeeded";
  } catch (const OutOfMemoryError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find(std::to_string(kPiB)), std::string::npos) << message;
    EXPECT_NE(message.find("free"), std::string::npos) << message;
    EXPECT_NE(message.find("reserved"), std::string::npos) << message;
  }
  EXPECT_EQ(memory_stats(kCuda).in_use_bytes, before.in_use_bytes);
  EXPECT_EQ(memory_stats(kCuda).allocations, before.allocations);
  Tensor ok = full({1000}, 2.0, TensorOptions(kCuda));
  EXPECT_TRUE(allclose(ok.cpu(), full({1000}, 2.0), 0, 0));
}
