// The AVX-512 + FMA row loops of layernorm v2 (LayerNormKernel::CpuAvx512; kernels/cpu/layernorm_avx512.cpp).
// Call them only where avx512_rows_run() (exp_rows_avx512.h) says so.
//
// What changes from v1's loops (layernorm_rows.h). v1 keeps every ISA to the same bits, so no FMA, and sums
// in double, widening every float to two double registers; its backward makes one sweep of dy and x for dx
// and a second for the parameter gradients. Here:
//  - the row sums are in float, with fused multiply-adds; the forward sums the row centred about a guess
//    of its mean (its first 16 elements'), then corrects the mean and the variance by what those sums show
//    (see the .cpp for why that keeps the accuracy): one pass for the statistics instead of two;
//  - the backward writes dx and adds the rows' share of dweight and dbias in the same sweep, four rows at a
//    time, so that each column's two gradient sums are loaded and stored once per four rows;
//  - the parameter-gradient totals stay in double, as v1's, but each group of four rows adds its terms in
//    float first and widens their sum once (v1 widens every term): a column's total is then within a few
//    float roundings of its terms' scale, sum |dy * xhat|, however many rows it adds.
#pragma once

#include <cstdint>

namespace brigade::kernels::cpu::detail {

/// For the rows r = 0 .. rows - 1 of x and y ([rows, n], contiguous; n >= 1): mu[r] = mean(x[r]),
/// inv_std[r] = 1 / sqrt(mean((x[r] - mu[r])^2) + eps) (the biased variance), and
/// y[r][j] = ((x[r][j] - mu[r]) * inv_std[r]) * w[j] + b[j] rounded to float. A null w is all ones, a null
/// b zeros. Rows are taken four or eight at a time, their serial chains interleaved; a row's results do not
/// depend on how many rows a call has.
void layernorm_forward_rows_avx512(const float* x, float* y, int64_t rows, int64_t n, const float* w,
                                   const float* b, double eps, double* mu, double* inv_std);

/// For the rows r = 0 .. rows - 1 of dy, x and dx ([rows, n], contiguous), with their stored mean[r] and
/// inv_std[r]: dx[r][j] = inv_std * ((dxhat - mean(dxhat)) - xhat * mean(dxhat * xhat)) with dxhat = dy * w
/// (w null: ones) and xhat = (x - mean) * inv_std; and, unless pw and pb are null,
/// pw[j] += dy[r][j] * xhat[r][j] and pb[j] += dy[r][j]: each group of four rows (from the first) summed in
/// float, in row order, then added to the double totals.
void layernorm_backward_rows_avx512(const float* dy, const float* x, const float* w, const float* mean,
                                    const float* inv_std, int64_t rows, int64_t n, float* dx, double* pw,
                                    double* pb);

}  // namespace brigade::kernels::cpu::detail
