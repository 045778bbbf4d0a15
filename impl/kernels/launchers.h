// Host-side launchers of the hand-written kernels: raw device pointers, sizes, a stream.
//
// No torch header is included here or in any .cu file, so each .cu compiles with bare
// `nvcc -arch=sm_90 -std=c++17 -c` on a machine without a GPU (tests/test_kernels.py).
// bindings.cpp is the only file that sees torch tensors.
//
// Conventions shared by every launcher:
// - all matrices are dense row-major; C[m x n] = A[m x k] . B[k x n];
// - every size is at most 2^30 and every matrix has at most INT_MAX elements (bindings.cpp
//   checks), so kernels index with 32-bit row/column values and a 64-bit row offset;
// - m, n >= 1 (bindings.cpp returns early for empty outputs), k >= 0 (k == 0 gives zeros);
// - the return value is cudaGetLastError() right after the launch: configuration
//   errors surface here, asynchronous faults at the next synchronising call.
// 16-bit element types travel as void* so this header needs no cuda_bf16.h.
#pragma once

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

// seed_step.cu: the course study's three kernels.
cudaError_t seed_forward_f32(const float* x, const float* w, float* y, int rows, int in_features,
                             int out_features, cudaStream_t stream);
cudaError_t seed_weight_grad_f32(const float* x, const float* grad_out, float* grad_w, int rows,
                                 int in_features, int out_features, cudaStream_t stream);
cudaError_t seed_sgd_f32(float* w, const float* grad, float lr, long long count,
                         cudaStream_t stream);

// gemm.cu: the GEMM ladder (see the header comment of gemm.cu for the versions).
cudaError_t gemm_v1_f32(const float* a, const float* b, float* c, int m, int n, int k,
                        cudaStream_t stream);
cudaError_t gemm_v1c_f32(const float* a, const float* b, float* c, int m, int n, int k,
                         cudaStream_t stream);
cudaError_t gemm_v2_f32(const float* a, const float* b, float* c, int m, int n, int k,
                        cudaStream_t stream);
cudaError_t gemm_v3_f32(const float* a, const float* b, float* c, int m, int n, int k,
                        cudaStream_t stream);
// v4 (WMMA), v5 (mma.sync): a, b, c hold __nv_bfloat16 / __half; c has the input dtype,
// accumulation is fp32.
cudaError_t gemm_v4_bf16(const void* a, const void* b, void* c, int m, int n, int k,
                         cudaStream_t stream);
cudaError_t gemm_v4_f16(const void* a, const void* b, void* c, int m, int n, int k,
                        cudaStream_t stream);
cudaError_t gemm_v5_bf16(const void* a, const void* b, void* c, int m, int n, int k,
                         cudaStream_t stream);
cudaError_t gemm_v5_f16(const void* a, const void* b, void* c, int m, int n, int k,
                        cudaStream_t stream);
// gemm_hopper.cu: v6 (TMA + wgmma, sm_90a). It runs v5's kernel instead when TMA cannot
// address the operands; gemm_v6_uses_tma says which (1: TMA path, 0: v5's kernel), given
// a 16-byte aligned output.
int gemm_v6_uses_tma(const void* a, const void* b, int n, int k);
cudaError_t gemm_v6_bf16(const void* a, const void* b, void* c, int m, int n, int k,
                         cudaStream_t stream);
cudaError_t gemm_v6_f16(const void* a, const void* b, void* c, int m, int n, int k,
                        cudaStream_t stream);
// gemm_v7.cu: v7 (persistent TMA + wgmma, sm_90a). A's rows are lda elements apart
// (lda >= k), B's ldb (ldb >= n); lda and ldb must be multiples of 8 and a, b, c 16-byte
// aligned (ops.py copies an operand where they are not); k is any size >= 1; c is dense
// m x n; block_n (128 or 256) is the tile width. splits > 1 cuts K into that many parts
// (split-K); sk_tiles > 0 shares the last sk_tiles tiles' slices among all SMs (stream-K;
// needs splits == 1 and sk_tiles · ceil(k / 64) >= SMs). Either keeps fp32 sums in `partials` (16-byte aligned, gemm_v7_workspace_floats
// floats) until a second kernel adds them into c. ctas_per_sm is 1, or 2 (two CTAs share
// each SM, each with half the shared-memory ring) with block_n 128 and sk_tiles 0; the
// workspace does not depend on it. Any other input returns cudaErrorInvalidValue before a
// launch.
long long gemm_v7_workspace_floats(int m, int n, int k, int block_n, int splits, int sk_tiles);
cudaError_t gemm_v7_bf16(const void* a, const void* b, void* c, int m, int n, int k, int lda,
                         int ldb, int block_n, int splits, int sk_tiles, int ctas_per_sm,
                         float* partials, cudaStream_t stream);
cudaError_t gemm_v7_f16(const void* a, const void* b, void* c, int m, int n, int k, int lda,
                        int ldb, int block_n, int splits, int sk_tiles, int ctas_per_sm,
                        float* partials, cudaStream_t stream);

// tc_peak.cu: the tensor-core ceiling probes (wgmma = 0: mma.sync, 1: wgmma, sm_90a).
// `out` holds tc_probe_threads(wgmma) floats; tc_probe_flop is the work of one launch.
long long tc_probe_threads(int wgmma);
long long tc_probe_flop(int wgmma, int iterations);
cudaError_t tc_probe(int wgmma, float* out, int iterations, cudaStream_t stream);

#ifdef __cplusplus
}
#endif
