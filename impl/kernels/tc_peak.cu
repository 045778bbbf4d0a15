// Tensor-core ceilings: how many bf16 FLOP/s each MMA instruction family can deliver on
// this GPU when nothing else is in the way (no global memory, no address arithmetic, no
// pipeline). They bound the ladder's tensor-core rungs from above: v4 (WMMA, which
// compiles to mma.sync) and v5 (mma.sync) cannot beat the mma.sync ceiling, v6 (wgmma)
// cannot beat the wgmma ceiling. Operand values are fixed non-zero bf16 bit patterns: the
// timing does not depend on them, and the results are only stored so that no work can be
// dropped.
//
//   mma.sync: each warp runs kChains independent m16n8k16 accumulation chains (enough in
//             flight to cover the instruction's latency), kWarpsPerBlock warps per block,
//             kBlocksPerSm blocks per SM.
//   wgmma:    each of two warpgroups per block issues m64n256k16 from one shared-memory
//             A tile and B tile (the descriptors v6 uses), one block per SM, one group in
//             flight behind the one being issued, as v6's consumers run.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "device_common.cuh"
#include "hopper.cuh"
#include "launchers.h"

namespace {

constexpr int kChains = 8;
constexpr int kWarpsPerBlock = 8;
constexpr int kBlocksPerSm = 4;
constexpr long long kMmaSyncFlop = 2LL * 16 * 8 * 16;     // one m16n8k16
constexpr long long kWgmmaFlop = 2LL * 64 * 256 * 16;     // one m64n256k16
constexpr int kWgmmaWarpgroups = 2;

__global__ void __launch_bounds__(32 * kWarpsPerBlock)
    mma_sync_peak_kernel(float* out, int iterations) {
  const unsigned int pattern = 0x3F803F80u ^ (threadIdx.x & 7u);  // bf16 pairs near 1.0
  const unsigned int a[4] = {pattern, pattern ^ 1u, pattern ^ 2u, pattern ^ 3u};
  float acc[kChains][4] = {};
  for (int it = 0; it < iterations; ++it) {
#pragma unroll
    for (int c = 0; c < kChains; ++c) kernels::mma_16816<__nv_bfloat16>(acc[c], a, pattern, a[1]);
  }
  float sum = 0.0f;
#pragma unroll
  for (int c = 0; c < kChains; ++c) sum += acc[c][0] + acc[c][1] + acc[c][2] + acc[c][3];
  out[blockIdx.x * blockDim.x + threadIdx.x] = sum;
}

__global__ void __launch_bounds__(128 * kWgmmaWarpgroups, 1)
    wgmma_peak_kernel(float* out, int iterations) {
#if V6_ARCH_OK
  __shared__ __align__(1024) __nv_bfloat16 a_tile[64 * 64];
  __shared__ __align__(1024) __nv_bfloat16 b_tile[64 * 256];
  for (int i = threadIdx.x; i < 64 * 64; i += blockDim.x) {
    a_tile[i] = __float2bfloat16_rn(1.0f + (i & 7) * 0.125f);
  }
  for (int i = threadIdx.x; i < 64 * 256; i += blockDim.x) {
    b_tile[i] = __float2bfloat16_rn(1.0f - (i & 7) * 0.0625f);
  }
  // The tiles were written through the generic proxy; wgmma reads through the async proxy.
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
  __syncthreads();
  const unsigned int a_address = kernels::smem_address(a_tile);
  const unsigned int b_address = kernels::smem_address(b_tile);
  float d[128];
#pragma unroll
  for (int i = 0; i < 128; ++i) d[i] = 0.0f;
  for (int it = 0; it < iterations; ++it) {
    hopper::wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
      hopper::wgmma_m64n256k16<__nv_bfloat16>(
          d, hopper::swizzle128_descriptor(a_address + kk * 32, 16, 1024),
          hopper::swizzle128_descriptor(b_address + kk * 16 * 128, 64 * 64 * 2, 1024));
    }
    hopper::wgmma_commit();
    hopper::wgmma_wait<1>();
  }
  hopper::wgmma_wait<0>();
  float sum = 0.0f;
#pragma unroll
  for (int i = 0; i < 128; ++i) sum += d[i];
  out[blockIdx.x * blockDim.x + threadIdx.x] = sum;
#endif
}

int sm_count() {
  int device = 0, count = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return 0;
  if (cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device) != cudaSuccess) {
    return 0;
  }
  return count;
}

}  // namespace

extern "C" long long tc_probe_threads(int wgmma) {
  const long long blocks = wgmma ? sm_count() : static_cast<long long>(sm_count()) * kBlocksPerSm;
  return blocks * (wgmma ? 128 * kWgmmaWarpgroups : 32 * kWarpsPerBlock);
}

extern "C" long long tc_probe_flop(int wgmma, int iterations) {
  if (wgmma) return sm_count() * kWgmmaWarpgroups * 4LL * iterations * kWgmmaFlop;
  return sm_count() * kBlocksPerSm * kWarpsPerBlock * kChains * static_cast<long long>(iterations) *
         kMmaSyncFlop;
}

extern "C" cudaError_t tc_probe(int wgmma, float* out, int iterations, cudaStream_t stream) {
  const int sms = sm_count();
  if (sms == 0) return cudaErrorNoDevice;
  if (wgmma) {
    wgmma_peak_kernel<<<sms, 128 * kWgmmaWarpgroups, 0, stream>>>(out, iterations);
  } else {
    mma_sync_peak_kernel<<<sms * kBlocksPerSm, 32 * kWarpsPerBlock, 0, stream>>>(out, iterations);
  }
  return cudaGetLastError();
}
