// Bad input to a raw op gives the right typed exception, and its message names the op and what was found
// and expected (shapes, dtypes, devices, the offending id or target). Device mismatches need a second
// device: with a GPU the real ops are called with a CUDA operand; without one the device check itself is
// exercised (the same function every op calls) and so is the refusal to allocate on a missing device.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "kernels/kernels.h"
#include "kernels/op_checks.h"
#include "tests/test_support.h"

namespace brigade {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
namespace k = kernels;
using brigade::testing::message_of;

/// The message of the E that `f` throws; records a failure when it throws nothing or something else.
Tensor f32(const Shape& shape) {
  return zeros(shape);
}
Tensor ids_of(std::vector<int64_t> v, const Shape& shape) {
  return from_vector<int64_t>(v, shape);
}

// ---- shapes ---------------------------------------------------------------------------------------------

TEST(KernelErrors, BinaryShapesThatDoNotBroadcast) {
  std::string msg = message_of<ShapeError>([] { k::binary(k::BinaryOp::Add, f32({2, 3}), f32({4})); });
  EXPECT_THAT(msg, AllOf(HasSubstr("add"), HasSubstr("[2, 3]"), HasSubstr("[4]")));
  msg = message_of<ShapeError>([] { k::where(f32({2, 1}), f32({2, 3}), f32({5})); });
  EXPECT_THAT(msg, AllOf(HasSubstr("where"), HasSubstr("[2, 3]"), HasSubstr("[5]")));
}

TEST(KernelErrors, InPlaceSourceMustBroadcastToDestination) {
  std::string msg = message_of<ShapeError>([] { k::add_(f32({3}), f32({2, 3})); });
  EXPECT_THAT(msg, AllOf(HasSubstr("add_"), HasSubstr("[2, 3]"), HasSubstr("[3]")));
  msg = message_of<ShapeError>([] { k::masked_fill(f32({3}), f32({2, 3}), 0.0); });
  EXPECT_THAT(msg, AllOf(HasSubstr("masked_fill"), HasSubstr("[2, 3]"), HasSubstr("[3]")));
}

TEST(KernelErrors, UnaryBackwardShapes) {
  std::string msg = message_of<ShapeError>([] {
    k::unary_backward(k::UnaryOp::Tanh, f32({2, 3}), f32({3, 2}), f32({3, 2}));
  });
  EXPECT_THAT(msg, AllOf(HasSubstr("tanh_backward"), HasSubstr("[2, 3]"), HasSubstr("[3, 2]")));
}

TEST(KernelErrors, ReductionDims) {
  std::string msg = message_of<ValueError>([] { k::sum(f32({2, 3}), {2}); });
  EXPECT_THAT(msg, AllOf(HasSubstr("sum"), HasSubstr("2")));
  msg = message_of<ValueError>([] { k::sum(f32({2, 3}), {1, -1}); });
  EXPECT_THAT(msg, AllOf(HasSubstr("sum"), HasSubstr("more than once"), HasSubstr("[1, -1]")));
  msg = message_of<ShapeError>([] { k::max(f32({2, 0}), {1}); });
  EXPECT_THAT(msg, AllOf(HasSubstr("max"), HasSubstr("zero-size"), HasSubstr("[2, 0]")));
  msg = message_of<ShapeError>([] { k::argmax(f32({0, 4}), 0); });
  EXPECT_THAT(msg, AllOf(HasSubstr("argmax"), HasSubstr("[0, 4]")));
  msg = message_of<ShapeError>([] { k::sum_to(f32({2, 3}), {4}); });
  EXPECT_THAT(msg, AllOf(HasSubstr("sum_to"), HasSubstr("[2, 3]"), HasSubstr("[4]")));
  msg = message_of<ShapeError>([] { k::sum_to(f32({3}), {2, 3}); });
  EXPECT_THAT(msg, AllOf(HasSubstr("sum_to"), HasSubstr("[3]"), HasSubstr("[2, 3]")));
}

TEST(KernelErrors, SoftmaxBackwardShapes) {
  std::string msg = message_of<ShapeError>([] { k::softmax_backward(f32({2, 4}), f32({2, 5})); });
  EXPECT_THAT(msg, AllOf(HasSubstr("softmax_backward"), HasSubstr("[2, 4]"), HasSubstr("[2, 5]")));
}

TEST(KernelErrors, LayerNormParameterAndStatisticShapes) {
  std::string msg = message_of<ShapeError>([] { k::layernorm(f32({3, 4}), f32({5}), Tensor()); });
  EXPECT_THAT(msg, AllOf(HasSubstr("layernorm"), HasSubstr("weight"), HasSubstr("[5]"), HasSubstr("[4]"),
                         HasSubstr("[3, 4]")));
  msg = message_of<ShapeError>([] { k::layernorm(f32({}), Tensor(), Tensor()); });
  EXPECT_THAT(msg, AllOf(HasSubstr("layernorm"), HasSubstr("at least one dim")));
  msg = message_of<ShapeError>([] {
    k::layernorm_backward(f32({3, 4}), f32({3, 4}), Tensor(), f32({4}), f32({3}), false);
  });
  EXPECT_THAT(msg,
              AllOf(HasSubstr("layernorm_backward"), HasSubstr("mean"), HasSubstr("[4]"), HasSubstr("[3]")));
  msg = message_of<DTypeError>([] {
    k::layernorm_backward(f32({3, 4}), f32({3, 4}), Tensor(), zeros({3}, kFloat64), f32({3}), false);
  });
  EXPECT_THAT(msg, AllOf(HasSubstr("layernorm_backward"), HasSubstr("mean"), HasSubstr("float32"),
                         HasSubstr("float64")));
}

TEST(KernelErrors, EmbeddingAndCrossEntropyShapes) {
  std::string msg = message_of<ShapeError>([] { k::embedding(f32({10}), ids_of({1}, {1})); });
  EXPECT_THAT(msg, AllOf(HasSubstr("embedding"), HasSubstr("[V, C]"), HasSubstr("[10]")));
  msg = message_of<ShapeError>([] { k::embedding_backward(f32({2, 4, 3}), ids_of({1, 2}, {2}), 5); });
  EXPECT_THAT(msg, AllOf(HasSubstr("embedding_backward"), HasSubstr("[2, 4, 3]"), HasSubstr("[2]")));
  msg = message_of<ShapeError>([] { k::cross_entropy(f32({4, 5}), ids_of({0, 1, 2}, {3})); });
  EXPECT_THAT(msg,
              AllOf(HasSubstr("cross_entropy"), HasSubstr("[3]"), HasSubstr("[4]"), HasSubstr("[4, 5]")));
}

TEST(KernelErrors, AdamWShapesDtypesAndLayout) {
  k::AdamWStep step;
  std::string msg =
      message_of<ShapeError>([&] { k::adamw_update(f32({3}), f32({4}), f32({3}), f32({3}), step); });
  EXPECT_THAT(msg, AllOf(HasSubstr("adamw_update"), HasSubstr("[3]"), HasSubstr("[4]")));
  Tensor p16 = zeros({3}, kBFloat16);
  msg = message_of<DTypeError>([&] { k::adamw_update(p16, p16, p16, f32({3}), step); });
  EXPECT_THAT(msg,
              AllOf(HasSubstr("adamw_update"), HasSubstr("m"), HasSubstr("float32"), HasSubstr("bfloat16")));
  Tensor strided = f32({3, 2}).t();
  msg = message_of<ValueError>([&] { k::adamw_update(strided, strided, f32({2, 3}), f32({2, 3}), step); });
  EXPECT_THAT(msg, AllOf(HasSubstr("adamw_update"), HasSubstr("param"), HasSubstr("contiguous")));
  step.step = 0;
  msg = message_of<ValueError>([&] { k::adamw_update(f32({3}), f32({3}), f32({3}), f32({3}), step); });
  EXPECT_THAT(msg, AllOf(HasSubstr("adamw_update"), HasSubstr("step"), HasSubstr("0")));
}

// ---- dtypes ---------------------------------------------------------------------------------------------

TEST(KernelErrors, DtypeMismatchNamesBothDtypes) {
  std::string msg =
      message_of<DTypeError>([] { k::binary(k::BinaryOp::Mul, f32({2}), zeros({2}, kFloat64)); });
  EXPECT_THAT(msg, AllOf(HasSubstr("mul"), HasSubstr("float32"), HasSubstr("float64")));
  msg = message_of<DTypeError>([] { k::add_(f32({2}), zeros({2}, kBFloat16)); });
  EXPECT_THAT(msg, AllOf(HasSubstr("add_"), HasSubstr("float32"), HasSubstr("bfloat16")));
  msg = message_of<DTypeError>([] { k::where(f32({2}), f32({2}), zeros({2}, kFloat64)); });
  EXPECT_THAT(msg, AllOf(HasSubstr("where"), HasSubstr("float32"), HasSubstr("float64")));
}

TEST(KernelErrors, NonFloatingInputsAndNonIntegerIndices) {
  std::string msg = message_of<DTypeError>([] { k::unary(k::UnaryOp::Exp, zeros({2}, kInt64)); });
  EXPECT_THAT(msg, AllOf(HasSubstr("exp"), HasSubstr("int64"), HasSubstr("floating")));
  msg = message_of<DTypeError>([] { k::softmax(zeros({2}, kInt32)); });
  EXPECT_THAT(msg, AllOf(HasSubstr("softmax"), HasSubstr("int32")));
  msg = message_of<DTypeError>([] { k::embedding(f32({4, 2}), f32({3})); });
  EXPECT_THAT(msg, AllOf(HasSubstr("embedding"), HasSubstr("ids"), HasSubstr("float32"), HasSubstr("int64")));
  msg = message_of<DTypeError>([] { k::cross_entropy(f32({3, 4}), f32({3})); });
  EXPECT_THAT(msg, AllOf(HasSubstr("cross_entropy"), HasSubstr("targets"), HasSubstr("float32")));
}

// ---- devices --------------------------------------------------------------------------------------------

TEST(KernelErrors, DeviceCheckNamesBothDevices) {
  // The check every op runs on its operands, called with the devices directly (no GPU needed).
  std::string msg = message_of<DeviceError>(
      [] { k::detail::check_same_device("add", "a", Device::cpu(), "b", Device::cuda(0)); });
  EXPECT_THAT(msg, AllOf(HasSubstr("add"), HasSubstr("cpu"), HasSubstr("cuda:0"), HasSubstr("never copies")));
  msg = message_of<DeviceError>(
      [] { k::detail::check_same_device("embedding", "weight", Device::cuda(1), "ids", Device::cuda(0)); });
  EXPECT_THAT(msg, AllOf(HasSubstr("embedding"), HasSubstr("cuda:1"), HasSubstr("cuda:0")));
  EXPECT_NO_THROW(k::detail::check_same_device("add", "a", Device::cuda(0), "b", Device::cuda(0)));
}

TEST(KernelErrors, Float64IsRefusedOnCuda) {
  std::string msg =
      message_of<DTypeError>([] { k::detail::check_floating("softmax", "x", kFloat64, Device::cuda(0)); });
  EXPECT_THAT(msg, AllOf(HasSubstr("softmax"), HasSubstr("float64 is CPU-only"), HasSubstr("cuda:0")));
  EXPECT_NO_THROW(k::detail::check_floating("softmax", "x", kFloat64, Device::cpu()));
  // causal_mask refuses before allocating, so this needs no GPU either.
  msg = message_of<DTypeError>([] { k::causal_mask(4, TensorOptions(kFloat64).device(Device::cuda())); });
  EXPECT_THAT(msg, AllOf(HasSubstr("causal_mask"), HasSubstr("float64 is CPU-only")));
}

TEST(KernelErrors, NoTensorOnAMissingCudaDevice) {
  if (cuda_available()) GTEST_SKIP() << "a CUDA device is present; covered by RealDeviceMismatch";
  std::string msg = message_of<DeviceError>([] { empty({2, 3}, Device::cuda()); });
  EXPECT_THAT(msg, HasSubstr("cuda"));
  msg = message_of<DeviceError>([] { k::causal_mask(4, Device::cuda()); });
  EXPECT_THAT(msg, AllOf(HasSubstr("causal_mask"), HasSubstr("cuda")));
}

TEST(KernelErrors, RealDeviceMismatch) {
  BRIGADE_REQUIRE_CUDA();
  Tensor cpu = f32({2, 3});
  Tensor gpu = f32({2, 3}).to(Device::cuda());
  std::string msg = message_of<DeviceError>([&] { k::binary(k::BinaryOp::Add, cpu, gpu); });
  EXPECT_THAT(msg, AllOf(HasSubstr("add"), HasSubstr("cpu"), HasSubstr("cuda:0")));
  msg = message_of<DeviceError>([&] { k::embedding(gpu, ids_of({0}, {1})); });
  EXPECT_THAT(msg, AllOf(HasSubstr("embedding"), HasSubstr("cpu"), HasSubstr("cuda:0")));
  msg = message_of<DeviceError>([&] { k::adamw_update(gpu, gpu, cpu, gpu, {}); });
  EXPECT_THAT(msg, AllOf(HasSubstr("adamw_update"), HasSubstr("cpu"), HasSubstr("cuda:0")));
  msg = message_of<DTypeError>([&] { k::softmax(f32({2, 3}).to(kFloat64).to(Device::cuda())); });
  EXPECT_THAT(msg, AllOf(HasSubstr("softmax"), HasSubstr("float64 is CPU-only")));
}

// ---- values ---------------------------------------------------------------------------------------------

TEST(KernelErrors, EmbeddingIdOutOfRangeNamesIdPositionAndV) {
  std::string msg = message_of<ValueError>([] { k::embedding(f32({5, 2}), ids_of({1, 2, 7, 0}, {2, 2})); });
  EXPECT_THAT(msg, AllOf(HasSubstr("embedding"), HasSubstr("id 7"), HasSubstr("[1, 0]"), HasSubstr("V = 5")));
  msg = message_of<ValueError>([] {
    k::embedding(f32({5, 2}), from_vector<int32_t>({0, -1, 9}, {3}));
  });  // the first bad one
  EXPECT_THAT(msg, AllOf(HasSubstr("id -1"), HasSubstr("[1]"), HasSubstr("V = 5")));
  msg = message_of<ValueError>([] { k::embedding_backward(f32({3, 2}), ids_of({0, 5, 1}, {3}), 5); });
  EXPECT_THAT(
      msg, AllOf(HasSubstr("embedding_backward"), HasSubstr("id 5"), HasSubstr("[1]"), HasSubstr("V = 5")));
}

TEST(KernelErrors, CrossEntropyTargetOutOfRangeNamesTargetPositionAndV) {
  std::string msg = message_of<ValueError>([] {
    k::cross_entropy(f32({4, 4}), ids_of({0, -100, 9, 1}, {4}));
  });
  EXPECT_THAT(msg, AllOf(HasSubstr("cross_entropy"), HasSubstr("target 9"), HasSubstr("position 2"),
                         HasSubstr("V = 4"), HasSubstr("-100")));
  // -100 is only ignored when it is the ignore_index.
  msg = message_of<ValueError>([] { k::cross_entropy(f32({2, 4}), ids_of({0, -100}, {2}), -1); });
  EXPECT_THAT(msg, AllOf(HasSubstr("target -100"), HasSubstr("position 1")));
}

TEST(KernelErrors, OutOfRangeScalarsAndUndefinedTensors) {
  std::string msg = message_of<ValueError>([] { k::dropout(f32({2}), 1.5, {}); });
  EXPECT_THAT(msg, AllOf(HasSubstr("dropout"), HasSubstr("1.5")));
  msg = message_of<ValueError>([] { k::causal_mask(-1); });
  EXPECT_THAT(msg, AllOf(HasSubstr("causal_mask"), HasSubstr("-1")));
  msg = message_of<ValueError>([] { k::unary(k::UnaryOp::Relu, Tensor()); });
  EXPECT_THAT(msg, AllOf(HasSubstr("relu"), HasSubstr("undefined")));
  msg = message_of<ValueError>([] { k::layernorm(f32({2, 3}), Tensor(), Tensor(), -1.0); });
  EXPECT_THAT(msg, AllOf(HasSubstr("layernorm"), HasSubstr("eps")));
}

}  // namespace
}  // namespace brigade
