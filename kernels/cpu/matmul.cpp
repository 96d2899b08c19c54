// CPU GEMM v1, cpu::gemm_blocked — a cache-blocked, packed, OpenMP-parallel GEMM (the GotoBLAS/BLIS
// structure, in plain C++), the default for float64.
//
//   C[b] (M x N, row-major, ldc) = op(A[b]) (M x K) @ op(B[b]) (K x N)
//
// Structure, from the outside in:
//   task (b, ic, N group)     MC rows of one C matrix, across a group of NC-wide column blocks (all of N
//                             unless there are too few row blocks to keep the threads busy); tasks are
//                             independent, so OpenMP hands them out dynamically.
//     pc over K by KC         pack op(A)[ic.., pc..] (MC x KC) once into contiguous, zero-padded
//                             micro-panels converted to the accumulation type
//       jc over the group     the packed op(B)[pc.., jc..] block (KC x NC): packed once per call and
//                             thread when all of op(B) fits kBCacheBytes, else packed here
//         jr over NC by NR    one B micro-panel (KC x NR) stays in L1 while ...
//           ir over MC by MR  ... the register-blocked micro-kernel runs through the A micro-panels,
//                             accumulating an MR x NR tile in registers over the whole KC slice, then
//                             storing it into C (first slice) or adding it to C (later slices).
//   Edge tiles (fewer than MR rows or NR columns left) are computed whole into a scratch tile and only
//   their valid part is merged into C.
//
// Accumulation: float and double accumulate in C itself, in their own type; bfloat16 is widened to float
// while packing and accumulates in a float block per task over the whole of K (nothing is rounded to
// bfloat16 until the final store). Every element of C sums its K products in one fixed order (k ascending
// within a slice from 0, slice sums added in order), whatever the blocking, the task split or the thread
// count: the result does not depend on the number of threads (deterministic, as the CPU reference must be).
//
// Blocking, napkin math. Assumed core: 32-64 KiB L1d, >= 512 KiB L2 (this dev box: AMD EPYC, 32 KiB L1d
// and 1 MiB L2 per core; Intel server cores: 48 KiB / 2 MiB). The build targets plain x86-64 (SSE2,
// 16 vector registers of 16 bytes), so the micro-tile is sized for that and gets wider for free when
// someone builds with -march=native:
//   float : MR x NR = 6 x 8  -> 12 xmm accumulators + 2 for the B row + 1 broadcast = 15 of 16 registers.
//           Per k step it loads 6 + 8 = 14 floats and does 48 multiply-adds: 3.4 flops per value loaded.
//   double: MR x NR = 6 x 4  -> the same 12 + 2 + 1 registers (2 doubles per xmm).
//   AVX2 (picked at run time where the CPU has it, bit-identical results; see Avx2Kernel): the same
//           registers are 32 bytes wide, so MR x NR = 6 x 16 for float, 6 x 8 for double: ~2x the
//           multiply-adds per cycle (measured on this box: ~2.4-4x the float GFLOP/s of the SSE2 kernel).
//   KC = 256: the A and B micro-panels touched by one micro-kernel call are (MR + NR) * KC values
//           = 14 * 256 * 4 B = 14 KiB for float (10 * 256 * 8 B = 20 KiB for double; AVX2: 22 KiB for
//           float, 28 KiB for double): fit L1.
//   MC = 96, NC = 128: packed A block MC * KC * 4 B = 96 KiB, packed B block KC * NC * 4 B = 128 KiB and the
//           accumulator block MC * NC * 4 B = 48 KiB: ~272 KiB per thread (double: ~544 KiB) stays in L2.
//           Small blocks also give enough tasks to keep every core busy: a 512 x 512 product is 6 x 4 = 24
//           tasks; a 128 x 128 product is 2 x 1 = 2 (which is why tiny products run on one thread).
// Packing re-reads A once per N block and B once per M block; that costs ~1/NC + 1/MC of the multiply-adds
// (< 2%), in exchange for unit-stride, aligned, zero-padded panels whatever the trans flags and strides
// (edge tiles then need no special case in the micro-kernel, only in the final store).
//
// What v2 (kernels/cpu/matmul_avx2_fma.cpp) improves: fused multiply-adds (v1's ceiling is half the FMA
// peak), blocks taken from the reported cache sizes, and micro-kernels written with intrinsics.
#include "kernels/cpu/matmul.h"

#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "kernels/backend.h"
#include "kernels/cpu/gemm_packing.h"
#include "kernels/cpu/vector_math.h"  // BRIGADE_CPU_AVX2, cpu_has_avx2
#include "tensor/bfloat16.h"

namespace brigade::kernels::cpu {
namespace {

using detail::ceil_div;
using detail::pack_a;
using detail::pack_b;
using detail::round_up;
using detail::thread_workspace;

// Blocking for the baseline build (16-byte vectors) and for the AVX2 micro-kernel (32-byte vectors: the
// same 12 + 2 + 1 registers hold twice the columns).
template <typename Acc>
struct Blocking;
template <>
struct Blocking<float> {
  static constexpr int64_t MR = 6, NR = 8, KC = 256, MC = 96, NC = 128;
};
template <>
struct Blocking<double> {
  static constexpr int64_t MR = 6, NR = 4, KC = 256, MC = 96, NC = 128;
};
template <typename Acc>
struct WideBlocking {
  static constexpr int64_t MR = 6, NR = 64 / sizeof(Acc), KC = 256, MC = 96, NC = 128;  // two ymm per row
};

template <typename T>
struct AccumulatorOf {
  using type = T;
};
template <>
struct AccumulatorOf<bfloat16> {
  using type = float;
};

// c[i * ldc + j] += sum_p a[p * MR + i] * b[p * NR + j] for the full MR x NR tile. The fixed trip counts
// let g++ -O3 unroll the i loop and keep `acc` in vector registers (no intrinsics needed). The two pragmas
// matter: without them g++ 12 vectorises the k loop instead (with shuffles) and runs at ~1/7 of the speed
// (measured on this box: 4.7 vs 33 GFLOP/s per core for float). `omp simd` is honoured because the
// kernels library is compiled with OpenMP.
//
// first: the tile is stored as 0 + acc instead of added to c (the first K slice of a C block; `0 +` keeps
// the bits of the former zero-filled accumulator block: -0 becomes +0).
template <typename Acc, int64_t MR, int64_t NR>
__attribute__((always_inline)) inline void micro_kernel(int64_t kc, const Acc* __restrict a,
                                                        const Acc* __restrict b, Acc* __restrict c,
                                                        int64_t ldc, bool first) {
  Acc acc[MR][NR] = {};
  for (int64_t p = 0; p < kc; ++p) {
    const Acc* bp = b + p * NR;
    const Acc* ap = a + p * MR;
#pragma GCC unroll 16
    for (int64_t i = 0; i < MR; ++i) {
      const Acc ai = ap[i];
#pragma omp simd
      for (int64_t j = 0; j < NR; ++j) acc[i][j] += ai * bp[j];
    }
  }
  if (first) {
    for (int64_t i = 0; i < MR; ++i) {
#pragma omp simd
      for (int64_t j = 0; j < NR; ++j) c[i * ldc + j] = Acc(0) + acc[i][j];
    }
  } else {
    for (int64_t i = 0; i < MR; ++i) {
#pragma omp simd
      for (int64_t j = 0; j < NR; ++j) c[i * ldc + j] += acc[i][j];
    }
  }
}

// The micro-kernel for the baseline ISA (inlined into the loops below).
struct BaselineKernel {
  template <typename Acc, int64_t MR, int64_t NR>
  static void run(int64_t kc, const Acc* a, const Acc* b, Acc* c, int64_t ldc, bool first) {
    micro_kernel<Acc, MR, NR>(kc, a, b, c, ldc, first);
  }
};

#if BRIGADE_CPU_AVX2
// The same source compiled for AVX2, chosen at run time (cpu_has_avx2) so that the binary still runs on any
// x86-64. Only the ISA changes, not the arithmetic: `target("avx2")` without "fma" cannot contract
// `acc += a * b` into a fused multiply-add, and every element of C still sums its products in the same
// order (k ascending within a KC slice, slices in order), so results are bit-identical to the baseline
// kernel. Twice the lanes per instruction: ~2x the multiply-adds per cycle (AMD Zen issues the mul and
// the add on separate pipes, as fast as an FMA).
struct Avx2Kernel {
  template <typename Acc, int64_t MR, int64_t NR>
  __attribute__((target("avx2"), noinline)) static void run(int64_t kc, const Acc* a, const Acc* b, Acc* c,
                                                            int64_t ldc, bool first) {
    micro_kernel<Acc, MR, NR>(kc, a, b, c, ldc, first);
  }
};
#endif

// A thread keeps the whole of op(B) packed (every K slice x N block) when it takes at most this much: then
// B is packed once per call and thread, not once per M block. 1 MiB covers the Linear layers of small
// models (e.g. K = 128, N = 512 float: 256 KiB; K = 832, N = 128: 416 KiB).
constexpr size_t kBCacheBytes = size_t{1} << 20;

template <typename T, typename B, typename Kernel>
void gemm_typed(const GemmArgs& args) {
  using Acc = typename AccumulatorOf<T>::type;
  constexpr int64_t MR = B::MR, NR = B::NR, KC = B::KC, MC = B::MC, NC = B::NC;
  // float and double accumulate straight into C; bfloat16 into a float block per task, stored at the end.
  constexpr bool kDirect = std::is_same_v<T, Acc>;

  const int64_t m = args.m, n = args.n, k = args.k;
  const T* a_base = static_cast<const T*>(args.a);
  const T* b_base = static_cast<const T*>(args.b);
  T* c_base = static_cast<T*>(args.c);
  if (k <= 0) {  // an empty sum: zeros
    for (int64_t b = 0; b < args.batch; ++b) {
      for (int64_t i = 0; i < m; ++i) std::fill_n(c_base + b * args.stride_c + i * args.ldc, n, T(0.0f));
    }
    return;
  }

  // Threads only from ~4 MFLOP (~60-300 us on one core, depending on the shape): a team costs a few
  // microseconds on an idle machine and far more on a shared one (see kParallelGrain in cpu_access.h).
  const int64_t m_blocks = ceil_div(m, MC), n_blocks = ceil_div(n, NC), k_slices = ceil_div(k, KC);
  const bool big = 2.0 * double(m) * double(n) * double(k) * double(args.batch) > 4e6;
  const int64_t threads = big ? omp_get_max_threads() : 1;
  // Tasks: (batch, M block, group of N blocks). One group holds every N block unless there are too few
  // row blocks to keep the threads busy.
  const int64_t row_tasks = args.batch * m_blocks;
  const int64_t n_groups =
      row_tasks >= 4 * threads ? 1 : std::min(n_blocks, ceil_div(4 * threads, row_tasks));
  const int64_t group_blocks = ceil_div(n_blocks, n_groups);
  const int64_t tasks = row_tasks * ceil_div(n_blocks, group_blocks);
  const bool parallel = big && tasks > 1;

  // Workspace sizes: the full blocks, or less when the whole matrix is smaller than a block.
  const int64_t n_padded = round_up(n, NR);
  const int64_t mc_max = std::min(MC, round_up(m, MR));
  const int64_t kc_max = std::min(KC, k);
  const bool cache_b = static_cast<size_t>(n_padded * k) * sizeof(Acc) <= kBCacheBytes;
  const int64_t b_space = cache_b ? n_padded * k : std::min(NC, n_padded) * kc_max;
  const int64_t block_space = kDirect ? 0 : mc_max * n_padded;  // bfloat16's accumulator block

#pragma omp parallel if (parallel)
  {
    // Per thread: packed A block, packed B (all of it, or one block), an edge tile, the accumulator block.
    Acc* const a_pack =
        thread_workspace<Acc>(static_cast<size_t>(mc_max * kc_max + b_space + MR * NR + block_space));
    Acc* const b_space_ptr = a_pack + mc_max * kc_max;
    Acc* const tile = b_space_ptr + b_space;
    Acc* const acc_block = tile + MR * NR;
    // Which (K slice, N block) panels of the cached B hold the current batch's values.
    std::vector<char> packed(cache_b ? static_cast<size_t>(k_slices * n_blocks) : 0, 0);
    int64_t cached_batch = -1;

#pragma omp for schedule(dynamic)
    for (int64_t task = 0; task < tasks; ++task) {
      const int64_t groups = ceil_div(n_blocks, group_blocks);
      const int64_t batch_index = task / (m_blocks * groups);
      const int64_t ic = task / groups % m_blocks * MC;
      const int64_t jc_begin = task % groups * group_blocks * NC;
      const int64_t jc_end = std::min(n, jc_begin + group_blocks * NC);
      const int64_t mc = std::min(MC, m - ic);
      const int64_t mc_padded = round_up(mc, MR);
      const T* a = a_base + batch_index * args.stride_a;
      const T* b = b_base + batch_index * args.stride_b;
      T* c = c_base + batch_index * args.stride_c;
      const int64_t b_batch = args.stride_b == 0 ? 0 : batch_index;
      if (cache_b && b_batch != cached_batch) {
        std::fill(packed.begin(), packed.end(), 0);
        cached_batch = b_batch;
      }
      // Where the MC x N rows of this task accumulate: C itself, or the float block (column j at j).
      Acc* const target = kDirect ? reinterpret_cast<Acc*>(c + ic * args.ldc) : acc_block;
      const int64_t ldt = kDirect ? args.ldc : n_padded;

      for (int64_t pc = 0; pc < k; pc += KC) {
        const int64_t kc = std::min(KC, k - pc);
        const bool first = pc == 0;
        const T* a_origin = args.trans_a ? a + pc * args.lda + ic : a + ic * args.lda + pc;
        pack_a<T, Acc, MR>(a_origin, args.lda, args.trans_a, mc, kc, a_pack);
        for (int64_t jc = jc_begin; jc < jc_end; jc += NC) {
          const int64_t nc = std::min(NC, n - jc), nc_padded = round_up(nc, NR);
          // The packed (pc, jc) block: its own place in the cache (slice pc starts at pc * n_padded, its
          // blocks follow one another), or the one-block buffer.
          Acc* const b_pack = cache_b ? b_space_ptr + pc * n_padded + jc * kc : b_space_ptr;
          char* const done = cache_b ? &packed[static_cast<size_t>(pc / KC * n_blocks + jc / NC)] : nullptr;
          if (!done || !*done) {
            const T* b_origin = args.trans_b ? b + jc * args.ldb + pc : b + pc * args.ldb + jc;
            pack_b<T, Acc, NR>(b_origin, args.ldb, args.trans_b, kc, nc, b_pack);
            if (done) *done = 1;
          }
          for (int64_t jr = 0; jr < nc_padded; jr += NR) {
            const int64_t cols = std::min(NR, nc - jr);
            for (int64_t ir = 0; ir < mc_padded; ir += MR) {
              const int64_t rows = std::min(MR, mc - ir);
              Acc* const dst = target + ir * ldt + jc + jr;
              if (rows == MR && cols == NR) {
                Kernel::template run<Acc, MR, NR>(kc, a_pack + ir * kc, b_pack + jr * kc, dst, ldt, first);
              } else {  // an edge tile: computed whole into `tile`, then only its valid part merged
                Kernel::template run<Acc, MR, NR>(kc, a_pack + ir * kc, b_pack + jr * kc, tile, NR, true);
                for (int64_t i = 0; i < rows; ++i) {
                  for (int64_t j = 0; j < cols; ++j) {
                    dst[i * ldt + j] = first ? tile[i * NR + j] : dst[i * ldt + j] + tile[i * NR + j];
                  }
                }
              }
            }
          }
        }
      }
      if constexpr (!kDirect) {  // bfloat16: round the float sums once
        for (int64_t i = 0; i < mc; ++i) {
          for (int64_t j = jc_begin; j < jc_end; ++j) {
            c[(ic + i) * args.ldc + j] = static_cast<T>(acc_block[i * n_padded + j]);
          }
        }
      }
    }
  }
}

template <typename T>
void gemm_dispatch(const GemmArgs& args) {
  using Acc = typename AccumulatorOf<T>::type;
#if BRIGADE_CPU_AVX2
  if (detail::cpu_has_avx2()) return gemm_typed<T, WideBlocking<Acc>, Avx2Kernel>(args);
#endif
  gemm_typed<T, Blocking<Acc>, BaselineKernel>(args);
}

}  // namespace

void gemm_blocked(const GemmArgs& args) {
  if (args.m <= 0 || args.n <= 0 || args.batch <= 0) return;
  switch (args.dtype) {
    case DType::Float32:
      gemm_dispatch<float>(args);
      break;
    case DType::Float64:
      gemm_dispatch<double>(args);
      break;
    case DType::BFloat16:
      gemm_dispatch<bfloat16>(args);
      break;
    default:
      BRIGADE_THROW(DTypeError, "matmul: expected float32, bfloat16 or float64, found ",
                    dtype_name(args.dtype));
  }
}

}  // namespace brigade::kernels::cpu
