// The Hopper (sm_90a) pieces of bf16 GEMM v8 (kernels/cuda/matmul_wgmma.cu), each behind a small device
// function: shared-memory descriptors, the 128-byte swizzle, wgmma.mma_async m64n128k16 and its fences,
// and the cp.async load path. Internal to the CUDA GEMMs; not part of the public API.
//
// Two implementations of every function, chosen by a macro:
//  - the real one (inline PTX), compiled only where the wgmma instructions exist
//    (__CUDA_ARCH_FEAT_SM90_ALL: an sm_90a device pass); other device passes get nothing to call, and the
//    kernel that uses these guards its body with BRIGADE_WGMMA_DEVICE_CODE;
//  - BRIGADE_CUDA_EMULATION (scripts/cuda_emulation): host C++ that does what the PTX ISA says the
//    instruction does. The emulated wgmma reads A and B from emulated shared memory *through the
//    descriptor* (start address, SBO, swizzle mode, with the 128-byte swizzle applied to the address bits)
//    and writes each lane's accumulators in the wgmma D-fragment layout, so a descriptor, swizzle or
//    fragment mistake in the kernel gives a wrong product there. It runs synchronously, so it cannot see a
//    missing fence or wait (the asynchrony of the hardware).
//
// Layout conventions (PTX ISA, "Asynchronous Warpgroup Level Matrix Shared Memory Layout"):
//  K-major operand with 128-byte swizzle: each row of the tile (a row of A: fixed m; a row of B stored as
//  [N, K]: fixed n) holds 64 bf16 = 128 bytes of K. Eight rows make a 1024-byte swizzle atom; atoms are
//  stacked along M (or N) every SBO = 1024 bytes. Inside an atom the 16-byte chunk c of row r sits at
//  chunk position c ^ r (the swizzle XORs address bits [4,7) with bits [7,10), so atoms must start at a
//  1024-byte aligned shared address). The leading-dimension offset is unused for swizzled K-major layouts
//  (a k16 step covers 32 of the 128 bytes); the next k16 step is the same descriptor with start + 32 bytes.
#pragma once

#include <cstdint>

#if defined(BRIGADE_CUDA_EMULATION)
#include <cuda_runtime.h>

#include <cstring>
#include <stdexcept>
#endif

#if defined(BRIGADE_CUDA_EMULATION) || (defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL))
#define BRIGADE_WGMMA_DEVICE_CODE 1
#endif

namespace brigade::kernels::cuda::wgmma {

/// Bytes of one swizzle row (K extent of a stage: 64 bf16) and of one 8-row swizzle atom.
constexpr uint32_t kSwizzleRowBytes = 128;
constexpr uint32_t kSwizzleAtomBytes = 8 * kSwizzleRowBytes;

/// Byte offset within a 1024-byte aligned tile at which the 16-byte chunk at logical `offset` lands under
/// the 128-byte swizzle: chunk bits [4,7) XOR row-in-atom bits [7,10).
__host__ __device__ __forceinline__ uint32_t swizzle_128b(uint32_t offset) {
  return offset ^ (((offset >> 7) & 7u) << 4);
}

#if defined(BRIGADE_WGMMA_DEVICE_CODE)

#if defined(BRIGADE_CUDA_EMULATION)
/// Where the emulation pretends dynamic shared memory starts in the shared window: deliberately not
/// 1024-aligned (as when static shared memory precedes it), so the kernel's alignment step is exercised.
constexpr uint32_t kEmulatedSharedBase = 144;
#endif

/// The shared-window address of `p` (which points into dynamic shared memory). In the emulation: the
/// offset from the start of the emulated dynamic shared memory plus kEmulatedSharedBase.
__device__ __forceinline__ uint32_t shared_address(const void* p) {
#if defined(BRIGADE_CUDA_EMULATION)
  const auto* base = static_cast<const unsigned char*>(::emu::dynamic_shared());
  return kEmulatedSharedBase + static_cast<uint32_t>(static_cast<const unsigned char*>(p) - base);
#else
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
#endif
}

/// Descriptor of a K-major, 128-byte swizzled operand starting at shared address `start` (the 1024-aligned
/// atom base, plus 32 bytes per k16 step), atoms `sbo` bytes apart along M/N:
///   bits [0,14) start >> 4 | [16,30) LBO >> 4 (1: unused here) | [32,46) SBO >> 4 |
///   [49,52) base offset (0: atoms 1024-aligned) | [62,64) swizzle mode (1 = 128B).
__device__ __forceinline__ uint64_t make_smem_desc(uint32_t start, uint32_t sbo) {
  uint64_t desc = (start & 0x3FFFFu) >> 4;
  desc |= uint64_t{1} << 16;
  desc |= static_cast<uint64_t>((sbo & 0x3FFFFu) >> 4) << 32;
  desc |= uint64_t{1} << 62;
  return desc;
}

/// Makes this thread's generic-proxy writes to shared memory (cp.async, st.shared) visible to the async
/// proxy that wgmma reads through; then a barrier publishes them to the warpgroups.
__device__ __forceinline__ void fence_proxy_async() {
#if !defined(BRIGADE_CUDA_EMULATION)
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}

/// Orders earlier register writes of the accumulators (and shared-memory writes) before the next wgmma.
__device__ __forceinline__ void wgmma_fence() {
#if !defined(BRIGADE_CUDA_EMULATION)
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}

/// Pins the accumulators in their registers at this point of the program (an empty asm that "reads and
/// writes" each): without it the compiler may copy them between the async wgmmas, which makes ptxas
/// serialize every wgmma (warning C7514). Call around each batch of wgmmas.
__device__ __forceinline__ void fence_accumulators(float (&d)[64]) {
#if !defined(BRIGADE_CUDA_EMULATION)
#pragma unroll
  for (int i = 0; i < 64; ++i) asm volatile("" : "+f"(d[i])::"memory");
#else
  (void)d;
#endif
}

/// Closes the wgmma operations issued since the last commit into one group.
__device__ __forceinline__ void wgmma_commit() {
#if !defined(BRIGADE_CUDA_EMULATION)
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}

/// Waits until at most `kPending` wgmma groups of this warpgroup are in flight (their accumulators and
/// shared-memory reads are then complete).
template <int kPending>
__device__ __forceinline__ void wgmma_wait() {
#if !defined(BRIGADE_CUDA_EMULATION)
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kPending) : "memory");
#endif
}

#if defined(BRIGADE_CUDA_EMULATION)
/// The bf16 element (row, k) of a K-major operand as the hardware would address it through `desc`.
inline float emulated_desc_element(uint64_t desc, int row, int k) {
  const uint32_t start = static_cast<uint32_t>(desc & 0x3FFFu) << 4;
  const uint32_t sbo = static_cast<uint32_t>((desc >> 32) & 0x3FFFu) << 4;
  const uint32_t base_offset = static_cast<uint32_t>((desc >> 49) & 7u);
  const uint32_t mode = static_cast<uint32_t>(desc >> 62);
  if (mode != 1 || base_offset != 0) {
    throw std::runtime_error("emulated wgmma: only 128-byte-swizzled K-major descriptors with base offset 0");
  }
  const uint32_t logical = start + static_cast<uint32_t>(row / 8) * sbo +
                           static_cast<uint32_t>(row % 8) * kSwizzleRowBytes + static_cast<uint32_t>(k) * 2;
  uint16_t bits = 0;
  std::memcpy(&bits,
              static_cast<const unsigned char*>(::emu::dynamic_shared()) + swizzle_128b(logical) -
                  kEmulatedSharedBase,
              2);
  const uint32_t wide = static_cast<uint32_t>(bits) << 16;
  float value = 0;
  std::memcpy(&value, &wide, 4);
  return value;
}
#endif

/// d (64 x 128 fp32, this thread's 64 registers) += A (64 x 16, desc_a) * B (16 x 128, desc_b^T), both
/// operands K-major bf16 in shared memory; issued by all 128 threads of a warpgroup.
/// D fragment: warp w of the warpgroup owns rows 16w..16w+15; lane l's register i holds
///   row 16w + l/4 + 8 * ((i/2) % 2), column 8 * (i/4) + 2 * (l%4) + i%2.
__device__ __forceinline__ void wgmma_m64n128k16_bf16(float (&d)[64], uint64_t desc_a, uint64_t desc_b) {
#if defined(BRIGADE_CUDA_EMULATION)
  const int lane128 = ::emu::t_linear % 128, warp = lane128 / 32, lane = lane128 % 32;
  for (int i = 0; i < 64; ++i) {
    const int row = 16 * warp + lane / 4 + 8 * ((i / 2) % 2);
    const int col = 8 * (i / 4) + 2 * (lane % 4) + i % 2;
    float sum = 0;
    for (int k = 0; k < 16; ++k) {
      sum += emulated_desc_element(desc_a, row, k) * emulated_desc_element(desc_b, col, k);
    }
    d[i] += sum;
  }
#else
  // scale-d = predicate p = true (accumulate), scale-a = scale-b = 1, trans-a = trans-b = 0 (K-major).
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"
      " %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31,"
      " %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47,"
      " %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63},"
      " %64, %65, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]),
        "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]),
        "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]),
        "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]),
        "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]),
        "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]),
        "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "l"(desc_a), "l"(desc_b), "r"(1)
      : "memory");
#endif
}

#endif  // BRIGADE_WGMMA_DEVICE_CODE

}  // namespace brigade::kernels::cuda::wgmma
