// GEMM ladder v6, the Hopper rung (sm_90a): TMA copies, wgmma from shared memory, warp
// specialisation. C[m x n] = A[m x k] . B[k x n], row-major, bf16 or fp16 in and out, fp32
// accumulation (the conventions of launchers.h).
//
// Block tile 128 x 256, k in 64-deep slices through a ring of STAGES shared-memory slots.
// Three warpgroups of 128 threads:
//   producer (warpgroup 0): one thread waits for a free slot and has the TMA unit copy the
//     next slice of A and B into it; the copies count their bytes on the slot's `full`
//     barrier. It needs few registers and gives most back (setmaxnreg).
//   consumers (warpgroups 1, 2): each owns 64 rows of the tile, waits for `full`, issues
//     four wgmma.m64n256k16 (one per 16-deep step) and, once the previous slice's group has
//     finished, frees that slot on its `empty` barrier. The 64 x 256 fp32 accumulators take
//     128 registers per thread, hence the registers the producer gave back.
// No thread of the CTA computes an address or touches an operand element: the copy engine
// and the tensor cores do, which is what v4/v5 (every thread copies, every warp loads
// fragments) cannot do and why they stop near 40% of cuBLAS on Hopper.
//
// Shared-memory layouts are those TMA writes with the 128-byte swizzle and wgmma reads
// through descriptors (see hopper.cuh):
//   A slot, 128 x 64, K-major: 128 rows of 128 bytes; groups of 8 rows 1024 bytes apart
//     (stride byte offset); the 16-deep step kk starts 32 * kk bytes into the rows.
//   B slot, 64 x 256, MN-major (B is row-major): four slabs of 64 columns, each 64 rows of
//     128 bytes (one TMA box each), 8192 bytes apart (leading byte offset); groups of 8
//     rows 1024 bytes apart (stride byte offset); step kk starts 16 * kk rows in.
// These are CUTLASS's canonical GMMA layouts SW128 K-major and SW128 MN-major.
//
// Ragged sizes: a box reaching past M, N or K arrives zero-filled, and stores are
// bounds-checked, so any m, n, k works as long as TMA can address the operands: row
// strides a multiple of 16 bytes (k % 8 == 0, n % 8 == 0) and 16-byte aligned pointers.
// Otherwise gemm_v6_* runs v5's kernel (gemm.cu) instead; ops.gemm_v6_path says which.
// (The output is allocated by torch, whose blocks are at least 256-byte aligned.)
#include <cuda_runtime.h>

#include "device_common.cuh"
#include "hopper.cuh"
#include "launchers.h"

namespace {

using kernels::ceil_div;

constexpr int BM = 128, BN = 256, BK = 64, STAGES = 4;
constexpr int CONSUMERS = 2;                     // warpgroups of 64 rows each
constexpr int THREADS = 128 * (1 + CONSUMERS);   // 384
constexpr int SLAB = 64;                         // 16-bit elements in one 128-byte row
constexpr int A_SLOT = BM * BK * 2;              // 16 KiB
constexpr int B_SLAB = BK * SLAB * 2;            // 8 KiB
constexpr int B_SLOT = BK * BN * 2;              // 32 KiB
constexpr int SLOT = A_SLOT + B_SLOT;            // bytes one slice brings in
constexpr int ALIGN = 1024;                      // the 128-byte swizzle repeats every 1 KiB
constexpr int SMEM_BYTES = STAGES * SLOT + ALIGN;  // 197632: slack to align the base
// A square-ish wave of tiles (16 rows x ~8 columns of 256 on 132 SMs) shares A and B
// panels in L2.
[[maybe_unused]] constexpr int GROUP_M = 16;
// Registers per thread after setmaxnreg: 128 * 40 + 256 * 232 = 64512 <= 65536.
[[maybe_unused]] constexpr int PRODUCER_REGISTERS = 40;
[[maybe_unused]] constexpr int CONSUMER_REGISTERS = 232;

static_assert(BN == 4 * SLAB && BK == SLAB, "B arrives as four 64 x 64 boxes per slice");
static_assert(A_SLOT % ALIGN == 0 && B_SLAB % ALIGN == 0 && SLOT % ALIGN == 0,
              "every operand tile starts 1024-byte aligned (descriptor base offset 0)");
static_assert(SMEM_BYTES <= 227 * 1024, "within sm_90's opt-in shared memory");

template <typename T>
__global__ void __launch_bounds__(THREADS, 1)
    gemm_v6_kernel(const __grid_constant__ CUtensorMap a_map,
                   const __grid_constant__ CUtensorMap b_map, T* __restrict__ C, int M, int N,
                   int K) {
#if V6_ARCH_OK
  extern __shared__ __align__(ALIGN) uint8_t v6_smem[];
  __shared__ __align__(8) uint64_t full[STAGES];
  __shared__ __align__(8) uint64_t empty[STAGES];
  uint8_t* slots = v6_smem + (ALIGN - kernels::smem_address(v6_smem) % ALIGN) % ALIGN;

  const int2 tile = kernels::grouped_tile(blockIdx.x, ceil_div(M, BM), ceil_div(N, BN), GROUP_M);
  const int row0 = tile.x * BM;
  const int col0 = tile.y * BN;
  const int warpgroup = threadIdx.x / 128;
  const int k_tiles = ceil_div(K, BK);

  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      hopper::mbarrier_init(&full[s], 1);                // the producer's expect_tx arrival
      hopper::mbarrier_init(&empty[s], CONSUMERS * 4);   // one arrival per consumer warp
    }
    hopper::mbarrier_init_fence();
  }
  __syncthreads();

  if (warpgroup == 0) {
    hopper::release_registers<PRODUCER_REGISTERS>();
    if (threadIdx.x == 0) {
      hopper::tma_prefetch_descriptor(&a_map);
      hopper::tma_prefetch_descriptor(&b_map);
      for (int kt = 0; kt < k_tiles; ++kt) {
        const int s = kt % STAGES;
        // Slice kt reuses the slot of slice kt - STAGES: wait until both consumers freed it
        // (the (kt / STAGES)-th completion of empty[s]).
        if (kt >= STAGES) hopper::mbarrier_wait(&empty[s], ((kt / STAGES) + 1) & 1);
        uint8_t* slot = slots + s * SLOT;
        hopper::mbarrier_arrive_expect_tx(&full[s], SLOT);
        hopper::tma_load_2d(slot, &a_map, &full[s], kt * BK, row0);
#pragma unroll
        for (int j = 0; j < BN / SLAB; ++j) {
          hopper::tma_load_2d(slot + A_SLOT + j * B_SLAB, &b_map, &full[s], col0 + j * SLAB,
                              kt * BK);
        }
      }
    }
    return;
  }

  hopper::claim_registers<CONSUMER_REGISTERS>();
  const int consumer = warpgroup - 1;
  const bool warp_leader = threadIdx.x % 32 == 0;
  float d[128];
#pragma unroll
  for (int i = 0; i < 128; ++i) d[i] = 0.0f;

  for (int kt = 0; kt < k_tiles; ++kt) {
    const int s = kt % STAGES;
    hopper::mbarrier_wait(&full[s], (kt / STAGES) & 1);
    const unsigned int a_tile = kernels::smem_address(slots + s * SLOT) + consumer * 64 * 128;
    const unsigned int b_tile = kernels::smem_address(slots + s * SLOT + A_SLOT);
    hopper::wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < BK / 16; ++kk) {
      const uint64_t a = hopper::swizzle128_descriptor(a_tile + kk * 32, 16, 1024);
      const uint64_t b = hopper::swizzle128_descriptor(b_tile + kk * 16 * 128, B_SLAB, 1024);
      hopper::wgmma_m64n256k16<T>(d, a, b);
    }
    hopper::wgmma_commit();
    // Keep this slice's group in flight; once the previous one is done, free its slot.
    hopper::wgmma_wait<1>();
    if (kt > 0 && warp_leader) hopper::mbarrier_arrive(&empty[(kt - 1) % STAGES]);
  }
  hopper::wgmma_wait<0>();

  // Epilogue straight from registers (layout in hopper.cuh): pairs of adjacent columns,
  // 4 bytes each. N % 8 == 0 on this path, so col < N implies col + 1 < N.
  const int warp = (threadIdx.x % 128) / 32;
  const int lane = threadIdx.x % 32;
  const int row_base = row0 + consumer * 64 + warp * 16 + lane / 4;
  const int col_base = col0 + 2 * (lane % 4);
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int row = row_base + 8 * h;
    if (row >= M) continue;
    T* c_row = C + static_cast<size_t>(row) * N;
#pragma unroll
    for (int j = 0; j < BN / 8; ++j) {
      const int col = col_base + 8 * j;
      if (col < N) {
        *reinterpret_cast<unsigned int*>(c_row + col) =
            kernels::pack2<T>(d[4 * j + 2 * h], d[4 * j + 2 * h + 1]);
      }
    }
  }
#endif
}

template <typename T>
cudaError_t launch_v6(const void* a, const void* b, void* c, int m, int n, int k,
                      CUtensorMapDataType type, cudaStream_t stream) {
  CUtensorMap a_map, b_map;
  if (!hopper::encode_map(&a_map, type, a, m, k, BM) ||
      !hopper::encode_map(&b_map, type, b, k, n, BK)) {
    return cudaErrorInvalidValue;
  }
  const unsigned int blocks = static_cast<unsigned int>(ceil_div(m, BM)) *
                              static_cast<unsigned int>(ceil_div(n, BN));
  const cudaError_t status = cudaFuncSetAttribute(
      gemm_v6_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM_BYTES);
  if (status != cudaSuccess) return status;
  gemm_v6_kernel<T><<<blocks, THREADS, SMEM_BYTES, stream>>>(a_map, b_map,
                                                              static_cast<T*>(c), m, n, k);
  return cudaGetLastError();
}

}  // namespace

extern "C" int gemm_v6_uses_tma(const void* a, const void* b, int n, int k) {
  return k > 0 && k % 8 == 0 && n % 8 == 0 && kernels::aligned16(a) && kernels::aligned16(b);
}

extern "C" cudaError_t gemm_v6_bf16(const void* a, const void* b, void* c, int m, int n, int k,
                                    cudaStream_t stream) {
  if (!gemm_v6_uses_tma(a, b, n, k) || !kernels::aligned16(c)) {
    return gemm_v5_bf16(a, b, c, m, n, k, stream);
  }
  return launch_v6<__nv_bfloat16>(a, b, c, m, n, k, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, stream);
}

extern "C" cudaError_t gemm_v6_f16(const void* a, const void* b, void* c, int m, int n, int k,
                                   cudaStream_t stream) {
  if (!gemm_v6_uses_tma(a, b, n, k) || !kernels::aligned16(c)) {
    return gemm_v5_f16(a, b, c, m, n, k, stream);
  }
  return launch_v6<__half>(a, b, c, m, n, k, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, stream);
}
