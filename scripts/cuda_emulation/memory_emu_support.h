// Force-included (g++ -include) into the transformed memory-bound kernel files for memory_emu.cpp:
//  - atomicAdd / atomicMin for the integer and float atomics the embedding kernels use, as host atomics
//    (the emulated CUDA threads are fibers on one host thread, so plain read-modify-writes would do; the
//    atomics keep the emulation correct should it run blocks on several threads);
//  - BRIGADE_CHECK_DEVICE disabled: the harness passes CPU tensors where the host code expects CUDA ones
//    (stream_for in launch.cuh checks the device), and those checks are not what the emulation tests.
#pragma once

#include <atomic>

#include "tensor/error.h"

#undef BRIGADE_CHECK_DEVICE
#define BRIGADE_CHECK_DEVICE(cond, ...) ((void)0)

template <typename T>
T atomicAdd(T* address, T value) {
  return std::atomic_ref<T>(*address).fetch_add(value);
}

inline long long atomicMin(long long* address, long long value) {
  std::atomic_ref<long long> ref(*address);
  long long old = ref.load();
  while (value < old && !ref.compare_exchange_weak(old, value)) {
  }
  return old;
}
