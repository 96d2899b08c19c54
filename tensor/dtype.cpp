#include "tensor/dtype.h"

namespace brigade {

size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::Float32: return 4;
    case DType::BFloat16: return 2;
    case DType::Float64: return 8;
    case DType::Int32: return 4;
    case DType::Int64: return 8;
  }
  BRIGADE_THROW(DTypeError, "dtype_size: unknown dtype ", static_cast<int>(dtype));
}

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::Float32: return "float32";
    case DType::BFloat16: return "bfloat16";
    case DType::Float64: return "float64";
    case DType::Int32: return "int32";
    case DType::Int64: return "int64";
  }
  return "unknown";
}

DType parse_dtype(const std::string& name) {
  if (name == "float32" || name == "f32" || name == "fp32") return kFloat32;
  if (name == "bfloat16" || name == "bf16") return kBFloat16;
  if (name == "float64" || name == "f64" || name == "fp64") return kFloat64;
  if (name == "int32" || name == "i32") return kInt32;
  if (name == "int64" || name == "i64") return kInt64;
  BRIGADE_THROW(DTypeError, "parse_dtype: unknown dtype '", name,
                "'; expected one of float32 (f32), bfloat16 (bf16), float64 (f64), int32 (i32), int64 (i64)");
}

bool is_floating(DType dtype) {
  return dtype == kFloat32 || dtype == kBFloat16 || dtype == kFloat64;
}

std::ostream& operator<<(std::ostream& out, DType dtype) { return out << dtype_name(dtype); }

}  // namespace brigade
