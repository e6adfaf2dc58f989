// CORPUS: templates with type and int params, defaults, nested templates (vec_t<float, N>),
// if constexpr, static_assert, a template template parameter, explicit launch template args.
// EXPECT: kernels=scale_kernel,cast_kernel device=operator[],load_vec,store_vec loops=4 launches=2
// EXPECT: launch_kernels=scale_kernel,cast_kernel warnings=0 errors=0
// EXPECT: constexprs=kDefaultVec:4
#include <cuda_bf16.h>
#include <cstdint>

template <typename T, int N>
struct vec_t {
  T data[N];
  __device__ T& operator[](int i) { return data[i]; }
};

template <typename T, int N>
__device__ __forceinline__ vec_t<T, N> load_vec(const T* ptr) {
  vec_t<T, N> v;
#pragma unroll
  for (int i = 0; i < N; ++i) v[i] = ptr[i];
  return v;
}

template <typename T, int N>
__device__ __forceinline__ void store_vec(T* ptr, vec_t<T, N>& v) {
#pragma unroll
  for (int i = 0; i < N; ++i) ptr[i] = v[i];
}

constexpr int kDefaultVec = 4;

template <typename T, int VEC = kDefaultVec, bool kScale = true>
__global__ void scale_kernel(T* __restrict__ out, const T* __restrict__ in, float alpha, int n) {
  static_assert(VEC > 0 && (VEC & (VEC - 1)) == 0, "VEC must be a power of two");
  const int i = (blockIdx.x * blockDim.x + threadIdx.x) * VEC;
  if (i + VEC > n) return;
  vec_t<float, VEC> acc;
  vec_t<T, VEC> x = load_vec<T, VEC>(in + i);
#pragma unroll
  for (int j = 0; j < VEC; ++j) {
    if constexpr (kScale) {
      acc[j] = static_cast<float>(x[j]) * alpha;
    } else {
      acc[j] = static_cast<float>(x[j]);
    }
  }
  for (int j = 0; j < VEC; ++j) x[j] = static_cast<T>(acc[j]);
  store_vec<T, VEC>(out + i, x);
}

template <template <typename, int> class Vec, typename Src, typename Dst>
__global__ void cast_kernel(Dst* out, const Src* in, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = static_cast<Dst>(in[i]);
}

void launch_all(float* out, const float* in, __nv_bfloat16* out_b, int n, cudaStream_t stream) {
  scale_kernel<float, 8, false><<<(n + 1023) / 1024, 128, 0, stream>>>(out, in, 2.0f, n);
  cast_kernel<vec_t, float, __nv_bfloat16><<<(n + 255) / 256, 256>>>(out_b, in, n);
}
