// moe_sum_scalar: the top-k expert sum in its plainest form, the scalar baseline `vectorize` starts
// from. One bf16 element per thread per iteration, the row addressed by plain index arithmetic.
//
//   out[t, i] = sum_{k < TOPK} input[t, k, i]          (fp32 accumulation, rounded once to T)
//
// Tensors (row-major, contiguous):
//   input  T [num_tokens, TOPK, d]
//   out    T [num_tokens, d]
//
// Launch mapping:
//   grid  = num_tokens             blockIdx.x is the token
//   block = min(d, 1024) threads
//   for (idx = threadIdx.x; idx < d; idx += blockDim.x), the TOPK loads unrolled (#pragma unroll
//   over the compile-time TOPK): TOPK 2-byte loads and one 2-byte store per element. Correct for
//   every d >= 1. kernels/moe_sum is the production form (row pointers); this one indexes
//   input[(t * TOPK + k) * d + i] directly, as the kernel is first written.
//
// Device code includes only the CUDA fp16/bf16 headers so that NVRTC (CuPy RawModule) compiles it
// as is; the host launcher is hidden from NVRTC by #ifndef __CUDACC_RTC__.

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace moe_sum_scalar_detail {

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

}  // namespace moe_sum_scalar_detail

template <typename T, int TOPK>
__global__ void moe_sum_scalar_kernel(T* __restrict__ out, const T* __restrict__ input, const int d) {
  using namespace moe_sum_scalar_detail;
  const long long token_idx = blockIdx.x;
  for (int idx = threadIdx.x; idx < d; idx += blockDim.x) {
    float x = 0.0f;
#pragma unroll
    for (int k = 0; k < TOPK; ++k) {
      x += to_float(input[(token_idx * TOPK + k) * d + idx]);
    }
    out[token_idx * d + idx] = from_float<T>(x);
  }
}

#ifndef __CUDACC_RTC__
#include <cuda_runtime.h>

#include <algorithm>

// out: bf16 [num_tokens, d]; input: bf16 [num_tokens, topk, d]; 1 <= topk <= 8.
// Returns false (and launches nothing) for a topk with no instantiation.
bool launch_moe_sum_scalar(__nv_bfloat16* out, const __nv_bfloat16* input, int num_tokens, int topk,
                           int d, cudaStream_t stream) {
  if (num_tokens <= 0 || d <= 0) return true;
  dim3 grid(num_tokens);
  dim3 block(std::min(d, 1024));
  switch (topk) {
    case 1:
      moe_sum_scalar_kernel<__nv_bfloat16, 1><<<grid, block, 0, stream>>>(out, input, d);
      break;
    case 2:
      moe_sum_scalar_kernel<__nv_bfloat16, 2><<<grid, block, 0, stream>>>(out, input, d);
      break;
    case 3:
      moe_sum_scalar_kernel<__nv_bfloat16, 3><<<grid, block, 0, stream>>>(out, input, d);
      break;
    case 4:
      moe_sum_scalar_kernel<__nv_bfloat16, 4><<<grid, block, 0, stream>>>(out, input, d);
      break;
    case 5:
      moe_sum_scalar_kernel<__nv_bfloat16, 5><<<grid, block, 0, stream>>>(out, input, d);
      break;
    case 6:
      moe_sum_scalar_kernel<__nv_bfloat16, 6><<<grid, block, 0, stream>>>(out, input, d);
      break;
    case 7:
      moe_sum_scalar_kernel<__nv_bfloat16, 7><<<grid, block, 0, stream>>>(out, input, d);
      break;
    case 8:
      moe_sum_scalar_kernel<__nv_bfloat16, 8><<<grid, block, 0, stream>>>(out, input, d);
      break;
    default:
      return false;
  }
  return true;
}
#endif  // __CUDACC_RTC__
