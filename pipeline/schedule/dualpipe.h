// DualPipeV (DeepSeek-AI's DualPipe, "cut in half" by Sea AI Lab into a V): a bidirectional schedule on
// two chunks per stage in V placement (schedule.h), stage s holding model chunks s and 2S-1-s.
//
// DualPipe feeds microbatches into both ends of the pipeline at once, so that in the steady state every
// stage pairs the forward of one chunk with the backward of the other, and a real implementation overlaps
// the two (one's communication hides behind the other's compute). DualPipeV gets the same pairs from a
// single V: a microbatch going down the stages (chunk 0) meets one coming back up (chunk 1). Stage s runs,
// with c0 / c1 its chunk 0 / 1 and M >= 2S:
//   1. 2(S - s - 1) forwards of c0;
//   2. s + 1 times: F c0, F c1;
//   3. S - s - 1 times: Bi c1, Bw (the oldest pending weight gradient), F c1;
//   4. M - 2S + s + 1 times: the pair (F c0, B c1), then the pair (F c1, B c0);
//   5. S - s - 1 times: B c1, then the pair (F c1, B c0);
//   6. s + 1 times: the backward of c1, then of c0; from the middle of this phase on they are split into
//      Bi now and Bw later (zero bubble);
//   7. S - s - 1 times: Bw, Bi c0;
//   8. the remaining Bw.
// brigade runs each overlapped pair as two actions in sequence, F then B, on the stage's one compute
// stream: nothing is overlapped. The F half may therefore start while the B half still waits for its
// gradient, which an overlapped pair cannot; with F = Bi = Bw each stage idles (S - 1) chunk forwards,
// below the (PP/2 - 1)(F&B + B - 3W) of DualPipe's table (PP = 2S chunks, F&B = F + B here), and holds
// 2S + 1 chunk activations at its peak, the table's PP + 1 (tests/pipeline/schedule_figures_test.cpp).
#pragma once

#include "pipeline/schedule/schedule.h"

namespace brigade::pipeline {

/// DualPipeV with S stages and M microbatches (v = 2, V placement). ValueError for S < 1 or M < 2S.
Schedule dualpipe_v(int stages, int microbatches, Recompute recompute = Recompute::Never);

}  // namespace brigade::pipeline
