// Value conversion between the five dtypes, written once for the host copies (tensor/device_ops.cpp) and the
// device copies (tensor/cuda/device_ops.cu): bfloat16 goes through float both ways, everything else is a
// static_cast.
#pragma once

#include <type_traits>

#include "tensor/bfloat16.h"

namespace brigade::detail {

template <typename To, typename From>
BRIGADE_HOST_DEVICE inline To convert(From value) {
  if constexpr (std::is_same_v<To, From>) {
    return value;
  } else if constexpr (std::is_same_v<To, bfloat16>) {
    return bfloat16(static_cast<float>(value));
  } else if constexpr (std::is_same_v<From, bfloat16>) {
    return static_cast<To>(static_cast<float>(value));
  } else {
    return static_cast<To>(value);
  }
}

}  // namespace brigade::detail
