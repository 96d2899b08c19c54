// Element types. float64 exists for finite-difference gradient checks (CPU); bfloat16 for mixed precision.
#pragma once

#include <cstddef>
#include <cstdint>
#include <ostream>
#include <string>

#include "tensor/bfloat16.h"
#include "tensor/error.h"

namespace brigade {

enum class DType : uint8_t { Float32, BFloat16, Float64, Int32, Int64 };

inline constexpr DType kFloat32 = DType::Float32;
inline constexpr DType kBFloat16 = DType::BFloat16;
inline constexpr DType kFloat64 = DType::Float64;
inline constexpr DType kInt32 = DType::Int32;
inline constexpr DType kInt64 = DType::Int64;

/// Bytes per element.
size_t dtype_size(DType dtype);
/// "float32", "bfloat16", "float64", "int32", "int64".
const char* dtype_name(DType dtype);
/// Parses the names above and the short forms "f32", "bf16", "f64", "i32", "i64"; throws DTypeError.
DType parse_dtype(const std::string& name);
/// True for float32, bfloat16 and float64.
bool is_floating(DType dtype);
std::ostream& operator<<(std::ostream& out, DType dtype);

/// Maps a C++ type to its DType: dtype_of<float>() == kFloat32.
template <typename T>
constexpr DType dtype_of();
template <> constexpr DType dtype_of<float>() { return kFloat32; }
template <> constexpr DType dtype_of<bfloat16>() { return kBFloat16; }
template <> constexpr DType dtype_of<double>() { return kFloat64; }
template <> constexpr DType dtype_of<int32_t>() { return kInt32; }
template <> constexpr DType dtype_of<int64_t>() { return kInt64; }

}  // namespace brigade

/// Calls the body with `scalar_t` bound to the C++ type of `dtype`. Used by kernels:
///   BRIGADE_DISPATCH_ALL(x.dtype(), "relu", [&] { relu_impl<scalar_t>(...); });
#define BRIGADE_DISPATCH_CASE(enum_value, type, ...) \
  case enum_value: {                                 \
    using scalar_t = type;                           \
    __VA_ARGS__();                                   \
    break;                                           \
  }

#define BRIGADE_DISPATCH_FLOATING(dtype, op_name, ...)                                                \
  do {                                                                                              \
    switch (dtype) {                                                                                \
      BRIGADE_DISPATCH_CASE(::brigade::DType::Float32, float, __VA_ARGS__)                          \
      BRIGADE_DISPATCH_CASE(::brigade::DType::BFloat16, ::brigade::bfloat16, __VA_ARGS__)           \
      BRIGADE_DISPATCH_CASE(::brigade::DType::Float64, double, __VA_ARGS__)                         \
      default:                                                                                      \
        BRIGADE_THROW(::brigade::DTypeError, op_name, ": expected a floating dtype (float32, bfloat16, " \
                      "float64), found ", ::brigade::dtype_name(dtype));                            \
    }                                                                                               \
  } while (0)

#define BRIGADE_DISPATCH_ALL(dtype, op_name, ...)                                           \
  do {                                                                                    \
    switch (dtype) {                                                                      \
      BRIGADE_DISPATCH_CASE(::brigade::DType::Float32, float, __VA_ARGS__)                \
      BRIGADE_DISPATCH_CASE(::brigade::DType::BFloat16, ::brigade::bfloat16, __VA_ARGS__) \
      BRIGADE_DISPATCH_CASE(::brigade::DType::Float64, double, __VA_ARGS__)               \
      BRIGADE_DISPATCH_CASE(::brigade::DType::Int32, int32_t, __VA_ARGS__)                \
      BRIGADE_DISPATCH_CASE(::brigade::DType::Int64, int64_t, __VA_ARGS__)                \
      default:                                                                            \
        BRIGADE_THROW(::brigade::DTypeError, op_name, ": unsupported dtype");             \
    }                                                                                     \
  } while (0)

#define BRIGADE_DISPATCH_INDEX(dtype, op_name, ...)                                                 \
  do {                                                                                            \
    switch (dtype) {                                                                              \
      BRIGADE_DISPATCH_CASE(::brigade::DType::Int32, int32_t, __VA_ARGS__)                        \
      BRIGADE_DISPATCH_CASE(::brigade::DType::Int64, int64_t, __VA_ARGS__)                        \
      default:                                                                                    \
        BRIGADE_THROW(::brigade::DTypeError, op_name, ": expected an integer dtype (int32, int64), " \
                      "found ", ::brigade::dtype_name(dtype));                                    \
    }                                                                                             \
  } while (0)
