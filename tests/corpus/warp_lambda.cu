// CORPUS: warp intrinsics (__shfl_xor_sync, __shfl_down_sync, __ballot_sync), vectorized
// access through reinterpret_cast<uint4*> / reinterpret_cast<const float4*>, __ldg, lambdas
// in device and host code (a loop inside a lambda is indexed with no loop parent), a functor
// struct with a device operator(), and host-side std::for_each with a lambda.
// EXPECT: kernels=vec_copy,softmax_row device=warp_max,warp_sum,operator() loops=4 launches=2
// EXPECT: launch_kernels=vec_copy,softmax_row warnings=0 errors=0
#include <cuda_bf16.h>

__device__ __forceinline__ float warp_max(float v) {
  for (int mask = 16; mask > 0; mask >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffff, v, mask));
  return v;
}

__device__ __forceinline__ float warp_sum(float v) {
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(0xffffffff, v, offset);
  return __shfl_sync(0xffffffff, v, 0);
}

struct Scale {
  float s;
  __device__ float operator()(float x) const { return s * x; }
};

__global__ void vec_copy(__nv_bfloat16* __restrict__ dst, const __nv_bfloat16* __restrict__ src, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if ((i + 1) * 8 <= n) {
    uint4 v = __ldg(reinterpret_cast<const uint4*>(src) + i);
    reinterpret_cast<uint4*>(dst)[i] = v;
  }
  unsigned any = __ballot_sync(0xffffffffu, i < n);
  (void)any;
}

__global__ void softmax_row(float* __restrict__ out, const float* __restrict__ in, int d) {
  const float4* row = reinterpret_cast<const float4*>(in + blockIdx.x * d);
  Scale half_of{0.5f};
  auto exp_sum = [&](float m) {
    float s = 0.f;
    for (int i = threadIdx.x; i < d / 4; i += 32) {
      float4 v = row[i];
      s += __expf(v.x - m) + __expf(v.y - m) + __expf(v.z - m) + __expf(v.w - m);
    }
    return warp_sum(s);
  };
  float m = -1e30f;
  for (int i = threadIdx.x; i < d / 4; i += 32) m = fmaxf(m, row[i].x);
  m = warp_max(m);
  const float inv = half_of(1.f / exp_sum(m));
  if (threadIdx.x == 0) out[blockIdx.x] = inv;
}

void run(__nv_bfloat16* dst, const __nv_bfloat16* src, float* out, const float* in, int n, int rows) {
  auto blocks = [](int count, int per) { return (count + per - 1) / per; };
  vec_copy<<<blocks(n / 8, 256), 256>>>(dst, src, n);
  softmax_row<<<rows, 32>>>(out, in, n / rows);
}
