// NeoX-style rotary embedding in place on q and k: the first and second halves of each head's
// rotary dims are rotated as pairs. Written for ktx init's tests, modelled on SGLang's rope.
#include <cuda_bf16.h>
#include <algorithm>
#include <cstdint>

template <typename T>
__global__ void rope_neox_kernel(const int64_t* __restrict__ positions, T* __restrict__ query,
                                 T* __restrict__ key, const float* __restrict__ cos_sin_cache,
                                 const int rot_dim, const int num_heads, const int num_kv_heads,
                                 const int head_size) {
  const int token = blockIdx.x;
  const int64_t pos = positions[token];
  const float* cache = cos_sin_cache + pos * rot_dim;
  const int half = rot_dim / 2;
  for (int i = threadIdx.x; i < num_heads * half; i += blockDim.x) {
    const int head = i / half;
    const int r = i % half;
    T* q = query + (token * num_heads + head) * head_size;
    const float c = cache[r], s = cache[half + r];
    const float x = static_cast<float>(q[r]), y = static_cast<float>(q[half + r]);
    q[r] = static_cast<T>(x * c - y * s);
    q[half + r] = static_cast<T>(y * c + x * s);
  }
  for (int i = threadIdx.x; i < num_kv_heads * half; i += blockDim.x) {
    const int head = i / half;
    const int r = i % half;
    T* kp = key + (token * num_kv_heads + head) * head_size;
    const float c = cache[r], s = cache[half + r];
    const float x = static_cast<float>(kp[r]), y = static_cast<float>(kp[half + r]);
    kp[r] = static_cast<T>(x * c - y * s);
    kp[half + r] = static_cast<T>(y * c + x * s);
  }
}

void rope_neox(const int64_t* positions, __nv_bfloat16* query, __nv_bfloat16* key,
               const float* cos_sin_cache, int num_tokens, int rot_dim, int num_heads,
               int num_kv_heads, int head_size, cudaStream_t stream) {
  dim3 grid(num_tokens);
  dim3 block(std::min(num_heads * rot_dim / 2, 512));
  rope_neox_kernel<__nv_bfloat16><<<grid, block, 0, stream>>>(
      positions, query, key, cos_sin_cache, rot_dim, num_heads, num_kv_heads, head_size);
}
