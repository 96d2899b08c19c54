#pragma once
// WMMA emulation: every lane holds the whole 16 x 16 fragment (redundantly); results are identical per lane.
#include <cuda_bf16.h>

#include <type_traits>
namespace nvcuda::wmma {
struct row_major {};
struct col_major {};
struct matrix_a {};
struct matrix_b {};
struct accumulator {};
enum layout_t { mem_row_major, mem_col_major };
template <typename Use, int M, int N, int K, typename T, typename Layout = void>
struct fragment {
  float v[16][16];  // logical [row][col] of the 16 x 16 block
};
template <typename Use, int M, int N, int K, typename T, typename Layout>
void fill_fragment(fragment<Use, M, N, K, T, Layout>& f, float x) {
  for (auto& r : f.v)
    for (auto& e : r) e = x;
}
template <typename Use, int M, int N, int K, typename T, typename Layout>
void load_matrix_sync(fragment<Use, M, N, K, T, Layout>& f, const __nv_bfloat16* p, unsigned ldm) {
  for (int r = 0; r < 16; ++r)
    for (int c = 0; c < 16; ++c)
      f.v[r][c] = std::is_same_v<Layout, row_major> ? float(p[r * ldm + c]) : float(p[c * ldm + r]);
}
template <int M, int N, int K>
void store_matrix_sync(float* p, const fragment<accumulator, M, N, K, float>& f, unsigned ldm, layout_t) {
  for (int r = 0; r < 16; ++r)
    for (int c = 0; c < 16; ++c) p[r * ldm + c] = f.v[r][c];
}
template <int M, int N, int K, typename LA, typename LB>
void mma_sync(fragment<accumulator, M, N, K, float>& d,
              const fragment<matrix_a, M, N, K, __nv_bfloat16, LA>& a,
              const fragment<matrix_b, M, N, K, __nv_bfloat16, LB>& b,
              const fragment<accumulator, M, N, K, float>& c) {
  float out[16][16];
  for (int r = 0; r < 16; ++r)
    for (int cc = 0; cc < 16; ++cc) {
      float s = c.v[r][cc];
      for (int k = 0; k < 16; ++k) s += a.v[r][k] * b.v[k][cc];
      out[r][cc] = s;
    }
  for (int r = 0; r < 16; ++r)
    for (int cc = 0; cc < 16; ++cc) d.v[r][cc] = out[r][cc];
}
}  // namespace nvcuda::wmma
