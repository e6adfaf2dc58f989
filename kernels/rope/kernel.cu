// rope: rotary position embedding applied in place to query and key, with a cos/sin cache.
//
// For token t at position pos = positions[t], with half = rot_dim / 2, c = cos_sin_cache[pos, i],
// s = cos_sin_cache[pos, half + i] for i < half, each head's first rot_dim elements are rotated
// pairwise (elements past rot_dim are left alone):
//   NeoX style (IS_NEOX = true):  pair (x, y) = (h[i], h[half + i])
//   GPT-J style (IS_NEOX = false): pair (x, y) = (h[2i], h[2i + 1])
//   x' = x * c - y * s,   y' = y * c + x * s        (fp32, rounded to T)
//
// Tensors:
//   positions      long long [num_tokens]
//   query          T [num_tokens, num_heads, head_size]      row (token) stride query_stride elements
//   key            T [num_tokens, num_kv_heads, head_size]   row stride key_stride; may be nullptr
//   cos_sin_cache  T [max_position, rot_dim]                 cos in [0, half), sin in [half, rot_dim)
//   Heads are contiguous inside a token (head stride = head_size).
//
// Launch mapping (mirrors vLLM's / SGLang's rotary_embedding_kernel):
//   grid  = num_tokens                          blockIdx.x is the token
//   block = min(num_heads * rot_dim / 2, 512)   threads
//   for (i = threadIdx.x; i < num_heads * half; i += blockDim.x): head = i / half, pair = i % half;
//   then the same loop over num_kv_heads * half for key. One scalar pair per thread per step,
//   as in production. Deviation: production does the rotation in T arithmetic; here in fp32.

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace rope_detail {

__device__ __forceinline__ float to_float(float x) { return x; }
__device__ __forceinline__ float to_float(__half x) { return __half2float(x); }
__device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }

template <typename T>
__device__ __forceinline__ T from_float(float x);
template <>
__device__ __forceinline__ float from_float<float>(float x) { return x; }
template <>
__device__ __forceinline__ __half from_float<__half>(float x) { return __float2half_rn(x); }
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}

template <typename T, bool IS_NEOX>
__device__ __forceinline__ void apply_token_rotary_embedding(T* __restrict__ arr,
                                                             const T* __restrict__ cos_ptr,
                                                             const T* __restrict__ sin_ptr,
                                                             const int rot_offset,
                                                             const int embed_dim) {
  int x_index, y_index;
  if (IS_NEOX) {
    x_index = rot_offset;
    y_index = embed_dim + rot_offset;
  } else {
    x_index = 2 * rot_offset;
    y_index = 2 * rot_offset + 1;
  }
  const float cos = to_float(cos_ptr[rot_offset]);
  const float sin = to_float(sin_ptr[rot_offset]);
  const float x = to_float(arr[x_index]);
  const float y = to_float(arr[y_index]);
  arr[x_index] = from_float<T>(x * cos - y * sin);
  arr[y_index] = from_float<T>(y * cos + x * sin);
}

}  // namespace rope_detail

template <typename T, bool IS_NEOX>
__global__ void rotary_embedding_kernel(const long long* __restrict__ positions,
                                        T* __restrict__ query, T* __restrict__ key,
                                        const T* __restrict__ cos_sin_cache, const int rot_dim,
                                        const long long query_stride, const long long key_stride,
                                        const int num_heads, const int num_kv_heads,
                                        const int head_size) {
  using namespace rope_detail;
  const long long token_idx = blockIdx.x;
  const long long pos = positions[token_idx];
  const T* __restrict__ cache_ptr = cos_sin_cache + pos * rot_dim;

  const int embed_dim = rot_dim / 2;
  const T* __restrict__ cos_ptr = cache_ptr;
  const T* __restrict__ sin_ptr = cache_ptr + embed_dim;

  const int nq = num_heads * embed_dim;
  for (int i = threadIdx.x; i < nq; i += blockDim.x) {
    const int head_idx = i / embed_dim;
    const long long token_head = token_idx * query_stride + (long long)head_idx * head_size;
    const int rot_offset = i % embed_dim;
    apply_token_rotary_embedding<T, IS_NEOX>(query + token_head, cos_ptr, sin_ptr, rot_offset,
                                             embed_dim);
  }

  if (key != nullptr) {
    const int nk = num_kv_heads * embed_dim;
    for (int i = threadIdx.x; i < nk; i += blockDim.x) {
      const int head_idx = i / embed_dim;
      const long long token_head = token_idx * key_stride + (long long)head_idx * head_size;
      const int rot_offset = i % embed_dim;
      apply_token_rotary_embedding<T, IS_NEOX>(key + token_head, cos_ptr, sin_ptr, rot_offset,
                                               embed_dim);
    }
  }
}

#ifndef __CUDACC_RTC__
#include <cuda_runtime.h>

#include <algorithm>

// positions: int64 [num_tokens]; query: bf16 [num_tokens, num_heads, head_size] (token stride
// query_stride); key: bf16 [num_tokens, num_kv_heads, head_size] (token stride key_stride) or
// nullptr; cos_sin_cache: bf16 [max_position, rot_dim]. In place.
void launch_rope(const long long* positions, __nv_bfloat16* query, __nv_bfloat16* key,
                 const __nv_bfloat16* cos_sin_cache, int num_tokens, int num_heads,
                 int num_kv_heads, int head_size, int rot_dim, long long query_stride,
                 long long key_stride, bool is_neox, cudaStream_t stream) {
  if (num_tokens <= 0 || rot_dim < 2) return;
  dim3 grid(num_tokens);
  dim3 block(std::min(num_heads * rot_dim / 2, 512));
  if (is_neox) {
    rotary_embedding_kernel<__nv_bfloat16, true><<<grid, block, 0, stream>>>(
        positions, query, key, cos_sin_cache, rot_dim, query_stride, key_stride, num_heads,
        num_kv_heads, head_size);
  } else {
    rotary_embedding_kernel<__nv_bfloat16, false><<<grid, block, 0, stream>>>(
        positions, query, key, cos_sin_cache, rot_dim, query_stride, key_stride, num_heads,
        num_kv_heads, head_size);
  }
}
#endif  // __CUDACC_RTC__
