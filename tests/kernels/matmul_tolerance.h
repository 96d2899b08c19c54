// The bound on matmul's magnitude-relative error (matmul_check.h explains the measure and the figures):
// float32 1e-5, float64 1e-12, bfloat16 1e-2. Apart from matmul_check.h so that code without GoogleTest
// (the kernel lab, apps/kernel_lab.cpp, through tests/ops/op_tolerance.h) reads the same figures.
#pragma once

#include "tensor/dtype.h"

namespace brigade::testing {

/// Tolerance on the magnitude-relative error of matmul_check.h.
inline double matmul_tolerance(DType dtype) {
  switch (dtype) {
    case DType::Float64:
      return 1e-12;
    case DType::BFloat16:
      return 1e-2;
    default:
      return 1e-5;
  }
}

}  // namespace brigade::testing
