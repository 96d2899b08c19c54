// Everything about the op table in one include: the cases (op_cases.h, and the perf mode's op_cases_perf.h)
// and what each op does with a case: its operands and kernel call (op_call.h), its reference
// (op_reference.h), its differentiable form (op_differentiable.h) and its work (op_work.h).
#pragma once

#include "tests/ops/op_call.h"
#include "tests/ops/op_case.h"
#include "tests/ops/op_cases.h"
#include "tests/ops/op_cases_perf.h"
#include "tests/ops/op_differentiable.h"
#include "tests/ops/op_reference.h"
#include "tests/ops/op_work.h"
