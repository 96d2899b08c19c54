// TensorImpl: what a Tensor handle points to. Internal to the tensor layer.
#pragma once

#include <memory>

#include "tensor/tensor.h"

namespace brigade {

struct TensorImpl {
  std::shared_ptr<Storage> storage;
  Shape shape;
  Strides strides;
  int64_t offset = 0;
  DType dtype = kFloat32;
  mutable std::unique_ptr<AutogradMeta> autograd;  // created on demand
};

}  // namespace brigade
