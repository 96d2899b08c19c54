// StridedIndex: maps a row-major linear index to an element offset for any strided tensor, on host and
// device. Passed by value to CUDA kernels (so at most kMaxDims dims).
//   offset(i) = sum_d coord_d(i) * stride_d,  coord from dividing i by the sizes, innermost first.
#pragma once

#include <cstdint>

#include "tensor/bfloat16.h"  // BRIGADE_HOST_DEVICE
#include "tensor/error.h"

namespace brigade {

struct StridedIndex {
  static constexpr int kMaxDims = 8;
  int ndim = 0;
  int64_t sizes[kMaxDims] = {};
  int64_t strides[kMaxDims] = {};

  BRIGADE_HOST_DEVICE int64_t offset(int64_t linear) const {
    int64_t off = 0;
    for (int d = ndim - 1; d >= 0; --d) {
      int64_t size = sizes[d];
      int64_t coord = linear % size;
      linear /= size;
      off += coord * strides[d];
    }
    return off;
  }
};

/// Builds the index for a tensor-like (anything with shape() and strides()), dropping size-1 dims and
/// throwing ShapeError for more than kMaxDims remaining dims.
template <typename TensorLike>
StridedIndex make_strided_index(const TensorLike& t, const char* op) {
  StridedIndex index;
  const auto& shape = t.shape();
  const auto& strides = t.strides();
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    BRIGADE_CHECK_SHAPE(index.ndim < StridedIndex::kMaxDims, op, ": at most ", StridedIndex::kMaxDims,
                        " non-trivial dims are supported on this path, found ", shape.size());
    index.sizes[index.ndim] = shape[d];
    index.strides[index.ndim] = strides[d];
    ++index.ndim;
  }
  return index;
}

}  // namespace brigade
