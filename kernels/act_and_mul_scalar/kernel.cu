// act_and_mul_scalar: the SwiGLU gate in its plainest form, the scalar baseline `vectorize` starts
// from. One half-precision element per thread per iteration; no packs, no alignment assumption.
//
//   out[t, i] = silu(x) * y,   x = input[t, i],  y = input[t, d + i],  silu(x) = x / (1 + exp(-x))
//
// computed in fp32 and rounded once to T on the store.
//
// Tensors (row-major, contiguous):
//   input  T [num_tokens, 2 * d]   first half of each row is the gate x, second half is y
//   out    T [num_tokens, d]
//
// Launch mapping:
//   grid  = num_tokens              blockIdx.x is the token (row)
//   block = min(d, 1024) threads
//   for (i = threadIdx.x; i < d; i += blockDim.x): one 2-byte load of x, one of y, one 2-byte
//   store. Correct for every d >= 1. This is the form a kernel is first written in (and the form
//   LLM-written kernels start from); kernels/silu_and_mul is the hand-vectorised production form.
//
// Device code includes only the CUDA fp16/bf16 headers so that NVRTC (CuPy RawModule) compiles it
// as is; the host launcher is hidden from NVRTC by #ifndef __CUDACC_RTC__.

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace act_and_mul_scalar_detail {

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

__device__ __forceinline__ float silu(float x) { return x / (1.0f + expf(-x)); }

}  // namespace act_and_mul_scalar_detail

template <typename T>
__global__ void act_and_mul_scalar_kernel(T* __restrict__ out, const T* __restrict__ input,
                                          const int d) {
  using namespace act_and_mul_scalar_detail;
  const long long token_idx = blockIdx.x;
  const T* __restrict__ x_row = input + token_idx * 2 * d;
  const T* __restrict__ y_row = x_row + d;
  T* __restrict__ out_row = out + token_idx * d;
  for (int i = threadIdx.x; i < d; i += blockDim.x) {
    const float x = to_float(x_row[i]);
    const float y = to_float(y_row[i]);
    out_row[i] = from_float<T>(silu(x) * y);
  }
}

#ifndef __CUDACC_RTC__
#include <cuda_runtime.h>

#include <algorithm>

// out: [num_tokens, d], input: [num_tokens, 2 * d], both fp16, contiguous.
void launch_act_and_mul_scalar(__half* out, const __half* input, int num_tokens, int d,
                               cudaStream_t stream) {
  if (num_tokens <= 0 || d <= 0) return;
  dim3 grid(num_tokens);
  dim3 block(std::min(d, 1024));
  act_and_mul_scalar_kernel<__half><<<grid, block, 0, stream>>>(out, input, d);
}
#endif  // __CUDACC_RTC__
