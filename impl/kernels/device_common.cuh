// Helpers shared by the GEMM kernels of gemm.cu and gemm_hopper.cu. Header-only, no torch.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace kernels {

// Sizes are at most 2^30 (bindings.cpp checks), so a + b - 1 cannot overflow.
__host__ __device__ constexpr int ceil_div(int a, int b) { return (a + b - 1) / b; }

inline bool aligned16(const void* pointer) {
  return reinterpret_cast<std::uintptr_t>(pointer) % 16 == 0;
}

__device__ __forceinline__ unsigned int smem_address(const void* pointer) {
  return static_cast<unsigned int>(__cvta_generic_to_shared(pointer));
}

// Block `block` of a grid over tiles_m x tiles_n output tiles, in grouped order (as in
// Triton's matmul tutorial): `group_m` consecutive tile rows sweep the tile columns
// together, so the operand panels they share are still in L2. Returns (tile row, tile col).
__device__ __forceinline__ int2 grouped_tile(int block, int tiles_m, int tiles_n, int group_m) {
  const int tiles_per_group = group_m * tiles_n;
  const int first_tile_m = (block / tiles_per_group) * group_m;
  const int group_rows = min(tiles_m - first_tile_m, group_m);
  const int in_group = block % tiles_per_group;
  return make_int2(first_tile_m + in_group % group_rows, in_group / group_rows);
}

template <typename T>
__device__ __forceinline__ T from_float(float x);
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}
template <>
__device__ __forceinline__ __half from_float<__half>(float x) {
  return __float2half_rn(x);
}

__device__ __forceinline__ unsigned int bits_of(__nv_bfloat16 x) { return __bfloat16_as_ushort(x); }
__device__ __forceinline__ unsigned int bits_of(__half x) { return __half_as_ushort(x); }

// Two floats rounded to T, packed little-endian: the lower-addressed element is the low half.
template <typename T>
__device__ __forceinline__ unsigned int pack2(float lo, float hi) {
  return bits_of(from_float<T>(lo)) | (bits_of(from_float<T>(hi)) << 16);
}

// D += A . B with mma.sync.m16n8k16, fp32 accumulation; register layouts of the PTX ISA
// ("Matrix fragments for mma.m16n8k16 with floating point type").
template <typename T>
__device__ __forceinline__ void mma_16816(float (&d)[4], const unsigned int (&a)[4],
                                          unsigned int b0, unsigned int b1);
template <>
__device__ __forceinline__ void mma_16816<__nv_bfloat16>(float (&d)[4],
                                                         const unsigned int (&a)[4],
                                                         unsigned int b0, unsigned int b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
template <>
__device__ __forceinline__ void mma_16816<__half>(float (&d)[4], const unsigned int (&a)[4],
                                                  unsigned int b0, unsigned int b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

}  // namespace kernels
