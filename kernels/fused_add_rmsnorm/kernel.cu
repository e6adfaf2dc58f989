// fused_add_rmsnorm: residual add followed by RMSNorm, in place.
//
//   s            = input[t, :] + residual[t, :]                       (fp32)
//   residual[t]  = s                                                  (rounded to T)
//   input[t]     = s * rsqrt(mean(s * s) + eps) * weight              (rounded to T)
//
// The normalisation uses the fp32 sum s, not the rounded residual (as FlashInfer does).
//
// Tensors (row-major, contiguous):
//   input     T [num_tokens, d]   read, then overwritten with the normalised row
//   residual  T [num_tokens, d]   read, then overwritten with input + residual
//   weight    T [d]
//
// Launch mapping (mirrors FlashInfer's FusedAddRMSNormKernel):
//   grid  = num_tokens                 blockIdx.x is the token (row)
//   block = dim3(32, num_warps)        num_warps = ceil(min(1024, d / 8) / 32), at least 1
//   dynamic shared memory = (ceil(num_warps / 4) * 4 + d) * sizeof(float)
//     smem[0 .. ceil(num_warps/4)*4)   per-warp partial sums (padded to keep the stash 16-byte aligned)
//     smem_x[0 .. d)                   the fp32 sum s of the row, so pass 2 reads it from shared memory
//   Pass 1: each thread walks the row in 16-byte packs (8 bf16) with stride blockDim.x * blockDim.y,
//     adds input + residual in fp32, stores residual, stashes s in smem_x, accumulates s * s.
//   Reduce: __shfl_xor_sync inside each warp, partials through shared memory, then warp 0 reduces.
//   Pass 2: reads s back from smem_x, scales by rsqrtf(mean + eps) and weight, stores input.
//   Each pass has a scalar tail loop; the 16-byte path is taken only when d % 8 == 0 (every row
//   16-byte aligned), otherwise the scalar loop covers the whole row. (FlashInfer instead picks a
//   vector width gcd(8, d) at compile time.)

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace fused_add_rmsnorm_detail {

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

}  // namespace fused_add_rmsnorm_detail

template <typename T>
__global__ void fused_add_rmsnorm_kernel(T* __restrict__ input, T* __restrict__ residual,
                                         const T* __restrict__ weight, const int d,
                                         const float eps) {
  using namespace fused_add_rmsnorm_detail;
  constexpr int VEC = Pack<T>::N;
  constexpr int WARP_SIZE = 32;

  const int num_warps = blockDim.y;
  const int thread_id = threadIdx.y * blockDim.x + threadIdx.x;
  const int num_threads = blockDim.x * blockDim.y;

  extern __shared__ __align__(16) float smem[];
  float* smem_x = smem + ((num_warps + 3) / 4) * 4;

  const long long row = blockIdx.x;
  T* __restrict__ input_row = input + row * d;
  T* __restrict__ residual_row = residual + row * d;

  const int num_packs = (d % VEC == 0) ? d / VEC : 0;

  // Pass 1: s = input + residual; residual = s; stash s; sum of squares.
  float sum_sq = 0.f;
  for (int i = thread_id; i < num_packs; i += num_threads) {
    Pack<T> in, res;
    in.load(input_row + i * VEC);
    res.load(residual_row + i * VEC);
    float x[VEC];
#pragma unroll
    for (int j = 0; j < VEC; ++j) {
      x[j] = to_float(in.v[j]) + to_float(res.v[j]);
      sum_sq += x[j] * x[j];
      res.v[j] = from_float<T>(x[j]);
    }
    res.store(residual_row + i * VEC);
#pragma unroll
    for (int j = 0; j < VEC; j += 4) {
      *reinterpret_cast<float4*>(smem_x + i * VEC + j) = make_float4(x[j], x[j + 1], x[j + 2], x[j + 3]);
    }
  }
  for (int i = num_packs * VEC + thread_id; i < d; i += num_threads) {
    const float x = to_float(input_row[i]) + to_float(residual_row[i]);
    sum_sq += x * x;
    residual_row[i] = from_float<T>(x);
    smem_x[i] = x;
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

  // Pass 2: input = s * rms_rcp * weight, s read back from shared memory.
  for (int i = thread_id; i < num_packs; i += num_threads) {
    Pack<T> w, o;
    w.load(weight + i * VEC);
    float x[VEC];
#pragma unroll
    for (int j = 0; j < VEC; j += 4) {
      const float4 s4 = *reinterpret_cast<const float4*>(smem_x + i * VEC + j);
      x[j] = s4.x;
      x[j + 1] = s4.y;
      x[j + 2] = s4.z;
      x[j + 3] = s4.w;
    }
#pragma unroll
    for (int j = 0; j < VEC; ++j) {
      o.v[j] = from_float<T>(x[j] * rms_rcp * to_float(w.v[j]));
    }
    o.store(input_row + i * VEC);
  }
  for (int i = num_packs * VEC + thread_id; i < d; i += num_threads) {
    input_row[i] = from_float<T>(smem_x[i] * rms_rcp * to_float(weight[i]));
  }
}

#ifndef __CUDACC_RTC__
#include <cuda_runtime.h>

#include <algorithm>

// input, residual: [num_tokens, d]; weight: [d]; all bf16, contiguous. In place.
void launch_fused_add_rmsnorm(__nv_bfloat16* input, __nv_bfloat16* residual,
                              const __nv_bfloat16* weight, int num_tokens, int d, float eps,
                              cudaStream_t stream) {
  if (num_tokens <= 0 || d <= 0) return;
  constexpr int vec_size = 16 / sizeof(__nv_bfloat16);
  const int block_size = std::min(1024, d / vec_size);
  const int num_warps = std::max(1, (block_size + 31) / 32);
  dim3 grid(num_tokens);
  dim3 block(32, num_warps);
  const size_t smem_size = (size_t)(((num_warps + 3) / 4) * 4 + d) * sizeof(float);
  auto kernel = fused_add_rmsnorm_kernel<__nv_bfloat16>;
  cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem_size);
  kernel<<<grid, block, smem_size, stream>>>(input, residual, weight, d, eps);
}
#endif  // __CUDACC_RTC__
