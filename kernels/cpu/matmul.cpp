// cpu::gemm — a cache-blocked, packed, OpenMP-parallel GEMM (the GotoBLAS/BLIS structure, in plain C++).
//
//   C[b] (M x N, row-major, ldc) = op(A[b]) (M x K) @ op(B[b]) (K x N)
//
// Structure, from the outside in:
//   task (b, ic, jc)          one MC x NC block of one C matrix; tasks are independent, so OpenMP hands
//                             them out dynamically (parallel over batch, M blocks and N blocks at once).
//     pc over K by KC         pack op(A)[ic.., pc..] (MC x KC) and op(B)[pc.., jc..] (KC x NC) into
//                             contiguous, zero-padded panels converted to the accumulation type
//       jr over NC by NR      one B micro-panel (KC x NR) stays in L1 while ...
//         ir over MC by MR    ... the register-blocked micro-kernel runs through the A micro-panels,
//                             accumulating an MR x NR tile in registers over the whole KC slice.
//   After the K loop the task's accumulator block is converted to the storage type and written to C.
//
// Accumulation: float and double accumulate in their own type; bfloat16 is widened to float while packing
// and accumulates in float over the whole of K (the block accumulator is float, so nothing is rounded to
// bfloat16 until the final store). Each element of C is produced by exactly one task in a fixed order, so
// the result does not depend on the number of threads (deterministic, as the CPU reference must be).
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
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/backend.h"
#include "tensor/bfloat16.h"

// The AVX2 micro-kernel needs GCC/Clang's target attribute and cpu-feature builtin, on x86-64.
// -DBRIGADE_GEMM_NO_AVX2 leaves it out (to test the baseline kernel on an AVX2 machine).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(BRIGADE_GEMM_NO_AVX2)
#define BRIGADE_GEMM_AVX2 1
#else
#define BRIGADE_GEMM_AVX2 0
#endif

namespace brigade::kernels::cpu {
namespace {

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

inline int64_t round_up(int64_t x, int64_t multiple) {
  return (x + multiple - 1) / multiple * multiple;
}

// The calling thread's scratch space, kept between calls (OpenMP's pool threads live on): a fresh
// few-hundred-KiB buffer per call would be a malloc/mmap, page faults and a zero fill every time, which
// costs more than a whole small product (measured: ~200 us for a 1 x 1 x 1 product before this).
template <typename Acc>
Acc* thread_workspace(size_t count) {
  thread_local std::vector<Acc> buffer;
  if (buffer.size() < count) buffer.resize(count);
  return buffer.data();
}

// Packs rows [0, mc) x cols [0, kc) of op(A) (origin at `a`) into micro-panels of MR rows: panel r holds
// element (r*MR + i, p) at out[r*MR*kc + p*MR + i]. Rows beyond mc are zero.
template <typename T, typename Acc, int64_t MR>
void pack_a(const T* a, int64_t lda, bool trans, int64_t mc, int64_t kc, Acc* out) {
  for (int64_t r0 = 0; r0 < mc; r0 += MR) {
    const int64_t rows = std::min(MR, mc - r0);
    Acc* panel = out + r0 * kc;
    if (!trans && rows == MR) {  // op(A)(i, p) = a[i * lda + p]: MR row streams, contiguous writes
      const T* src = a + r0 * lda;
      for (int64_t p = 0; p < kc; ++p) {
#pragma GCC unroll 16
        for (int64_t i = 0; i < MR; ++i) panel[p * MR + i] = static_cast<Acc>(src[i * lda + p]);
      }
    } else if (!trans) {
      for (int64_t i = 0; i < rows; ++i) {
        const T* src = a + (r0 + i) * lda;
        for (int64_t p = 0; p < kc; ++p) panel[p * MR + i] = static_cast<Acc>(src[p]);
      }
    } else {  // op(A)(i, p) = a[p * lda + i]: rows of the panel are contiguous in memory
      for (int64_t p = 0; p < kc; ++p) {
        const T* src = a + p * lda + r0;
        for (int64_t i = 0; i < rows; ++i) panel[p * MR + i] = static_cast<Acc>(src[i]);
      }
    }
    for (int64_t i = rows; i < MR; ++i) {
      for (int64_t p = 0; p < kc; ++p) panel[p * MR + i] = Acc(0);
    }
  }
}

// Packs rows [0, kc) x cols [0, nc) of op(B) into micro-panels of NR columns: panel c holds element
// (p, c*NR + j) at out[c*NR*kc + p*NR + j]. Columns beyond nc are zero.
template <typename T, typename Acc, int64_t NR>
void pack_b(const T* b, int64_t ldb, bool trans, int64_t kc, int64_t nc, Acc* out) {
  for (int64_t c0 = 0; c0 < nc; c0 += NR) {
    const int64_t cols = std::min(NR, nc - c0);
    Acc* panel = out + c0 * kc;
    if (!trans) {  // op(B)(p, j) = b[p * ldb + j]
      for (int64_t p = 0; p < kc; ++p) {
        const T* src = b + p * ldb + c0;
        int64_t j = 0;
        for (; j < cols; ++j) panel[p * NR + j] = static_cast<Acc>(src[j]);
        for (; j < NR; ++j) panel[p * NR + j] = Acc(0);
      }
    } else if (cols == NR) {  // op(B)(p, j) = b[j * ldb + p]: NR row streams, contiguous writes
      const T* src = b + c0 * ldb;
      for (int64_t p = 0; p < kc; ++p) {
#pragma GCC unroll 16
        for (int64_t j = 0; j < NR; ++j) panel[p * NR + j] = static_cast<Acc>(src[j * ldb + p]);
      }
    } else {
      for (int64_t j = 0; j < cols; ++j) {
        const T* src = b + (c0 + j) * ldb;
        for (int64_t p = 0; p < kc; ++p) panel[p * NR + j] = static_cast<Acc>(src[p]);
      }
      for (int64_t j = cols; j < NR; ++j) {
        for (int64_t p = 0; p < kc; ++p) panel[p * NR + j] = Acc(0);
      }
    }
  }
}

// c[i * ldc + j] += sum_p a[p * MR + i] * b[p * NR + j] for the full MR x NR tile. The fixed trip counts
// let g++ -O3 unroll the i loop and keep `acc` in vector registers (no intrinsics needed). The two pragmas
// matter: without them g++ 12 vectorises the k loop instead (with shuffles) and runs at ~1/7 of the speed
// (measured on this box: 4.7 vs 33 GFLOP/s per core for float). `omp simd` is honoured because the
// kernels library is compiled with OpenMP.
template <typename Acc, int64_t MR, int64_t NR>
__attribute__((always_inline)) inline void micro_kernel(int64_t kc, const Acc* __restrict a,
                                                        const Acc* __restrict b, Acc* __restrict c,
                                                        int64_t ldc) {
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
  for (int64_t i = 0; i < MR; ++i) {
#pragma omp simd
    for (int64_t j = 0; j < NR; ++j) c[i * ldc + j] += acc[i][j];
  }
}

// The micro-kernel for the baseline ISA (inlined into the loops below).
struct BaselineKernel {
  template <typename Acc, int64_t MR, int64_t NR>
  static void run(int64_t kc, const Acc* a, const Acc* b, Acc* c, int64_t ldc) {
    micro_kernel<Acc, MR, NR>(kc, a, b, c, ldc);
  }
};

#if BRIGADE_GEMM_AVX2
// The same source compiled for AVX2, chosen at run time (cpu_has_avx2) so that the binary still runs on any
// x86-64. Only the ISA changes, not the arithmetic: `target("avx2")` without "fma" cannot contract
// `acc += a * b` into a fused multiply-add, and every element of C still sums its products in the same
// order (k ascending within a KC slice, slices in order), so results are bit-identical to the baseline
// kernel. Twice the lanes per instruction: ~2x the multiply-adds per cycle (AMD Zen issues the mul and
// the add on separate pipes, as fast as an FMA).
struct Avx2Kernel {
  template <typename Acc, int64_t MR, int64_t NR>
  __attribute__((target("avx2"), noinline)) static void run(int64_t kc, const Acc* a, const Acc* b, Acc* c,
                                                            int64_t ldc) {
    micro_kernel<Acc, MR, NR>(kc, a, b, c, ldc);
  }
};

bool cpu_has_avx2() {
  static const bool has = __builtin_cpu_supports("avx2");  // also checks that the OS saves ymm registers
  return has;
}
#endif

template <typename T, typename B, typename Kernel>
void gemm_typed(const GemmArgs& args) {
  using Acc = typename AccumulatorOf<T>::type;
  constexpr int64_t MR = B::MR, NR = B::NR, KC = B::KC, MC = B::MC, NC = B::NC;

  const int64_t m = args.m, n = args.n, k = args.k;
  const T* a_base = static_cast<const T*>(args.a);
  const T* b_base = static_cast<const T*>(args.b);
  T* c_base = static_cast<T*>(args.c);

  const int64_t m_blocks = (m + MC - 1) / MC;
  const int64_t n_blocks = (n + NC - 1) / NC;
  const int64_t tasks = args.batch * m_blocks * n_blocks;
  // Threads only from ~4 MFLOP (~60-300 us on one core, depending on the shape): a team costs a few
  // microseconds on an idle machine and far more on a shared one (see kParallelGrain in cpu_access.h).
  const bool parallel = tasks > 1 && 2.0 * double(m) * double(n) * double(k) * double(args.batch) > 4e6;

  // Workspace sizes: the full blocks, or less when the whole matrix is smaller than a block.
  const int64_t mc_max = std::min(MC, round_up(m, MR));
  const int64_t nc_max = std::min(NC, round_up(n, NR));
  const int64_t kc_max = std::max<int64_t>(std::min(KC, k), 1);
  const int64_t ldcb = nc_max;  // row stride of the accumulator block

#pragma omp parallel if (parallel)
  {
    // Per-thread: packed A block, packed B block, accumulator block (see the napkin math above).
    Acc* const a_pack =
        thread_workspace<Acc>(static_cast<size_t>((mc_max + nc_max) * kc_max + mc_max * ldcb));
    Acc* const b_pack = a_pack + mc_max * kc_max;
    Acc* const c_block = b_pack + nc_max * kc_max;

    // Tasks run M blocks fastest, so consecutive tasks of a thread usually share their B block: when K fits
    // one KC slice, the packed B block is kept and reused (Linear layers pack W once, not once per M block).
    int64_t packed_b = -1;  // batch * n_blocks + N block of what b_pack holds (single-slice K only)
#pragma omp for schedule(dynamic)
    for (int64_t task = 0; task < tasks; ++task) {
      const int64_t batch_index = task / (m_blocks * n_blocks);
      const int64_t jc = (task / m_blocks) % n_blocks * NC;
      const int64_t ic = task % m_blocks * MC;
      const int64_t mc = std::min(MC, m - ic);
      const int64_t nc = std::min(NC, n - jc);
      const int64_t mc_padded = round_up(mc, MR), nc_padded = round_up(nc, NR);
      const T* a = a_base + batch_index * args.stride_a;
      const T* b = b_base + batch_index * args.stride_b;
      T* c = c_base + batch_index * args.stride_c;

      // The accumulator block (row stride ldcb); zero first so that K == 0 gives zeros.
      std::fill(c_block, c_block + mc_padded * ldcb, Acc(0));
      for (int64_t pc = 0; pc < k; pc += KC) {
        const int64_t kc = std::min(KC, k - pc);
        // Origin of the (ic, pc) block of op(A) and the (pc, jc) block of op(B) in storage.
        const T* a_origin = args.trans_a ? a + pc * args.lda + ic : a + ic * args.lda + pc;
        const T* b_origin = args.trans_b ? b + jc * args.ldb + pc : b + pc * args.ldb + jc;
        pack_a<T, Acc, MR>(a_origin, args.lda, args.trans_a, mc, kc, a_pack);
        const int64_t b_key = k <= KC ? (args.stride_b == 0 ? 0 : batch_index) * n_blocks + jc / NC : -1;
        if (b_key < 0 || b_key != packed_b) {
          pack_b<T, Acc, NR>(b_origin, args.ldb, args.trans_b, kc, nc, b_pack);
          packed_b = b_key;
        }
        for (int64_t jr = 0; jr < nc_padded; jr += NR) {
          for (int64_t ir = 0; ir < mc_padded; ir += MR) {
            Kernel::template run<Acc, MR, NR>(kc, a_pack + ir * kc, b_pack + jr * kc,
                                              c_block + ir * ldcb + jr, ldcb);
          }
        }
      }
      // Store the valid mc x nc region (padding rows/columns are dropped here, and only here).
      for (int64_t i = 0; i < mc; ++i) {
        const Acc* src = c_block + i * ldcb;
        T* dst = c + (ic + i) * args.ldc + jc;
        for (int64_t j = 0; j < nc; ++j) dst[j] = static_cast<T>(src[j]);
      }
    }
  }
}

template <typename T>
void gemm_dispatch(const GemmArgs& args) {
  using Acc = typename AccumulatorOf<T>::type;
#if BRIGADE_GEMM_AVX2
  if (cpu_has_avx2()) return gemm_typed<T, WideBlocking<Acc>, Avx2Kernel>(args);
#endif
  gemm_typed<T, Blocking<Acc>, BaselineKernel>(args);
}

}  // namespace

void gemm(const GemmArgs& args) {
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
