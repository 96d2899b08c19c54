// Op table cases (op_cases.h): the reductions sum, mean, max over any dims, argmax, and sum_to.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "tests/ops/op_case.h"

namespace brigade::testing {

inline void add_reduction_cases(OpTableBuilder& t) {
  const std::vector<DType> floating = {kFloat32, kBFloat16, kFloat64};
  // ---- reductions
  struct DimsCase {
    std::vector<int64_t> dims;
    bool keepdim;
  };
  const std::vector<DimsCase> dim_sets = {{{}, false},     {{0}, false},   {{1}, true},      {{-1}, false},
                                          {{0, 2}, false}, {{2, 0}, true}, {{0, 1, 2}, true}};
  for (Op op : {Op::Sum, Op::Mean, Op::Max}) {
    for (const DimsCase& ds : dim_sets) {
      for (DType d : floating) {
        OpCase c = make_case(op, d, {in({2, 3, 4})});
        c.dims = ds.dims;
        c.keepdim = ds.keepdim;
        t.add(c);
      }
    }
    OpCase c = make_case(op, kFloat32, {transposed({4, 3, 2}, 0, 2)});
    c.dims = {1};
    t.add(c);
    c = make_case(op, kFloat32, {expanded({3, 1}, {3, 5})});
    c.dims = {1};
    t.add(c);
    c = make_case(op, kFloat32, {in({})});  // 0-d: all dims
    t.add(c);
    c = make_case(op, kFloat32, {in({2, 1, 3})});
    c.dims = {1};
    c.keepdim = true;
    t.add(c);
    c = make_case(op, kFloat64, {in({2, 3, 4})});  // one dim dropped (the gradcheck unsqueezes it back)
    c.dims = {1};
    t.add(c);
  }
  {
    OpCase c = make_case(Op::Sum, kFloat32, {in({2, 0, 3})});  // empty rows: sums are 0
    c.dims = {1};
    t.add(c);
    c = make_case(Op::Sum, kFloat32, {in({0, 3})});  // no rows
    c.dims = {1};
    t.add(c);
    c = make_case(Op::Mean, kFloat32, {in({2, 0})});  // mean of nothing: NaN
    c.dims = {1};
    t.add(c);
    c = make_case(Op::Max, kFloat32, {in({0, 3})});
    c.dims = {1};
    t.add(c);
    c = make_case(Op::Sum, kFloat32, {in({3, 20000})});  // few long rows: the chunked parallel path
    c.dims = {1};
    t.add(c);
    c = make_case(Op::Sum, kFloat32, {in({40000})});
    t.add(c);
    c = make_case(Op::Sum, kFloat32, {in({512, 96})});  // many rows: parallel over rows
    c.dims = {-1};
    t.add(c);
    c = make_case(Op::Mean, kBFloat16, {in({4, 300})});
    c.dims = {1};
    t.add(c);
    // Sums over the leading dims of a contiguous tensor (a bias gradient): the column-sum path, on CUDA with
    // rows split over several slabs (the last one short) and a partial tile of 32 columns.
    c = make_case(Op::Sum, kFloat32, {in({1000, 77})});
    c.dims = {0};
    t.add(c);
    c = make_case(Op::Sum, kBFloat16, {in({8, 130, 40})});
    c.dims = {0, 1};
    t.add(c);
  }
  for (DType d : floating) {
    for (auto [dim, keep] : std::vector<std::pair<int64_t, bool>>{{0, false}, {1, true}, {-1, false}}) {
      OpCase c = make_case(Op::ArgMax, d, {in({3, 5, 4})});
      c.dims = {dim};
      c.keepdim = keep;
      t.add(c);
    }
  }
  {
    OpCase c = make_case(Op::ArgMax, kFloat32, {transposed({6, 4}, 0, 1)});
    c.dims = {1};
    t.add(c);
    c = make_case(Op::ArgMax, kFloat32, {in({4, 6}, Values::Discrete)});  // ties: the first maximum
    c.dims = {1};
    t.add(c);
    c = make_case(Op::ArgMax, kFloat32, {in({5, 1})});
    c.dims = {1};
    t.add(c);
  }
  for (auto [from, to] : std::vector<std::pair<Shape, Shape>>{{{2, 3, 4}, {3, 1}},
                                                              {{2, 3, 4}, {4}},
                                                              {{3, 4}, {3, 4}},
                                                              {{2, 3}, {}},
                                                              {{2, 3, 4}, {2, 1, 4}},
                                                              {{4, 1, 3}, {1, 1}}}) {
    for (DType d : floating) {
      OpCase c = make_case(Op::SumTo, d, {in(from)});
      c.shape = to;
      t.add(c);
    }
  }
  {
    OpCase c = make_case(Op::SumTo, kFloat32, {expanded({3, 1}, {2, 3, 4})});
    c.shape = {3, 1};
    t.add(c);
    c = make_case(Op::SumTo, kFloat32, {in({2, 0, 3})});
    c.shape = {1, 3};
    t.add(c);
  }
}

}  // namespace brigade::testing
