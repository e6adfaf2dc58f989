// A MoE sum over a grid capped at 256 blocks, the token walked by a while loop from a local
// (the grid-stride form that the grid alone does not bound). Written for ktx init's tests.
#include <cuda_bf16.h>
#include <algorithm>

__global__ void moe_sum_while_kernel(__nv_bfloat16* __restrict__ out,
                                     const __nv_bfloat16* __restrict__ input, const int num_tokens,
                                     const int d) {
  int token = blockIdx.x;
  while (token < num_tokens) {
    __nv_bfloat16* row = out + token * d;
    const __nv_bfloat16* in_row = input + token * 2 * d;
    for (int i = threadIdx.x; i < d; i += blockDim.x) {
      row[i] = __float2bfloat16(__bfloat162float(in_row[i]) + __bfloat162float(in_row[d + i]));
    }
    token += gridDim.x;
  }
}

void moe_sum_while(__nv_bfloat16* out, const __nv_bfloat16* input, int num_tokens, int d,
                   cudaStream_t stream) {
  const int blocks = num_tokens < 256 ? num_tokens : 256;
  moe_sum_while_kernel<<<blocks, std::min(d, 1024), 0, stream>>>(out, input, num_tokens, d);
}
