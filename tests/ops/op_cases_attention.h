// Op table cases (op_cases.h): fused causal attention, forward and backward (kernels.h: causal_attention),
// q, k, v, dout [B, H, T, D]: odd T and D, T around the CUDA kernels' 64- and 32-row tiles, head dims 64 and
// 128, T whose rows the AVX-512 version pads by a cache line, head-split (strided) views of a packed
// projection, a last dim that is not unit-stride, degenerate sizes, and the float64 shapes the gradcheck
// differentiates. Scale 1 / sqrt(D) unless stated.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "tests/ops/op_case.h"

namespace brigade::testing {

/// A forward case of q, k, v and the backward case of q, k, v and dout on the same specs.
inline void add_attention_pair(OpTableBuilder& t, DType d, const std::vector<InputSpec>& qkv, double scale,
                               const Shape& dout) {
  OpCase f = make_case(Op::Attention, d, qkv);
  f.scalar = scale;
  t.add(f);
  std::vector<InputSpec> inputs = qkv;
  inputs.push_back(in(dout));
  OpCase b = make_case(Op::AttentionBackward, d, inputs);
  b.scalar = scale;
  t.add(b);
}

inline void add_attention_cases(OpTableBuilder& t) {
  struct Heads {
    int64_t B, H, T, D;
  };
  auto plain = [&t](DType d, const Heads& s) {
    const Shape shape{s.B, s.H, s.T, s.D};
    add_attention_pair(t, d, {in(shape), in(shape), in(shape)}, 1.0 / std::sqrt(static_cast<double>(s.D)),
                       shape);
  };
  for (const Heads& s : {Heads{1, 1, 1, 1}, Heads{2, 3, 7, 5}, Heads{2, 4, 13, 16}, Heads{1, 2, 33, 9},
                         Heads{1, 1, 64, 32}, Heads{1, 2, 129, 64}, Heads{1, 2, 200, 128}}) {
    plain(kFloat32, s);
  }
  // Key counts whose padded rows would be an even number of cache lines from 128 floats up (120 -> 128,
  // 256): the AVX-512 version lays those rows out one line longer (attention_avx512.cpp, task_sizes).
  for (const Heads& s : {Heads{1, 2, 120, 32}, Heads{1, 1, 256, 64}}) plain(kFloat32, s);
  for (const Heads& s : {Heads{1, 1, 1, 1}, Heads{2, 3, 7, 5}, Heads{1, 2, 33, 9}}) plain(kFloat64, s);
  for (const Heads& s : {Heads{2, 3, 7, 5}, Heads{1, 2, 33, 9}, Heads{1, 2, 13, 16}, Heads{1, 2, 129, 64},
                         Heads{1, 1, 200, 128}}) {
    plain(kBFloat16, s);
  }
  // The CUDA flash versions' own head dims (64, 128; 24 runs v1) and T around their 64- and 32-row tiles.
  for (DType d : {kFloat32, kBFloat16}) {
    for (const Heads& s : {Heads{1, 1, 1, 64}, Heads{2, 3, 37, 64}, Heads{1, 2, 64, 64}, Heads{1, 2, 65, 128},
                           Heads{1, 2, 130, 64}, Heads{2, 1, 200, 128}, Heads{1, 2, 70, 24}}) {
      plain(d, s);
    }
    for (int64_t D : {64, 128}) {
      add_attention_pair(t, d,
                         {head_split(2, 77, 3, D, 0), head_split(2, 77, 3, D, 1), head_split(2, 77, 3, D, 2)},
                         1.0 / std::sqrt(static_cast<double>(D)), {2, 3, 77, D});
    }
  }
  // q, k, v as heads of packed [B, T, 3, H, D] projections (stride 1 on D only), as a GPT splits them.
  add_attention_pair(t, kFloat32,
                     {head_split(2, 37, 3, 24, 0), head_split(2, 37, 3, 24, 1), head_split(2, 37, 3, 24, 2)},
                     0.25, {2, 3, 37, 24});
  // A last dim that is not unit-stride (q is a transposed view: stride 6 on D): the dispatch copies it.
  add_attention_pair(t, kFloat32, {transposed({1, 2, 4, 6}, 2, 3), in({1, 2, 6, 4}), in({1, 2, 6, 4})}, 0.5,
                     {1, 2, 6, 4});
  // Degenerate: no queries (T = 0); no features (D = 0: every score is 0, lse_i = log(i + 1)).
  plain(kFloat32, Heads{2, 3, 0, 4});
  add_attention_pair(t, kFloat32, {in({1, 2, 3, 0}), in({1, 2, 3, 0}), in({1, 2, 3, 0})}, 1.0, {1, 2, 3, 0});
  // The gradcheck's float64 shapes (scale 0.7), and one with k held fixed.
  for (const Shape& shape : {Shape{1, 1, 1, 1}, Shape{1, 2, 5, 3}, Shape{2, 1, 7, 4}}) {
    add_attention_pair(t, kFloat64, {in(shape), in(shape), in(shape)}, 0.7, shape);
  }
  add_attention_pair(t, kFloat64, {in({1, 2, 4, 3}), constant(in({1, 2, 4, 3})), in({1, 2, 4, 3})}, 0.5,
                     {1, 2, 4, 3});
}

}  // namespace brigade::testing
