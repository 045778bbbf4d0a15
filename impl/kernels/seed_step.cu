// The course study's training step, kernel for kernel, as its phase 1 designed it:
//
//   forward      y[rows x out] = x[rows x in] . W[in x out]      one thread per ROW of y
//   weight grad  gW[in x out]  = x^T . grad_out[rows x out]       one thread per element of gW
//   SGD update   W -= lr * gW                                     one thread per element
//
// The study's shapes are x 1024x512 and W 512x512, fp32, row-major; any size works here.
// These kernels are deliberately naive (they are the baseline the GEMM ladder in gemm.cu
// improves on), but exact in the usual fp32 sense: one fused multiply-add per term,
// summed in index order.
#include <cuda_runtime.h>

#include "launchers.h"

namespace {

constexpr int kThreads = 128;

// One thread owns a whole row of y: it reads its row of x (strided across the warp,
// so poorly coalesced; that is the design being measured) and all of W (the same
// address across the warp, so a broadcast).
__global__ void seed_forward_kernel(const float* __restrict__ x, const float* __restrict__ w,
                                    float* __restrict__ y, int rows, int in_features,
                                    int out_features) {
  const int row = blockIdx.x * blockDim.x + threadIdx.x;
  if (row >= rows) return;
  const float* x_row = x + static_cast<size_t>(row) * in_features;
  float* y_row = y + static_cast<size_t>(row) * out_features;
  for (int col = 0; col < out_features; ++col) {
    float sum = 0.0f;
    for (int p = 0; p < in_features; ++p) {
      sum = fmaf(x_row[p], w[static_cast<size_t>(p) * out_features + col], sum);
    }
    y_row[col] = sum;
  }
}

// gW[p][col] = sum_r x[r][p] * grad_out[r][col]. Threads of a warp take consecutive
// columns, so grad_out reads coalesce and x reads are a broadcast.
__global__ void seed_weight_grad_kernel(const float* __restrict__ x,
                                        const float* __restrict__ grad_out,
                                        float* __restrict__ grad_w, int rows, int in_features,
                                        int out_features) {
  const long long index = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (index >= static_cast<long long>(in_features) * out_features) return;
  const int p = static_cast<int>(index / out_features);
  const int col = static_cast<int>(index % out_features);
  float sum = 0.0f;
  for (int r = 0; r < rows; ++r) {
    sum = fmaf(x[static_cast<size_t>(r) * in_features + p],
               grad_out[static_cast<size_t>(r) * out_features + col], sum);
  }
  grad_w[index] = sum;
}

__global__ void seed_sgd_kernel(float* __restrict__ w, const float* __restrict__ grad, float lr,
                                long long count) {
  const long long index = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (index < count) w[index] -= lr * grad[index];
}

unsigned int blocks_for(long long items) {
  return static_cast<unsigned int>((items + kThreads - 1) / kThreads);
}

}  // namespace

extern "C" cudaError_t seed_forward_f32(const float* x, const float* w, float* y, int rows,
                                        int in_features, int out_features,
                                        cudaStream_t stream) {
  seed_forward_kernel<<<blocks_for(rows), kThreads, 0, stream>>>(x, w, y, rows, in_features,
                                                                 out_features);
  return cudaGetLastError();
}

extern "C" cudaError_t seed_weight_grad_f32(const float* x, const float* grad_out, float* grad_w,
                                            int rows, int in_features, int out_features,
                                            cudaStream_t stream) {
  const long long count = static_cast<long long>(in_features) * out_features;
  seed_weight_grad_kernel<<<blocks_for(count), kThreads, 0, stream>>>(
      x, grad_out, grad_w, rows, in_features, out_features);
  return cudaGetLastError();
}

extern "C" cudaError_t seed_sgd_f32(float* w, const float* grad, float lr, long long count,
                                    cudaStream_t stream) {
  seed_sgd_kernel<<<blocks_for(count), kThreads, 0, stream>>>(w, grad, lr, count);
  return cudaGetLastError();
}
