// GEMM ladder: C[m x n] = A[m x k] . B[k x n], all row-major, one file, numbered versions
// (llm.c's layout). Each version keeps what the one before it does and adds one idea.
//
//   v1  naive: one thread per element of C, every operand read from global memory.
//       fp32.
//   v2  shared-memory tiling: 32x32 tiles of A and B staged in shared memory, one thread
//       per element of C, so each global element is read m/32 (or n/32) times, not m (n).
//       fp32.
//   v3  register blocking: a 128x128 block tile in 8-deep k slices, each of 256 threads
//       computes an 8x8 sub-tile held in registers (outer products from shared memory),
//       float4 global loads/stores when k, n are multiples of 4 and the pointers are
//       16-byte aligned, scalar predicated loads otherwise. fp32.
//   v4  tensor cores through WMMA: bf16 or fp16 inputs, fp32 accumulation, output in the
//       input dtype (one rounding at the end, as cuBLAS/torch.matmul do). 128x256 block
//       tile, 32-deep k slices, 8 warps each owning a 64x64 warp tile (4x4 WMMA 16x16x16
//       fragments), a 4-stage cp.async pipeline in padded shared memory (no bank conflicts
//       for the ldmatrix-style fragment loads), and grouped tile order for L2 reuse.
//       16-byte cp.async with zero-fill when k, n are multiples of 8 and the pointers are
//       16-byte aligned; element-wise predicated copies otherwise.
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

#include "launchers.h"

namespace {

__host__ __device__ constexpr int ceil_div(int a, int b) { return (a + b - 1) / b; }

bool aligned16(const void* pointer) {
  return reinterpret_cast<std::uintptr_t>(pointer) % 16 == 0;
}

// ---------------------------------------------------------------------------------------
// v1: naive. Consecutive threads take consecutive columns of one row of C, so B reads
// and C writes coalesce and A reads are a broadcast.
constexpr int kV1Threads = 256;

__global__ void gemm_v1_kernel(const float* __restrict__ A, const float* __restrict__ B,
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
// v4: tensor cores (WMMA), multi-stage cp.async pipeline.
namespace v4 {

constexpr int BM = 128, BN = 256, BK = 32, STAGES = 4;
constexpr int WARPS_M = 2, WARPS_N = 4;
constexpr int THREADS = 32 * WARPS_M * WARPS_N;          // 256
constexpr int WM = BM / WARPS_M, WN = BN / WARPS_N;      // 64 x 64 per warp
constexpr int FM = WM / 16, FN = WN / 16;                // 4 x 4 fragments per warp
// 8 elements (16 bytes) of padding per shared row: consecutive rows then start 80 (A) or
// 528 (B) bytes apart, which puts the 8 rows of one 8x8 fragment-load phase on 8
// disjoint groups of 4 banks, and keeps every row start 16-byte aligned for cp.async.
constexpr int PAD = 8;
constexpr int LDA = BK + PAD;                            // 40 elements
constexpr int LDB = BN + PAD;                            // 264 elements
constexpr int A_STAGE = BM * LDA;                        // elements per stage
constexpr int B_STAGE = BK * LDB;
constexpr int SMEM_BYTES = STAGES * (A_STAGE + B_STAGE) * 2;  // 108544 bytes
constexpr int GROUP_M = 8;  // tile rows per group in the L2-friendly launch order
constexpr int CHUNK = 8;    // 16-bit elements per 16-byte copy

static_assert(BK % 16 == 0 && WM % 16 == 0 && WN % 16 == 0, "WMMA tiles are 16x16x16");
static_assert((BM * BK / CHUNK) % THREADS == 0 && (BK * BN / CHUNK) % THREADS == 0,
              "every thread copies the same number of 16-byte chunks");
// WMMA needs 32-byte aligned fragment pointers: rows of 16 fragments apart and stage
// starts must stay multiples of 32 bytes.
static_assert((16 * LDA * 2) % 32 == 0 && (16 * LDB * 2) % 32 == 0, "fragment alignment");
static_assert((A_STAGE * 2) % 128 == 0 && (B_STAGE * 2) % 128 == 0, "stage alignment");
static_assert(THREADS / 32 * 16 * 16 * 4 <= SMEM_BYTES, "epilogue scratch fits");

__device__ __forceinline__ void cp_async16(void* smem, const void* gmem, bool pred) {
  const unsigned int smem_addr = static_cast<unsigned int>(__cvta_generic_to_shared(smem));
  const int src_bytes = pred ? 16 : 0;  // 0: read nothing, fill the 16 bytes with zeros
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr), "l"(gmem),
               "r"(src_bytes)
               : "memory");
}

__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}

template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}

// Copies the k-slice `k_tile` of the block's A rows and B columns into pipeline `stage`.
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

// Eight consecutive outputs, rounded to T, as one 16-byte store (dst 16-byte aligned).
template <typename T>
__device__ __forceinline__ void store8(T* dst, const float* src) {
  unsigned int words[4];
#pragma unroll
  for (int w = 0; w < 4; ++w) {
    // Little-endian: the lower-addressed element goes in the low half of the word.
    words[w] = bits_of(from_float<T>(src[2 * w])) | (bits_of(from_float<T>(src[2 * w + 1])) << 16);
  }
  *reinterpret_cast<uint4*>(dst) = make_uint4(words[0], words[1], words[2], words[3]);
}

template <typename T, bool kAligned>
__global__ void __launch_bounds__(THREADS, 1)
    gemm_v4_kernel(const T* __restrict__ A, const T* __restrict__ B, T* __restrict__ C, int M,
                   int N, int K) {
  using namespace nvcuda;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  uint16_t* a_smem = reinterpret_cast<uint16_t*>(smem_raw);
  uint16_t* b_smem = a_smem + STAGES * A_STAGE;
  const uint16_t* a_bits = reinterpret_cast<const uint16_t*>(A);
  const uint16_t* b_bits = reinterpret_cast<const uint16_t*>(B);

  // Grouped launch order (as in Triton's matmul tutorial): GROUP_M consecutive tile rows
  // sweep the tile columns together, so the B panels they share are still in L2.
  const int tiles_m = ceil_div(M, BM), tiles_n = ceil_div(N, BN);
  const int tiles_per_group = GROUP_M * tiles_n;
  const int group = blockIdx.x / tiles_per_group;
  const int first_tile_m = group * GROUP_M;
  const int group_rows = min(tiles_m - first_tile_m, GROUP_M);
  const int in_group = blockIdx.x % tiles_per_group;
  const int row0 = (first_tile_m + in_group % group_rows) * BM;
  const int col0 = (in_group / group_rows) * BN;

  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const int warp_row = (warp / WARPS_N) * WM;
  const int warp_col = (warp % WARPS_N) * WN;

  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[FM][FN];
#pragma unroll
  for (int i = 0; i < FM; ++i) {
#pragma unroll
    for (int j = 0; j < FN; ++j) wmma::fill_fragment(acc[i][j], 0.0f);
  }

  const int k_tiles = ceil_div(K, BK);
  // Prologue: slices 0..STAGES-2 in flight. One commit per slot even when empty, so
  // that "group g holds slice g" stays true and wait_group counts line up.
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
    // 0..kt are complete: slice kt is in shared memory (for this thread's copies) ...
    cp_async_wait<STAGES - 2>();
    // ... and after the barrier for every thread's copies. The barrier also proves every
    // warp finished computing slice kt-1, whose stage the next load overwrites.
    __syncthreads();
    const int next = kt + STAGES - 1;
    if (next < k_tiles) {
      const int stage = next % STAGES;
      load_stage<kAligned>(a_bits, b_bits, a_smem + stage * A_STAGE, b_smem + stage * B_STAGE,
                           M, N, K, row0, col0, next);
    }
    cp_async_commit();

    const T* a_stage = reinterpret_cast<const T*>(a_smem + (kt % STAGES) * A_STAGE);
    const T* b_stage = reinterpret_cast<const T*>(b_smem + (kt % STAGES) * B_STAGE);
#pragma unroll
    for (int kk = 0; kk < BK; kk += 16) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> a_frag[FM];
      wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::row_major> b_frag[FN];
#pragma unroll
      for (int i = 0; i < FM; ++i) {
        wmma::load_matrix_sync(a_frag[i], a_stage + (warp_row + i * 16) * LDA + kk, LDA);
      }
#pragma unroll
      for (int j = 0; j < FN; ++j) {
        wmma::load_matrix_sync(b_frag[j], b_stage + kk * LDB + warp_col + j * 16, LDB);
      }
#pragma unroll
      for (int i = 0; i < FM; ++i) {
#pragma unroll
        for (int j = 0; j < FN; ++j) wmma::mma_sync(acc[i][j], a_frag[i], b_frag[j], acc[i][j]);
      }
    }
  }

  // Epilogue. The fragment-to-element layout of WMMA is unspecified, so each warp goes
  // through a private 16x16 fp32 scratch in the (now idle) pipeline memory: fragment ->
  // scratch -> rounded to T -> bounds-checked global stores, 8 elements per lane.
  cp_async_wait<0>();  // only empty groups can be pending; drain them anyway
  __syncthreads();     // every warp is done reading the stages the scratch reuses
  float* scratch = reinterpret_cast<float*>(smem_raw) + warp * 16 * 16;
  const int r = lane / 2;
  const int c = (lane % 2) * 8;
#pragma unroll
  for (int i = 0; i < FM; ++i) {
#pragma unroll
    for (int j = 0; j < FN; ++j) {
      wmma::store_matrix_sync(scratch, acc[i][j], 16, wmma::mem_row_major);
      __syncwarp();
      const int global_row = row0 + warp_row + i * 16 + r;
      const int global_col = col0 + warp_col + j * 16 + c;
      const float* values = scratch + r * 16 + c;
      if (global_row < M) {
        T* dst = C + static_cast<size_t>(global_row) * N + global_col;
        if (kAligned && global_col < N) {
          store8(dst, values);  // N % 8 == 0: the whole 8-run is in range and aligned
        } else {
#pragma unroll
          for (int e = 0; e < 8; ++e) {
            if (global_col + e < N) dst[e] = from_float<T>(values[e]);
          }
        }
      }
      __syncwarp();  // the scratch is rewritten by the next fragment
    }
  }
}

template <typename T>
cudaError_t launch_v4(const void* a, const void* b, void* c, int m, int n, int k,
                      cudaStream_t stream) {
  const T* A = static_cast<const T*>(a);
  const T* B = static_cast<const T*>(b);
  T* C = static_cast<T*>(c);
  const bool aligned = k % CHUNK == 0 && n % CHUNK == 0 && aligned16(a) && aligned16(b) &&
                       aligned16(c);
  const unsigned int blocks = static_cast<unsigned int>(ceil_div(m, BM)) *
                              static_cast<unsigned int>(ceil_div(n, BN));
  // More than the default 48 KiB of dynamic shared memory must be asked for per kernel;
  // cheap enough to do on every launch, and correct whichever device is current.
  auto kernel = aligned ? gemm_v4_kernel<T, true> : gemm_v4_kernel<T, false>;
  cudaError_t status =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM_BYTES);
  if (status != cudaSuccess) return status;
  kernel<<<blocks, THREADS, SMEM_BYTES, stream>>>(A, B, C, m, n, k);
  return cudaGetLastError();
}

}  // namespace v4

}  // namespace

extern "C" cudaError_t gemm_v1_f32(const float* a, const float* b, float* c, int m, int n, int k,
                                   cudaStream_t stream) {
  const long long outputs = static_cast<long long>(m) * n;
  const unsigned int blocks = static_cast<unsigned int>((outputs + kV1Threads - 1) / kV1Threads);
  gemm_v1_kernel<<<blocks, kV1Threads, 0, stream>>>(a, b, c, m, n, k);
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
  return v4::launch_v4<__nv_bfloat16>(a, b, c, m, n, k, stream);
}

extern "C" cudaError_t gemm_v4_f16(const void* a, const void* b, void* c, int m, int n, int k,
                                   cudaStream_t stream) {
  return v4::launch_v4<__half>(a, b, c, m, n, k, stream);
}
