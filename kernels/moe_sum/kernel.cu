// moe_sum: sum the top-k expert outputs of each token (the reduction after a fused MoE).
//
//   out[t, i] = sum_{k < TOPK} input[t, k, i]          (fp32 accumulation, rounded once to T)
//
// Tensors (row-major, contiguous):
//   input  T [num_tokens, TOPK, d]
//   out    T [num_tokens, d]
//
// Launch mapping (mirrors vLLM's / SGLang's moe_sum_kernel):
//   grid  = num_tokens             blockIdx.x is the token
//   block = min(d, 1024) threads
//   for (idx = threadIdx.x; idx < d; idx += blockDim.x), with the TOPK loads unrolled
//   (#pragma unroll over the compile-time TOPK). One scalar element per thread per step, as in
//   production. Production instantiates TOPK = 2, 3, 4 (other top-k fall back to a torch sum);
//   the launcher here instantiates TOPK = 1..8.
//   Deviation: production accumulates in T (bf16 adds); here the sum is kept in fp32.

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace moe_sum_detail {

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

}  // namespace moe_sum_detail

template <typename T, int TOPK>
__global__ void moe_sum_kernel(T* __restrict__ out, const T* __restrict__ input, const int d) {
  using namespace moe_sum_detail;
  const long long token_idx = blockIdx.x;
  const T* __restrict__ token_input = input + token_idx * TOPK * d;
  T* __restrict__ token_out = out + token_idx * d;
  for (int idx = threadIdx.x; idx < d; idx += blockDim.x) {
    float x = 0.0f;
#pragma unroll
    for (int k = 0; k < TOPK; ++k) {
      x += to_float(token_input[k * d + idx]);
    }
    token_out[idx] = from_float<T>(x);
  }
}

#ifndef __CUDACC_RTC__
#include <cuda_runtime.h>

#include <algorithm>

// out: bf16 [num_tokens, d]; input: bf16 [num_tokens, topk, d]; 1 <= topk <= 8.
// Returns false (and launches nothing) for a topk with no instantiation.
bool launch_moe_sum(__nv_bfloat16* out, const __nv_bfloat16* input, int num_tokens, int topk,
                    int d, cudaStream_t stream) {
  if (num_tokens <= 0 || d <= 0) return true;
  dim3 grid(num_tokens);
  dim3 block(std::min(d, 1024));
  switch (topk) {
    case 1:
      moe_sum_kernel<__nv_bfloat16, 1><<<grid, block, 0, stream>>>(out, input, d);
      break;
    case 2:
      moe_sum_kernel<__nv_bfloat16, 2><<<grid, block, 0, stream>>>(out, input, d);
      break;
    case 3:
      moe_sum_kernel<__nv_bfloat16, 3><<<grid, block, 0, stream>>>(out, input, d);
      break;
    case 4:
      moe_sum_kernel<__nv_bfloat16, 4><<<grid, block, 0, stream>>>(out, input, d);
      break;
    case 5:
      moe_sum_kernel<__nv_bfloat16, 5><<<grid, block, 0, stream>>>(out, input, d);
      break;
    case 6:
      moe_sum_kernel<__nv_bfloat16, 6><<<grid, block, 0, stream>>>(out, input, d);
      break;
    case 7:
      moe_sum_kernel<__nv_bfloat16, 7><<<grid, block, 0, stream>>>(out, input, d);
      break;
    case 8:
      moe_sum_kernel<__nv_bfloat16, 8><<<grid, block, 0, stream>>>(out, input, d);
      break;
    default:
      return false;
  }
  return true;
}
#endif  // __CUDACC_RTC__
