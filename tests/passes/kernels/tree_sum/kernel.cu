// tree_sum: a test kernel for warp-reduce (not part of the suite).
//
//   out[r] = sum_i x[r, i]        fp32, one block of 256 threads per row
//
// Each thread sums a strided part of its row, then the block reduces the partial sums with the
// textbook shared-memory tree (halving stride, a barrier per step).

#define TREE_BLOCK 256

__global__ void tree_sum_kernel(float* __restrict__ out, const float* __restrict__ x, const int n) {
  __shared__ float sdata[TREE_BLOCK];
  const unsigned tid = threadIdx.x;
  const float* __restrict__ row = x + (long long)blockIdx.x * n;
  float acc = 0.f;
  for (int i = tid; i < n; i += blockDim.x) acc += row[i];
  sdata[tid] = acc;
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
    if (tid < s) {
      sdata[tid] += sdata[tid + s];
    }
    __syncthreads();
  }
  if (tid == 0) out[blockIdx.x] = sdata[0];
}

#ifndef __CUDACC_RTC__
void launch_tree_sum(float* out, const float* x, int rows, int n) {
  tree_sum_kernel<<<rows, TREE_BLOCK>>>(out, x, n);
}
#endif
