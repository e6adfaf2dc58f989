// An RMSNorm whose launcher sizes its dynamic shared memory from the block (a warp per row
// slice, block.y warps): written for ktx init's tests, modelled on SGLang-style launchers.
#include <cuda_bf16.h>
#include <algorithm>

template <typename T>
__global__ void rmsnorm_kernel(T* __restrict__ out, const T* __restrict__ input,
                               const T* __restrict__ weight, const int d, const float eps) {
  extern __shared__ float red[];
  const int row = blockIdx.x;
  const int tid = threadIdx.y * blockDim.x + threadIdx.x;
  const int nthreads = blockDim.x * blockDim.y;
  float sum = 0.f;
  for (int i = tid; i < d; i += nthreads) {
    float v = static_cast<float>(input[row * d + i]);
    sum += v * v;
  }
  for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffff, sum, o);
  if (threadIdx.x == 0) red[threadIdx.y] = sum;
  __syncthreads();
  float total = 0.f;
  for (int w = 0; w < blockDim.y; ++w) total += red[w];
  const float scale = rsqrtf(total / d + eps);
  for (int i = tid; i < d; i += nthreads) {
    out[row * d + i] = static_cast<T>(static_cast<float>(input[row * d + i]) * scale *
                                      static_cast<float>(weight[i]));
  }
}

void rmsnorm(__nv_bfloat16* out, const __nv_bfloat16* input, const __nv_bfloat16* weight,
             int num_tokens, int d, float eps, cudaStream_t stream) {
  dim3 grid(num_tokens);
  dim3 block(32, std::min(std::max(d / 256, 1), 32));
  rmsnorm_kernel<<<grid, block, block.y * sizeof(float), stream>>>(out, input, weight, d, eps);
}
