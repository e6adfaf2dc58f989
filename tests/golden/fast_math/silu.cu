// RUN: ktx apply --passes fast-math %s --diff 2>&1 | filecheck %s --match-full-lines
// RUN: ktx apply --passes fast-math %s --config FAST_MATH=2 --diff -q | filecheck %s --match-full-lines --check-prefix=CONFIG
// The math sits in a device function the kernel calls; each level is a variant under #if.
__device__ __forceinline__ float silu(float x) { return x / (1.0f + expf(-x)); }

__global__ void act(float* __restrict__ out, const float* __restrict__ in, float var, int d) {
  const float inv = 1.0f / sqrtf(var);
  for (int i = threadIdx.x; i < d; i += blockDim.x) out[i] = silu(in[i]) * inv;
}

// CHECK: {{.*}}: remark: [fast-math] act: rewritten: exposed FAST_MATH {0, 1, 2, 3}; 2 statement(s) in act, silu; verified against the float64 reference
// CHECK: -__device__ __forceinline__ float silu(float x) { return x / (1.0f + expf(-x)); }
// CHECK: +// ktx:knobs begin
// CHECK: +// act templated by `fast-math`.
// CHECK: +// Each KTX_ macro is a knob; the defaults reproduce the original. Pick other values with
// CHECK: +// `ktx apply --config NAME=VALUE` (clean code) or -DKTX_NAME=VALUE.
// CHECK: +#ifndef KTX_FAST_MATH
// CHECK: +#define KTX_FAST_MATH 0  // fast-math: precision: 0 original, 1 __expf & co., rsqrtf, 2 1 + __fdividef, 3 1 + reciprocal-multiply (error within the spec's tolerance of the reference in use)
// CHECK: +#endif
// CHECK: +// ktx:knobs end
// CHECK: +__device__ __forceinline__ float silu(float x) {
// CHECK: +#if KTX_FAST_MATH == 0
// CHECK: +  return x / (1.0f + expf(-x));
// CHECK: +#elif KTX_FAST_MATH == 1
// CHECK: +  return x / (1.0f + __expf(-x));
// CHECK: +#elif KTX_FAST_MATH == 2
// CHECK: +  return __fdividef(x, 1.0f + __expf(-x));
// CHECK: +#else
// CHECK: +  return x * __frcp_rn(1.0f + __expf(-x));
// CHECK: +#endif
// CHECK: +}
// CHECK: +#if KTX_FAST_MATH == 0
// CHECK: +#else
// CHECK: +  const float inv = rsqrtf(var);
// CHECK: +#endif
// CONFIG: -__device__ __forceinline__ float silu(float x) { return x / (1.0f + expf(-x)); }
// CONFIG: +// ktx: `fast-math` instantiated with FAST_MATH=2
// CONFIG: +__device__ __forceinline__ float silu(float x) {
// CONFIG: +  return __fdividef(x, 1.0f + __expf(-x));
// CONFIG: +}
// CONFIG: -  const float inv = 1.0f / sqrtf(var);
// CONFIG: +  const float inv = rsqrtf(var);
