#include "kernels/cpu/vector_isa.h"

#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/vector_math.h"

namespace brigade::kernels::cpu::detail {

bool vector_isa_runs(VectorIsa isa) {
#if BRIGADE_CPU_AVX2
  if (isa == VectorIsa::Avx512) return cpu_features().avx512f;
  if (isa == VectorIsa::Avx2) return cpu_has_avx2();
#endif
  return isa == VectorIsa::Sse2;
}

VectorIsa widest_vector_isa() {
  static const VectorIsa widest = vector_isa_runs(VectorIsa::Avx512) ? VectorIsa::Avx512
                                  : vector_isa_runs(VectorIsa::Avx2) ? VectorIsa::Avx2
                                                                     : VectorIsa::Sse2;
  return widest;
}

}  // namespace brigade::kernels::cpu::detail
