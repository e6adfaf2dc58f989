// rmsnorm: RMS normalisation of each row, scaled by a weight vector.
//
//   output[t, :] = input[t, :] * rsqrt(mean(input[t, :]^2) + eps) * weight     (fp32, rounded to T)
//
// Tensors (row-major, contiguous):
//   input   T [num_tokens, d]
//   weight  T [d]
//   output  T [num_tokens, d]
//
// Launch mapping (mirrors FlashInfer's RMSNormKernel):
//   grid  = num_tokens                 blockIdx.x is the token (row)
//   block = dim3(32, num_warps)        num_warps = ceil(min(1024, d / 8) / 32), at least 1
//   dynamic shared memory = ceil(num_warps / 4) * 4 * sizeof(float)   (per-warp partial sums)
//   Loop 1: each thread walks the row in 16-byte packs (8 bf16) with stride blockDim.x * blockDim.y
//     and accumulates x * x in fp32.
//   Reduce: __shfl_xor_sync inside each warp, partials through shared memory, then warp 0 reduces.
//   Loop 2: reads the row again (an L1/L2 hit for the usual row sizes) with the weight, scales by
//     rsqrtf(mean + eps) and stores output.
//   Each loop has a scalar tail loop; the 16-byte path is taken only when d % 8 == 0 (every row
//   16-byte aligned), otherwise the scalar loop covers the whole row. (FlashInfer instead picks a
//   vector width gcd(8, d) at compile time.)

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace rmsnorm_detail {

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

}  // namespace rmsnorm_detail

template <typename T>
__global__ void rmsnorm_kernel(T* __restrict__ output, const T* __restrict__ input,
                               const T* __restrict__ weight, const int d, const float eps) {
  using namespace rmsnorm_detail;
  constexpr int VEC = Pack<T>::N;
  constexpr int WARP_SIZE = 32;

  const int num_warps = blockDim.y;
  const int thread_id = threadIdx.y * blockDim.x + threadIdx.x;
  const int num_threads = blockDim.x * blockDim.y;

  extern __shared__ __align__(16) float smem[];

  const long long row = blockIdx.x;
  const T* __restrict__ input_row = input + row * d;
  T* __restrict__ output_row = output + row * d;

  const int num_packs = (d % VEC == 0) ? d / VEC : 0;

  // Loop 1: sum of squares.
  float sum_sq = 0.f;
  for (int i = thread_id; i < num_packs; i += num_threads) {
    Pack<T> in;
    in.load(input_row + i * VEC);
#pragma unroll
    for (int j = 0; j < VEC; ++j) {
      const float x = to_float(in.v[j]);
      sum_sq += x * x;
    }
  }
  for (int i = num_packs * VEC + thread_id; i < d; i += num_threads) {
    const float x = to_float(input_row[i]);
    sum_sq += x * x;
  }

  // Block reduction of sum_sq: warp shuffle, then warp 0 reduces the per-warp partials.
#pragma unroll
  for (int offset = WARP_SIZE / 2; offset > 0; offset /= 2) {
    sum_sq += __shfl_xor_sync(0xffffffffu, sum_sq, offset);
  }
  if (threadIdx.x == 0) smem[threadIdx.y] = sum_sq;
  __syncthreads();
  if (threadIdx.y == 0) {
    sum_sq = (threadIdx.x < num_warps) ? smem[threadIdx.x] : 0.f;
#pragma unroll
    for (int offset = WARP_SIZE / 2; offset > 0; offset /= 2) {
      sum_sq += __shfl_xor_sync(0xffffffffu, sum_sq, offset);
    }
    if (threadIdx.x == 0) smem[0] = sum_sq;
  }
  __syncthreads();
  const float rms_rcp = rsqrtf(smem[0] / static_cast<float>(d) + eps);

  // Loop 2: output = input * rms_rcp * weight.
  for (int i = thread_id; i < num_packs; i += num_threads) {
    Pack<T> in, w, o;
    in.load(input_row + i * VEC);
    w.load(weight + i * VEC);
#pragma unroll
    for (int j = 0; j < VEC; ++j) {
      o.v[j] = from_float<T>(to_float(in.v[j]) * rms_rcp * to_float(w.v[j]));
    }
    o.store(output_row + i * VEC);
  }
  for (int i = num_packs * VEC + thread_id; i < d; i += num_threads) {
    output_row[i] = from_float<T>(to_float(input_row[i]) * rms_rcp * to_float(weight[i]));
  }
}

#ifndef __CUDACC_RTC__
#include <cuda_runtime.h>

#include <algorithm>

// output, input: [num_tokens, d]; weight: [d]; all bf16, contiguous.
void launch_rmsnorm(__nv_bfloat16* output, const __nv_bfloat16* input, const __nv_bfloat16* weight,
                    int num_tokens, int d, float eps, cudaStream_t stream) {
  if (num_tokens <= 0 || d <= 0) return;
  constexpr int vec_size = 16 / sizeof(__nv_bfloat16);
  const int block_size = std::min(1024, d / vec_size);
  const int num_warps = std::max(1, (block_size + 31) / 32);
  dim3 grid(num_tokens);
  dim3 block(32, num_warps);
  const size_t smem_size = (size_t)(((num_warps + 3) / 4) * 4) * sizeof(float);
  rmsnorm_kernel<__nv_bfloat16><<<grid, block, smem_size, stream>>>(output, input, weight, d, eps);
}
#endif  // __CUDACC_RTC__
