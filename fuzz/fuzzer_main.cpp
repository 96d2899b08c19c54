// One libFuzzer executable per target of fuzz/fuzz_targets.h: fuzz/CMakeLists.txt compiles this file once
// per target with BRIGADE_FUZZ_TARGET set to the target's function (e.g. safetensors).
#include <cstddef>
#include <cstdint>

#include "fuzz/fuzz_targets.h"

#ifndef BRIGADE_FUZZ_TARGET
#error "BRIGADE_FUZZ_TARGET must name a function of fuzz/fuzz_targets.h"
#endif

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  brigade::fuzz::BRIGADE_FUZZ_TARGET(data, size);
  return 0;
}
