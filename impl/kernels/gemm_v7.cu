// GEMM ladder v7 (sm_90a): v6's TMA + wgmma pipeline made persistent, with a tile width
// chosen per shape. C[m x n] = A[m x k] . B[k x n], row-major, bf16 or fp16 in and out,
// fp32 accumulation (the conventions of launchers.h).
//
// What changes from v6 (gemm_hopper.cu), and why:
// - Persistent grid: min(tiles, SMs) CTAs, each walking the tiles t = blockIdx.x,
//   blockIdx.x + gridDim.x, ... in v6's grouped (L2-friendly) raster order. The producer
//   runs ahead across tile boundaries, so while the consumers write one tile's epilogue
//   the ring already fills with the next tile's first slices: v6 pays a pipeline fill and
//   an exposed epilogue per tile, which costs most where K is small (few slices per tile).
// - Tile width BN = 256 or 128 (a template parameter): 128 doubles the tile count where
//   256-wide tiles leave SMs idle (skinny M, small squares). impl/kernels/tiles.py picks
//   it from a measured per-tile rate and the wave count; nothing here is tuned per shape.
//   BN = 192 (three B slabs, 4 ring slots) sits between them for wave counts and narrow n
//   that neither fits; it runs only where the caller forces it until its rate is fitted.
// - Two CTAs per SM at BN = 128 (CTAS = 2, forced by the caller, never chosen by the plan
//   yet): both consumer warpgroups of a CTA write a tile's epilogue at once while the
//   tensor cores idle; a second CTA on the SM can run its main loop meanwhile. 64 fp32
//   accumulators per thread leave room for it: each CTA gets half the ring (3 slots) and
//   a one-warp producer, so that 2 x 288 threads fit the register file (see Roles).
//   The grid is then min(units, 2 x SMs) CTAs.
//   Stream-K is refused with it (its schedule and workspace assume one CTA per SM);
//   split-K needs nothing more.
// - Any size: each operand is read through its own row stride (lda, ldb multiples of 8, TMA's
//   16-byte minimum) over its real k (and B its real n), TMA zero-filling past them. ops.py
//   copies an operand onto rows of whole 128-byte lines only where its stride needs it or the
//   copy pays (tiles.copies_onto_lines), and the epilogue stores single elements where
//   n % 8 != 0, so v7 never falls back to v5.
// - The epilogue stores whole 8-column chunks per lane (a shuffle within each quad of
//   lanes): one 16-byte store where n % 8 == 0, else 8- or 4-byte pieces as n's alignment
//   allows (v6 stores 4 bytes, or single elements where n % 8 != 0).
// - Stream-K for a last partial wave (tiles.chooses_stream_k): its tiles' slices are
//   shared evenly by all SMs, partial tiles summed by reduce_stream_k.
// - Split-K where the output has too few tiles to fill the SMs (tiles.choose_splits): each
//   tile's K range is cut into `splits` parts, the work units are tiles x parts, and each
//   unit writes its fp32 partial tile to a workspace; reduce_splits then sums the parts in
//   a fixed order (deterministic) and rounds once, as the unsplit kernel does.
//
// The slot/ring/descriptor layouts are v6's (see gemm_hopper.cu): A 128 x 64 K-major SW128,
// B 64 x BN MN-major SW128 as BN / 64 slabs of 64 x 64. Barrier phases count slices over
// the CTA's whole tile sequence (`slice`), not per tile.
#include <cuda_runtime.h>

#include "device_common.cuh"
#include "hopper.cuh"
#include "launchers.h"

namespace {

using kernels::ceil_div;

constexpr int BM = 128, BK = 64;
constexpr int CONSUMERS = 2;                     // warpgroups of 64 rows each
constexpr int THREADS = 128 * (1 + CONSUMERS);   // 384
constexpr int SLAB = 64;                         // 16-bit elements in one 128-byte row
constexpr int A_SLOT = BM * BK * 2;              // 16 KiB
constexpr int B_SLAB = BK * SLAB * 2;            // 8 KiB
constexpr int ALIGN = 1024;                      // the 128-byte swizzle repeats every 1 KiB
constexpr int RING_BYTES = 192 * 1024;           // 4 slots of BN = 256 or 192, 6 of 128
constexpr int PAIR_RING_BYTES = 96 * 1024;       // two CTAs per SM: 3 slots of BN = 128 each
// An SM's shared memory, and what each resident CTA takes beside its dynamic part: the
// system's reserved 1 KiB and the static barriers, which ptxas -v reports as 1 KiB (they
// sit before the 1 KiB-aligned dynamic array).
constexpr int SM_SHARED_BYTES = 228 * 1024;
constexpr int CTA_SHARED_OVERHEAD = 1024 + 1024;
[[maybe_unused]] constexpr int GROUP_M = 16;
[[maybe_unused]] constexpr int PRODUCER_REGISTERS = 40;
[[maybe_unused]] constexpr int CONSUMER_REGISTERS = 232;

// Who does what in a CTA, for CTAS CTAs per SM. One CTA: the producer is warpgroup 0 and
// moves registers to the consumers with setmaxnreg (40 and 232 from 168 at launch). Two:
// ptxas allocates every thread of a kernel within its launch bound, setmaxnreg or not, and
// 384 threads at 2 CTAs get 80, under the 90 it asked for around the m64n128 wgmma (C7602,
// "Insufficient registers"). So the producer shrinks to one warp after the two consumer
// warpgroups (wgmma needs whole, aligned warpgroups; setmaxnreg too, so none is used):
// 288 threads, 18 warps on the SM. ptxas then allows 96 registers a thread (an SM's four
// quarters of 16,384 registers each hold up to 5 of those warps: 102, rounded down to 8),
// and the consumers' 64 accumulators fit without spills.
template <int CTAS>
struct Roles {
  static_assert(CTAS == 1 || CTAS == 2, "one or two CTAs per SM");
  static constexpr int THREADS = CTAS == 1 ? ::THREADS : 128 * CONSUMERS + 32;
  static constexpr int PRODUCER = CTAS == 1 ? 0 : CONSUMERS;  // the producer's warpgroup
  static constexpr int FIRST_CONSUMER = CTAS == 1 ? 1 : 0;    // the first consumer's
  static constexpr bool MOVES_REGISTERS = CTAS == 1;
  static_assert(PRODUCER * 128 < THREADS && (FIRST_CONSUMER + CONSUMERS) * 128 <= THREADS,
                "every role has its threads");
  static_assert(!MOVES_REGISTERS || THREADS % 128 == 0, "setmaxnreg takes whole warpgroups");
};

template <int BN, int CTAS = 1>
struct Tile {
  static constexpr int B_SLOT = BK * BN * 2;
  static constexpr int SLOT = A_SLOT + B_SLOT;
  static constexpr int STAGES = (CTAS == 1 ? RING_BYTES : PAIR_RING_BYTES) / SLOT;
  static constexpr int SMEM_BYTES = STAGES * SLOT + ALIGN;
  static constexpr int ACCUMULATORS = BN / 2;    // fp32 per thread for a 64 x BN tile
  static_assert(BN % SLAB == 0 && SLOT % ALIGN == 0 && STAGES >= 2, "slots stay aligned");
  static_assert(SMEM_BYTES <= 227 * 1024, "within sm_90's opt-in shared memory");
  static_assert(CTAS == 1 || BN == 128, "two CTAs per SM only with 128-wide tiles");
  static_assert(ACCUMULATORS * 128 * CONSUMERS == BM * BN, "the consumers hold the tile");
  static_assert(CTAS * (SMEM_BYTES + CTA_SHARED_OVERHEAD) <= SM_SHARED_BYTES,
                "CTAS CTAs fit one SM's shared memory");
};

template <typename T, int BN>
__device__ __forceinline__ void wgmma_tile(float (&d)[BN / 2], uint64_t a, uint64_t b) {
  if constexpr (BN == 256) {
    hopper::wgmma_m64n256k16<T>(d, a, b);
  } else if constexpr (BN == 192) {
    hopper::wgmma_m64n192k16<T>(d, a, b);
  } else {
    static_assert(BN == 128, "v7 has 128-, 192- and 256-wide tiles");
    hopper::wgmma_m64n128k16<T>(d, a, b);
  }
}

// Four lanes of a quad hold, for one row, two columns each of every 8-column chunk
// (hopper.cuh's fragment layout). Two butterfly exchanges (a 4 x 4 transpose of packed
// pairs) give lane q the whole chunk q of four: 16 contiguous bytes. Every lane must
// take part, so rows past M are skipped only at the store.
__device__ __forceinline__ uint4 quad_transpose(unsigned int v0, unsigned int v1,
                                                unsigned int v2, unsigned int v3) {
  const int lane = threadIdx.x % 4;
  const bool odd = lane & 1;  // exchange 1: chunks whose bit 0 is the lane's bit 0
  unsigned int r0 = __shfl_xor_sync(0xffffffff, odd ? v0 : v1, 1);
  unsigned int r1 = __shfl_xor_sync(0xffffffff, odd ? v2 : v3, 1);
  if (odd) { v0 = r0; v2 = r1; } else { v1 = r0; v3 = r1; }
  const bool high = lane & 2;  // exchange 2: chunks whose bit 1 is the lane's bit 1
  r0 = __shfl_xor_sync(0xffffffff, high ? v0 : v2, 2);
  r1 = __shfl_xor_sync(0xffffffff, high ? v1 : v3, 2);
  if (high) { v0 = r0; v1 = r1; } else { v2 = r0; v3 = r1; }
  return make_uint4(v0, v1, v2, v3);
}

// Eight adjacent elements of C's row `row` from column `col` (a multiple of 8; col < N),
// packed as 4 words in memory order. C's rows are N elements apart (C is a dense m x n
// tensor) on a 16-byte aligned base, so the chunk is as aligned as N allows: one 16-byte
// store where N % 8 == 0, two 8-byte or four 4-byte stores where N is a multiple of 4 or 2,
// and single elements where N is odd or the row ends inside the chunk. Wide stores matter:
// ncu on small K showed the epilogue stalled on the LG queue with 4-byte stores, and the
// sweep's n = 6414 ran at 0.60 of cuBLAS with v7's former element-by-element stores.
template <typename T>
__device__ __forceinline__ void store8(T* __restrict__ C, int N, int row, int col, uint4 chunk) {
  T* dst = C + static_cast<size_t>(row) * N + col;
  if (col + 8 <= N) {
    if (N % 8 == 0) {
      *reinterpret_cast<uint4*>(dst) = chunk;
      return;
    }
    if (N % 4 == 0) {
      reinterpret_cast<uint2*>(dst)[0] = make_uint2(chunk.x, chunk.y);
      reinterpret_cast<uint2*>(dst)[1] = make_uint2(chunk.z, chunk.w);
      return;
    }
    if (N % 2 == 0) {
      unsigned int* words = reinterpret_cast<unsigned int*>(dst);
      words[0] = chunk.x; words[1] = chunk.y; words[2] = chunk.z; words[3] = chunk.w;
      return;
    }
  }
  const unsigned int words[4] = {chunk.x, chunk.y, chunk.z, chunk.w};
  unsigned short* halves = reinterpret_cast<unsigned short*>(dst);
  for (int e = 0; e < 8 && col + e < N; ++e) {
    halves[e] = static_cast<unsigned short>(words[e / 2] >> (16 * (e % 2)));
  }
}

// A consumer's 64 x BN accumulators into C, rounded once. Each lane stores whole 8-column
// chunks (quad_transpose), so a warp's store fills 32-byte sectors where 4-byte stores left
// them half written and queued four times as many instructions. `Aligned` (N % 8 == 0, the
// common case) keeps the other widths' branches out of the unrolled loop: with them inline
// the sweep's small-K shapes lost up to a fifth (results/h100x1/logs/20261125T1832-*).
template <typename T, int BN, bool Aligned>
__device__ __forceinline__ void store_chunks(const float (&d)[BN / 2], T* __restrict__ C, int M,
                                             int N, int row0, int col0, int consumer) {
  const int warp = (threadIdx.x % 128) / 32;
  const int lane = threadIdx.x % 32;
  const int row_base = row0 + consumer * 64 + warp * 16 + lane / 4;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int row = row_base + 8 * h;
#pragma unroll
    for (int j = 0; j < BN / 8; j += 4) {
      const uint4 chunk = quad_transpose(
          kernels::pack2<T>(d[4 * j + 2 * h], d[4 * j + 2 * h + 1]),
          kernels::pack2<T>(d[4 * j + 4 + 2 * h], d[4 * j + 5 + 2 * h]),
          kernels::pack2<T>(d[4 * j + 8 + 2 * h], d[4 * j + 9 + 2 * h]),
          kernels::pack2<T>(d[4 * j + 12 + 2 * h], d[4 * j + 13 + 2 * h]));
      const int col = col0 + 8 * (j + lane % 4);
      if (row < M && col < N) {
        if constexpr (Aligned) {
          *reinterpret_cast<uint4*>(C + static_cast<size_t>(row) * N + col) = chunk;
        } else {
          store8<T>(C, N, row, col, chunk);
        }
      }
    }
  }
}

template <typename T, int BN>
__device__ __forceinline__ void store_tile(const float (&d)[BN / 2], T* __restrict__ C, int M,
                                           int N, int row0, int col0, int consumer) {
  if (N % 8 == 0) {
    store_chunks<T, BN, true>(d, C, M, N, row0, col0, consumer);
  } else {
    store_chunks<T, BN, false>(d, C, M, N, row0, col0, consumer);
  }
}

// A split's fp32 partial tile into its part of the workspace, whose rows are `ld` (a
// multiple of BN) floats apart and cover whole tiles, so no store needs a bounds check:
// reduce_splits reads only the m x n corner.
template <int BN>
__device__ __forceinline__ void store_partial(const float (&d)[BN / 2], float* __restrict__ part,
                                              int ld, int row0, int col0, int consumer) {
  const int warp = (threadIdx.x % 128) / 32;
  const int lane = threadIdx.x % 32;
  const int row_base = row0 + consumer * 64 + warp * 16 + lane / 4;
  const int col_base = col0 + 2 * (lane % 4);
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float* p_row = part + static_cast<size_t>(row_base + 8 * h) * ld + col_base;
#pragma unroll
    for (int j = 0; j < BN / 8; ++j) {
      *reinterpret_cast<float2*>(p_row + 8 * j) = make_float2(d[4 * j + 2 * h],
                                                              d[4 * j + 2 * h + 1]);
    }
  }
}

template <typename T>
__device__ __forceinline__ uint4 pack8(const float (&sum)[8]) {
  return make_uint4(kernels::pack2<T>(sum[0], sum[1]), kernels::pack2<T>(sum[2], sum[3]),
                    kernels::pack2<T>(sum[4], sum[5]), kernels::pack2<T>(sum[6], sum[7]));
}

// sum[0..8) += the 8 floats at p (16-byte aligned).
__device__ __forceinline__ void add8(float (&sum)[8], const float* p) {
  const float4 lo = *reinterpret_cast<const float4*>(p);
  const float4 hi = *reinterpret_cast<const float4*>(p + 4);
  sum[0] += lo.x; sum[1] += lo.y; sum[2] += lo.z; sum[3] += lo.w;
  sum[4] += hi.x; sum[5] += hi.y; sum[6] += hi.z; sum[7] += hi.w;
}

// C = the sum of the `splits` partial products, one thread per 8 columns of a row, the
// parts added in a fixed order (deterministic) and rounded once.
template <typename T>
__global__ void reduce_splits(const float* __restrict__ partials, T* __restrict__ C, int M,
                              int N, int ld, size_t part_stride, int splits) {
  const int chunks = ceil_div(N, 8);
  const long long index = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (index >= static_cast<long long>(M) * chunks) return;
  const int row = static_cast<int>(index / chunks), col = static_cast<int>(index % chunks) * 8;
  const float* p = partials + static_cast<size_t>(row) * ld + col;
  float sum[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
  for (int s = 0; s < splits; ++s, p += part_stride) add8(sum, p);
  store8<T>(C, N, row, col, pack8<T>(sum));
}

// Stream-K (after CUTLASS's and Osama et al.'s): the last `sk_tiles` tiles of the raster
// order, the ones that would leave SMs idle in a last partial wave, are cut into
// sk_tiles x k_tiles slices shared evenly by all `grid` CTAs, each taking one contiguous
// run of them; the other tiles go whole to the CTAs in turn, as without stream-K. A run
// covers parts of one or more tiles; a CTA that covers a whole tile stores it to C, and
// the other parts go to a workspace of whole 128 x BN fp32 tiles, one plane per CTA that
// touches the tile, for reduce_stream_k. This is the CTA that holds slice i of that space.
__host__ __device__ __forceinline__ int stream_k_owner(long long slice, long long total,
                                                       int grid) {
  return static_cast<int>(((slice + 1) * grid - 1) / total);
}

// The workspace planes a stream-K schedule needs: every CTA holds at least total / grid
// slices, so a tile's k_tiles slices meet at most (k_tiles - 1) / that + 2 CTAs.
int stream_k_planes(long long total, int grid, int k_tiles) {
  return static_cast<int>((k_tiles - 1) / (total / grid) + 2);
}

// A CTA's stream-K run, tile by tile: slices [kt_begin, kt_end) of stream-K tile `j`, and
// the workspace plane of this CTA for that tile (counted from the tile's first CTA; -1 where
// the run holds the whole tile, which then goes straight to C). Kept apart from the
// whole-tile loop, which stays as it was before stream-K: with one work list walking both,
// v7's 128-wide tiles lost about a tenth on nearly every shape, the 256-wide ones nothing
// (results/h100x1/logs/gemm-sweep-20261125T1840Z.json); with the loops apart they ran as
// before again (results/h100x1/gemm-sweep-20261125T1846Z.json). Why was not profiled.
class StreamKRun {
 public:
  __device__ StreamKRun(int sk_tiles, int k_tiles)
      : k_tiles_(k_tiles), total_(sk_tiles * k_tiles),
        slice_(static_cast<int>(static_cast<long long>(total_) * blockIdx.x / gridDim.x)),
        end_(static_cast<int>(static_cast<long long>(total_) * (blockIdx.x + 1) / gridDim.x)) {}

  __device__ __forceinline__ bool next(int& j, int& kt_begin, int& kt_end, int& plane) {
    if (slice_ >= end_) return false;
    j = slice_ / k_tiles_;
    kt_begin = slice_ % k_tiles_;
    kt_end = min(k_tiles_, kt_begin + end_ - slice_);
    plane = kt_begin == 0 && kt_end == k_tiles_
                ? -1
                : static_cast<int>(blockIdx.x) -
                      stream_k_owner(static_cast<long long>(j) * k_tiles_, total_, gridDim.x);
    slice_ += kt_end - kt_begin;
    return true;
  }

 private:
  int k_tiles_, total_, slice_, end_;
};

// C's stream-K tiles = the sum of their parts' planes, in plane order (deterministic): one
// thread per 8 columns of a tile row, blockIdx.x the tile (tiles one CTA held whole were
// stored by the GEMM kernel). A block per tile with a loop over its rows was latency-bound:
// stream-K lost to the plain schedule on every shape of the first sweep with it.
template <typename T, int BN>
__global__ void reduce_stream_k(const float* __restrict__ partials, T* __restrict__ C, int M,
                                int N, int tiles_m, int tiles_n, int sk_tiles, int k_tiles,
                                int grid) {
  const int j = blockIdx.x;
  const int c = blockIdx.y * blockDim.x + threadIdx.x;
  if (c >= BM * BN / 8) return;
  const long long total = static_cast<long long>(sk_tiles) * k_tiles;
  const int first = stream_k_owner(static_cast<long long>(j) * k_tiles, total, grid);
  const int last = stream_k_owner(static_cast<long long>(j + 1) * k_tiles - 1, total, grid);
  if (first == last) return;
  const int2 tile = kernels::grouped_tile(tiles_m * tiles_n - sk_tiles + j, tiles_m, tiles_n,
                                          GROUP_M);
  const int r = c / (BN / 8), col8 = c % (BN / 8) * 8;
  const int row = tile.x * BM + r, col = tile.y * BN + col8;
  if (row >= M || col >= N) return;
  float sum[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
  for (int plane = 0; plane <= last - first; ++plane) {
    add8(sum, partials + (static_cast<size_t>(plane) * sk_tiles + j) * BM * BN +
                  static_cast<size_t>(r) * BN + col8);
  }
  store8<T>(C, N, row, col, pack8<T>(sum));
}

template <typename T, int BN, int CTAS>
__global__ void __launch_bounds__(Roles<CTAS>::THREADS, CTAS)
    gemm_v7_kernel(const __grid_constant__ CUtensorMap a_map,
                   const __grid_constant__ CUtensorMap b_map, T* __restrict__ C, int M, int N,
                   int K, float* __restrict__ partials, int splits, int split_slices,
                   int sk_tiles) {
#if V6_ARCH_OK
  using Shape = Tile<BN, CTAS>;
  using Role = Roles<CTAS>;
  constexpr int STAGES = Shape::STAGES;
  extern __shared__ __align__(ALIGN) uint8_t v7_smem[];
  __shared__ __align__(8) uint64_t full[STAGES];
  __shared__ __align__(8) uint64_t empty[STAGES];
  uint8_t* slots = v7_smem + (ALIGN - kernels::smem_address(v7_smem) % ALIGN) % ALIGN;

  const int tiles_m = ceil_div(M, BM), tiles_n = ceil_div(N, BN);
  const int tiles = tiles_m * tiles_n;
  const int k_tiles = ceil_div(K, BK);
  // launch_v7 refuses stream-K with two CTAs per SM, so its loops compile out there: with
  // them, ptxas spilled 12 bytes within those 96 registers.
  if constexpr (CTAS > 1) sk_tiles = 0;
  // Work unit u < units: tile u % whole_tiles, K part u / whole_tiles; then stream-K.
  const int whole_tiles = tiles - sk_tiles;
  const int units = whole_tiles * splits;
  const int warpgroup = threadIdx.x / 128;

  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      hopper::mbarrier_init(&full[s], 1);                // the producer's expect_tx arrival
      hopper::mbarrier_init(&empty[s], CONSUMERS * 4);   // one arrival per consumer warp
    }
    hopper::mbarrier_init_fence();
  }
  __syncthreads();

  if (warpgroup == Role::PRODUCER) {
    if constexpr (Role::MOVES_REGISTERS) hopper::release_registers<PRODUCER_REGISTERS>();
    if (threadIdx.x == Role::PRODUCER * 128) {
      hopper::tma_prefetch_descriptor(&a_map);
      hopper::tma_prefetch_descriptor(&b_map);
      int slice = 0;  // slices this CTA has loaded, over all its tiles
      auto load = [&](int tile_index, int kt_begin, int kt_end) {
        const int2 tile = kernels::grouped_tile(tile_index, tiles_m, tiles_n, GROUP_M);
        for (int kt = kt_begin; kt < kt_end; ++kt, ++slice) {
          const int s = slice % STAGES;
          // The slot's previous slice (slice - STAGES) must have been freed by both
          // consumers: the (slice / STAGES)-th completion of empty[s].
          if (slice >= STAGES) hopper::mbarrier_wait(&empty[s], ((slice / STAGES) + 1) & 1);
          uint8_t* slot = slots + s * Shape::SLOT;
          hopper::mbarrier_arrive_expect_tx(&full[s], Shape::SLOT);
          hopper::tma_load_2d(slot, &a_map, &full[s], kt * BK, tile.x * BM);
#pragma unroll
          for (int j = 0; j < BN / SLAB; ++j) {
            hopper::tma_load_2d(slot + A_SLOT + j * B_SLAB, &b_map, &full[s],
                                tile.y * BN + j * SLAB, kt * BK);
          }
        }
      };
      for (int u = blockIdx.x; u < units; u += gridDim.x) {
        const int kt_begin = (u / whole_tiles) * split_slices;
        load(u % whole_tiles, kt_begin, min(k_tiles, kt_begin + split_slices));
      }
      if constexpr (CTAS > 1) return;
      StreamKRun run(sk_tiles, k_tiles);
      for (int j, kt_begin, kt_end, plane; run.next(j, kt_begin, kt_end, plane);) {
        load(whole_tiles + j, kt_begin, kt_end);
      }
    }
    return;
  }

  if constexpr (Role::MOVES_REGISTERS) hopper::claim_registers<CONSUMER_REGISTERS>();
  const int consumer = warpgroup - Role::FIRST_CONSUMER;
  const bool warp_leader = threadIdx.x % 32 == 0;
  float d[Shape::ACCUMULATORS];
  int slice = 0;
  // Slices [kt_begin, kt_end) of one tile into d, then their slots back to the producer.
  auto compute = [&](int kt_begin, int kt_end) {
#pragma unroll
    for (int i = 0; i < Shape::ACCUMULATORS; ++i) d[i] = 0.0f;
    for (int kt = kt_begin; kt < kt_end; ++kt, ++slice) {
      const int s = slice % STAGES;
      hopper::mbarrier_wait(&full[s], (slice / STAGES) & 1);
      const unsigned int a_tile =
          kernels::smem_address(slots + s * Shape::SLOT) + consumer * 64 * 128;
      const unsigned int b_tile = kernels::smem_address(slots + s * Shape::SLOT + A_SLOT);
      hopper::wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < BK / 16; ++kk) {
        const uint64_t a = hopper::swizzle128_descriptor(a_tile + kk * 32, 16, 1024);
        const uint64_t b = hopper::swizzle128_descriptor(b_tile + kk * 16 * 128, B_SLAB, 1024);
        wgmma_tile<T, BN>(d, a, b);
      }
      hopper::wgmma_commit();
      // Keep this slice's group in flight; once the previous one is done, free its slot.
      hopper::wgmma_wait<1>();
      if (kt > kt_begin && warp_leader) hopper::mbarrier_arrive(&empty[(slice - 1) % STAGES]);
    }
    hopper::wgmma_wait<0>();
    // The tile's last slot is free too; the producer may be waiting on it for the next tile.
    if (warp_leader) hopper::mbarrier_arrive(&empty[(slice - 1) % STAGES]);
  };
  // Whole tiles (or split-K's parts: part u / whole_tiles of tile u % whole_tiles, CTAs
  // running together sharing a K range, so the raster order's L2 reuse holds within it).
  for (int u = blockIdx.x; u < units; u += gridDim.x) {
    const int2 tile = kernels::grouped_tile(u % whole_tiles, tiles_m, tiles_n, GROUP_M);
    const int kt_begin = (u / whole_tiles) * split_slices;
    compute(kt_begin, min(k_tiles, kt_begin + split_slices));
    if (splits == 1) {
      store_tile<T, BN>(d, C, M, N, tile.x * BM, tile.y * BN, consumer);
    } else {
      const int ld = tiles_n * BN;
      store_partial<BN>(d, partials + static_cast<size_t>(u / whole_tiles) * tiles_m * BM * ld,
                        ld, tile.x * BM, tile.y * BN, consumer);
    }
  }
  if constexpr (CTAS > 1) return;
  StreamKRun run(sk_tiles, k_tiles);
  for (int j, kt_begin, kt_end, plane; run.next(j, kt_begin, kt_end, plane);) {
    const int2 tile = kernels::grouped_tile(whole_tiles + j, tiles_m, tiles_n, GROUP_M);
    compute(kt_begin, kt_end);
    if (plane < 0) {
      store_tile<T, BN>(d, C, M, N, tile.x * BM, tile.y * BN, consumer);
    } else {
      store_partial<BN>(d, partials + (static_cast<size_t>(plane) * sk_tiles + j) * BM * BN, BN,
                        0, 0, consumer);
    }
  }
#endif
}

int multiprocessors() {
  int device = 0, count = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device) != cudaSuccess) {
    return 0;
  }
  return count;
}

// The fp32 workspace one launch needs: split-K's parts of the whole-tile m x n result, or
// stream-K's planes of its tiles (none without either).
long long workspace_floats(int m, int n, int k, int block_n, int splits, int sk_tiles,
                           int sms) {
  const long long tiles_m = ceil_div(m, BM), tiles_n = ceil_div(n, block_n);
  if (sk_tiles > 0) {
    const int k_tiles = ceil_div(k, BK);
    return static_cast<long long>(stream_k_planes(static_cast<long long>(sk_tiles) * k_tiles,
                                                  sms, k_tiles)) *
           sk_tiles * BM * block_n;
  }
  return splits > 1 ? splits * tiles_m * BM * tiles_n * block_n : 0;
}

template <typename T, int BN, int CTAS>
cudaError_t launch_v7(const void* a, const void* b, void* c, int m, int n, int k, int lda,
                      int ldb, int splits, int sk_tiles, float* partials,
                      CUtensorMapDataType type, cudaStream_t stream) {
  using Shape = Tile<BN, CTAS>;
  // Stream-K's shares and its workspace's planes are counted for one CTA per SM.
  if (CTAS > 1 && sk_tiles > 0) return cudaErrorInvalidValue;
  CUtensorMap a_map, b_map;
  // Each operand's map covers its real k (and B its real n) with its own row stride: ops.py
  // copies only the operand whose rows need moving, and TMA's zero fill pads the rest.
  if (!hopper::encode_map(&a_map, type, a, m, k, BM, lda) ||
      !hopper::encode_map(&b_map, type, b, k, n, BK, ldb)) {
    return cudaErrorInvalidValue;
  }
  const int sms = multiprocessors();
  if (sms <= 0) return cudaErrorInvalidDevice;
  // Every part gets at least one slice: `splits` parts of split_slices, the last shorter.
  const int k_tiles = ceil_div(k, BK);
  const int split_slices = ceil_div(k_tiles, splits);
  splits = ceil_div(k_tiles, split_slices);
  const int tiles_m = ceil_div(m, BM), tiles_n = ceil_div(n, BN);
  const long long tiles = static_cast<long long>(tiles_m) * tiles_n;
  // Stream-K shares its slices among all SMs, each at least one.
  if (sk_tiles < 0 || sk_tiles > tiles || (sk_tiles > 0 && splits > 1) ||
      static_cast<long long>(sk_tiles) * k_tiles < (sk_tiles > 0 ? sms : 0)) {
    return cudaErrorInvalidValue;
  }
  const long long units = sk_tiles > 0 ? sms : tiles * splits;
  const long long resident = static_cast<long long>(CTAS) * sms;
  const unsigned int blocks = static_cast<unsigned int>(units < resident ? units : resident);
  cudaError_t status = cudaFuncSetAttribute(
      gemm_v7_kernel<T, BN, CTAS>, cudaFuncAttributeMaxDynamicSharedMemorySize,
      Shape::SMEM_BYTES);
  if (status != cudaSuccess) return status;
  if constexpr (CTAS > 1) {
    // A hint that the SM's unified L1 / shared memory be all shared memory, so that both
    // rings fit beside each other (TMA's loads bypass L1, so the kernel loses no cache).
    status = cudaFuncSetAttribute(gemm_v7_kernel<T, BN, CTAS>,
                                  cudaFuncAttributePreferredSharedMemoryCarveout,
                                  cudaSharedmemCarveoutMaxShared);
    if (status != cudaSuccess) return status;
  }
  gemm_v7_kernel<T, BN, CTAS><<<blocks, Roles<CTAS>::THREADS, Shape::SMEM_BYTES, stream>>>(
      a_map, b_map, static_cast<T*>(c), m, n, k, partials, splits, split_slices, sk_tiles);
  constexpr int REDUCE_THREADS = 256;
  if (sk_tiles > 0) {
    const dim3 reduce_grid(sk_tiles, ceil_div(BM * BN / 8, REDUCE_THREADS));
    reduce_stream_k<T, BN><<<reduce_grid, REDUCE_THREADS, 0, stream>>>(
        partials, static_cast<T*>(c), m, n, tiles_m, tiles_n, sk_tiles, k_tiles,
        static_cast<int>(blocks));
    return cudaGetLastError();
  }
  if (splits == 1) return cudaGetLastError();
  const int ld = tiles_n * BN;
  const long long threads = static_cast<long long>(m) * ceil_div(n, 8);
  reduce_splits<T><<<static_cast<unsigned int>((threads + REDUCE_THREADS - 1) / REDUCE_THREADS),
                     REDUCE_THREADS, 0, stream>>>(partials, static_cast<T*>(c), m, n, ld,
                                                  static_cast<size_t>(tiles_m) * BM * ld, splits);
  return cudaGetLastError();
}

template <typename T>
cudaError_t dispatch_v7(const void* a, const void* b, void* c, int m, int n, int k, int lda,
                        int ldb, int block_n, int splits, int sk_tiles, int ctas_per_sm,
                        float* partials, CUtensorMapDataType type, cudaStream_t stream) {
  const bool workspace = splits > 1 || sk_tiles > 0;
  if (k <= 0 || lda % 8 != 0 || lda < k || ldb % 8 != 0 || ldb < n ||
      !kernels::aligned16(a) || !kernels::aligned16(b) || !kernels::aligned16(c) || splits < 1 ||
      (workspace && (partials == nullptr || !kernels::aligned16(partials)))) {
    return cudaErrorInvalidValue;  // ops.py copies operands before they come here
  }
  if (block_n == 256 && ctas_per_sm == 1) {
    return launch_v7<T, 256, 1>(a, b, c, m, n, k, lda, ldb, splits, sk_tiles, partials, type,
                                stream);
  }
  if (block_n == 192 && ctas_per_sm == 1) {
    return launch_v7<T, 192, 1>(a, b, c, m, n, k, lda, ldb, splits, sk_tiles, partials, type,
                                stream);
  }
  if (block_n == 128 && ctas_per_sm == 1) {
    return launch_v7<T, 128, 1>(a, b, c, m, n, k, lda, ldb, splits, sk_tiles, partials, type,
                                stream);
  }
  if (block_n == 128 && ctas_per_sm == 2) {
    return launch_v7<T, 128, 2>(a, b, c, m, n, k, lda, ldb, splits, sk_tiles, partials, type,
                                stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace

extern "C" long long gemm_v7_workspace_floats(int m, int n, int k, int block_n, int splits,
                                              int sk_tiles) {
  const int sms = multiprocessors();
  return sms <= 0 ? -1 : workspace_floats(m, n, k, block_n, splits, sk_tiles, sms);
}

extern "C" cudaError_t gemm_v7_bf16(const void* a, const void* b, void* c, int m, int n, int k,
                                    int lda, int ldb, int block_n, int splits, int sk_tiles,
                                    int ctas_per_sm, float* partials, cudaStream_t stream) {
  return dispatch_v7<__nv_bfloat16>(a, b, c, m, n, k, lda, ldb, block_n, splits, sk_tiles,
                                    ctas_per_sm, partials, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
                                    stream);
}

extern "C" cudaError_t gemm_v7_f16(const void* a, const void* b, void* c, int m, int n, int k,
                                   int lda, int ldb, int block_n, int splits, int sk_tiles,
                                   int ctas_per_sm, float* partials, cudaStream_t stream) {
  return dispatch_v7<__half>(a, b, c, m, n, k, lda, ldb, block_n, splits, sk_tiles, ctas_per_sm,
                             partials, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, stream);
}
