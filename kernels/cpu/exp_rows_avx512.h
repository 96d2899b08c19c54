// The AVX-512 + FMA row loops of softmax v2 and cross-entropy v2 (SoftmaxKernel::CpuAvx512,
// CrossEntropyKernel::CpuAvx512; kernels/cpu/exp_rows_avx512.cpp). Call them only where
// avx512_rows_run() says so.
//
// What changes from v1's loops (exp_rows.h). v1 makes three passes over a row for softmax (max; exp with
// its sum, stored; scale) and keeps every ISA to the same bits, so no FMA and a degree-5 exp. Here:
//  - max_exp_sum takes the max and the sum of exp(x - max) in one pass over memory. A row of up to
//    kExpChunk floats (8 KiB, in L1) takes its max first, then its exps from L1. A longer row goes once:
//    its exps are summed against a shift (the max of its first 64 floats), which is raised, the sum so
//    far rescaled in double, only when an element passes it by more than 16; at the end the sum is moved
//    to the row's max. Nothing is stored, so cross-entropy without a gradient reads its logits once.
//  - outputs are then written in one more pass (exp_scaled, log_softmax), optionally with non-temporal
//    stores when the output is too big for the caches (it would only evict the input).
//  - exp16 (exp_avx512.h): ~1 ulp, about half the instructions of v1's exp.
// Sums stay in double: each group of 4 vectors (64 exps) is added in float, then widened.
#pragma once

#include <cstdint>

namespace brigade::kernels::cpu::detail {

/// Rows up to this many floats (8 KiB) are read twice by max_exp_sum, for the max and then from L1 for the
/// exps; longer rows once, against a running shift.
constexpr int64_t kExpChunk = 2048;

/// Rows up to this many floats are taken several at a time (max_exp_sum_rows_avx512): their per-row chains
/// cost more than their vectors. Longer rows go one at a time, so that a row is still in L1 for its
/// output pass (8 rows of 1024 keys, 32 KiB of input and as much output, were 1.4x slower than one).
constexpr int64_t kShortRow = 256;

/// Whether this build has the loops below and this CPU runs them (AVX-512F and FMA).
bool avx512_rows_run();

/// Whether an output of `floats` float32 values is more than twice the L3 (cpu_cache_sizes()): stores to
/// it then go around the caches (non-temporal), where they would only evict what is still to be read.
bool output_outgrows_caches(int64_t floats);

/// Returns sum_j exp(x[j] - m) in double and sets *max to m = max_j x[j], for n >= 1. A NaN element, or
/// a row of -inf only, gives a NaN or zero sum (the ops then produce NaN, as v1 does).
double max_exp_sum_avx512(const float* x, int64_t n, float* max);

/// max_exp_sum_avx512 for each of `rows` rows of n floats (1 <= n <= kExpChunk; [rows, n] contiguous), the
/// same bits, a few rows at a time with their chains interleaved: for short rows, whose per-row chain (two
/// reductions) costs more than their vectors. With y (else null), each row's exps are written into y's
/// row as max_exp_sum_store_avx512 writes them.
void max_exp_sum_rows_avx512(const float* x, int64_t rows, int64_t n, float* max, double* total, float* y);

/// For a row that fits one chunk (1 <= n <= kExpChunk): max_exp_sum's result, and y[j] = exp(x[j] - max)
/// written on the way (the same exps, so that scale_avx512 then finishes the softmax from L1 instead of
/// computing every exp a second time). A row of -inf only writes nothing (the sum is 0, *max -inf).
double max_exp_sum_store_avx512(const float* x, float* y, int64_t n, float* max);

/// y[j] *= scale.
void scale_avx512(float* y, int64_t n, float scale);

/// y[j] = exp(x[j] - shift) * scale, all in float (softmax: scale = 1 / total; cross-entropy's gradient:
/// 1 / (total * count)). shift is the row's max (x[j] - shift must not exceed 88). `stream`: non-temporal
/// stores (the row is then not in cache afterwards).
void exp_scaled_avx512(const float* x, float* y, int64_t n, float shift, float scale, bool stream);

/// y[j] = exp(x[j] - max) * scale as exp_scaled_avx512 gives it. With `kept`, y already holds the row's
/// exps (max_exp_sum_rows_avx512 or max_exp_sum_store_avx512 wrote them) and is scaled in place, the same
/// bits; a row of -inf only kept nothing and is computed (NaN, as v1).
void exps_scaled_avx512(const float* x, float* y, int64_t n, float max, float scale, bool kept, bool stream);

/// y[j] = (x[j] - max) - log_total in float (log-softmax); `stream` as above.
void log_softmax_avx512(const float* x, float* y, int64_t n, float max, float log_total, bool stream);

/// dx[j] = dy[j] - exp(y[j]) * dy_total, one FMA (log-softmax backward; y is a log-softmax, at most 0).
void log_softmax_backward_avx512(const float* dy, const float* y, float* dx, int64_t n, float dy_total);

/// The backward of `rows` rows of n floats ([rows, n] contiguous): softmax dx = y * (dy - sum_j dy[j] y[j]),
/// or with `log`, log-softmax dx = dy - exp(y) * sum_j dy[j]; the sums in double (as v1's), the rest in
/// float. Rows up to kShortRow floats four at a time, their sums first.
void softmax_backward_rows_avx512(const float* dy, const float* y, float* dx, int64_t rows, int64_t n,
                                  bool log);

/// y[j] = exp16(x[j]) (for its accuracy test).
void exp_avx512(const float* x, float* y, int64_t n);

/// y[j] = log8(x[j]) (log_avx512.h; for its accuracy test).
void log_avx512(const double* x, double* y, int64_t n);

}  // namespace brigade::kernels::cpu::detail
