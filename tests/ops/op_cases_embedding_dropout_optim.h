// Op table cases (op_cases.h): embedding and its backward, dropout, the causal mask, AdamW and the global
// L2 norm.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "tests/ops/op_case.h"

namespace brigade::testing {

inline void add_embedding_dropout_optim_cases(OpTableBuilder& t) {
  const std::vector<DType> floating = {kFloat32, kBFloat16, kFloat64};
  // ---- embedding
  for (DType d : floating) {
    t.add(make_case(Op::Embedding, d, {in({10, 6}), ids({2, 3}, 10)}));
    OpCase c = make_case(Op::EmbeddingBackward, d, {in({4, 6, 3}), ids({4, 6}, 5)});  // 24 ids over 5 rows
    c.index = 5;
    t.add(c);
  }
  t.add(make_case(Op::Embedding, kFloat32, {in({7, 4}), ids({9}, 7, InputDType::Int32)}));
  t.add(make_case(Op::Embedding, kFloat32, {transposed({5, 8}, 0, 1), ids({3, 2, 2}, 8)}));
  t.add(make_case(Op::Embedding, kFloat32, {in({6, 3}), ids({0}, 6)}));
  t.add(make_case(Op::Embedding, kFloat32, {in({6, 3}), ids({}, 6)}));
  t.add(make_case(Op::Embedding, kFloat64, {in({5, 3}), fixed_ids({0, 4, 2, 4, 1, 0}, {2, 3})}));  // repeats
  {
    OpCase c = make_case(Op::EmbeddingBackward, kFloat32,
                         {transposed({3, 10}, 0, 1), ids({10}, 3, InputDType::Int32)});
    c.index = 4;  // row 3 is never hit and stays 0
    t.add(c);
    c = make_case(Op::EmbeddingBackward, kFloat32, {in({500, 80}), ids({500}, 50)});  // OpenMP path
    c.index = 50;
    t.add(c);
    c = make_case(Op::EmbeddingBackward, kFloat32, {in({0, 4}), ids({0}, 3)});
    c.index = 3;
    t.add(c);
  }

  // ---- dropout
  for (DType d : floating) {
    OpCase c = make_case(Op::Dropout, d, {in({8, 16})});
    c.scalar = 0.25;
    c.rng = {1234, 7};
    t.add(c);
  }
  for (auto [p, rng] :
       std::vector<std::pair<double, GeneratorState>>{{0.5, {99, 0}}, {0.0, {5, 5}}, {1.0, {5, 5}}}) {
    OpCase c = make_case(Op::Dropout, kFloat32, {transposed({16, 9}, 0, 1)});
    c.scalar = p;
    c.rng = rng;
    t.add(c);
  }
  {
    OpCase c = make_case(Op::Dropout, kFloat32, {in({300, 200})});  // OpenMP path
    c.scalar = 0.125;
    c.rng = {42, 3};
    t.add(c);
  }

  // ---- causal mask
  for (DType d : floating) {
    OpCase c = make_case(Op::CausalMask, d, {});
    c.index = 5;
    t.add(c);
  }
  for (int64_t T : {0, 1, 200}) {
    OpCase c = make_case(Op::CausalMask, kFloat32, {});
    c.index = T;
    t.add(c);
  }

  // ---- AdamW
  for (DType d : floating) {
    for (double wd : {0.1, 0.0}) {
      OpCase c =
          make_case(Op::AdamW, d,
                    {in({5, 7}), in({5, 7}), with_dtype(in({5, 7}, Values::Small), InputDType::Accumulator),
                     with_dtype(in({5, 7}, Values::Positive), InputDType::Accumulator)});
      c.adamw.lr = 1e-2;
      c.adamw.weight_decay = wd;
      c.adamw.step = 3;
      t.add(c);
    }
  }
  {
    OpCase c = make_case(
        Op::AdamW, kFloat32,
        {in({4, 6}), transposed({6, 4}, 0, 1), with_dtype(in({4, 6}, Values::Small), InputDType::Accumulator),
         with_dtype(in({4, 6}, Values::Positive), InputDType::Accumulator)});
    c.adamw = kernels::AdamWStep{3e-4, 0.8, 0.99, 1e-6, 0.01, 1};
    t.add(c);
    c = make_case(
        Op::AdamW, kFloat32,
        {in({200, 200}), in({200, 200}), with_dtype(in({200, 200}, Values::Small), InputDType::Accumulator),
         with_dtype(in({200, 200}, Values::Positive), InputDType::Accumulator)});  // OpenMP path
    c.adamw.step = 10;
    c.adamw.weight_decay = 0.05;
    t.add(c);
  }

  // ---- global L2 norm
  for (DType d : floating)
    t.add(make_case(Op::GlobalL2Norm, d, {in({3, 4}), in({5}), transposed({2, 3, 2}, 0, 2)}));
  t.add(make_case(Op::GlobalL2Norm, kFloat32, {in({10000}), in({0, 3}), in({100, 100})}));
}

}  // namespace brigade::testing
