// GEMM ladder: C[m x n] = A[m x k] . B[k x n], all row-major, one file, numbered versions
// (llm.c's layout). Each version keeps what the one before it does and adds one idea.
//
//   v1  naive: one thread per element of C, every operand read from global memory, threads
//       numbered down the columns of C (threadIdx.x -> row), as the GEMM study's naive
//       kernel and the overlap study's "one thread per row" kernel index them. fp32.
//   v1c v1 with the thread mapping turned (threadIdx.x -> column): the same work, but a
//       warp's loads of B and stores of C coalesce. Not a rung of its own: it separates
//       what coalescing buys from what v2's tiling buys. fp32.
//   v2  shared-memory tiling: 32x32 tiles of A and B staged in shared memory, one thread
//       per element of C, so each global element is read m/32 (or n/32) times, not m (n).
//       fp32.
//   v3  register blocking: a 128x128 block tile in 8-deep k slices, each of 256 threads
//       computes an 8x8 sub-tile held in registers (outer products from shared memory),
//       float4 global loads/stores when k, n are multiples of 4 and the pointers are
//       16-byte aligned, scalar predicated loads otherwise. fp32.
//   v4  tensor cores through WMMA: bf16 or fp16 inputs, fp32 accumulation, output in the
//       input dtype (one rounding at the end, as cuBLAS/torch.matmul do). 128x256 block
//       tile, 64-deep k slices, 8 warps each owning a 64x64 warp tile (4x4 WMMA 16x16x16
//       fragments), a 3-stage cp.async pipeline in padded shared memory (row padding makes
//       the fragment loads bank-conflict free), grouped tile order for L2 reuse. These are
//       the tile sizes of CUTLASS's large-GEMM configuration for 16-bit mma.sync on sm_80.
//       16-byte cp.async with zero-fill when k, n are multiples of 8 and the pointers are
//       16-byte aligned; element-wise predicated copies otherwise. Fragments are loaded
//       with the .shared form of wmma.load, which ptxas turns into ldmatrix (per 64-deep
//       slice and warp, sm_90 SASS: 32 LDSM, 128 HMMA.16816). Accumulators leave through
//       a shared-memory scratch, since WMMA's register layout is opaque.
//   v5  the same block pipeline with the warp level written in PTX: ldmatrix(.trans) x4
//       and mma.sync.m16n8k16 (the instructions CUTLASS's Ampere kernels use), with the
//       register layout known, so accumulators are stored straight from registers. Same
//       main-loop instruction mix as v4; it owns its layout, which further rungs need
//       (swizzled instead of padded shared memory, fragment double buffering).
//   v6  Hopper: TMA loads and wgmma, warp-specialised, in gemm_hopper.cu (sm_90a only).
//
// Every version handles sizes that are not multiples of its tiles: out-of-range operands
// load as zero and out-of-range outputs are never written. Grids are one-dimensional
// (tile index decomposed in the kernel) so no size hits the 65535 limit of grid.y.
// No torch header here: see launchers.h.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <mma.h>

#include <cstdint>

#include "device_common.cuh"
#include "launchers.h"

namespace {

using kernels::aligned16;
using kernels::ceil_div;
using kernels::pack2;
using kernels::from_float;
using kernels::smem_address;

// ---------------------------------------------------------------------------------------
// v1: naive. threadIdx.x walks down a column of C, so the 32 threads of a warp read 32
// rows of A (32 cache lines per load instruction), one element of B (a broadcast) and
// write 32 rows of C.
constexpr int kV1Tile = 32;

__global__ void __launch_bounds__(kV1Tile* kV1Tile)
    gemm_v1_kernel(const float* __restrict__ A, const float* __restrict__ B,
                   float* __restrict__ C, int M, int N, int K) {
  const int tiles_m = ceil_div(M, kV1Tile);
  const int row = (blockIdx.x % tiles_m) * kV1Tile + threadIdx.x;
  const int col = (blockIdx.x / tiles_m) * kV1Tile + threadIdx.y;
  if (row >= M || col >= N) return;
  const float* a_row = A + static_cast<size_t>(row) * K;
  float sum = 0.0f;
  for (int p = 0; p < K; ++p) sum = fmaf(a_row[p], B[static_cast<size_t>(p) * N + col], sum);
  C[static_cast<size_t>(row) * N + col] = sum;
}

// v1c: consecutive threads take consecutive columns of one row of C, so B reads and C
// writes coalesce and A reads are a broadcast.
constexpr int kV1cThreads = 256;

__global__ void gemm_v1c_kernel(const float* __restrict__ A, const float* __restrict__ B,
                                float* __restrict__ C, int M, int N, int K) {
  const long long index = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (index >= static_cast<long long>(M) * N) return;
  const int row = static_cast<int>(index / N);
  const int col = static_cast<int>(index % N);
  const float* a_row = A + static_cast<size_t>(row) * K;
  float sum = 0.0f;
  for (int p = 0; p < K; ++p) sum = fmaf(a_row[p], B[static_cast<size_t>(p) * N + col], sum);
  C[index] = sum;
}

// ---------------------------------------------------------------------------------------
// v2: shared-memory tiling, 32x32 tiles, a 32x32 block of threads.
constexpr int kV2Tile = 32;

__global__ void __launch_bounds__(kV2Tile* kV2Tile)
    gemm_v2_kernel(const float* __restrict__ A, const float* __restrict__ B,
                   float* __restrict__ C, int M, int N, int K) {
  __shared__ float a_tile[kV2Tile][kV2Tile];
  __shared__ float b_tile[kV2Tile][kV2Tile];
  const int tiles_n = ceil_div(N, kV2Tile);
  const int row = (blockIdx.x / tiles_n) * kV2Tile + threadIdx.y;
  const int col = (blockIdx.x % tiles_n) * kV2Tile + threadIdx.x;
  float sum = 0.0f;
  for (int k0 = 0; k0 < K; k0 += kV2Tile) {
    // Each thread stages one element of each tile; zeros pad the ragged edges so the
    // inner loop needs no bounds checks.
    const int a_col = k0 + threadIdx.x;
    const int b_row = k0 + threadIdx.y;
    a_tile[threadIdx.y][threadIdx.x] =
        (row < M && a_col < K) ? A[static_cast<size_t>(row) * K + a_col] : 0.0f;
    b_tile[threadIdx.y][threadIdx.x] =
        (b_row < K && col < N) ? B[static_cast<size_t>(b_row) * N + col] : 0.0f;
    __syncthreads();
#pragma unroll
    for (int p = 0; p < kV2Tile; ++p) sum = fmaf(a_tile[threadIdx.y][p], b_tile[p][threadIdx.x], sum);
    __syncthreads();  // the next iteration overwrites the tiles
  }
  if (row < M && col < N) C[static_cast<size_t>(row) * N + col] = sum;
}

// ---------------------------------------------------------------------------------------
// v3: register blocking. Block tile kV3BM x kV3BN, k slices of kV3BK, thread tile
// kV3TM x kV3TN; A is stored transposed in shared memory so that both operands of the
// per-k outer product are contiguous float4 reads.
constexpr int kV3BM = 128, kV3BN = 128, kV3BK = 8, kV3TM = 8, kV3TN = 8;
constexpr int kV3Threads = (kV3BM / kV3TM) * (kV3BN / kV3TN);  // 256
static_assert(kV3BK % 4 == 0 && kV3BN % 4 == 0 && kV3TN % 4 == 0 && kV3TM % 4 == 0,
              "v3 moves float4s");
static_assert((kV3BM * kV3BK / 4) % kV3Threads == 0 && (kV3BK * kV3BN / 4) % kV3Threads == 0,
              "every thread loads the same number of float4s");

// Four consecutive elements of a row starting at `col`; zeros past `cols` or `row_ok`.
// kVec: the caller guarantees cols % 4 == 0, col % 4 == 0 and a 16-byte aligned base.
template <bool kVec>
__device__ __forceinline__ float4 load_row4(const float* __restrict__ base, bool row_ok, int col,
                                            int cols) {
  float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  if (!row_ok) return v;
  if constexpr (kVec) {
    if (col < cols) v = *reinterpret_cast<const float4*>(base + col);
  } else {
    if (col + 0 < cols) v.x = base[col + 0];
    if (col + 1 < cols) v.y = base[col + 1];
    if (col + 2 < cols) v.z = base[col + 2];
    if (col + 3 < cols) v.w = base[col + 3];
  }
  return v;
}

template <bool kVec>
__global__ void __launch_bounds__(kV3Threads)
    gemm_v3_kernel(const float* __restrict__ A, const float* __restrict__ B,
                   float* __restrict__ C, int M, int N, int K) {
  __shared__ __align__(16) float a_tile_t[kV3BK][kV3BM];  // transposed: [k][m]
  __shared__ __align__(16) float b_tile[kV3BK][kV3BN];

  const int tiles_n = ceil_div(N, kV3BN);
  const int row0 = (blockIdx.x / tiles_n) * kV3BM;
  const int col0 = (blockIdx.x % tiles_n) * kV3BN;
  const int tid = threadIdx.x;
  const int thread_row = tid / (kV3BN / kV3TN);  // 0..15
  const int thread_col = tid % (kV3BN / kV3TN);  // 0..15

  float acc[kV3TM][kV3TN] = {};
  float a_reg[kV3TM];
  float b_reg[kV3TN];

  for (int k0 = 0; k0 < K; k0 += kV3BK) {
    // A slice kV3BM x kV3BK: one float4 along k per iteration, stored transposed.
#pragma unroll
    for (int it = 0; it < kV3BM * kV3BK / 4 / kV3Threads; ++it) {
      const int i = tid + it * kV3Threads;
      const int r = i / (kV3BK / 4);
      const int c = (i % (kV3BK / 4)) * 4;
      const int global_row = row0 + r;
      const float4 v = load_row4<kVec>(A + static_cast<size_t>(global_row) * K,
                                       global_row < M, k0 + c, K);
      a_tile_t[c + 0][r] = v.x;
      a_tile_t[c + 1][r] = v.y;
      a_tile_t[c + 2][r] = v.z;
      a_tile_t[c + 3][r] = v.w;
    }
    // B slice kV3BK x kV3BN, row-major as in global memory.
#pragma unroll
    for (int it = 0; it < kV3BK * kV3BN / 4 / kV3Threads; ++it) {
      const int i = tid + it * kV3Threads;
      const int r = i / (kV3BN / 4);
      const int c = (i % (kV3BN / 4)) * 4;
      const int global_row = k0 + r;
      *reinterpret_cast<float4*>(&b_tile[r][c]) = load_row4<kVec>(
          B + static_cast<size_t>(global_row) * N, global_row < K, col0 + c, N);
    }
    __syncthreads();
#pragma unroll
    for (int p = 0; p < kV3BK; ++p) {
#pragma unroll
      for (int i = 0; i < kV3TM; i += 4) {
        const float4 v = *reinterpret_cast<const float4*>(&a_tile_t[p][thread_row * kV3TM + i]);
        a_reg[i + 0] = v.x;
        a_reg[i + 1] = v.y;
        a_reg[i + 2] = v.z;
        a_reg[i + 3] = v.w;
      }
#pragma unroll
      for (int j = 0; j < kV3TN; j += 4) {
        const float4 v = *reinterpret_cast<const float4*>(&b_tile[p][thread_col * kV3TN + j]);
        b_reg[j + 0] = v.x;
        b_reg[j + 1] = v.y;
        b_reg[j + 2] = v.z;
        b_reg[j + 3] = v.w;
      }
#pragma unroll
      for (int i = 0; i < kV3TM; ++i) {
#pragma unroll
        for (int j = 0; j < kV3TN; ++j) acc[i][j] = fmaf(a_reg[i], b_reg[j], acc[i][j]);
      }
    }
    __syncthreads();  // the next slice overwrites the tiles
  }

#pragma unroll
  for (int i = 0; i < kV3TM; ++i) {
    const int global_row = row0 + thread_row * kV3TM + i;
    if (global_row >= M) continue;
    float* c_row = C + static_cast<size_t>(global_row) * N;
#pragma unroll
    for (int j = 0; j < kV3TN; j += 4) {
      const int col = col0 + thread_col * kV3TN + j;
      if constexpr (kVec) {
        // N % 4 == 0 and col % 4 == 0, so col < N means all four are in range.
        if (col < N) {
          *reinterpret_cast<float4*>(c_row + col) =
              make_float4(acc[i][j], acc[i][j + 1], acc[i][j + 2], acc[i][j + 3]);
        }
      } else {
#pragma unroll
        for (int q = 0; q < 4; ++q) {
          if (col + q < N) c_row[col + q] = acc[i][j + q];
        }
      }
    }
  }
}

// ---------------------------------------------------------------------------------------
// v4 and v5: tensor cores. One block-level pipeline (tiling, cp.async stages, launch order)
// shared by both; they differ only in the warp-level policy that turns a staged k-slice
// into MMAs and writes the accumulators out: WmmaWarp (v4) and MmaSyncWarp (v5).
namespace tc {

constexpr int BM = 128, BN = 256, BK = 64, STAGES = 3;
constexpr int WARPS_M = 2, WARPS_N = 4;
constexpr int THREADS = 32 * WARPS_M * WARPS_N;          // 256
constexpr int WM = BM / WARPS_M, WN = BN / WARPS_N;      // 64 x 64 per warp
// 8 elements (16 bytes) of padding per shared row: consecutive rows then start 144 (A) or
// 528 (B) bytes apart, i.e. 4 banks further on (mod 32), which puts the 8 rows read by one
// 8x8 fragment-load phase on 8 disjoint groups of 4 banks, and keeps every row start
// 16-byte aligned for cp.async.
constexpr int PAD = 8;
constexpr int LDA = BK + PAD;                            // 72 elements
constexpr int LDB = BN + PAD;                            // 264 elements
constexpr int A_STAGE = BM * LDA;                        // elements per stage
constexpr int B_STAGE = BK * LDB;
// 3 stages of 52 KiB: 153 KiB, within the opt-in limit of sm_80 (163 KiB) and sm_90
// (227 KiB); one block per SM, whose 8 warps hide latency with the stages in flight.
constexpr int SMEM_BYTES = STAGES * (A_STAGE + B_STAGE) * 2;  // 156672 bytes
constexpr int GROUP_M = 8;  // tile rows per group in the L2-friendly launch order
constexpr int CHUNK = 8;    // 16-bit elements per 16-byte copy

static_assert(BK % 16 == 0 && WM % 16 == 0 && WN % 16 == 0, "MMA tiles are 16 deep/wide");
static_assert((BM * BK / CHUNK) % THREADS == 0 && (BK * BN / CHUNK) % THREADS == 0,
              "every thread copies the same number of 16-byte chunks");
// WMMA wants 32-byte aligned fragment pointers, ldmatrix and cp.async 16-byte aligned rows.
static_assert((16 * LDA * 2) % 32 == 0 && (16 * LDB * 2) % 32 == 0, "fragment alignment");
static_assert((LDA * 2) % 16 == 0 && (LDB * 2) % 16 == 0, "row alignment");
static_assert((A_STAGE * 2) % 128 == 0 && (B_STAGE * 2) % 128 == 0, "stage alignment");
static_assert(THREADS / 32 * 16 * 16 * 4 <= SMEM_BYTES, "WMMA epilogue scratch fits");
static_assert((LDA * 2 / 4) % 32 == 4 && (LDB * 2 / 4) % 32 == 4, "conflict-free row stride");
static_assert(SMEM_BYTES == 156672, "update the comment above");

// The dynamic shared memory of the tensor-core kernels, at namespace scope so that the
// pipeline and the warp policies address it by element offset.
extern __shared__ __align__(128) uint16_t tc_smem[];

__device__ __forceinline__ void cp_async16(void* smem, const void* gmem, bool pred) {
  const int src_bytes = pred ? 16 : 0;  // 0: read nothing, fill the 16 bytes with zeros
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_address(smem)),
               "l"(gmem), "r"(src_bytes)
               : "memory");
}

__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}

template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}

// Copies the k-slice `k_tile` of the block's A rows and B columns into one stage.
// kAligned: K % 8 == 0, N % 8 == 0 and A, B 16-byte aligned, so a 16-byte chunk that
// starts in range lies wholly in range and can go through cp.async (asynchronous);
// otherwise element-wise predicated copies (synchronous, correct for any size).
// Elements are moved as raw 16-bit words: zero bits are +0.0 in bf16 and fp16 alike.
template <bool kAligned>
__device__ __forceinline__ void load_stage(const uint16_t* __restrict__ A,
                                           const uint16_t* __restrict__ B, uint16_t* a_smem,
                                           uint16_t* b_smem, int M, int N, int K, int row0,
                                           int col0, int k_tile) {
  const int k0 = k_tile * BK;
  const int tid = threadIdx.x;
  if constexpr (kAligned) {
#pragma unroll
    for (int i = 0; i < BM * BK / CHUNK / THREADS; ++i) {
      const int chunk = tid + i * THREADS;
      const int r = chunk / (BK / CHUNK);
      const int c = (chunk % (BK / CHUNK)) * CHUNK;
      const bool ok = row0 + r < M && k0 + c < K;
      // A clamped, never-read source address keeps the instruction's operand valid.
      const uint16_t* src = ok ? A + static_cast<size_t>(row0 + r) * K + (k0 + c) : A;
      cp_async16(a_smem + r * LDA + c, src, ok);
    }
#pragma unroll
    for (int i = 0; i < BK * BN / CHUNK / THREADS; ++i) {
      const int chunk = tid + i * THREADS;
      const int r = chunk / (BN / CHUNK);
      const int c = (chunk % (BN / CHUNK)) * CHUNK;
      const bool ok = k0 + r < K && col0 + c < N;
      const uint16_t* src = ok ? B + static_cast<size_t>(k0 + r) * N + (col0 + c) : B;
      cp_async16(b_smem + r * LDB + c, src, ok);
    }
  } else {
    for (int e = tid; e < BM * BK; e += THREADS) {
      const int r = e / BK, c = e % BK;
      const bool ok = row0 + r < M && k0 + c < K;
      a_smem[r * LDA + c] = ok ? A[static_cast<size_t>(row0 + r) * K + (k0 + c)] : uint16_t{0};
    }
    for (int e = tid; e < BK * BN; e += THREADS) {
      const int r = e / BN, c = e % BN;
      const bool ok = k0 + r < K && col0 + c < N;
      b_smem[r * LDB + c] = ok ? B[static_cast<size_t>(k0 + r) * N + (col0 + c)] : uint16_t{0};
    }
  }
}

// Writes kCount (even) consecutive outputs of one row starting at column `col`, rounded
// to T. kAligned (N % 8 == 0, C 16-byte aligned) and an even col let pairs go out as one
// 4-byte store; everything else goes element by element with a bounds check.
template <typename T, bool kAligned, int kCount>
__device__ __forceinline__ void store_row(T* __restrict__ c_row, int col, int N,
                                          const float* values) {
  if constexpr (kCount == 8) {
    // The WMMA epilogue's runs start at multiples of 8: one 16-byte store when in range.
    if (kAligned && col + 7 < N) {
      *reinterpret_cast<uint4*>(c_row + col) =
          make_uint4(pack2<T>(values[0], values[1]), pack2<T>(values[2], values[3]),
                     pack2<T>(values[4], values[5]), pack2<T>(values[6], values[7]));
      return;
    }
  }
#pragma unroll
  for (int e = 0; e < kCount; e += 2) {
    if (kAligned && col + e + 1 < N) {
      *reinterpret_cast<unsigned int*>(c_row + col + e) = pack2<T>(values[e], values[e + 1]);
    } else {
      if (col + e < N) c_row[col + e] = from_float<T>(values[e]);
      if (col + e + 1 < N) c_row[col + e + 1] = from_float<T>(values[e + 1]);
    }
  }
}

// WMMA fragment loads from shared memory. For fp16, wmma::load_matrix_sync emits the
// .shared form of wmma.load, which ptxas compiles to ldmatrix; for bf16 (CUDA 13) it emits
// only the generic form, which came out as 128 generic LD + 64 MOVM per slice and warp
// in this kernel's SASS. So for bf16 the same PTX instruction is issued here with the
// state space spelled out; it fills the fragment's registers as the API does (mma.hpp
// passes the fragment as an int array to the same instruction).
using ABf16 = nvcuda::wmma::fragment<nvcuda::wmma::matrix_a, 16, 16, 16, __nv_bfloat16,
                                     nvcuda::wmma::row_major>;
using BBf16 = nvcuda::wmma::fragment<nvcuda::wmma::matrix_b, 16, 16, 16, __nv_bfloat16,
                                     nvcuda::wmma::row_major>;
static_assert(sizeof(ABf16) == 16 && sizeof(BBf16) == 16, "bf16 fragments are 4 registers");

__device__ __forceinline__ void load_fragment(ABf16& frag, const __nv_bfloat16* p, unsigned ldm) {
  unsigned int* r = reinterpret_cast<unsigned int*>(&frag);
  asm volatile("wmma.load.a.sync.aligned.row.m16n16k16.shared.bf16 {%0, %1, %2, %3}, [%4], %5;\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_address(p)), "r"(ldm)
               : "memory");
}

__device__ __forceinline__ void load_fragment(BBf16& frag, const __nv_bfloat16* p, unsigned ldm) {
  unsigned int* r = reinterpret_cast<unsigned int*>(&frag);
  asm volatile("wmma.load.b.sync.aligned.row.m16n16k16.shared.bf16 {%0, %1, %2, %3}, [%4], %5;\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_address(p)), "r"(ldm)
               : "memory");
}

template <typename Fragment>
__device__ __forceinline__ void load_fragment(Fragment& frag, const __half* p, unsigned ldm) {
  nvcuda::wmma::load_matrix_sync(frag, p, ldm);
}

// v4 policy: WMMA 16x16x16 fragments, 4x4 of them per warp.
template <typename T>
struct WmmaWarp {
  static constexpr int FM = WM / 16, FN = WN / 16;
  nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 16, float> acc[FM][FN];

  __device__ __forceinline__ void zero() {
#pragma unroll
    for (int i = 0; i < FM; ++i) {
#pragma unroll
      for (int j = 0; j < FN; ++j) nvcuda::wmma::fill_fragment(acc[i][j], 0.0f);
    }
  }

  // a_warp, b_warp: offsets in tc_smem (elements) of the warp's first A row and first B
  // column in the current stage.
  __device__ __forceinline__ void compute(int a_warp, int b_warp) {
    using namespace nvcuda;
    const T* a = reinterpret_cast<const T*>(tc_smem) + a_warp;
    const T* b = reinterpret_cast<const T*>(tc_smem) + b_warp;
#pragma unroll
    for (int kk = 0; kk < BK; kk += 16) {
      // All A fragments, then one B fragment at a time: fewer live registers (the
      // 128 accumulator registers leave little room) at the same number of loads.
      wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> a_frag[FM];
#pragma unroll
      for (int i = 0; i < FM; ++i) load_fragment(a_frag[i], a + i * 16 * LDA + kk, LDA);
#pragma unroll
      for (int j = 0; j < FN; ++j) {
        wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::row_major> b_frag;
        load_fragment(b_frag, b + kk * LDB + j * 16, LDB);
#pragma unroll
        for (int i = 0; i < FM; ++i) wmma::mma_sync(acc[i][j], a_frag[i], b_frag, acc[i][j]);
      }
    }
  }

  // The fragment-to-element layout of WMMA is unspecified, so each fragment goes through
  // a private 16x16 fp32 scratch (idle pipeline memory) and then to global memory, 8
  // elements per lane. (row0, col0): the warp tile's origin in C.
  template <bool kAligned>
  __device__ __forceinline__ void store(T* __restrict__ C, int M, int N, int row0, int col0,
                                        float* scratch) {
    const int lane = threadIdx.x % 32;
    const int r = lane / 2;
    const int c = (lane % 2) * 8;
#pragma unroll
    for (int i = 0; i < FM; ++i) {
#pragma unroll
      for (int j = 0; j < FN; ++j) {
        nvcuda::wmma::store_matrix_sync(scratch, acc[i][j], 16, nvcuda::wmma::mem_row_major);
        __syncwarp();
        const int row = row0 + i * 16 + r;
        if (row < M) {
          store_row<T, kAligned, 8>(C + static_cast<size_t>(row) * N, col0 + j * 16 + c, N,
                                    scratch + r * 16 + c);
        }
        __syncwarp();  // the next fragment rewrites the scratch
      }
    }
  }
};

// v5 policy: mma.sync m16n8k16 from PTX, operands loaded with ldmatrix (4 8x8 matrices
// per instruction instead of WMMA's per-element shared loads). Per warp: 4 (16-row) x 8
// (8-column) MMA tiles. Register layouts are those of the PTX ISA, section "Matrix
// fragments for mma.m16n8k16 with floating point type":
//   groupID = lane / 4, tig = lane % 4
//   A (row-major 16x16): a0 (g, 2t..2t+1), a1 (g+8, 2t..), a2 (g, 2t+8..), a3 (g+8, 2t+8..)
//   B (16x8, "col"):     b0 (k 2t..2t+1, n g), b1 (k 2t+8..2t+9, n g)
//   C (16x8 fp32):       c0, c1 (g, 2t..2t+1), c2, c3 (g+8, 2t..2t+1)
__device__ __forceinline__ void ldmatrix_x4(unsigned int (&r)[4], const void* smem) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_address(smem))
               : "memory");
}

__device__ __forceinline__ void ldmatrix_x4_trans(unsigned int (&r)[4], const void* smem) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_address(smem))
               : "memory");
}

using kernels::mma_16816;

template <typename T>
struct MmaSyncWarp {
  static constexpr int FM = WM / 16;  // 16-row A fragments
  static constexpr int FN = WN / 8;   // 8-column MMA tiles
  float acc[FM][FN][4];

  __device__ __forceinline__ void zero() {
#pragma unroll
    for (int i = 0; i < FM; ++i) {
#pragma unroll
      for (int j = 0; j < FN; ++j) {
#pragma unroll
        for (int q = 0; q < 4; ++q) acc[i][j][q] = 0.0f;
      }
    }
  }

  __device__ __forceinline__ void compute(int a_warp, int b_warp) {
    const int lane = threadIdx.x % 32;
    // ldmatrix.x4: lanes 0-7, 8-15, 16-23, 24-31 give the row addresses of matrices 0-3.
    // Matrices (rows 0-7, cols 0-7), (rows 8-15, cols 0-7), (rows 0-7, cols 8-15),
    // (rows 8-15, cols 8-15) of a 16x16 block: lane -> row lane % 16, col (lane / 16) * 8.
    // For A these are a0..a3. For B (rows = k, cols = n) with .trans they are b0, b1 of
    // the n-tile at cols 0-7, then b0, b1 of the n-tile at cols 8-15.
    const int ld_row = lane % 16;
    const int ld_col = (lane / 16) * 8;
#pragma unroll
    for (int kk = 0; kk < BK; kk += 16) {
      unsigned int a_frag[FM][4];
      unsigned int b_frag[FN / 2][4];
#pragma unroll
      for (int i = 0; i < FM; ++i) {
        ldmatrix_x4(a_frag[i], tc_smem + a_warp + (i * 16 + ld_row) * LDA + kk + ld_col);
      }
#pragma unroll
      for (int j = 0; j < FN / 2; ++j) {
        ldmatrix_x4_trans(b_frag[j], tc_smem + b_warp + (kk + ld_row) * LDB + j * 16 + ld_col);
      }
#pragma unroll
      for (int i = 0; i < FM; ++i) {
#pragma unroll
        for (int j = 0; j < FN; ++j) {
          const unsigned int(&b)[4] = b_frag[j / 2];
          mma_16816<T>(acc[i][j], a_frag[i], b[(j % 2) * 2], b[(j % 2) * 2 + 1]);
        }
      }
    }
  }

  // Straight from registers: each lane owns pairs of adjacent columns (c0, c1) and
  // (c2, c3) in rows g and g+8 of every MMA tile.
  template <bool kAligned>
  __device__ __forceinline__ void store(T* __restrict__ C, int M, int N, int row0, int col0,
                                        float* /*scratch*/) {
    const int lane = threadIdx.x % 32;
    const int g = lane / 4;
    const int t = lane % 4;
#pragma unroll
    for (int i = 0; i < FM; ++i) {
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int row = row0 + i * 16 + g + half * 8;
        if (row >= M) continue;
        T* c_row = C + static_cast<size_t>(row) * N;
#pragma unroll
        for (int j = 0; j < FN; ++j) {
          store_row<T, kAligned, 2>(c_row, col0 + j * 8 + 2 * t, N, &acc[i][j][half * 2]);
        }
      }
    }
  }
};

template <typename T, template <typename> class Warp, bool kAligned>
__global__ void __launch_bounds__(THREADS, 1)
    gemm_tc_kernel(const T* __restrict__ A, const T* __restrict__ B, T* __restrict__ C, int M,
                   int N, int K) {
  uint16_t* a_smem = tc_smem;
  uint16_t* b_smem = tc_smem + STAGES * A_STAGE;
  const uint16_t* a_bits = reinterpret_cast<const uint16_t*>(A);
  const uint16_t* b_bits = reinterpret_cast<const uint16_t*>(B);

  const int2 tile = kernels::grouped_tile(blockIdx.x, ceil_div(M, BM), ceil_div(N, BN), GROUP_M);
  const int row0 = tile.x * BM;
  const int col0 = tile.y * BN;

  const int warp = threadIdx.x / 32;
  const int warp_row = (warp / WARPS_N) * WM;
  const int warp_col = (warp % WARPS_N) * WN;

  Warp<T> mma;
  mma.zero();

  const int k_tiles = ceil_div(K, BK);
  // Prologue: slices 0..STAGES-2 in flight. One commit per slot even when empty, so
  // that "group g holds slice g" stays true and the wait_group counts line up.
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < k_tiles) {
      load_stage<kAligned>(a_bits, b_bits, a_smem + s * A_STAGE, b_smem + s * B_STAGE, M, N, K,
                           row0, col0, s);
    }
    cp_async_commit();
  }

  for (int kt = 0; kt < k_tiles; ++kt) {
    // Groups committed so far: STAGES-1+kt. Allowing STAGES-2 pending means groups
    // 0..kt are complete: slice kt is in shared memory (this thread's copies) ...
    cp_async_wait<STAGES - 2>();
    // ... and, after the barrier, everyone's. The barrier also proves every warp is done
    // with slice kt-1, whose stage ((kt-1) % STAGES) the load below overwrites.
    __syncthreads();
    const int next = kt + STAGES - 1;
    if (next < k_tiles) {
      const int stage = next % STAGES;
      load_stage<kAligned>(a_bits, b_bits, a_smem + stage * A_STAGE, b_smem + stage * B_STAGE,
                           M, N, K, row0, col0, next);
    }
    cp_async_commit();
    const int stage = kt % STAGES;
    mma.compute(stage * A_STAGE + warp_row * LDA, STAGES * A_STAGE + stage * B_STAGE + warp_col);
  }

  cp_async_wait<0>();  // only empty groups can be pending; drain them anyway
  __syncthreads();     // every warp is done with the stages a WMMA scratch reuses
  float* scratch = reinterpret_cast<float*>(tc_smem) + warp * 16 * 16;
  mma.template store<kAligned>(C, M, N, row0 + warp_row, col0 + warp_col, scratch);
}

template <typename T, template <typename> class Warp>
cudaError_t launch_tc(const void* a, const void* b, void* c, int m, int n, int k,
                      cudaStream_t stream) {
  const bool aligned = k % CHUNK == 0 && n % CHUNK == 0 && aligned16(a) && aligned16(b) &&
                       aligned16(c);
  const unsigned int blocks = static_cast<unsigned int>(ceil_div(m, BM)) *
                              static_cast<unsigned int>(ceil_div(n, BN));
  auto kernel = aligned ? gemm_tc_kernel<T, Warp, true> : gemm_tc_kernel<T, Warp, false>;
  // More than the default 48 KiB of dynamic shared memory must be opted into per kernel;
  // cheap enough to do on every launch, and right for whichever device is current.
  const cudaError_t status =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM_BYTES);
  if (status != cudaSuccess) return status;
  kernel<<<blocks, THREADS, SMEM_BYTES, stream>>>(
      static_cast<const T*>(a), static_cast<const T*>(b), static_cast<T*>(c), m, n, k);
  return cudaGetLastError();
}

}  // namespace tc

}  // namespace

extern "C" cudaError_t gemm_v1_f32(const float* a, const float* b, float* c, int m, int n, int k,
                                   cudaStream_t stream) {
  const unsigned int blocks = static_cast<unsigned int>(ceil_div(m, kV1Tile)) *
                              static_cast<unsigned int>(ceil_div(n, kV1Tile));
  gemm_v1_kernel<<<blocks, dim3(kV1Tile, kV1Tile), 0, stream>>>(a, b, c, m, n, k);
  return cudaGetLastError();
}

extern "C" cudaError_t gemm_v1c_f32(const float* a, const float* b, float* c, int m, int n,
                                    int k, cudaStream_t stream) {
  const long long outputs = static_cast<long long>(m) * n;
  const unsigned int blocks =
      static_cast<unsigned int>((outputs + kV1cThreads - 1) / kV1cThreads);
  gemm_v1c_kernel<<<blocks, kV1cThreads, 0, stream>>>(a, b, c, m, n, k);
  return cudaGetLastError();
}

extern "C" cudaError_t gemm_v2_f32(const float* a, const float* b, float* c, int m, int n, int k,
                                   cudaStream_t stream) {
  const unsigned int blocks = static_cast<unsigned int>(ceil_div(m, kV2Tile)) *
                              static_cast<unsigned int>(ceil_div(n, kV2Tile));
  gemm_v2_kernel<<<blocks, dim3(kV2Tile, kV2Tile), 0, stream>>>(a, b, c, m, n, k);
  return cudaGetLastError();
}

extern "C" cudaError_t gemm_v3_f32(const float* a, const float* b, float* c, int m, int n, int k,
                                   cudaStream_t stream) {
  const unsigned int blocks = static_cast<unsigned int>(ceil_div(m, kV3BM)) *
                              static_cast<unsigned int>(ceil_div(n, kV3BN));
  const bool vec = k % 4 == 0 && n % 4 == 0 && aligned16(a) && aligned16(b) && aligned16(c);
  if (vec) {
    gemm_v3_kernel<true><<<blocks, kV3Threads, 0, stream>>>(a, b, c, m, n, k);
  } else {
    gemm_v3_kernel<false><<<blocks, kV3Threads, 0, stream>>>(a, b, c, m, n, k);
  }
  return cudaGetLastError();
}

extern "C" cudaError_t gemm_v4_bf16(const void* a, const void* b, void* c, int m, int n, int k,
                                    cudaStream_t stream) {
  return tc::launch_tc<__nv_bfloat16, tc::WmmaWarp>(a, b, c, m, n, k, stream);
}

extern "C" cudaError_t gemm_v4_f16(const void* a, const void* b, void* c, int m, int n, int k,
                                   cudaStream_t stream) {
  return tc::launch_tc<__half, tc::WmmaWarp>(a, b, c, m, n, k, stream);
}

extern "C" cudaError_t gemm_v5_bf16(const void* a, const void* b, void* c, int m, int n, int k,
                                    cudaStream_t stream) {
  return tc::launch_tc<__nv_bfloat16, tc::MmaSyncWarp>(a, b, c, m, n, k, stream);
}

extern "C" cudaError_t gemm_v5_f16(const void* a, const void* b, void* c, int m, int n, int k,
                                   cudaStream_t stream) {
  return tc::launch_tc<__half, tc::MmaSyncWarp>(a, b, c, m, n, k, stream);
}
