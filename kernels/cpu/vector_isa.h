// The vector instruction sets that the float32 row loops are compiled for (exp_rows.cpp,
// layernorm_rows.cpp), and which of them this CPU runs. Each loop is compiled once per ISA from the same
// code and the widest one that runs is picked at run time; all give the same bits.
#pragma once

namespace brigade::kernels::cpu::detail {

enum class VectorIsa { Sse2, Avx2, Avx512 };

/// Whether this CPU (and OS) runs `isa`'s code.
bool vector_isa_runs(VectorIsa isa);

/// The widest VectorIsa this CPU runs.
VectorIsa widest_vector_isa();

}  // namespace brigade::kernels::cpu::detail
