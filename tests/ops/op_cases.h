// The op table (in the spirit of ggml's tests/test-backend-ops.cpp): ONE list of op cases that drives
//   op_table_test.cpp       every case on the CPU against the plain reference of kernels/reference/
//   cuda_op_table_test.cpp  every case on CUDA, by every registered kernel version, against the same
//   reference op_gradcheck_test.cpp   the float64 finite-difference gradcheck of every case with a
//   differentiable form bench/kernels_bench.cpp the perf mode: the same ops at a GPT's shapes, timed, with
//   their napkin work
// The cases cover every op of kernels/kernels.h, every floating dtype, broadcasting, size-0 and size-1 dims,
// 0-d tensors, non-contiguous views, sizes large enough to take the OpenMP / chunked paths of the CPU
// backend, and the compositions of autograd ops the gradcheck differentiates.
//
// How to add a case: pick the section file of its op below and add a line, e.g.
//   OpCase c = make_case(Op::Softmax, kFloat32, {transposed({10, 4}, 0, 1)});
//   t.add(c);
// make_case takes the op, the case dtype and the inputs (op_case.h: in, transposed, narrowed, expanded,
// viewed, head_split, ids, targets, mask, fixed_ids, constant); set the op's parameters on the case
// (dims, scalar, transpose_a, ...). The name is derived from all of that. Nothing else is needed: every test
// and the bench pick the case up, on every backend and version; a float64 case with a differentiable form
// and few elements is also gradchecked (op_differentiable.h: gradchecked()).
// How to add an op: an enumerator in Op (op_case.h), then the compiler (-Wswitch) names every switch that
// must learn it: its name (op_case.h), its kernel call (op_call.h), its reference (op_reference.h, calling a
// new function of kernels/reference/), its differentiable form (op_differentiable.h) and its work
// (op_work.h); then cases here.
#pragma once

#include <vector>

#include "tests/ops/op_case.h"
#include "tests/ops/op_cases_attention.h"
#include "tests/ops/op_cases_compositions.h"
#include "tests/ops/op_cases_elementwise.h"
#include "tests/ops/op_cases_embedding_dropout_optim.h"
#include "tests/ops/op_cases_fused.h"
#include "tests/ops/op_cases_matmul.h"
#include "tests/ops/op_cases_reduce.h"
#include "tests/ops/op_cases_rows.h"

namespace brigade::testing {

inline std::vector<OpCase> build_op_cases() {
  OpTableBuilder t;
  add_elementwise_cases(t);
  add_reduction_cases(t);
  add_matmul_cases(t);
  add_row_cases(t);
  add_attention_cases(t);
  add_embedding_dropout_optim_cases(t);
  add_fused_cases(t);
  add_composition_cases(t);
  return t.take();
}

/// Every case, built once.
inline const std::vector<OpCase>& op_cases() {
  static const std::vector<OpCase> cases = build_op_cases();
  return cases;
}

}  // namespace brigade::testing
