// CORPUS: attribute macros (#define KTX_INLINE __device__ __forceinline__, inline
// __attribute__((always_inline)) __device__, macros built from macros, a __global__ macro),
// and macro-built declarations tree-sitter cannot read (file-scope invocations without a
// semicolon, masked by ktx.ir.foreign so they raise no warning) while the kernels around them
// are still indexed.
// EXPECT: kernels=rms_kernel,axpy_kernel device=warp_sum,block_sum,clamp01,square loops=3
// EXPECT: launches=0 warnings=0 errors=0 defines=KTX_WARP:32
#pragma once

#define KTX_INLINE __device__ __forceinline__
#define KTX_ALWAYS inline __attribute__((always_inline)) __device__
#define KTX_HD_INLINE __host__ KTX_INLINE
#define KTX_KERNEL __global__
#define KTX_WARP 32

// A declaration built by a function-like macro: tree-sitter sees a call at file scope.
#define KTX_DECLARE_GETTER(name, value) \
  KTX_INLINE int get_##name() { return value; }
KTX_DECLARE_GETTER(warps, 4)
KTX_DECLARE_GETTER(lanes, KTX_WARP)

template <typename T>
KTX_INLINE T warp_sum(T v) {
#pragma unroll
  for (int o = KTX_WARP / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

template <typename T>
KTX_ALWAYS T block_sum(T v, T* smem) {
  v = warp_sum(v);
  if (threadIdx.x % KTX_WARP == 0) smem[threadIdx.x / KTX_WARP] = v;
  __syncthreads();
  return threadIdx.x < blockDim.x / KTX_WARP ? smem[threadIdx.x] : T(0);
}

KTX_HD_INLINE float clamp01(float x) { return x < 0.f ? 0.f : (x > 1.f ? 1.f : x); }

template <typename T>
KTX_KERNEL void rms_kernel(T* __restrict__ out, const T* __restrict__ in, int d, float eps) {
  extern __shared__ float smem[];
  float acc = 0.f;
  for (int i = threadIdx.x; i < d; i += blockDim.x) {
    float x = static_cast<float>(in[blockIdx.x * d + i]);
    acc += x * x;
  }
  acc = block_sum(acc, smem);
  if (threadIdx.x == 0) smem[0] = rsqrtf(acc / d + eps);
  __syncthreads();
  for (int i = threadIdx.x; i < d; i += blockDim.x) {
    out[blockIdx.x * d + i] = static_cast<T>(clamp01(static_cast<float>(in[blockIdx.x * d + i]) * smem[0]));
  }
}

KTX_INLINE float square(float x) { return x * x; }

__global__ void axpy_kernel(float a, const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * square(x[i]) + y[i];
}
