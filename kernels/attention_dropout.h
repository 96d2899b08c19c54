// Dropout on the attention weights inside the fused causal attention (kernels.h: causal_attention).
//
// The weights of (b, h) are the [T, T] matrix a_ij = softmax_j(s_ij) (zero above the diagonal). With
// dropout, weight (b, h, i, j) is kept, scaled by 1 / (1 - p), iff
//
//   philox::uniform(state.seed, state.offset, ((b * H + h) * T + i) * T + j) >= p
//
// and dropped otherwise: the rule of kernels::dropout applied to the contiguous [B, H, T, T] weights. So the
// fused op drops exactly the weights that softmax followed by dropout (one draw of the same state) drops,
// and a model gives the same masks whichever path it takes. Backward regenerates the mask from the state.
#pragma once

#include "tensor/generator.h"

namespace brigade::kernels {

struct AttentionDropout {
  double p = 0.0;        ///< in [0, 1); 0 is no dropout
  GeneratorState state;  ///< one draw of a Generator (Generator::next_draw)
};

}  // namespace brigade::kernels
