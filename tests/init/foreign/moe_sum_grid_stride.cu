// A MoE sum whose grid is capped at 256 blocks: each block walks tokens with a grid-stride
// loop. Written for ktx init's tests, modelled on SGLang's moe_sum.
#include <cuda_bf16.h>
#include <algorithm>

template <typename T, int TOPK>
__global__ void moe_sum_kernel(T* __restrict__ out, const T* __restrict__ input,
                               const int num_tokens, const int d) {
  for (int t = blockIdx.x; t < num_tokens; t += gridDim.x) {
    for (int i = threadIdx.x; i < d; i += blockDim.x) {
      float x = 0.f;
#pragma unroll
      for (int k = 0; k < TOPK; ++k) x += static_cast<float>(input[(t * TOPK + k) * d + i]);
      out[t * d + i] = static_cast<T>(x);
    }
  }
}

void moe_sum(__nv_bfloat16* out, const __nv_bfloat16* input, int num_tokens, int d,
             cudaStream_t stream) {
  const int blocks = std::min(num_tokens, 256);
  const int threads = std::min(d, 1024);
  moe_sum_kernel<__nv_bfloat16, 2><<<blocks, threads, 0, stream>>>(out, input, num_tokens, d);
}
