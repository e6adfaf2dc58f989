// Per-block partial sums with the block size from a header macro that is an expression of
// other macros (THREADBLOCK_SIZE = WARP_COUNT * WARP_LANES).
#include "launch_util.cuh"

__global__ void partial_sums(float* __restrict__ partial, const float* __restrict__ x, int n) {
  __shared__ float s[THREADBLOCK_SIZE];
  float acc = 0.0f;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) acc += x[i];
  s[threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.x == 0) {
    float t = 0.0f;
    for (int j = 0; j < THREADBLOCK_SIZE; j++) t += s[j];
    partial[blockIdx.x] = t;
  }
}

void partial_sums_launch(float* partial, const float* x, int n, int blocks) {
  partial_sums<<<blocks, THREADBLOCK_SIZE>>>(partial, x, n);
}
