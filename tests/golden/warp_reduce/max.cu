// RUN: ktx apply --passes warp-reduce %s --config WARP_REDUCE_L0=1 --diff 2>&1 | filecheck %s --match-full-lines
// A max over a constant 128 elements, written with fmaxf; the block size comes from the launcher.
__global__ void block_max(float* __restrict__ out, const float* __restrict__ x) {
  __shared__ float s[128];
  s[threadIdx.x] = x[blockIdx.x * 128 + threadIdx.x];
  __syncthreads();
  for (int stride = 128 / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) s[threadIdx.x] = fmaxf(s[threadIdx.x], s[threadIdx.x + stride]);
    __syncthreads();
  }
  if (threadIdx.x == 0) out[blockIdx.x] = s[0];
}

void launch_block_max(float* out, const float* x, int rows) { block_max<<<rows, 128>>>(out, x); }

// CHECK: {{.*}}: remark: [warp-reduce] L0: rewritten: exposed WARP_REDUCE_L0 {0, 1}; max of 128 float values in s; needs blocks of whole warps
// CHECK: +// ktx: `warp-reduce` instantiated with WARP_REDUCE_L0=1
// CHECK: -  for (int stride = 128 / 2; stride > 0; stride /= 2) {
// CHECK: -    if (threadIdx.x < stride) s[threadIdx.x] = fmaxf(s[threadIdx.x], s[threadIdx.x + stride]);
// CHECK: +  {  // WARP_REDUCE_L0: shuffles inside each warp, one step through s across warps
// CHECK: +    const unsigned ktx_lane = threadIdx.x % 32, ktx_warp = threadIdx.x / 32;
// CHECK: +    float ktx_v = threadIdx.x < 128 ? s[threadIdx.x] : s[0];
// CHECK: +#pragma unroll
// CHECK: +    for (int ktx_o = 16; ktx_o > 0; ktx_o /= 2) ktx_v = fmaxf(ktx_v, __shfl_down_sync(0xffffffffu, ktx_v, ktx_o));
// CHECK: +    if (ktx_lane == 0) s[ktx_warp * 32] = ktx_v;  // only this thread read that element
// CHECK: +    __syncthreads();
// CHECK: +    if (ktx_warp == 0) {
// CHECK: +      ktx_v = ktx_lane * 32 < blockDim.x ? s[ktx_lane * 32] : s[0];
// CHECK: +#pragma unroll
// CHECK: +      for (int ktx_o = 16; ktx_o > 0; ktx_o /= 2) ktx_v = fmaxf(ktx_v, __shfl_down_sync(0xffffffffu, ktx_v, ktx_o));
// CHECK: +      if (ktx_lane == 0) s[0] = ktx_v;
// CHECK: +    }
