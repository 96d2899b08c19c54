// The vector ISAs this CPU runs, narrowest first: the row-loop tests compare every one of them with the
// first (kernels/cpu/vector_isa.h).
#pragma once

#include <vector>

#include "kernels/cpu/vector_isa.h"

namespace brigade::testing {

inline std::vector<kernels::cpu::detail::VectorIsa> vector_isas_here() {
  using kernels::cpu::detail::VectorIsa;
  std::vector<VectorIsa> out;
  for (VectorIsa isa : {VectorIsa::Sse2, VectorIsa::Avx2, VectorIsa::Avx512}) {
    if (kernels::cpu::detail::vector_isa_runs(isa)) out.push_back(isa);
  }
  return out;
}

}  // namespace brigade::testing
