// merge_attn_states: merge two partial attention results by their log-sum-exp (split-KV / cascade
// attention, section 2.2 of arXiv:2501.01005).
//
//   m   = max(p_lse, s_lse)           (an LSE of +inf is treated as -inf: that side is empty)
//   p   = exp(p_lse - m),  s = exp(s_lse - m)
//   output     = (p * prefix_output + s * suffix_output) / (p + s)       (fp32, rounded to T)
//   output_lse = log(p + s) + m
//
//   Both sides empty (both LSEs are +-inf, so m = -inf): no NaN is produced; output is a copy of
//   prefix_output and output_lse = -inf. (The SGLang kernel computes -inf - -inf there: NaN.)
//
// Tensors (row-major, contiguous):
//   prefix_output, suffix_output, output   T     [num_tokens, num_heads, head_size]
//   prefix_lse, suffix_lse, output_lse     float [num_heads, num_tokens]   (index head * num_tokens + token)
//   output_lse may be nullptr (not written).
//   head_size must be a multiple of 8 (16 / sizeof(T)): each thread moves one 16-byte pack.
//
// Launch mapping (mirrors SGLang's / vLLM's merge_attn_states_kernel):
//   one thread per 16-byte pack: num_tokens * num_heads * (head_size / 8) threads in all
//   block = 128 threads, grid = ceil(total / 128)
//   thread -> (token, head, pack): token_head = idx / (head_size / 8), pack = idx % (head_size / 8),
//   token = token_head / num_heads, head = token_head % num_heads.
//   The thread with pack == 0 writes output_lse for its (token, head).

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace merge_attn_states_detail {

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

// 16 bytes of T, moved with one 128-bit load or store.
template <typename T>
struct alignas(16) Pack {
  static constexpr int N = 16 / sizeof(T);
  T v[N];
  __device__ __forceinline__ void load(const T* ptr) {
    *reinterpret_cast<uint4*>(v) = *reinterpret_cast<const uint4*>(ptr);
  }
  __device__ __forceinline__ void store(T* ptr) const {
    *reinterpret_cast<uint4*>(ptr) = *reinterpret_cast<const uint4*>(v);
  }
};

}  // namespace merge_attn_states_detail

template <typename T>
__global__ void merge_attn_states_kernel(T* __restrict__ output, float* __restrict__ output_lse,
                                         const T* __restrict__ prefix_output,
                                         const float* __restrict__ prefix_lse,
                                         const T* __restrict__ suffix_output,
                                         const float* __restrict__ suffix_lse,
                                         const int num_tokens, const int num_heads,
                                         const int head_size) {
  using namespace merge_attn_states_detail;
  constexpr int PACK_SIZE = Pack<T>::N;
  const unsigned int packs_per_head = head_size / PACK_SIZE;
  const unsigned int total_packs = (unsigned int)num_tokens * num_heads * packs_per_head;

  const unsigned int global_idx = blockIdx.x * blockDim.x + threadIdx.x;
  if (global_idx >= total_packs) return;

  const unsigned int token_head_idx = global_idx / packs_per_head;
  const unsigned int pack_idx = global_idx % packs_per_head;
  const unsigned int token_idx = token_head_idx / num_heads;
  const unsigned int head_idx = token_head_idx % num_heads;

  const long long elem_offset = (long long)token_head_idx * head_size + pack_idx * PACK_SIZE;
  const unsigned int lse_idx = head_idx * num_tokens + token_idx;

  float p_lse = prefix_lse[lse_idx];
  float s_lse = suffix_lse[lse_idx];
  // +inf marks an empty side like -inf does, so the other side wins.
  const float neg_inf = __int_as_float(0xff800000u);  // -inf (no INFINITY macro under NVRTC)
  p_lse = isinf(p_lse) ? neg_inf : p_lse;
  s_lse = isinf(s_lse) ? neg_inf : s_lse;
  const float max_lse = fmaxf(p_lse, s_lse);

  if (isinf(max_lse)) {
    // Both sides empty: copy the prefix, LSE stays -inf (no 0/0).
    Pack<T> p_out;
    p_out.load(prefix_output + elem_offset);
    p_out.store(output + elem_offset);
    if (output_lse != nullptr && pack_idx == 0) output_lse[lse_idx] = max_lse;
    return;
  }

  const float p_se = expf(p_lse - max_lse);
  const float s_se = expf(s_lse - max_lse);
  const float out_se = p_se + s_se;
  const float p_scale = p_se / out_se;
  const float s_scale = s_se / out_se;

  Pack<T> p_out, s_out, o;
  p_out.load(prefix_output + elem_offset);
  s_out.load(suffix_output + elem_offset);
#pragma unroll
  for (int i = 0; i < PACK_SIZE; ++i) {
    o.v[i] = from_float<T>(to_float(p_out.v[i]) * p_scale + to_float(s_out.v[i]) * s_scale);
  }
  o.store(output + elem_offset);

  if (output_lse != nullptr && pack_idx == 0) {
    output_lse[lse_idx] = logf(out_se) + max_lse;
  }
}

#ifndef __CUDACC_RTC__
#include <cuda_runtime.h>

// output, prefix_output, suffix_output: bf16 [num_tokens, num_heads, head_size];
// output_lse (nullable), prefix_lse, suffix_lse: fp32 [num_heads, num_tokens].
// head_size must be a multiple of 8.
void launch_merge_attn_states(__nv_bfloat16* output, float* output_lse,
                              const __nv_bfloat16* prefix_output, const float* prefix_lse,
                              const __nv_bfloat16* suffix_output, const float* suffix_lse,
                              int num_tokens, int num_heads, int head_size, cudaStream_t stream) {
  constexpr unsigned int NUM_THREADS = 128;
  constexpr unsigned int pack_size = 16 / sizeof(__nv_bfloat16);
  const unsigned int threads_per_head = head_size / pack_size;
  const unsigned int total_threads = (unsigned int)num_tokens * num_heads * threads_per_head;
  if (total_threads == 0) return;
  dim3 block(NUM_THREADS);
  dim3 grid((total_threads + NUM_THREADS - 1) / NUM_THREADS);
  merge_attn_states_kernel<__nv_bfloat16><<<grid, block, 0, stream>>>(
      output, output_lse, prefix_output, prefix_lse, suffix_output, suffix_lse, num_tokens,
      num_heads, head_size);
}
#endif  // __CUDACC_RTC__
