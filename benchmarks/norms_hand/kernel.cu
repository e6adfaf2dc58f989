// Hand variants of the suite's norms (kernels/rmsnorm, kernels/fused_add_rmsnorm) in the form
// issue 23 measured at d = 4096, tokens 1024 / 4096 (1.27x / 1.28x over a FlashInfer-like
// two-pass kernel): one block per row, each thread holding PACKS 16-byte packs of the row AND of
// the weight in registers. Every global load is issued before any math (one memory latency
// precedes the reduction), the row is read from global memory once, each output is written once
// and never read back. Written by hand for this benchmark, to compare with what
// `block-size,row-registers` emits from the suite kernels (benchmarks/norms_hand/README.md).
//
// Contract (the spec's launch keeps it): d % 8 == 0 and blockDim.x * blockDim.y * PACKS * 8 >= d,
// so a thread's packs cover the row and there is no remainder loop; blockDim.x == 32.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace norms_hand {

__device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float to_float(__half x) { return __half2float(x); }
template <typename T>
__device__ __forceinline__ T from_float(float x);
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }
template <>
__device__ __forceinline__ __half from_float<__half>(float x) { return __float2half_rn(x); }

template <typename T>
struct alignas(16) Pack {
  static constexpr int N = 16 / sizeof(T);
  T v[N];
};

template <typename T>
__device__ __forceinline__ Pack<T> load(const T* p) {
  Pack<T> r;
  *reinterpret_cast<uint4*>(r.v) = *reinterpret_cast<const uint4*>(p);
  return r;
}

template <typename T>
__device__ __forceinline__ void store(T* p, const Pack<T>& r) {
  *reinterpret_cast<uint4*>(p) = *reinterpret_cast<const uint4*>(r.v);
}

// The block's sum of `v`, returned to every thread: shuffles in each warp, one warp over the
// warps' partials, one broadcast through shared memory (two barriers, as the suite kernels).
__device__ __forceinline__ float block_sum(float v) {
  __shared__ float partial[32];
  __shared__ float total;
#pragma unroll
  for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  if (threadIdx.x == 0) partial[threadIdx.y] = v;
  __syncthreads();
  if (threadIdx.y == 0) {
    float s = threadIdx.x < blockDim.y ? partial[threadIdx.x] : 0.f;
#pragma unroll
    for (int o = 16; o > 0; o /= 2) s += __shfl_xor_sync(0xffffffffu, s, o);
    if (threadIdx.x == 0) total = s;
  }
  __syncthreads();
  return total;
}

}  // namespace norms_hand

template <typename T, int PACKS>
__global__ void rmsnorm_rows_hand(T* __restrict__ output, const T* __restrict__ input,
                                  const T* __restrict__ weight, const int d, const float eps) {
  using namespace norms_hand;
  constexpr int VEC = Pack<T>::N;
  const int threads = blockDim.x * blockDim.y;
  const int tid = threadIdx.y * blockDim.x + threadIdx.x;
  const int packs = d / VEC;
  const T* in_row = input + static_cast<long long>(blockIdx.x) * d;
  T* out_row = output + static_cast<long long>(blockIdx.x) * d;

  Pack<T> x[PACKS], w[PACKS];
#pragma unroll
  for (int k = 0; k < PACKS; ++k) {  // every load first: the row's packs and the weight's
    const int p = k * threads + tid;
    if (p < packs) {
      x[k] = load(in_row + p * VEC);
      w[k] = load(weight + p * VEC);
    } else {
#pragma unroll
      for (int j = 0; j < VEC; ++j) x[k].v[j] = from_float<T>(0.f);
    }
  }
  float sum = 0.f;
#pragma unroll
  for (int k = 0; k < PACKS; ++k) {
#pragma unroll
    for (int j = 0; j < VEC; ++j) sum += to_float(x[k].v[j]) * to_float(x[k].v[j]);
  }
  const float rcp = rsqrtf(block_sum(sum) / static_cast<float>(d) + eps);
#pragma unroll
  for (int k = 0; k < PACKS; ++k) {
    const int p = k * threads + tid;
    if (p < packs) {
      Pack<T> o;
#pragma unroll
      for (int j = 0; j < VEC; ++j) o.v[j] = from_float<T>(to_float(x[k].v[j]) * rcp * to_float(w[k].v[j]));
      store(out_row + p * VEC, o);
    }
  }
}

template <typename T, int PACKS>
__global__ void fused_add_rmsnorm_rows_hand(T* __restrict__ input, T* __restrict__ residual,
                                            const T* __restrict__ weight, const int d,
                                            const float eps) {
  using namespace norms_hand;
  constexpr int VEC = Pack<T>::N;
  const int threads = blockDim.x * blockDim.y;
  const int tid = threadIdx.y * blockDim.x + threadIdx.x;
  const int packs = d / VEC;
  T* in_row = input + static_cast<long long>(blockIdx.x) * d;
  T* res_row = residual + static_cast<long long>(blockIdx.x) * d;

  Pack<T> a[PACKS], r[PACKS], w[PACKS];
#pragma unroll
  for (int k = 0; k < PACKS; ++k) {  // every load first: input, residual and weight packs
    const int p = k * threads + tid;
    if (p < packs) {
      a[k] = load(in_row + p * VEC);
      r[k] = load(res_row + p * VEC);
      w[k] = load(weight + p * VEC);
    }
  }
  float s[PACKS][VEC];  // the fp32 sum stays in registers: written to residual once, never re-read
  float sum = 0.f;
#pragma unroll
  for (int k = 0; k < PACKS; ++k) {
    const int p = k * threads + tid;
#pragma unroll
    for (int j = 0; j < VEC; ++j) {
      s[k][j] = p < packs ? to_float(a[k].v[j]) + to_float(r[k].v[j]) : 0.f;
      sum += s[k][j] * s[k][j];
    }
    if (p < packs) {
      Pack<T> o;
#pragma unroll
      for (int j = 0; j < VEC; ++j) o.v[j] = from_float<T>(s[k][j]);
      store(res_row + p * VEC, o);
    }
  }
  const float rcp = rsqrtf(block_sum(sum) / static_cast<float>(d) + eps);
#pragma unroll
  for (int k = 0; k < PACKS; ++k) {
    const int p = k * threads + tid;
    if (p < packs) {
      Pack<T> o;
#pragma unroll
      for (int j = 0; j < VEC; ++j) o.v[j] = from_float<T>(s[k][j] * rcp * to_float(w[k].v[j]));
      store(in_row + p * VEC, o);
    }
  }
}
