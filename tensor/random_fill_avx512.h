// The CPU's float random fills, their Philox draws 16 at a time (tensor/philox_avx512.h). Call it only
// where the CPU has AVX-512F (__builtin_cpu_supports("avx512f")); x86-64 builds only.
#pragma once

#include <cstdint>

namespace brigade::detail {

/// out[i] = philox::normal(seed, offset, i) (or uniform, without `normal`) for i in [first, first + n): the
/// scalar loop's bits. The draws are 16 at a time; a normal's log and cos stay libm's, in double.
void fill_random_float_avx512(float* out, int64_t first, int64_t n, bool normal, uint64_t seed,
                              uint64_t offset);

}  // namespace brigade::detail
