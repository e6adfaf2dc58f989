// Scalar GeLU-and-mul: out[t, i] = gelu(x[t, i]) * x[t, d + i]. Written for ktx init's tests,
// modelled on SGLang's act_and_mul; T is deduced at the launch from the pointers' types.
#include <cuda_bf16.h>
#include <algorithm>

template <typename T>
__global__ void gelu_and_mul_kernel(T* __restrict__ out, const T* __restrict__ input, const int d) {
  const int64_t token = blockIdx.x;
  for (int64_t i = threadIdx.x; i < d; i += blockDim.x) {
    const float x = static_cast<float>(input[token * 2 * d + i]);
    const float y = static_cast<float>(input[token * 2 * d + d + i]);
    const float g = 0.5f * x * (1.f + erff(x * 0.70710678f));
    out[token * d + i] = static_cast<T>(g * y);
  }
}

void gelu_and_mul(__nv_bfloat16* out, const __nv_bfloat16* input, int num_tokens, int d,
                  cudaStream_t stream) {
  dim3 grid(num_tokens);
  dim3 block(std::min(d, 1024));
  gelu_and_mul_kernel<<<grid, block, 0, stream>>>(out, input, d);
}
