// Hopper (sm_90a) building blocks in inline PTX: mbarriers, TMA, wgmma, setmaxnreg; and the
// host's tensor-map encoding. Used by gemm_hopper.cu (v6), gemm_v7.cu and tc_peak.cu. Only
// code compiled for sm_90a may call the device ones (the callers guard their bodies with
// V6_ARCH_OK); sections of the PTX ISA are named.
#pragma once

#include <cuda.h>  // CUtensorMap (a type only: no driver call is linked)
#include <cudaTypedefs.h>  // PFN_cuTensorMapEncodeTiled
#include <cuda_runtime.h>

#include <cstdint>

#include "device_common.cuh"

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define V6_ARCH_OK 1
#else
#define V6_ARCH_OK 0
#endif

namespace hopper {

// --- mbarrier ("Parallel Synchronization and Communication Instructions: mbarrier") -------

__device__ __forceinline__ void mbarrier_init(uint64_t* bar, unsigned int arrivals) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(kernels::smem_address(bar)),
               "r"(arrivals)
               : "memory");
}

// Makes the initialised barriers visible to the other threads and to the TMA unit.
__device__ __forceinline__ void mbarrier_init_fence() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}

__device__ __forceinline__ void mbarrier_arrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(kernels::smem_address(bar))
               : "memory");
}

// Arrives and announces `bytes` of asynchronous copies that will complete on `bar`.
__device__ __forceinline__ void mbarrier_arrive_expect_tx(uint64_t* bar, unsigned int bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n"
               ::"r"(kernels::smem_address(bar)), "r"(bytes)
               : "memory");
}

// Waits until the phase of parity `parity` has completed: the n-th completion (n >= 1)
// of a barrier is the phase of parity (n - 1) & 1.
__device__ __forceinline__ void mbarrier_wait(uint64_t* bar, unsigned int parity) {
  unsigned int done = 0;
  while (!done) {
    asm volatile(
        "{\n.reg .pred p;\n"
        "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        "selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(kernels::smem_address(bar)), "r"(parity)
        : "memory");
  }
}

// --- TMA ("cp.async.bulk.tensor") ----------------------------------------------------------

__device__ __forceinline__ void tma_prefetch_descriptor(const CUtensorMap* map) {
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(map)) : "memory");
}

// Copies the box at (inner, outer) of `map` into shared memory at `dst`; out-of-range
// elements arrive as zeros. Completion is counted in bytes on `bar`.
__device__ __forceinline__ void tma_load_2d(void* dst, const CUtensorMap* map, uint64_t* bar,
                                            int inner, int outer) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3}], [%4];\n" ::"r"(kernels::smem_address(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(inner), "r"(outer),
      "r"(kernels::smem_address(bar))
      : "memory");
}

// --- registers ("setmaxnreg") --------------------------------------------------------------

template <int kRegisters>
__device__ __forceinline__ void release_registers() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kRegisters));
}

template <int kRegisters>
__device__ __forceinline__ void claim_registers() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kRegisters));
}

// --- wgmma ("Asynchronous Warpgroup Level Matrix Multiply-Accumulate") ---------------------

// Shared-memory matrix descriptor ("Matrix Descriptor Format") for the 128-byte swizzle:
// start address, leading and stride byte offsets, each stored >> 4; bits 62-63 = 1 select
// the 128-byte swizzle. Base offset 0: every operand tile starts 1024-byte aligned.
__device__ __forceinline__ uint64_t swizzle128_descriptor(unsigned int smem_byte_address,
                                                          unsigned int leading_bytes,
                                                          unsigned int stride_bytes) {
  return static_cast<uint64_t>((smem_byte_address & 0x3FFFF) >> 4) |
         static_cast<uint64_t>(leading_bytes >> 4) << 16 |
         static_cast<uint64_t>(stride_bytes >> 4) << 32 | 1ull << 62;
}

// Orders this thread's register and shared-memory accesses before the next wgmma.
__device__ __forceinline__ void wgmma_fence() {
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}

__device__ __forceinline__ void wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}

// Waits until at most kPending committed wgmma groups of this warpgroup are in flight.
template <int kPending>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kPending) : "memory");
}

// The 128 fp32 accumulators of an m64n256 tile, in the fragment layout of the PTX ISA
// ("Register Fragments: wgmma .m64nNk16"): for warp w of the warpgroup and lane l,
// d[4j + 2h + e] is row 16w + l/4 + 8h, column 8j + 2(l%4) + e.
#define HOPPER_D_REGISTERS \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, " \
  "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
  "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, " \
  "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, " \
  "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, " \
  "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, " \
  "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}"

// Eight accumulators' constraints, d[i] to d[i + 7]: the operand lists below are runs of them.
#define HOPPER_F8(i)                                                                        \
  "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), \
      "+f"(d[i + 6]), "+f"(d[i + 7])

#define HOPPER_D_OPERANDS \
  HOPPER_F8(0), HOPPER_F8(8), HOPPER_F8(16), HOPPER_F8(24), HOPPER_F8(32), HOPPER_F8(40), \
  HOPPER_F8(48), HOPPER_F8(56), HOPPER_F8(64), HOPPER_F8(72), HOPPER_F8(80), HOPPER_F8(88), \
  HOPPER_F8(96), HOPPER_F8(104), HOPPER_F8(112), HOPPER_F8(120)

// One shape's wgmma for bf16 and fp16: D += A . B for a 64x16 A (K-major) and a 16xN B read
// transposed (MN-major, as a row-major B is), both in shared memory behind descriptors.
// scale-d = 1 (accumulate), scale-a = scale-b = 1, trans-a = 0, trans-b = 1. REGISTERS lists
// the COUNT accumulators' operands, A_AND_B the two descriptors' (COUNT and COUNT + 1), and
// the accumulators' constraints come last (a list of commas, so variadic).
#define HOPPER_WGMMA_TYPED(N, COUNT, REGISTERS, A_AND_B, T, PTX_TYPE, ...)                  \
  template <>                                                                              \
  __device__ __forceinline__ void wgmma_m64n##N##k16<T>(float (&d)[COUNT], uint64_t a,     \
                                                        uint64_t b) {                      \
    asm volatile("wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." PTX_TYPE "." PTX_TYPE   \
                 " " REGISTERS ", " A_AND_B ", 1, 1, 1, 0, 1;\n"                          \
                 : __VA_ARGS__                                                             \
                 : "l"(a), "l"(b));                                                        \
  }

#define HOPPER_WGMMA(N, COUNT, REGISTERS, A_AND_B, ...)                                      \
  template <typename T>                                                                    \
  __device__ __forceinline__ void wgmma_m64n##N##k16(float (&d)[COUNT], uint64_t a,        \
                                                     uint64_t b);                          \
  HOPPER_WGMMA_TYPED(N, COUNT, REGISTERS, A_AND_B, __nv_bfloat16, "bf16", __VA_ARGS__)     \
  HOPPER_WGMMA_TYPED(N, COUNT, REGISTERS, A_AND_B, __half, "f16", __VA_ARGS__)

HOPPER_WGMMA(256, 128, HOPPER_D_REGISTERS, "%128, %129", HOPPER_D_OPERANDS)

// The 64 fp32 accumulators of an m64n128 tile: the same layout as above, j < 16.
#define HOPPER_D64_REGISTERS \
  "{" \
  "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, " \
  "%19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, " \
  "%36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, " \
  "%53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63 " \
  "}"

#define HOPPER_D64_OPERANDS \
  HOPPER_F8(0), HOPPER_F8(8), HOPPER_F8(16), HOPPER_F8(24), HOPPER_F8(32), HOPPER_F8(40), \
  HOPPER_F8(48), HOPPER_F8(56)

// v7's narrower tile.
HOPPER_WGMMA(128, 64, HOPPER_D64_REGISTERS, "%64, %65", HOPPER_D64_OPERANDS)

// The 96 fp32 accumulators of an m64n192 tile: the same layout as above, j < 24.
#define HOPPER_D96_REGISTERS \
  "{" \
  "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, " \
  "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
  "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, " \
  "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, " \
  "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95" \
  "}"

#define HOPPER_D96_OPERANDS \
  HOPPER_F8(0), HOPPER_F8(8), HOPPER_F8(16), HOPPER_F8(24), HOPPER_F8(32), HOPPER_F8(40), \
  HOPPER_F8(48), HOPPER_F8(56), HOPPER_F8(64), HOPPER_F8(72), HOPPER_F8(80), HOPPER_F8(88)

// v7's 192-wide tile: three 64-column slabs of B, so that a narrow n or a wave count between
// the other widths' fits.
HOPPER_WGMMA(192, 96, HOPPER_D96_REGISTERS, "%96, %97", HOPPER_D96_OPERANDS)

// --- tensor maps (host) --------------------------------------------------------------------

// cuTensorMapEncodeTiled from the driver, found through the runtime so that the extension
// needs no -lcuda at link time. nullptr if the driver lacks it.
inline PFN_cuTensorMapEncodeTiled_v12000 encode_tiled() {
  static const PFN_cuTensorMapEncodeTiled_v12000 function = [] {
    void* entry = nullptr;
    cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
    const cudaError_t status = cudaGetDriverEntryPointByVersion(
        "cuTensorMapEncodeTiled", &entry, 12000, cudaEnableDefault, &found);
    return status == cudaSuccess && found == cudaDriverEntryPointSuccess
               ? reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(entry)
               : nullptr;
  }();
  return function;
}

// A row-major rows x cols matrix of 16-bit elements, read in boxes of box_rows x 64
// columns (128 bytes, the swizzle's row) with the 128-byte swizzle; boxes reaching past
// the matrix arrive zero-filled. TMA needs cols * 2 % 16 == 0 and a 16-byte aligned base.
// A rows x cols matrix whose rows are `ld` elements apart (ld >= cols; 0: cols, dense).
// Boxes past its edges read zeros (OOB_FILL_NONE), so a K tail adds nothing to a product.
inline bool encode_map(CUtensorMap* map, CUtensorMapDataType type, const void* base, int rows,
                       int cols, int box_rows, int ld = 0) {
  const PFN_cuTensorMapEncodeTiled_v12000 encode = encode_tiled();
  if (encode == nullptr) return false;
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(cols), static_cast<cuuint64_t>(rows)};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(ld > 0 ? ld : cols) * 2};  // bytes
  const cuuint32_t box[2] = {64, static_cast<cuuint32_t>(box_rows)};
  const cuuint32_t element_strides[2] = {1, 1};
  return encode(map, type, 2, const_cast<void*>(base), dims, strides, box, element_strides,
                CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

}  // namespace hopper
