// BLIS's five loops around a micro-kernel: the driver of the packed GEMM versions v2-v4
// (kernels/cpu/matmul_avx2_fma.cpp, matmul_avx512.cpp, matmul_avx512_bf16.cpp). Each version supplies a
// Kernel: its register tile MR x NR, its packing and its micro-kernel, compiled for its ISA; this file is
// the same for all of them.
//
//   C[b] (M x N, row-major, ldc) = op(A[b]) (M x K) @ op(B[b]) (K x N)
//
// Loops, from the outside in (row-major C: the micro-kernel broadcasts A and loads rows of B as vectors,
// so B plays the part BLIS's column-major A plays, and the roles of the blocks follow):
//   task                    a (batch entry, row range, column range) of C; tasks share nothing, so
//                           OpenMP runs them on any thread (see split_tasks)
//    ic over rows by MC     the packed A block (MC x KC) stays in L3
//     pc over K by KC       pack op(A)[ic.., pc..] into micro-panels of MR rows
//      jc over cols by NC   pack op(B)[pc.., jc..] into micro-panels of NR columns: the B block (KC x NC)
//                           stays in L2
//       ir over MC by MR    one A micro-panel (MR x KC) stays in L1 while ...
//        jr over NC by NR   ... the micro-kernel runs it against each B micro-panel in turn (from L2),
//                           accumulating an MR x NR tile in registers over the K slice, then storing it
//                           into C (first slice) or adding it to C (later slices); with a bias, the last
//                           slice adds it to the tile's rows on the way out (a Linear's bias: no pass over
//                           C of its own)
//   Edge tiles (fewer than MR rows or NR columns left) are computed whole into a scratch tile (the packed
//   panels are zero-padded; a kernel with narrow tiles computes only the left columns it needs where at
//   most NR / 2 are real) and only their valid part is merged into C.
// One large product on several threads runs the same loops with the threads in step instead
// (run_gemm_shared_b): each owns a share of the rows, and they pack every B block together, once.
//
// Block sizes come from the caches the machine reports (blocks_from_caches; BLIS's analytic model, after
// Low et al., "Analytical modeling is enough for high-performance BLIS", 2016, simplified): the A
// micro-panel takes half of L1, the B block half of L2, the A block a core's share of L3.
//
// Determinism: every element of C sums its K products in one fixed order (k ascending within a slice,
// one FMA chain per slice from zero, slice sums added to C in order). Neither the task split, nor threads
// packing B together, nor the thread count, nor the position of an element in a full or an edge tile changes
// that order, so the result does not depend on the number of threads. The slice length does depend on the
// machine's L1 (and on K: slice_length evens the slices out).
//
// bfloat16 C: op(A) and op(B) are widened to float (v2, v3) or packed as bf16 pairs (v4), and K is not
// sliced (KC = K), so each element is accumulated in float over the whole of K and rounded once.
#pragma once

#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "kernels/backend.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/gemm_packing.h"
#include "tensor/bf16_arrays.h"
#include "tensor/bfloat16.h"

namespace brigade::kernels::cpu::detail {

struct GemmBlocks {
  int64_t mc = 0, kc = 0, nc = 0;
};

/// Block sizes for an MR x NR micro-kernel whose packed operands take `bytes` per element and k value.
inline GemmBlocks blocks_from_caches(int64_t mr, int64_t nr, int64_t bytes) {
  const CacheSizes& caches = cpu_cache_sizes();
  const int64_t cores = std::max(1, omp_get_num_procs());
  GemmBlocks b;
  // The A micro-panel (MR x KC) in half of L1; the other half holds the B micro-panel streaming through
  // and the C tile. 32 KiB L1, 12 rows of float: KC = 336.
  b.kc = std::clamp<int64_t>(caches.l1d / 2 / (mr * bytes) / 16 * 16, 64, 1024);
  // The B block (KC x NC) in half of L2. 1 MiB L2, KC = 336: NC = 384.
  b.nc = std::clamp<int64_t>(caches.l2 / 2 / (b.kc * bytes) / nr * nr, nr, 8192);
  // The A block (MC x KC) in half of this core's share of L3 (at most 8192 rows), whole micro-panels.
  b.mc = std::clamp<int64_t>(caches.l3 / cores / 2 / (b.kc * bytes), mr, 8192) / mr * mr;
  return b;
}

/// The K slice length for a product of depth k, given the cache-derived slice kc: equal slices, each up to
/// an eighth longer than kc where that saves one. Every slice is a pass that loads and stores the C tile, and
/// a short last one (2048 = 6 x 336 + 32) moves C for a tenth of the work: 2048 is cut 5 x 344 + 328 instead.
inline int64_t slice_length(int64_t k, int64_t kc) {
  const int64_t slices = ceil_div(k, kc + kc / 8);
  return round_up(ceil_div(k, slices), 4);
}

/// The K slice length both drivers use: slice_length for float C; bfloat16 C is not sliced (one slice,
/// rounded once).
template <typename T>
int64_t k_slice(const GemmArgs& g, const GemmBlocks& blocks) {
  return std::is_same_v<T, float> ? std::min(slice_length(g.k, blocks.kc), g.k) : g.k;
}

/// One task of a GEMM: rows [i0, i1) and columns [j0, j1) of C[item].
struct GemmTask {
  int64_t item, i0, i1, j0, j1;
};

/// How a GEMM is cut into tasks: `parts_m` x `parts_n` ranges of each batch entry.
struct GemmSplit {
  int threads = 1;
  int64_t parts_m = 1, parts_n = 1;
};

/// Threads only from ~4 MFLOP (~40 us on one core at the measured peak): a team costs a few microseconds on
/// an idle machine and far more on a shared one. Batches of small products (attention scores per head)
/// give each thread whole products. A single product is cut into row ranges (whole micro-panels; columns
/// too when there are too few rows), handed out dynamically: one a thread under ~200 MFLOP, about two a
/// thread above, so that a thread the OS delays does not hold the others up. Every task packs all of B,
/// and at the baby GPT's products (12-100 MFLOP, B read from memory) a second packing per thread cost more
/// than the balance saved: one task a thread took the 2-thread step to 0.93-0.96 of its time with two.
/// (Larger products that meet shares_b's rule pack B once, all threads together.)
inline GemmSplit split_tasks(const GemmArgs& g, int64_t mr, int64_t nr) {
  GemmSplit s;
  const double flops = 2.0 * double(g.m) * double(g.n) * double(g.k) * double(g.batch);
  s.threads = flops > 4e6 ? omp_get_max_threads() : 1;
  if (s.threads > 1 && g.batch < 2 * s.threads) {
    const int64_t per_item = ceil_div((flops >= 2e8 ? 2 : 1) * s.threads, g.batch);
    s.parts_m = std::min(per_item, ceil_div(g.m, mr));
    s.parts_n = std::min(ceil_div(per_item, s.parts_m), ceil_div(g.n, nr));
  }
  return s;
}

/// [begin, end) of part `index` of `parts` near-equal ranges of `count`, cut at multiples of `unit`.
inline std::pair<int64_t, int64_t> part_range(int64_t count, int64_t parts, int64_t index, int64_t unit) {
  const int64_t units = ceil_div(count, unit);
  const int64_t begin = units * index / parts * unit, end = units * (index + 1) / parts * unit;
  return {std::min(begin, count), std::min(end, count)};
}

/// Whether Kernel has tile_rows: a micro-kernel that reads an untransposed A where it lies.
template <typename Kernel>
constexpr bool kHasTileRows = requires(int64_t k, const float* a, float* c) {
  Kernel::tile_rows(k, a, k, a, c, k, true, a);
};

/// Whether Kernel has tile_narrow and tile_rows_narrow: the micro-kernels for a last panel of at most
/// NR / 2 real columns (stored into the scratch tile).
template <typename Kernel>
constexpr bool kHasNarrowTile = requires(int64_t k, const float* a, float* c) {
  Kernel::tile_narrow(k, a, a, c, k, k);
  Kernel::tile_rows_narrow(k, a, k, a, c, k, k);
};

/// Whether a task reads A's rows where they lie (Kernel::tile_rows) instead of packing them. Packing copies
/// every value of the A block once, and the block then serves every column of the task: at 32 columns a
/// tile, the copy costs about as much as the products of 32-64 columns (a transposing copy, ~0.5 cycles a
/// value, against 1/32 cycle a multiply-add), so a task of few columns (the baby GPT's products: 65-512)
/// spends 5-25 % of its time packing A. Read in place, the 12 rows of a micro-panel are 12 streams from L1;
/// rows a multiple of 4 KiB apart would share one L1 set and evict each other, so those still pack, as do
/// wide tasks (the copy is a small share there), a transposed A and bfloat16.
template <typename T, typename Kernel>
bool reads_rows_of_a(const GemmArgs& g, int64_t cols) {
  constexpr int64_t kMaxColumns = 512;
  if constexpr (std::is_same_v<T, float> && kHasTileRows<Kernel>) {
    return !g.trans_a && cols <= kMaxColumns && (g.lda * int64_t{sizeof(float)}) % 4096 != 0;
  }
  return false;
}

/// The bias for the columns from `col` of a K slice that ends at `end`: the last slice adds it, the others
/// (and a GEMM without one) get nullptr.
template <typename T>
const T* slice_bias(const GemmArgs& g, int64_t end, int64_t col) {
  return g.bias != nullptr && end == g.k ? static_cast<const T*>(g.bias) + col : nullptr;
}

/// A bfloat16 C's tile: `rows` x `cols` float sums (tile, NR apart) rounded into C row by row, the bits of
/// bfloat16(float) (plus C's old values where not `first`, and `bias` rounded in after as a separate add
/// would): on AVX-512 lanes with the casts in registers where the CPU has AVX-512F, else by
/// tensor/bf16_arrays.h's array casts. The scalar loop they replace rounded an element at a time, ~20 % of
/// the baby GPT's bf16 training step on a Zen 4 core.
#if BRIGADE_CPU_X86
/// store_bf16_tile on 16 AVX-512 lanes, the casts in registers (kernels/cpu/bf16_tile_store_avx512.cpp):
/// tile rows `nr` floats apart. Only where the CPU has AVX-512F.
void store_bf16_tile_avx512(const float* tile, int64_t nr, int64_t rows, int64_t cols, bfloat16* dst,
                            int64_t ldc, bool first, const bfloat16* bias);
#endif

template <int64_t NR>
void store_bf16_tile(const float* tile, int64_t rows, int64_t cols, bfloat16* dst, int64_t ldc, bool first,
                     const bfloat16* bias) {
#if BRIGADE_CPU_X86
  static const bool avx512 = cpu_features().avx512f;
  if (avx512) return store_bf16_tile_avx512(tile, NR, rows, cols, dst, ldc, first, bias);
#endif
  float sums[NR], biases[NR];
  bfloat16 rounded[NR];
  if (bias != nullptr) float_from_bf16_array(biases, bias, cols);
  for (int64_t i = 0; i < rows; ++i) {
    const float* src = tile + i * NR;
    bfloat16* out = dst + i * ldc;
    if (!first) {
      float_from_bf16_array(sums, out, cols);
      for (int64_t j = 0; j < cols; ++j) sums[j] += src[j];
      src = sums;
    }
    if (bias == nullptr) {
      bf16_from_float_array(out, src, cols);
      continue;
    }
    bf16_from_float_array(rounded, src, cols);
    float_from_bf16_array(sums, rounded, cols);
    for (int64_t j = 0; j < cols; ++j) sums[j] += biases[j];
    bf16_from_float_array(out, sums, cols);
  }
}

/// The two innermost loops: the packed A block (mc rows) against the packed B block (nc columns), both over
/// one K slice of kc values, into C at `c` (row-major, ldc). `first`: the slice stores, later slices add.
/// `bias` (the block's nc values, or nullptr): added to each row once the slice is in, rounded to T first
/// (the bits of a separate add). With `a_rows` (reads_rows_of_a), the block's whole micro-panels of A are
/// read from there (lda apart) and only a last, partial one from a_pack.
template <typename T, typename Kernel>
void run_block(int64_t kc, int64_t mc, int64_t nc, const typename Kernel::Packed* a_pack,
               const typename Kernel::Packed* b_pack, T* c, int64_t ldc, bool first, const T* bias,
               float* tile, const float* a_rows = nullptr, int64_t lda = 0) {
  constexpr int64_t MR = Kernel::MR, NR = Kernel::NR;
  const int64_t groups = ceil_div(kc, Kernel::KSTEP);
  for (int64_t ir = 0; ir < mc; ir += MR) {
    const int64_t tile_rows = std::min(MR, mc - ir);
    const auto* a_panel = a_pack + ir * groups;
    const bool in_place = a_rows != nullptr && tile_rows == MR;
    // The MR x NR product of this row panel and the B micro-panel at b_panel, into `out` (ldo), plus
    // `row_bias` where not nullptr.
    auto product = [&](const auto* b_panel, float* out, int64_t ldo, bool store, const float* row_bias) {
      if constexpr (kHasTileRows<Kernel>) {
        if (in_place) {
          Kernel::tile_rows(kc, a_rows + ir * lda, lda, b_panel, out, ldo, store, row_bias);
          return;
        }
      }
      Kernel::tile(kc, a_panel, b_panel, out, ldo, store, row_bias);
    };
    for (int64_t jr = 0; jr < nc; jr += NR) {
      const int64_t tile_cols = std::min(NR, nc - jr);
      const auto* b_panel = b_pack + jr * groups;
      T* const dst = c + ir * ldc + jr;
      if constexpr (std::is_same_v<T, float>) {
        if (tile_rows == MR && tile_cols == NR) {
          product(b_panel, dst, ldc, first, bias != nullptr ? bias + jr : nullptr);
          continue;
        }
      }
      bool narrow = false;
      if constexpr (kHasNarrowTile<Kernel>) {
        if (tile_cols <= NR / 2) {
          narrow = true;
          if (in_place) {
            Kernel::tile_rows_narrow(kc, a_rows + ir * lda, lda, b_panel, tile, NR, tile_cols);
          } else {
            Kernel::tile_narrow(kc, a_panel, b_panel, tile, NR, tile_cols);
          }
        }
      }
      if (!narrow) product(b_panel, tile, NR, true, nullptr);
      if constexpr (std::is_same_v<T, bfloat16>) {
        store_bf16_tile<NR>(tile, tile_rows, tile_cols, dst, ldc, first,
                            bias != nullptr ? bias + jr : nullptr);
        continue;
      }
      for (int64_t i = 0; i < tile_rows; ++i) {
        for (int64_t j = 0; j < tile_cols; ++j) {
          const float sum = first ? tile[i * NR + j] : float(dst[i * ldc + j]) + tile[i * NR + j];
          T value = static_cast<T>(sum);
          if (bias != nullptr) value = static_cast<T>(float(value) + float(bias[jr + j]));
          dst[i * ldc + j] = value;
        }
      }
    }
  }
}

/// The five loops over one task, on the calling thread. Kernel: MR, NR, KSTEP (k values per packed
/// element: 1, or 2 for bf16 pairs), Packed (the packed element type), pack_a<T>, pack_b<T> and tile
/// (see kernels/cpu/matmul_avx2_fma.cpp for the contract).
template <typename T, typename Kernel>
void run_gemm_task(const GemmArgs& g, const GemmBlocks& blocks, const GemmTask& task) {
  using Packed = typename Kernel::Packed;
  constexpr int64_t MR = Kernel::MR, NR = Kernel::NR, KSTEP = Kernel::KSTEP;
  const T* a = static_cast<const T*>(g.a) + task.item * g.stride_a;
  const T* b = static_cast<const T*>(g.b) + task.item * g.stride_b;
  T* c = static_cast<T*>(g.c) + task.item * g.stride_c;

  const int64_t rows = task.i1 - task.i0, cols = task.j1 - task.j0;
  const int64_t mc_block = std::min(blocks.mc, round_up(rows, MR));
  const int64_t nc_block = std::min(blocks.nc, round_up(cols, NR));
  const int64_t kc_block = k_slice<T>(g, blocks);
  const int64_t groups_max = ceil_div(kc_block, KSTEP);
  Packed* const a_pack = thread_workspace<Packed, 1>(static_cast<size_t>(mc_block * groups_max));
  Packed* const b_pack = thread_workspace<Packed, 2>(static_cast<size_t>(nc_block * groups_max));
  float* const tile = thread_workspace<float, 3>(static_cast<size_t>(MR * NR));
  const bool in_place = reads_rows_of_a<T, Kernel>(g, cols);

  for (int64_t ic = task.i0; ic < task.i1; ic += mc_block) {
    const int64_t mc = std::min(mc_block, task.i1 - ic);
    for (int64_t pc = 0; pc < g.k; pc += kc_block) {
      const int64_t kc = std::min(kc_block, g.k - pc);
      const bool first = pc == 0;
      const T* a_block = g.trans_a ? a + pc * g.lda + ic : a + ic * g.lda + pc;
      // In place, only the last micro-panel is packed, and only when it is partial.
      const int64_t packed_from = in_place ? mc / MR * MR : 0;
      if (packed_from < mc) {
        Kernel::pack_a(a_block + packed_from * g.lda, g.lda, g.trans_a, mc - packed_from, kc,
                       a_pack + packed_from * ceil_div(kc, KSTEP));
      }
      for (int64_t jc = task.j0; jc < task.j1; jc += nc_block) {
        const int64_t nc = std::min(nc_block, task.j1 - jc);
        Kernel::pack_b(g.trans_b ? b + jc * g.ldb + pc : b + pc * g.ldb + jc, g.ldb, g.trans_b, kc, nc,
                       b_pack);
        run_block<T, Kernel>(kc, mc, nc, a_pack, b_pack, c + ic * g.ldc + jc, g.ldc, first,
                             slice_bias<T>(g, pc + kc, jc), tile,
                             in_place ? reinterpret_cast<const float*>(a_block) : nullptr, g.lda);
      }
    }
  }
}

/// Whether a product goes to run_gemm_shared_b: one large product (>= ~1 ms of work, ~200 MFLOP) on
/// several threads whose row shares each fit one A block. Cut into independent row tasks instead, every task
/// packs the whole of B: at GPT-2's layer products on 2 threads that is 4 packings of B where 1 would do,
/// measured at 3-7 % of the product's time (4 row tasks against 1, on one thread).
inline bool shares_b(const GemmArgs& g, const GemmBlocks& blocks, int threads, int64_t mr) {
  const double flops = 2.0 * double(g.m) * double(g.n) * double(g.k);
  const int64_t rows_per_thread = round_up(ceil_div(g.m, threads), mr);
  // At least four micro-panels of rows a thread, so that a block between two barriers is real work (a
  // 24-row logits product would give ~10 us a block).
  return threads > 1 && g.batch < threads && flops >= 2e8 && g.m >= 4 * threads * mr &&
         rows_per_thread <= blocks.mc;
}

/// One product on `threads` threads that pack each B block together (BLIS's way): each thread owns an even
/// share of the rows (whole micro-panels) and packs its A rows once per K slice; for every (K slice, column
/// block) the threads pack a share of the B block's micro-panels, meet at a barrier, and each runs its rows
/// against the whole block. Blocks alternate between two buffers, so that a thread may pack the next block
/// while another still reads this one: one barrier a block (~1 ms of work at GPT-2's sizes), which matters
/// where waiting threads sleep (OMP_WAIT_POLICY=passive) and each wake-up costs tens of microseconds.
/// Every element of C sums its products in the order run_gemm_task does (K slices in order, k ascending
/// within one), so the bits are the same.
template <typename T, typename Kernel>
void run_gemm_shared_b(const GemmArgs& g, const GemmBlocks& blocks, int threads) {
  using Packed = typename Kernel::Packed;
  constexpr int64_t MR = Kernel::MR, NR = Kernel::NR, KSTEP = Kernel::KSTEP;
  const int64_t kc_block = k_slice<T>(g, blocks);
  const int64_t nc_block = std::min(blocks.nc, round_up(g.n, NR));
  const int64_t groups_max = ceil_div(kc_block, KSTEP);
  const size_t b_size = static_cast<size_t>(nc_block * groups_max);
  Packed* const b_packs[2] = {thread_workspace<Packed, 2>(b_size),
                              thread_workspace<Packed, 4>(b_size)};  // shared
  for (int64_t item = 0; item < g.batch; ++item) {
    const T* a = static_cast<const T*>(g.a) + item * g.stride_a;
    const T* b = static_cast<const T*>(g.b) + item * g.stride_b;
    T* c = static_cast<T*>(g.c) + item * g.stride_c;
#pragma omp parallel num_threads(threads)
    {
      const int team = omp_get_num_threads(), me = omp_get_thread_num();
      const auto [i0, i1] = part_range(g.m, team, me, MR);
      const int64_t rows = i1 - i0;
      Packed* const a_pack =
          thread_workspace<Packed, 1>(static_cast<size_t>(round_up(rows, MR) * groups_max));
      float* const tile = thread_workspace<float, 3>(static_cast<size_t>(MR * NR));
      int64_t block = 0;
      for (int64_t pc = 0; pc < g.k; pc += kc_block) {
        const int64_t kc = std::min(kc_block, g.k - pc), groups = ceil_div(kc, KSTEP);
        if (rows > 0) {
          Kernel::pack_a(g.trans_a ? a + pc * g.lda + i0 : a + i0 * g.lda + pc, g.lda, g.trans_a, rows, kc,
                         a_pack);
        }
        for (int64_t jc = 0; jc < g.n; jc += nc_block) {
          const int64_t nc = std::min(nc_block, g.n - jc);
          const auto [j0, j1] = part_range(nc, team, me, NR);  // this thread's micro-panels of the block
          // The buffer of two blocks ago: every thread finished reading it before the last block's barrier,
          // which this thread has passed.
          Packed* const b_pack = b_packs[block++ % 2];
          if (j0 < j1) {
            const int64_t col = jc + j0;
            Kernel::pack_b(g.trans_b ? b + col * g.ldb + pc : b + pc * g.ldb + col, g.ldb, g.trans_b, kc,
                           j1 - j0, b_pack + j0 * groups);
          }
#pragma omp barrier
          if (rows > 0) {
            run_block<T, Kernel>(kc, rows, nc, a_pack, b_pack, c + i0 * g.ldc + jc, g.ldc, pc == 0,
                                 slice_bias<T>(g, pc + kc, jc), tile);
          }
        }
      }
    }
  }
}

/// A whole GEMM: tasks (split_tasks) over OpenMP threads, each through run_gemm_task, or one large product
/// through run_gemm_shared_b. T: float or bfloat16.
template <typename T, typename Kernel>
void run_gemm(const GemmArgs& g, const GemmBlocks& blocks) {
  if (g.m <= 0 || g.n <= 0 || g.batch <= 0) return;
  if (g.k <= 0) {  // an empty sum: zeros (plus the bias)
    const T* bias = static_cast<const T*>(g.bias);
    for (int64_t item = 0; item < g.batch; ++item) {
      T* c = static_cast<T*>(g.c) + item * g.stride_c;
      for (int64_t i = 0; i < g.m; ++i) {
        for (int64_t j = 0; j < g.n; ++j) {
          c[i * g.ldc + j] = bias != nullptr ? static_cast<T>(0.0f + float(bias[j])) : T(0.0f);
        }
      }
    }
    return;
  }
  const GemmSplit split = split_tasks(g, Kernel::MR, Kernel::NR);
  if (shares_b(g, blocks, split.threads, Kernel::MR)) {
    run_gemm_shared_b<T, Kernel>(g, blocks, split.threads);
    return;
  }
  const int64_t per_item = split.parts_m * split.parts_n, tasks = g.batch * per_item;
#pragma omp parallel for schedule(dynamic) num_threads(split.threads) if (split.threads > 1 && tasks > 1)
  for (int64_t t = 0; t < tasks; ++t) {
    const int64_t item = t / per_item, part = t % per_item;
    const auto [i0, i1] = part_range(g.m, split.parts_m, part / split.parts_n, Kernel::MR);
    const auto [j0, j1] = part_range(g.n, split.parts_n, part % split.parts_n, Kernel::NR);
    if (i0 < i1 && j0 < j1) run_gemm_task<T, Kernel>(g, blocks, GemmTask{item, i0, i1, j0, j1});
  }
}

}  // namespace brigade::kernels::cpu::detail
